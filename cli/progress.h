// Progress of a long command: a redrawn bar with elapsed time, cases/s and the time left when the
// stream is a terminal, plain lines (a tenth of the run each) otherwise, so logs stay greppable.
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>

namespace mlaverify::cli {

// Whether stderr (where progress goes, so that stdout stays the result) is a terminal.
bool stderr_is_terminal();

class Progress {
 public:
  Progress(std::ostream& out, bool bar);
  // After each case: done of total. The bar redraws at most every 0.1 s and on the last case.
  void update(int32_t done, int32_t total);

 private:
  std::ostream& out_;
  bool bar_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace mlaverify::cli
