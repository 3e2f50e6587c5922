// Host-side validation of a VerifyParams' metadata before CudaBackend stages it: everything the
// kernel relies on for memory safety, each failure an InvalidInput naming the field and index.
#pragma once

#include <cstdint>
#include <vector>

#include "mlaverify/verify_params.h"

namespace mlaverify::cuda {

// Host pointers. Throws InvalidInput(field, index, detail). The layering keeps cuda/ off model/,
// so this is cuda's own reading of docs/spec.md §3; tests/cuda checks it against
// model::validate_params.
void validate_host_params(const VerifyParams& p);

// int32 kv_indices and page tables (KvIndexing) as the int64 token-level indices the kernel reads:
// checks what the translation reads (InvalidInput naming the field and index), then returns
// params pointing into kv_indptr / kv_indices (rebased CSR). `p` itself when already TokenI64.
VerifyParams with_token_indices(const VerifyParams& p, std::vector<int32_t>& kv_indptr,
                                std::vector<int64_t>& kv_indices);

}  // namespace mlaverify::cuda
