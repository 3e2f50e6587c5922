// libFuzzer harness for the simulation scenario reader (sim/sim_scenario.h parse_sim_scenario,
// behind load_sim_scenario and `mlaverify replay` of a simulation's failing step). Any input is
// either rejected with InvalidInput naming a field, or accepted; an accepted scenario writes
// back (to_json) to text that reads back to an equal scenario. is_sim_scenario never throws.
// Anything else, or a sanitizer report, is a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "mlaverify/error.h"
#include "sim/sim_scenario.h"

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "sim_fuzzer: %s: %s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  using mlaverify::sim::SimScenario;
  try {
    (void)mlaverify::sim::is_sim_scenario(text);
  } catch (const std::exception& e) {
    fail("is_sim_scenario threw", e.what());
  }
  SimScenario s;
  try {
    s = mlaverify::sim::parse_sim_scenario(text);
  } catch (const mlaverify::InvalidInput& e) {
    if (e.field().empty()) fail("a rejection that names no field", e.what());
    return 0;
  } catch (const std::exception& e) {
    fail("the reader threw something other than InvalidInput", e.what());
  } catch (...) {
    fail("the reader threw a non-std exception", "");
  }
  const std::string written = mlaverify::sim::to_json(s);
  try {
    if (!(mlaverify::sim::parse_sim_scenario(written) == s))
      fail("a scenario changed through write and read", written.substr(0, 400));
  } catch (const mlaverify::InvalidInput& e) {
    fail("a written scenario does not read back", e.what());
  }
  return 0;
}
