// Tree-mask encodings of docs/spec.md §3 (FULL_MASK, QLEN_ONLY, QLEN_ONLY_BITPACKING, FlashInfer
// packed, DraftBits): the encoder that writes them, the one decoder every backend reads them by.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "mlaverify/types.h"
#include "mlaverify/verify_params.h"
#include "model/bitrows.h"
#include "model/tree.h"

namespace mlaverify::model {

// One batch's mask buffer, ready to be pointed at by a VerifyParams (attach_mask).
struct EncodedMask {
  MaskFormat format = MaskFormat::FullMask;
  // The buffer as bytes. DraftBits: uint32 words stored little-endian, 4 bytes each.
  std::vector<uint8_t> data;  // [len] bytes, or [len * 4] for DraftBits
  // Capacity in the format's units (VerifyParams::mask_len): bytes, or uint32 words for DraftBits.
  int64_t len = 0;
  // FullMask: element offsets; FlashInferPacked: byte offsets. Empty for the other formats.
  std::vector<int64_t> indptr;  // [bs + 1] (Csr) or [bs] (OffsetsOnly)
  IndptrConvention indptr_convention = IndptrConvention::Csr;
  // QlenOnly / QlenOnlyBitpacking: max D_i (rows and columns per request block).
  // DraftBits: uint32 words per draft token row = ceil(max D_i / 32) (types.h: [T, stride] words).
  // 0 for FullMask / FlashInferPacked.
  int32_t draft_stride = 0;
  int32_t word_bytes = 4;  // QlenOnlyBitpacking word size (1, 2 or 4); as passed otherwise
};

// Encodes the trees of one batch (request i: trees[i] with prefix_lens[i] committed tokens).
// FullMask prefix columns are ones (SGLang writes them; kernels do not read them). FlashInfer packs
// each request's [D_i, P_i + D_i] row-major little-endian and pads it to a whole byte.
// QlenOnlyBitpacking needs max D_i <= 32 and a word of word_bytes (1, 2, 4) holding max D_i bits
// (SGLang picks the smallest: 1 byte for D <= 8, 2 for D <= 16, else 4; any that fits is accepted).
EncodedMask encode_mask(MaskFormat format, std::span<const DraftTree> trees,
                        std::span<const int64_t> prefix_lens,
                        IndptrConvention conv = IndptrConvention::Csr, int32_t word_bytes = 4);

// The same encoder over decoded visibility blocks instead of trees, so that a mask whose bits are
// no tree (CUDA-graph padded rows, docs/spec.md §3.5) is still re-encoded bit for bit:
// draft_blocks[i] is request i's D_i x D_i block (every bit written, upper triangle included).
// prefix_blocks, when given, holds each request's D_i x P_i prefix columns for the formats that
// store them (mask_has_prefix_columns); when empty those columns are ones, as encode_mask writes.
// encode_mask(trees) == encode_mask_blocks(each tree's ancestor_bits()). Errors name "blocks".
EncodedMask encode_mask_blocks(MaskFormat format, std::span<const BitRows> draft_blocks,
                               std::span<const int64_t> prefix_lens,
                               IndptrConvention conv = IndptrConvention::Csr,
                               int32_t word_bytes = 4, std::span<const BitRows> prefix_blocks = {});

// Whether a format stores each draft row's P_i prefix columns (FullMask, FlashInferPacked).
bool mask_has_prefix_columns(MaskFormat format);

// Points p's mask fields at m (mask, mask_len, mask_indptr, convention, stride, word size).
// m must outlive every use of p.
void attach_mask(VerifyParams& p, const EncodedMask& m);

// Draft query t of `request` sees draft column j, read from p's mask (host pointers). D_i and P_i
// come from mlaverify::request_extent (FullMask row stride is P_i + D_i, column offset P_i), and
// mask_indptr[request] is the request's start under both indptr conventions. Every read is
// bounds-checked against p.mask_len; bad metadata raises InvalidInput, never a wild read.
bool mask_visible(const VerifyParams& p, int32_t request, int32_t t, int32_t j);

// The whole D_i x D_i visibility block of `request`: bit (t, j) = draft query t sees column j.
BitRows draft_block(const VerifyParams& p, int32_t request);

// The D_i x P_i prefix columns of `request` as the mask stores them (bit (t, c) = element (t, c) of
// the request's [D_i, P_i + D_i] rows), for the formats that hold them; no kernel reads them
// (§3.4), but a faithful conversion keeps them. Same bounds checks as draft_block; InvalidInput
// for a format without prefix columns.
BitRows prefix_block(const VerifyParams& p, int32_t request);

// Every read the decoders would make lies inside [0, p.mask_len); a Csr mask_indptr starts at 0,
// is non-decreasing and holds exactly each request's segment size; an OffsetsOnly one is
// non-decreasing and each segment fits; strides hold D_i. Assumes qo_indptr and kv_indptr were
// validated (validate_params) but still refuses negative D_i / P_i rather than reading with them.
void validate_mask(const VerifyParams& p);

// validate_mask, then every request's draft_block as a DraftTree (DraftTree::from_ancestor_bits):
// the inverse of encode_mask for every format.
std::vector<DraftTree> decode_trees(const VerifyParams& p);

}  // namespace mlaverify::model
