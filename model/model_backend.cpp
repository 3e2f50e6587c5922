// ModelBackend: runs reference_verify and stores its double results the way a kernel stores its
// outputs (o_lat in the output dtype with its strides, lse as fp32), for backend-level comparison.
#include "model/model_backend.h"

#include "mlaverify/error.h"
#include "model/storage.h"
#include "model/validate.h"

namespace mlaverify::model {

Support ModelBackend::can_implement(const VerifyParams& p) const {
  try {
    validate_params(p);
  } catch (const InvalidInput& e) {
    return Support::no(std::string("malformed params: ") + e.what());
  }
  return Support::yes();
}

void ModelBackend::run(const VerifyParams& p) {
  validate_params(p);
  RefResult r = reference_verify(p, LseBase::Natural);
  for (int64_t t = 0; t < r.tokens; ++t) {
    for (int32_t h = 0; h < r.heads; ++h) {
      int64_t base = t * p.o_token_stride + h * p.o_head_stride;
      for (int k = 0; k < kLatentDim; ++k) store(p.o_dtype, p.o_lat, base + k, r.o(t, h, k));
      // lse is fp32 by contract (docs/spec.md §5); one RNE rounding, -inf stays -inf.
      p.lse[t * r.heads + h] = static_cast<float>(r.lse_at(t, h));
    }
  }
}

}  // namespace mlaverify::model
