// Host-side validation of a VerifyParams' metadata before CudaBackend stages it: everything the
// kernel relies on for memory safety, each failure an InvalidInput naming the field and index.
#pragma once

#include "mlaverify/verify_params.h"

namespace mlaverify::cuda {

// Host pointers. Throws InvalidInput(field, index, detail). The layering keeps cuda/ off model/,
// so this is cuda's own reading of docs/spec.md §3; tests/cuda checks it against
// model::validate_params.
void validate_host_params(const VerifyParams& p);

}  // namespace mlaverify::cuda
