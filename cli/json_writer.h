// A minimal streaming JSON writer for the --json documents of replay (dumps), diagnose, show and
// convert: objects, arrays, strings, numbers, booleans. nlohmann_json stays in json_io.cpp (slow
// to compile on 2 cores, STYLE.md); these commands only write, so they need no parser.
#pragma once

#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace mlaverify::cli {

class JsonWriter {
 public:
  explicit JsonWriter(std::ostream& out) : out_(out) {}

  JsonWriter& begin_object() { value_prefix(); out_ << '{'; first_.push_back(true); return *this; }
  JsonWriter& end_object() { out_ << '}'; first_.pop_back(); return *this; }
  JsonWriter& begin_array() { value_prefix(); out_ << '['; first_.push_back(true); return *this; }
  JsonWriter& end_array() { out_ << ']'; first_.pop_back(); return *this; }
  JsonWriter& key(std::string_view k) {
    comma();
    string_literal(k);
    out_ << ':';
    after_key_ = true;
    return *this;
  }
  JsonWriter& value(std::string_view s) { value_prefix(); string_literal(s); return *this; }
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(bool b) { value_prefix(); out_ << (b ? "true" : "false"); return *this; }
  JsonWriter& value(int64_t v) { value_prefix(); out_ << v; return *this; }
  JsonWriter& value(int32_t v) { return value(static_cast<int64_t>(v)); }
  // Non-finite numbers have no JSON spelling: they are written as null.
  JsonWriter& value(double v) {
    value_prefix();
    if (!std::isfinite(v)) {
      out_ << "null";
    } else {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.9g", v);
      out_ << buf;
    }
    return *this;
  }
  template <class T>
  JsonWriter& field(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }

 private:
  void comma() {
    if (!first_.empty()) {
      if (!first_.back()) out_ << ',';
      first_.back() = false;
    }
  }
  void value_prefix() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    comma();
  }
  void string_literal(std::string_view s) {
    out_ << '"';
    for (char c : s) {
      switch (c) {
        case '"': out_ << "\\\""; break;
        case '\\': out_ << "\\\\"; break;
        case '\n': out_ << "\\n"; break;
        case '\t': out_ << "\\t"; break;
        case '\r': out_ << "\\r"; break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out_ << buf;
          } else {
            out_ << c;
          }
      }
    }
    out_ << '"';
  }

  std::ostream& out_;
  std::vector<bool> first_;
  bool after_key_ = false;
};

}  // namespace mlaverify::cli
