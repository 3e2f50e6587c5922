// libFuzzer harness for the scenario loader (scenarios::parse_scenario): any input either
// parses into a scenario that validates and survives a JSON round trip unchanged, or raises
// InvalidInput. Any other exception, a failed round trip, or a sanitizer report is a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "mlaverify/error.h"
#include "scenarios/scenario.h"

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "scenario_fuzzer: %s: %s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mlaverify;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  scenarios::Scenario s;
  try {
    s = scenarios::parse_scenario(text);
  } catch (const InvalidInput& e) {
    if (std::getenv("MLAV_FUZZ_VERBOSE")) {
      std::fprintf(stderr, "scenario_fuzzer: rejected: %s\n", e.what());
    }
    return 0;  // rejected, as bad input must be
  } catch (const std::exception& e) {
    fail("parse_scenario threw something other than InvalidInput", e.what());
  } catch (...) {
    fail("parse_scenario threw a non-std exception", "");
  }
  // Accepted: it must be a valid case, and what the writer makes of it must read back the same.
  try {
    scenarios::validate_case(s.spec);
    (void)scenarios::summary(s.spec);
    const std::string again = scenarios::to_json(s);
    const scenarios::Scenario back = scenarios::parse_scenario(again);
    if (!(back == s)) fail("round trip changed the scenario", again);
    if (std::getenv("MLAV_FUZZ_VERBOSE")) {
      std::fprintf(stderr, "scenario_fuzzer: accepted: %s\n", scenarios::summary(s.spec).c_str());
    }
  } catch (const InvalidInput& e) {
    fail("an accepted scenario does not round-trip", e.what());
  } catch (const std::exception& e) {
    fail("an accepted scenario threw", e.what());
  }
  return 0;
}
