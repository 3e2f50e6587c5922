// What the loader harnesses share: a crash with a message, and the one outcome a reader may have
// besides success (InvalidInput naming a field).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>

#include "mlaverify/error.h"

namespace mlaverify::fuzzing {

// The harness's name, for its crash messages (each harness defines it).
extern const char* const kHarness;

[[noreturn]] inline void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "%s: %s: %s\n", kHarness, what, detail.c_str());
  std::abort();
}

// What `read` returns, or nothing when it rejects the input with InvalidInput naming a field;
// any other outcome (no field, another exception) is a crash. `reader` names it in the message.
template <typename Read>
auto accepted(Read&& read, const char* reader) -> std::optional<decltype(read())> {
  try {
    return read();
  } catch (const InvalidInput& e) {
    if (e.field().empty())
      fail("a rejection that names no field", reader + std::string(": ") + e.what());
    return std::nullopt;
  } catch (const std::exception& e) {
    fail("a reader threw something other than InvalidInput", reader + std::string(": ") + e.what());
  } catch (...) {
    fail("a reader threw a non-std exception", reader);
  }
}

}  // namespace mlaverify::fuzzing
