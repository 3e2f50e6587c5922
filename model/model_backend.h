// The model as a Backend: the reference verify attention behind the same interface as the CPU
// and CUDA backends, so a property can loop over backends and compare each against this one.
#pragma once

#include <cstddef>
#include <string>

#include "mlaverify/backend.h"
#include "model/attention.h"

namespace mlaverify::model {

class ModelBackend : public Backend {
 public:
  std::string name() const override { return "model"; }
  // Everything the model accepts; its arithmetic is double (units 2^-52), f32 operands read as
  // stored, no rounding of P, one rounding of o to o_dtype.
  Capabilities capabilities() const override {
    Capabilities c;
    c.numerics.operand_unit = 0;
    c.numerics.accumulate_unit = 0x1.0p-52;
    c.numerics.p_unit = 0;
    c.numerics.exp_unit = 0x1.0p-52;
    c.numerics.max_partials = 1;
    return c;
  }
  // Yes for every well-formed params; for malformed ones no, with validate_params' message.
  Support can_implement(const VerifyParams& p) const override;
  // The model needs no scratch: it allocates its own double buffers.
  size_t workspace_bytes(const VerifyParams&) const override { return 0; }
  // validate_params, then reference_verify; writes o_lat in p.o_dtype (rounded once, to nearest
  // even) at p.o_token_stride / p.o_head_stride, and lse (natural log) as float into p.lse [T, H].
  // Rows past T = qo_indptr[bs] and the padding between strided rows are left untouched.
  void run(const VerifyParams& p) override;
};

}  // namespace mlaverify::model
