// Progress output for fuzz: the bar's escape codes are written only when stderr is a terminal.
#include "cli/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <string>

namespace mlaverify::cli {

bool stderr_is_terminal() { return isatty(STDERR_FILENO) == 1; }

Progress::Progress(std::ostream& out, bool bar)
    : out_(out), bar_(bar), start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

void Progress::update(int32_t done, int32_t total) {
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed > 0 ? done / elapsed : 0;
  char stats[128];
  std::snprintf(stats, sizeof stats, "%d/%d cases  %.1f s  %.2f cases/s", done, total, elapsed,
                rate);
  if (!bar_) {
    if (done == total || done % std::max(1, total / 10) == 0) out_ << "  " << stats << "\n";
    return;
  }
  if (done != total && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  constexpr int kWidth = 30;
  const int filled = total > 0 ? static_cast<int>(int64_t{kWidth} * done / total) : kWidth;
  std::string line =
      "\r\033[2K  [" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "] " + stats;
  if (done < total && rate > 0) {
    char eta[48];
    std::snprintf(eta, sizeof eta, "  %.0f s left", (total - done) / rate);
    line += eta;
  }
  out_ << line << (done == total ? "\n" : "") << std::flush;
}

}  // namespace mlaverify::cli
