// Typed errors for bad input: every rejection names the field and the index at fault.
// Host code throws these; it never calls exit. Device code never sees them.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace mlaverify {

// Bad input: a field (e.g. "kv_indptr") and an index within it (-1 when the whole field is
// at fault, e.g. a wrong length). what() reads "kv_indptr[3]: not non-decreasing (7 < 9)".
class InvalidInput : public std::invalid_argument {
 public:
  InvalidInput(std::string field, int64_t index, const std::string& detail)
      : std::invalid_argument(format(field, index, detail)),
        field_(std::move(field)),
        index_(index),
        detail_(detail) {}

  const std::string& field() const { return field_; }
  int64_t index() const { return index_; }
  const std::string& detail() const { return detail_; }

 private:
  static std::string format(const std::string& field, int64_t index, const std::string& detail) {
    std::string where = index >= 0 ? field + "[" + std::to_string(index) + "]" : field;
    return where + ": " + detail;
  }
  std::string field_;
  int64_t index_;
  std::string detail_;
};

// A well-formed request that a backend cannot run (unsupported layout, too many nodes, ...).
class Unsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A backend that can run nothing more in this process: a CUDA kernel that faults (an illegal
// address, a trap) poisons the context, and every later call fails with the same error whatever
// its input. A campaign stops at the case that raised it and keeps that case unshrunk (every
// simpler case would "fail" too); the backend keeps throwing it on every later run.
class BackendLost : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  // The CUDA paths' BackendLost (CudaBackend, a CUDA plugin's staging): the call that failed,
  // then why nothing more can run.
  static BackendLost cuda_context(const std::string& failed) {
    return BackendLost(failed +
                       "; the CUDA context is lost (a sticky error: a kernel fault, or a device "
                       "this process cannot use): this process can run no more CUDA work");
  }
};

}  // namespace mlaverify
