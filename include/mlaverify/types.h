// Vocabulary of the verify problem: dimensions, dtypes, cache layouts, indptr conventions and
// mask formats. Plain values only (no Eigen, no CUDA), so every layer and a C ABI can share them.
#pragma once

#include <cstdint>

#include "mlaverify/hd.h"

namespace mlaverify {

inline constexpr int kLatentDim = 512;  // R, kv_lora_rank: width of c and of o_lat
inline constexpr int kRopeDim = 64;     // Rp, qk_rope_head_dim
inline constexpr int kRowDim = 576;     // E = R + Rp: one query row, one cache row

enum class DType : int32_t {
  BF16 = 0,
  F32 = 1,
};

MLAV_HD int dtype_bytes(DType d) { return d == DType::BF16 ? 2 : 4; }

// Where the latent c (512) and the rotated k_pe (64) of cache slot s live, in elements of the
// pool's dtype from the pool base pointer:
//   c[s][k]    = pool[latent_offset + s * latent_stride + k],  k < 512
//   k_pe[s][k] = pool[rope_offset   + s * rope_stride   + k],  k < 64
// V is c: there is no separate V buffer (docs/spec.md §1). Indices are int64: a 2M-slot pool times
// 576 overflows int32 (docs/spec.md §7 class 14).
enum class LayoutKind : int32_t {
  LatentFirst = 0,  // [c | k_pe] in one row (SGLang, FlashMLA, vLLM)
  RopeFirst = 1,    // [k_pe | c]: a wrong reading of a latent-first row; used for mutants
  Split = 2,        // two strided views ckv [.., 512] and kpe [.., 64] of one buffer (FlashInfer)
};

struct KvLayout {
  LayoutKind kind;
  int64_t latent_offset;  // elements from pool base to slot 0's c
  int64_t latent_stride;  // elements between consecutive slots' c (>= 512 apart from Split)
  int64_t rope_offset;    // elements from pool base to slot 0's k_pe
  int64_t rope_stride;    // elements between consecutive slots' k_pe

  MLAV_HD int64_t latent_index(int64_t slot) const { return latent_offset + slot * latent_stride; }
  MLAV_HD int64_t rope_index(int64_t slot) const { return rope_offset + slot * rope_stride; }

  // A row of `row_stride` >= 576 elements holding [c | k_pe] then padding.
  static constexpr KvLayout latent_first(int64_t row_stride = kRowDim) {
    return {LayoutKind::LatentFirst, 0, row_stride, kLatentDim, row_stride};
  }
  // A row of `row_stride` >= 576 elements holding [k_pe | c] then padding.
  static constexpr KvLayout rope_first(int64_t row_stride = kRowDim) {
    return {LayoutKind::RopeFirst, kRopeDim, row_stride, 0, row_stride};
  }
  // Two views of one buffer with their own base offsets and strides (FlashInfer's ckv / kpe).
  static constexpr KvLayout split(int64_t ckv_offset, int64_t ckv_stride, int64_t kpe_offset,
                                  int64_t kpe_stride) {
    return {LayoutKind::Split, ckv_offset, ckv_stride, kpe_offset, kpe_stride};
  }
};

// Every indptr the library passes says which convention it follows; it is checked at the boundary.
enum class IndptrConvention : int32_t {
  Csr = 0,          // [bs + 1]: starts at 0, non-decreasing, entry i+1 - entry i = size of i
  OffsetsOnly = 1,  // [bs]: the start of each request only
};

MLAV_HD int64_t indptr_length(IndptrConvention c, int64_t batch) {
  return c == IndptrConvention::Csr ? batch + 1 : batch;
}

// How a request's kv entries name pool slots (VerifyParams::kv_indexing, kv_slot).
enum class KvIndexing : int32_t {
  TokenI64 = 0,   // kv_indices int64, one slot id per token (SGLang's kv_indices)
  TokenI32 = 1,   // kv_indices_i32, the same with int32 ids (FlashInfer's paged_kv_indices style)
  PageTable = 2,  // block_table [bs, max_pages] of page ids (FlashMLA / vLLM block tables)
};

// Where the draft tokens' own KV rows come from (docs/spec.md §3). Both must give the same result.
enum class DraftKvSource : int32_t {
  // Rows k_extend [T, 576] (latent-first, pool dtype); kv_indptr / kv_indices cover the prefix only.
  ExtendRows = 0,
  // The unified path: kv_indptr / kv_indices cover P_i + D_i slots per request, the last D_i of
  // which are the draft slots req_to_token[r, P_i + t]; the prefix is the first kv_len - D_i.
  CacheSlots = 1,
};

// Tree-mask encodings in use (docs/spec.md §3). Column j of the draft block is draft node j of the
// request.
enum class MaskFormat : int32_t {
  // uint8 per element, per request row-major [D_i, P_i + D_i], concatenated; mask_indptr int64 in
  // elements. Prefix columns hold ones; kernels read only the draft block.
  FullMask = 0,
  // uint8 [bs, mask_draft_stride, mask_draft_stride]: the draft block only, padded to the stride.
  QlenOnly = 1,
  // [bs, mask_draft_stride] words of mask_word_bytes (1, 2 or 4) bytes, bit j = draft column j,
  // little-endian. D <= 32.
  QlenOnlyBitpacking = 2,
  // FlashInfer: each request's [D_i, P_i + D_i] bit-packed little-endian (bit k of byte k / 8 is
  // element k), padded to a whole byte per request; mask_indptr int64 counts bytes.
  FlashInferPacked = 3,
  // uint32 [T, mask_draft_stride] words per draft token (stride >= ceil(max D / 32) words), bit
  // (j % 32) of word j / 32 = draft column
  // j: the compact format for large trees (D up to 1024).
  DraftBits = 4,
};

}  // namespace mlaverify
