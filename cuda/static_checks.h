// What the kernel needs of a VerifyParams that does not depend on metadata contents: dtypes,
// size ranges, and 16-byte alignment of every stride and offset it loads with 16-byte copies.
#pragma once

#include <cstdint>
#include <string>

#include "mlaverify/backend.h"
#include "mlaverify/split_plan.h"
#include "mlaverify/verify_params.h"

namespace mlaverify::cuda::detail {

inline bool aligned_elems(int64_t v, int64_t elems) { return v % elems == 0; }
inline bool aligned_ptr(const void* p, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

// check_pointers = false for host params that CudaBackend restages into fresh device buffers
// (their alignment is the device buffers', which cudaMalloc gives at 256 bytes).
inline Support check_static(const VerifyParams& p, bool check_pointers) {
  if (p.batch_size < 1 || p.batch_size > 65535)
    return Support::no("batch_size " + std::to_string(p.batch_size) +
                       " outside [1, 65535] (grid z)");
  if (p.num_heads < 1 || p.num_heads > 128)
    return Support::no("num_heads " + std::to_string(p.num_heads) + " outside [1, 128]");
  if (p.max_draft < 1 || p.max_draft > 1024)
    return Support::no("max_draft " + std::to_string(p.max_draft) + " outside [1, 1024]");
  if (p.num_splits < 1 || p.num_splits > kMaxSplits)
    return Support::no("num_splits " + std::to_string(p.num_splits) + " outside [1, 64]");
  if (p.plan_blocks < 0 || p.plan_blocks > kMaxPlanBlocks)
    return Support::no("plan_blocks " + std::to_string(p.plan_blocks) + " outside [0, " +
                       std::to_string(kMaxPlanBlocks) + "]");
  if (p.max_total_q < 1 || p.max_total_q * p.num_heads > (int64_t{1} << 31) - 1)
    return Support::no("max_total_q * num_heads must be in [1, 2^31) (merge grid)");
  if (p.q_dtype != DType::BF16)
    return Support::no("queries must be bf16 (the kernel feeds them to mma.sync)");
  if (p.kv_dtype != DType::BF16)
    return Support::no("the KV pool must be bf16 (fp32 pools: convert first)");
  // 16-byte cp.async of q, pool and k_extend rows: every offset and stride a multiple of 8 bf16.
  if (!aligned_elems(p.q_token_stride, 8) || !aligned_elems(p.q_head_stride, 8) ||
      !aligned_elems(p.q_latent_offset, 8) || !aligned_elems(p.q_rope_offset, 8))
    return Support::no("q strides and offsets must be multiples of 8 elements (16-byte loads)");
  const KvLayout& l = p.kv_layout;
  if (!aligned_elems(l.latent_offset, 8) || !aligned_elems(l.latent_stride, 8) ||
      !aligned_elems(l.rope_offset, 8) || !aligned_elems(l.rope_stride, 8))
    return Support::no(
        "kv_layout offsets and strides must be multiples of 8 elements (16-byte loads)");
  if (l.latent_offset < 0 || l.latent_stride < 0 || l.rope_offset < 0 || l.rope_stride < 0)
    return Support::no("kv_layout offsets and strides must be non-negative");
  if (p.draft_source == DraftKvSource::ExtendRows && !aligned_elems(p.k_extend_stride, 8))
    return Support::no("k_extend_stride must be a multiple of 8 elements (16-byte loads)");
  // The merge writes 4 output columns per thread: 8 bytes (bf16) or 16 bytes (fp32).
  if (!aligned_elems(p.o_token_stride, 4) || !aligned_elems(p.o_head_stride, 4))
    return Support::no("o strides must be multiples of 4 elements (vector stores)");
  if (check_pointers) {
    if (!aligned_ptr(p.q, 16) || !aligned_ptr(p.kv_pool, 16) ||
        (p.draft_source == DraftKvSource::ExtendRows && !aligned_ptr(p.k_extend, 16)))
      return Support::no("q, kv_pool and k_extend must be 16-byte aligned");
    if (!aligned_ptr(p.o_lat, p.o_dtype == DType::BF16 ? 8 : 16) || !aligned_ptr(p.lse, 4))
      return Support::no("o_lat must be 8-byte (bf16) or 16-byte (fp32) aligned, lse 4-byte");
    if (p.mask_format == MaskFormat::DraftBits && !aligned_ptr(p.mask, 4))
      return Support::no("a DraftBits mask must be 4-byte aligned");
  }
  return Support::yes();
}

}  // namespace mlaverify::cuda::detail
