// A Backend that forwards every call to an inner one. Test wrappers derive from it and override
// only what they change (run, mostly: record, corrupt, time or fail it), so each states its one
// difference instead of repeating the forwarding.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "mlaverify/backend.h"

namespace mlaverify::testing {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(BackendPtr inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  Capabilities capabilities() const override { return inner_->capabilities(); }
  Support can_implement(const VerifyParams& p) const override { return inner_->can_implement(p); }
  size_t workspace_bytes(const VerifyParams& p) const override {
    return inner_->workspace_bytes(p);
  }
  void run(const VerifyParams& p) override { inner_->run(p); }
  double last_device_ms() const override { return inner_->last_device_ms(); }

 protected:
  Backend& inner() const { return *inner_; }

 private:
  BackendPtr inner_;
};

}  // namespace mlaverify::testing
