// libFuzzer harness for the C API's options reader (capi/c_options.h), the loader of the one
// input a Python or C caller hands libmlaverify_c as text. The first byte picks the reader
// (fuzz, replay, diagnose), the rest is the options text. Any input is either rejected with
// InvalidInput naming the options (options.<key> or options[byte]), or accepted; accepted
// requests are in range (cases 1 .. 1,000,000, max_memory >= 1, max_seconds finite and > 0,
// replay paths non-empty), every key the input gave a non-null value holds that exact value
// in the request (nothing narrowed or guessed), and to_json reads back to the same request.
// Anything else, or a sanitizer report, is a crash.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include <nlohmann/json.hpp>

#include "capi/c_options.h"
#include "mlaverify/error.h"

namespace {

using nlohmann::json;

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "options_fuzzer: %s: %s\n", what, detail.c_str());
  std::abort();
}

// Every non-null key of the input holds the same JSON value in the request's to_json (an integer
// given as 7 reads back as 7; the readers accept no other spelling of a value).
void same_values(const std::string& text, const json& out) {
  json in;
  try {
    in = json::parse(text);
  } catch (const json::exception& e) {
    fail("accepted options that nlohmann cannot parse", e.what());
  }
  if (in.is_null()) in = json::object();
  for (auto it = in.begin(); it != in.end(); ++it) {
    if (it->is_null()) continue;
    if (!out.contains(it.key()) || out[it.key()] != *it)
      fail("an accepted value changed", it.key() + ": " + it->dump() + " -> " + out.dump());
  }
}

template <typename Request, typename Parse, typename Check>
void exercise(const std::string& text, Parse parse, Check check) {
  Request r;
  try {
    r = parse(text.c_str());
  } catch (const mlaverify::InvalidInput& e) {
    if (e.field().rfind("options", 0) != 0) fail("a rejection that does not name the options", e.what());
    return;
  } catch (const std::exception& e) {
    fail("the reader threw something other than InvalidInput", e.what());
  } catch (...) {
    fail("the reader threw a non-std exception", "");
  }
  check(r);
  const json j = mlaverify::capi::to_json(r);
  if (!text.empty()) same_values(text, j);
  Request back;
  try {
    back = parse(j.dump().c_str());
  } catch (const std::exception& e) {
    fail("an accepted request does not read back", j.dump() + ": " + e.what());
  }
  if (!(back == r)) fail("round trip changed the request", j.dump());
}

void limits(const std::optional<int64_t>& max_memory, const std::optional<double>& max_seconds) {
  if (max_memory && *max_memory < 1) fail("max_memory below 1 accepted", std::to_string(*max_memory));
  if (max_seconds && !(std::isfinite(*max_seconds) && *max_seconds > 0))
    fail("max_seconds not finite and positive accepted", std::to_string(*max_seconds));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mlaverify::capi;
  if (size == 0) return 0;
  // The C API reads a NUL-terminated string: the text stops at the first NUL, as a caller's would.
  std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  text = text.substr(0, text.find('\0'));
  switch (data[0] % 3) {
    case 0:
      exercise<FuzzRequest>(text, parse_fuzz_options, [](const FuzzRequest& r) {
        if (r.cases && (*r.cases < 1 || *r.cases > kMaxCases))
          fail("cases out of range accepted", std::to_string(*r.cases));
      });
      break;
    case 1:
      exercise<ReplayRequest>(text, parse_replay_options, [](const ReplayRequest& r) {
        if (r.paths.empty()) fail("a replay without paths accepted", "");
        limits(r.max_memory, r.max_seconds);
      });
      break;
    default:
      exercise<DiagnoseRequest>(text, parse_diagnose_options, [](const DiagnoseRequest& r) {
        limits(r.max_memory, r.max_seconds);
      });
  }
  return 0;
}
