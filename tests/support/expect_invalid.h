// Test helpers for the bad-input contract: a call must throw InvalidInput naming the field and the
// index at fault (and, optionally, saying something specific about it).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "mlaverify/error.h"

namespace mlaverify::testing {

// Runs f, which must throw InvalidInput; returns it for further checks (a placeholder with
// field "<none>" and index -2 after recording a failure when f does not throw).
template <class F>
InvalidInput catch_invalid(F&& f) {
  try {
    f();
  } catch (const InvalidInput& e) {
    return e;
  }
  ADD_FAILURE() << "expected InvalidInput";
  return InvalidInput("<none>", -2, "no throw");
}

// Runs f, which must throw InvalidInput naming `field` and `index`, with `detail` (when given)
// somewhere in its detail text.
template <class F>
void expect_invalid(F&& f, const std::string& field, int64_t index,
                    const std::string& detail = "") {
  const InvalidInput e = catch_invalid(f);
  EXPECT_EQ(e.field(), field) << e.what();
  EXPECT_EQ(e.index(), index) << e.what();
  if (!detail.empty()) {
    EXPECT_NE(e.detail().find(detail), std::string::npos) << e.what();
  }
}

}  // namespace mlaverify::testing
