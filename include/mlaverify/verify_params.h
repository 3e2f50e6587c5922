// The one params struct of a verify launch, shared by the model, the CPU backend and the CUDA
// kernel. Plain pointers, sizes and enums only, so it can become a stable C ABI unchanged.
#pragma once

#include <cstdint>

#include "mlaverify/hd.h"
#include "mlaverify/types.h"

namespace mlaverify {

// All pointers are in the backend's memory space: host memory for Backend::run (the CUDA backend
// stages its own copies), device memory for the CUDA kernel's own lifecycle (cuda/verify_kernel.h).
// Sizes marked "static" are fixed for a launch and for a captured CUDA graph; every size that varies
// from step to step (D_i, P_i, T, mask offsets) is read from the metadata buffers.
struct VerifyParams {
  // ---- static sizes ----
  int32_t batch_size = 0;   // bs: rows of the metadata, CUDA-graph padded rows included
  int32_t num_heads = 0;    // H: query heads on this rank (1..128)
  int32_t max_draft = 0;    // upper bound on every D_i (1..1024): tiles and workspace
  int64_t max_total_q = 0;  // rows of q, k_extend, o_lat and lse buffers (>= T = qo_indptr[bs])
  int32_t num_splits = 1;   // NSPLIT: prefix chunks per request (split_plan.h), >= 1
  float sm_scale = 0.f;     // (qk_nope + Rp)^-0.5 * mscale^2 (model/config.h), never 576^-0.5

  // ---- queries ----
  const void* q = nullptr;        // [max_total_q, H, q_row] of q_dtype
  DType q_dtype = DType::BF16;
  int64_t q_token_stride = 0;     // elements between tokens (>= H * q_head_stride)
  int64_t q_head_stride = 0;      // elements between heads (>= 576)
  int64_t q_latent_offset = 0;    // elements from a row's start to q_lat (512); 0 = latent first
  int64_t q_rope_offset = kLatentDim;  // elements from a row's start to q_pe (64)

  // ---- one layer's KV pool ----
  const void* kv_pool = nullptr;  // pool_slots slots addressed through kv_layout, of kv_dtype
  DType kv_dtype = DType::BF16;
  KvLayout kv_layout = KvLayout::latent_first();
  int64_t pool_slots = 0;         // valid slot ids are [0, pool_slots)

  // ---- batch metadata (SGLang conventions, docs/spec.md §3) ----
  const int32_t* qo_indptr = nullptr;   // [bs + 1] CSR: D_i = qo_indptr[i+1] - qo_indptr[i]
  // [bs + 1] CSR: kv length per request (see draft_source). Under KvIndexing::PageTable only the
  // differences are read (the lengths); the entries need not start at 0.
  const int32_t* kv_indptr = nullptr;
  // How entry k (0 <= k < kv length) of request i names its pool slot (kv_slot below).
  KvIndexing kv_indexing = KvIndexing::TokenI64;
  const int64_t* kv_indices = nullptr;      // TokenI64: [kv_indices_len] token-level slot ids
  const int32_t* kv_indices_i32 = nullptr;  // TokenI32: [kv_indices_len] the same, int32
  int64_t kv_indices_len = 0;               // capacity of either (>= kv_indptr[bs]); token modes
  // PageTable: [bs, block_table_stride] page ids; entry k of request i is slot
  // block_table[i * block_table_stride + k / page_size] * page_size + k % page_size.
  const int32_t* block_table = nullptr;
  int32_t block_table_stride = 0;  // pages per row (max_pages); >= ceil(kv length / page_size)
  int32_t page_size = 1;           // tokens per page of block_table (PageTable only)

  // ---- draft KV ----
  DraftKvSource draft_source = DraftKvSource::ExtendRows;
  const void* k_extend = nullptr;  // [max_total_q, k_extend_stride] latent-first, kv_dtype; ExtendRows
  int64_t k_extend_stride = kRowDim;

  // ---- tree mask ----
  MaskFormat mask_format = MaskFormat::FullMask;
  const void* mask = nullptr;        // encoding per mask_format (types.h)
  int64_t mask_len = 0;              // capacity of mask in its units (bytes, or uint32 for DraftBits)
  const int64_t* mask_indptr = nullptr;  // FullMask / FlashInferPacked: start of each request
  IndptrConvention mask_indptr_convention = IndptrConvention::Csr;  // [bs + 1] or [bs]
  int32_t mask_draft_stride = 0;     // QlenOnly / QlenOnlyBitpacking / DraftBits row stride
  int32_t mask_word_bytes = 4;       // QlenOnlyBitpacking word size: 1, 2 or 4

  // ---- outputs ----
  void* o_lat = nullptr;           // [max_total_q, H, 512] of o_dtype
  DType o_dtype = DType::BF16;
  int64_t o_token_stride = 0;      // elements between tokens (>= H * o_head_stride)
  int64_t o_head_stride = 0;       // elements between heads (>= 512)
  float* lse = nullptr;            // [max_total_q, H] contiguous, natural log; -inf if fully masked
};

// One request's extent as the metadata says it, the single reading every backend shares.
struct RequestExtent {
  int32_t request;      // i
  int64_t q_begin;      // first query token: qo_indptr[i]
  int32_t draft_nodes;  // D_i = qo_indptr[i+1] - qo_indptr[i]
  int64_t kv_begin;     // kv_indptr[i]: first entry of kv_indices for this request
  int64_t prefix_len;   // P_i: kv length, less D_i on the CacheSlots path
};

// Reads request i's extent from p's metadata (host or device memory, whichever p points to).
// Does not validate: validate_params (model/validate.h) checks every invariant on the host.
MLAV_HD RequestExtent request_extent(const VerifyParams& p, int32_t i) {
  RequestExtent e;
  e.request = i;
  e.q_begin = p.qo_indptr[i];
  e.draft_nodes = p.qo_indptr[i + 1] - p.qo_indptr[i];
  e.kv_begin = p.kv_indptr[i];
  int64_t kv_len = static_cast<int64_t>(p.kv_indptr[i + 1]) - p.kv_indptr[i];
  e.prefix_len = p.draft_source == DraftKvSource::CacheSlots ? kv_len - e.draft_nodes : kv_len;
  return e;
}

// The pool slot of entry k (0 <= k < kv length) of request e.request, under any KvIndexing: the one
// reading of kv_indices / block_table every backend shares (unvalidated, like request_extent).
MLAV_HD int64_t kv_slot(const VerifyParams& p, const RequestExtent& e, int64_t k) {
  switch (p.kv_indexing) {
    case KvIndexing::TokenI32:
      return p.kv_indices_i32[e.kv_begin + k];
    case KvIndexing::PageTable: {
      const int64_t page = p.block_table[static_cast<int64_t>(e.request) * p.block_table_stride +
                                         k / p.page_size];
      return page * p.page_size + k % p.page_size;
    }
    case KvIndexing::TokenI64:
    default:
      return p.kv_indices[e.kv_begin + k];
  }
}

}  // namespace mlaverify
