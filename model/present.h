// How one launch's logical buffers are handed to a backend (q dtype and layout, k_extend row
// stride, kv indexing, output dtype and head stride, rows past T) and the buffers that takes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "mlaverify/bf16.h"
#include "mlaverify/types.h"
#include "mlaverify/verify_params.h"
#include "model/metadata.h"

namespace mlaverify::model {

// The presentation of a launch: none of these changes a logical value, so a correct backend gives
// the same result under every one it takes (BatchSpec carries the same fields).
struct Presentation {
  DType q_dtype = DType::BF16;         // F32: the bf16 queries widened exactly
  bool q_rope_first = false;           // each head's row [q_pe | q_lat] instead of [q_lat | q_pe]
  int64_t q_head_stride = kRowDim;     // >= 576: NaN padding after each head's row
  DType o_dtype = DType::BF16;         // F32: the output rounded once, to fp32
  int64_t o_head_stride = kLatentDim;  // >= 512: guarded gaps a backend must not write
  int64_t k_extend_stride = kRowDim;   // >= 576: NaN padding after each k_extend row
  KvIndexing kv_indexing = KvIndexing::TokenI64;
  int32_t page_size = 1;  // PageTable: slots per page (every real request's slots page-aligned)
  int32_t tail_rows = 0;  // rows past T in q, k_extend, o and lse (max_total_q = T + tail_rows)
};

// The logical buffers of a launch, in their canonical forms, that a presentation is made from.
struct LaunchInputs {
  std::span<const bf16> q;              // [T + tail, H, 576] latent-first
  std::span<const std::byte> k_extend;  // [T + tail, 576] latent-first, of kv_dtype (ExtendRows)
  DType kv_dtype = DType::BF16;
  const VerifyMetadata* metadata = nullptr;  // indptrs, token-level kv_indices, draft source
  int32_t real_batch_size = 0;  // requests from here on are CUDA-graph padding (sink page 0)
};

// Output elements a backend wrote that no backend may write (stride gaps, rows past T).
struct StrayWrites {
  int64_t count = 0;
  std::string first;  // "o_lat row 7 head 2 element 515" / "lse row 9 (past T)"
};

// Owns the presented copies of one launch's inputs and its output buffers. The outputs are
// poisoned so that rows a backend fails to write show as NaN and elements no backend may write
// (head-stride gaps, rows past T: backend.h's rules) hold a guard pattern a write changes.
class Presenter {
 public:
  Presenter() = default;
  // Outputs of `tokens` (T) rows of `heads` heads, plus how.tail_rows, poisoned.
  Presenter(const Presentation& how, int64_t tokens, int32_t heads);

  // Sets every VerifyParams field the presentation decides: max_total_q; q with its dtype,
  // strides and offsets; kv_indexing with kv_indices, kv_indices_i32 or the page table; k_extend
  // and its stride (null off the ExtendRows path); o_lat, its dtype and strides, and lse. The
  // presented copies are rebuilt from `in` on every call (a mutation of the inputs shows), in
  // place, so the pointers an earlier call handed out stay valid. InvalidInput("kv_indexing", i)
  // when real request i's slots are not page-aligned, which no page table can name.
  void present(VerifyParams& p, const LaunchInputs& in);

  // o_lat := NaN and lse := NaN, guards where no backend may write.
  void poison_outputs();
  StrayWrites stray_writes() const;

  const Presentation& how() const { return how_; }
  int64_t tokens() const { return tokens_; }                 // T
  int64_t rows() const { return tokens_ + how_.tail_rows; }  // max_total_q
  int32_t heads() const { return heads_; }

  // Value a backend wrote, read back: o_lat[t, h, k] as float, lse[t, h]; t < T, else
  // InvalidInput("t" / "h" / "k").
  float o_lat_value(int64_t t, int32_t h, int32_t k) const;
  float lse_value(int64_t t, int32_t h) const;

  // The dense bf16 output (the one handed out when the presentation pads or widens nothing) and
  // lse, for tests that write or read them directly.
  std::vector<bf16>& o_lat() { return o_lat_; }  // [T + tail, H, 512]
  std::vector<float>& lse() { return lse_; }     // [T + tail, H]
  const std::vector<bf16>& o_lat() const { return o_lat_; }
  const std::vector<float>& lse() const { return lse_; }

 private:
  bool presented_o() const {
    return how_.o_dtype != DType::BF16 || how_.o_head_stride != kLatentDim;
  }

  Presentation how_;
  int64_t tokens_ = 0;
  int32_t heads_ = 0;
  std::vector<bf16> o_lat_;  // [T + tail, H, 512]
  std::vector<float> lse_;   // [T + tail, H]
  // The presented forms, built when the presentation asks for them (empty otherwise).
  std::vector<std::byte> q_store_;         // [T + tail, H, q_head_stride] of q_dtype
  std::vector<std::byte> k_extend_store_;  // [T + tail, k_extend_stride] of kv_dtype
  std::vector<std::byte> o_store_;         // [T + tail, H, o_head_stride] of o_dtype
  std::vector<int32_t> kv_indices_i32_;    // TokenI32
  std::vector<int32_t> block_table_;       // PageTable [bs, block_table_stride_]
  int32_t block_table_stride_ = 0;
};

}  // namespace mlaverify::model
