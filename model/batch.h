// VerifyBatch: every host buffer of one verify launch, generated from a BatchSpec (trees, prefix
// lengths, layout, mask format, slot order, graph padding), and the VerifyParams pointing into it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mlaverify/bf16.h"
#include "mlaverify/types.h"
#include "mlaverify/verify_params.h"
#include "model/indptr.h"
#include "model/kv_pool.h"
#include "model/mask.h"
#include "model/metadata.h"
#include "model/present.h"
#include "model/req_to_token.h"
#include "model/tree.h"

namespace mlaverify::model {

struct RequestSpec {
  DraftTree tree;      // D_i = tree.size() draft nodes
  int64_t prefix_len;  // P_i committed tokens already in the cache
};

struct BatchSpec {
  enum class SlotOrder : int32_t {
    Scattered = 0,   // pages (slots when page_size is 1) taken in a seeded random permutation
    Contiguous = 1,  // pages taken in ascending order: each request one ascending run
  };

  std::vector<RequestSpec> requests;  // [bs] real requests
  int32_t num_heads = 8;              // H
  double sm_scale = 0.1352338;        // DeepSeek-V3 (model/config.h); stored as float in params
  DType kv_dtype = DType::BF16;       // pool and k_extend storage
  // Only layout.kind is read: LatentFirst / RopeFirst rows get row_stride (>= 576; more pads each
  // row), Split gets FlashInfer's two regions of the pool's buffer (KvPool::split_regions), since
  // its offsets depend on the pool size the builder chooses.
  KvLayout layout = KvLayout::latent_first();
  int64_t row_stride = kRowDim;
  DraftKvSource draft_source = DraftKvSource::ExtendRows;
  MaskFormat mask_format = MaskFormat::FullMask;
  IndptrConvention mask_indptr_convention = IndptrConvention::Csr;
  int32_t mask_word_bytes = 4;  // QlenOnlyBitpacking word size (1, 2 or 4)
  int32_t page_size = 1;        // tokens per page; kv_indices stay token-level slot ids
  SlotOrder slot_order = SlotOrder::Scattered;
  int32_t graph_padded_bs = 0;      // 0: no padding; else the captured size (>= bs) to pad up to
  bool poison_unused_slots = true;  // NaN in every pool slot no request owns (slot 0 excepted)
  double value_scale = 1.0;         // q and kv ~ N(0, value_scale^2) before rounding to bf16
  int32_t num_splits = 1;           // NSPLIT in params
  int32_t plan_blocks = 0;          // VerifyParams::plan_blocks (0: the uniform split plan)
  int64_t spare_pages = -1;         // free pages beyond the batch's (-1: max(4, used / 8))
  uint64_t seed = 0;

  // How the same values are presented to a backend (params()); none changes a logical value.
  DType q_dtype = DType::BF16;          // F32: the bf16 queries widened exactly
  bool q_rope_first = false;            // each head's row [q_pe | q_lat] instead of [q_lat | q_pe]
  int64_t q_head_stride = kRowDim;      // >= 576: NaN padding after each head's row
  DType o_dtype = DType::BF16;          // F32: the output rounded once, to fp32
  int64_t o_head_stride = kLatentDim;   // >= 512: poisoned gaps a backend must not write
  int64_t k_extend_stride = kRowDim;    // >= 576: NaN padding after each k_extend row
  KvIndexing kv_indexing = KvIndexing::TokenI64;  // PageTable uses page_size (slots page-aligned)
  int32_t tail_rows = 0;  // rows past T in q, k_extend, o and lse (max_total_q = T + tail_rows)

  // The fields above (and page_size, the page of a page table) as the Presenter takes them.
  Presentation presentation() const {
    return {.q_dtype = q_dtype,
            .q_rope_first = q_rope_first,
            .q_head_stride = q_head_stride,
            .o_dtype = o_dtype,
            .o_head_stride = o_head_stride,
            .k_extend_stride = k_extend_stride,
            .kv_indexing = kv_indexing,
            .page_size = page_size,
            .tail_rows = tail_rows};
  }
};

// Owns the buffers of one launch. Logical data depend only on (trees, prefix lengths, num_heads,
// value_scale, seed): the same spec under another layout, dtype, slot order, page size, mask
// format or draft source holds the same values for the same (request, token), so backends must
// give identical results across those choices (bf16 values are exact in fp32 storage too).
class VerifyBatch {
 public:
  // Throws InvalidInput naming the spec field ("requests", "num_heads", ...) for a bad spec.
  static VerifyBatch build(const BatchSpec& spec);

  // Every VerifyParams field, pointing into this batch's buffers. Call again after mutating a
  // buffer's size (pointers are taken fresh each time). q [T, H, 576] and o_lat [T, H, 512] are
  // contiguous; k_extend is null on the CacheSlots path so no backend reads it there.
  VerifyParams params();

  // o_lat := NaN and lse := NaN, so rows a backend fails to write are visible; the elements no
  // backend may write (head-stride gaps, tail rows) get a signalling pattern instead.
  void poison_outputs() { presenter_.poison_outputs(); }
  // Elements of the output buffers a backend wrote but must not have (stride gaps, rows past T:
  // backend.h's rules), counted against the pattern poison_outputs left; the first one's place.
  using StrayWrites = model::StrayWrites;
  StrayWrites stray_writes() const { return presenter_.stray_writes(); }
  // The presented inputs and the outputs params() hands out (model/present.h).
  Presenter& presenter() { return presenter_; }
  const Presenter& presenter() const { return presenter_; }

  const BatchSpec& spec() const { return spec_; }
  int32_t real_batch_size() const { return real_bs_; }
  int32_t batch_size() const { return static_cast<int32_t>(prefix_lens_.size()); }  // padded
  int64_t real_tokens() const { return metadata_.qo_indptr[static_cast<size_t>(real_bs_)]; }
  int64_t total_tokens() const { return metadata_.total_q(); }  // T, padded rows included
  int64_t row_capacity() const { return metadata_.total_q() + spec_.tail_rows; }  // max_total_q
  int32_t max_draft() const { return max_draft_; }

  // Per request, padded rows included (padded: chain(D) standing in, P = 1, row 0).
  const DraftTree& tree(int32_t i) const;
  int64_t prefix_len(int32_t i) const;
  int32_t req_pool_index(int32_t i) const;
  std::vector<int64_t> prefix_slots(int32_t i) const;  // [P_i] req_to_token[r, 0:P_i]
  std::vector<int64_t> draft_slots(int32_t i) const;   // [D_i] req_to_token[r, P_i:P_i+D_i]

  // The batch's indptrs with their conventions named (docs/spec.md §3: the library names the
  // convention of every indptr it passes): qo/kv are CSR [bs+1]; mask_indptr follows the spec's
  // convention and is empty for the formats without one (QlenOnly, QlenOnlyBitpacking, DraftBits).
  Indptr<int32_t> qo_indptr() const { return {metadata_.qo_indptr, IndptrConvention::Csr}; }
  Indptr<int32_t> kv_indptr() const { return {metadata_.kv_indptr, IndptrConvention::Csr}; }
  Indptr<int64_t> mask_indptr() const { return {mask_.indptr, mask_.indptr_convention}; }

  // Value a backend writes, read back: o_lat[t, h, k] as float, lse[t, h].
  float o_lat_value(int64_t t, int32_t h, int32_t k) const {
    return presenter_.o_lat_value(t, h, k);
  }
  float lse_value(int64_t t, int32_t h) const { return presenter_.lse_value(t, h); }

  // Mutable buffers, for mutants and properties that rewrite them on purpose.
  ReqToToken& req_to_token() { return req_to_token_; }
  KvPool& pool() { return pool_; }
  VerifyMetadata& metadata() { return metadata_; }  // qo/kv_indptr, kv_indices, positions
  EncodedMask& mask() { return mask_; }
  std::vector<bf16>& q() { return q_; }                     // [T, H, 576]
  std::vector<std::byte>& k_extend() { return k_extend_; }  // [T, 576] of kv_dtype, raw
  std::vector<bf16>& o_lat() { return presenter_.o_lat(); }  // [T + tail, H, 512]
  std::vector<float>& lse() { return presenter_.lse(); }     // [T + tail, H]
  const ReqToToken& req_to_token() const { return req_to_token_; }
  const KvPool& pool() const { return pool_; }
  const VerifyMetadata& metadata() const { return metadata_; }
  const EncodedMask& mask() const { return mask_; }
  const std::vector<bf16>& q() const { return q_; }
  const std::vector<std::byte>& k_extend() const { return k_extend_; }

 private:
  VerifyBatch(BatchSpec spec, ReqToToken rtt, KvPool pool);
  void check_request(int32_t i) const;

  BatchSpec spec_;
  int32_t real_bs_ = 0;
  int32_t max_draft_ = 0;
  std::vector<DraftTree> trees_;           // [bs] padded rows included
  std::vector<int64_t> prefix_lens_;       // [bs]
  std::vector<int32_t> req_pool_indices_;  // [bs]
  ReqToToken req_to_token_;                // [bs_real + 1, max_context_len]
  KvPool pool_;                            // [size + page_size slots] through the layout
  VerifyMetadata metadata_;
  EncodedMask mask_;
  std::vector<bf16> q_;              // [T, H, 576] latent-first
  std::vector<std::byte> k_extend_;  // [T, 576] latent-first, kv_dtype
  Presenter presenter_;  // presented copies of q, k_extend and kv ids; o_lat and lse [T + tail]
};

}  // namespace mlaverify::model
