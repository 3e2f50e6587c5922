// A scan of raw JSON text for bracket nesting, run before any parser sees a file, so that input
// such as "[[[[..." cannot drive a recursive parser (or a recursive destructor) without bound.
#pragma once

#include <cstdint>
#include <string_view>

namespace mlaverify {

// The byte offset of the first '[' or '{' (outside strings) nested deeper than max_depth, or -1.
inline int64_t json_nesting_exceeded_at(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return static_cast<int64_t>(i);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return -1;
}

}  // namespace mlaverify
