// The buffers of one VerifyParams as a plugin sees them: which pointers a run passes, how many
// bytes each spans from its base pointer, and which output elements the contract lets it write.
// The one description both CUDA staging and the guarded worker's shared region are built from.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "mlaverify/verify_params.h"

namespace mlaverify::plugin {

// Every pointer field of VerifyParams, in struct order.
enum BufferId : int {
  kQ,
  kKvPool,
  kQoIndptr,
  kKvIndptr,
  kKvIndices,     // TokenI64 only
  kKvIndicesI32,  // TokenI32 only
  kBlockTable,    // PageTable only
  kKExtend,       // ExtendRows only
  kMask,
  kMaskIndptr,  // FullMask / FlashInferPacked only
  kOLat,        // output
  kLse,         // output
  kNumBuffers,
};

const char* buffer_name(BufferId id);
inline bool is_output(BufferId id) { return id == kOLat || id == kLse; }

// Bytes from each base pointer to one past the last byte a backend may touch (by the static
// extents: max_total_q rows, the pool's extent from kv_layout and pool_slots, kv_indices_len,
// mask_len, bs * block_table_stride). 0 for a buffer this run does not pass: c_api.h passes only
// the index buffer kv_indexing names, k_extend only for ExtendRows, mask_indptr only for the two
// formats that have one, lse only when non-null. Call on validated params (model::validate_params).
std::array<size_t, kNumBuffers> buffer_bytes(const VerifyParams& p);

const void* buffer_ptr(const VerifyParams& p, BufferId id);
void set_buffer_ptr(VerifyParams& p, BufferId id, const void* ptr);

// Whether byte `offset` of output `id` (kOLat or kLse, measured from its base pointer) belongs to
// an element the plugin must write: token t < T = qo_indptr[bs], head h < H, column < 512 of
// o_lat; lse[t, h] for t < T when lse is written (writes_lse). Every other byte inside the extent
// (rows t >= T, stride gaps, lse of a plugin that does not declare it) must stay as it was.
struct OutputGeometry {
  int64_t tokens = 0;  // T
  int32_t heads = 0;
  int64_t token_stride = 0;  // elements
  int64_t head_stride = 0;   // elements
  int64_t row_elements = 0;  // 512 for o_lat, 1 for lse
  int elem_bytes = 0;
  bool writable = true;  // false: no element may be written (lse not declared)
  bool writes(size_t offset) const;
  // "token 7 head 2 column 512" for the element holding byte `offset`.
  std::string describe(size_t offset) const;
};
OutputGeometry output_geometry(const VerifyParams& p, BufferId id, bool writes_lse);

// Which request owns token t of p (host metadata), or -1 for t >= T.
int32_t request_of_token(const VerifyParams& p, int64_t t);

}  // namespace mlaverify::plugin
