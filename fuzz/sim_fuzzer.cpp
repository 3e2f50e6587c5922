// libFuzzer harness for the simulation's three readers of user files: scenarios
// (sim/sim_scenario.h parse_sim_scenario, behind load_sim_scenario and `mlaverify replay` of a
// simulation's failing step) and request traces (sim/simulation.h parse_trace, behind
// `simulate --trace`) and accept-length traces (parse_accept_trace, `simulate --accept-trace`).
// Every input goes to all three. Each either rejects it with InvalidInput naming
// a field, or accepts it; an accepted scenario writes back (to_json) to text that reads back to
// an equal scenario, and an accepted trace holds only what the reader promises (steps >= 0 and
// non-decreasing, lengths in [1, 2^20]) and reads back equal from its own CSV lines.
// is_sim_scenario never throws. Anything else, or a sanitizer report, is a crash.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "sim/sim_scenario.h"
#include "sim/simulation.h"

const char* const mlaverify::fuzzing::kHarness = "sim_fuzzer";

namespace {

using mlaverify::fuzzing::accepted;
using mlaverify::fuzzing::fail;

// The request trace (`simulate --trace`): accepted entries hold the reader's promises (steps
// >= 0 and non-decreasing, lengths in [1, 2^20]) and read back equal from their own CSV.
void trace(const std::string& text) {
  const auto t = accepted([&] { return mlaverify::sim::parse_trace(text, "trace.csv"); }, "trace");
  if (!t) return;
  if (t->empty()) fail("an accepted trace without requests", text.substr(0, 200));
  std::string written;
  for (size_t i = 0; i < t->size(); ++i) {
    const mlaverify::sim::Arrival& a = (*t)[i];
    if (a.step < 0 || (i > 0 && a.step < (*t)[i - 1].step) || a.prompt_len < 1 ||
        a.prompt_len > (int64_t{1} << 20) || a.output_len < 1 || a.output_len > (int64_t{1} << 20))
      fail("an accepted trace entry out of range", std::to_string(i));
    written += std::to_string(a.step) + "," + std::to_string(a.prompt_len) + "," +
               std::to_string(a.output_len) + "\n";
  }
  const auto back =
      accepted([&] { return mlaverify::sim::parse_trace(written, "written.csv"); }, "trace");
  if (!back || *back != *t) fail("a trace changed through write and read", written.substr(0, 200));
}

// The accept-length trace (`simulate --accept-trace`): accepted entries are in [1, 1024] and read
// back equal from their own comma-separated text.
void accept_trace(const std::string& text) {
  const auto t =
      accepted([&] { return mlaverify::sim::parse_accept_trace(text, "accept.txt"); }, "accept");
  if (!t) return;
  std::string written;
  for (int32_t v : *t) {
    if (v < 1 || v > 1024) fail("an accepted accept length out of range", std::to_string(v));
    written += std::to_string(v) + ",";
  }
  const auto back = accepted(
      [&] { return mlaverify::sim::parse_accept_trace(written, "written.txt"); }, "accept");
  if (t->empty() || !back || *back != *t)
    fail("an accept trace changed through write and read", written.substr(0, 200));
}

// The scenario (`mlaverify replay`): an accepted one reads back equal from its to_json.
void scenario(std::string_view text) {
  try {
    (void)mlaverify::sim::is_sim_scenario(text);
  } catch (const std::exception& e) {
    fail("is_sim_scenario threw", e.what());
  }
  const auto s = accepted([&] { return mlaverify::sim::parse_sim_scenario(text); }, "scenario");
  if (!s) return;
  const std::string written = mlaverify::sim::to_json(*s);
  const auto back =
      accepted([&] { return mlaverify::sim::parse_sim_scenario(written); }, "scenario");
  if (!back || !(*back == *s))
    fail("a scenario changed through write and read", written.substr(0, 400));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  trace(std::string(text));
  accept_trace(std::string(text));
  scenario(text);
  return 0;
}
