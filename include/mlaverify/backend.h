// The Backend interface: how a property, a scenario replay or the CLI runs a verify launch
// without naming the implementation (model, cpu, cuda, or a kernel a user brings).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "mlaverify/verify_params.h"

namespace mlaverify {

// Whether a backend can run a case; when not, a reason a person can act on.
struct Support {
  bool ok = true;
  std::string reason;
  static Support yes() { return {}; }
  static Support no(std::string why) { return {false, std::move(why)}; }
  explicit operator bool() const { return ok; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Whether this backend can run `p`, and why not. Never throws for unsupported shapes.
  virtual Support can_implement(const VerifyParams& p) const = 0;
  // Bytes of scratch `run` needs for `p` (split partials and the like).
  virtual size_t workspace_bytes(const VerifyParams& p) const = 0;
  // Runs one verify launch. Every pointer in `p` is host memory; a device backend stages copies.
  // Throws InvalidInput for malformed metadata and Unsupported when can_implement says no.
  virtual void run(const VerifyParams& p) = 0;
};

using BackendPtr = std::shared_ptr<Backend>;

}  // namespace mlaverify
