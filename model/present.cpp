// Presenter: the presented copies (widened or rope-first q, padded rows, int32 ids, a page table)
// and the poisoned, guarded output buffers of one launch, whichever code built its logical data.
#include "model/present.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <utility>

#include "mlaverify/error.h"
#include "mlaverify/split_plan.h"
#include "model/storage.h"

namespace mlaverify::model {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

// Bit patterns: the NaN a backend's unwritten output shows, and the signalling NaN left where no
// backend may write (a write of any computed value, NaN included, changes it).
constexpr uint16_t kBf16Poison = 0x7fc0;
constexpr uint16_t kBf16Guard = 0x7fa5;
constexpr uint32_t kF32Guard = 0x7fa5a5a5u;

void store_value(std::byte* base, DType dtype, int64_t index, float v) {
  if (dtype == DType::BF16) {
    const bf16 x = float_to_bf16(v);
    std::memcpy(base + index * 2, &x, 2);
  } else {
    std::memcpy(base + index * 4, &v, 4);
  }
}

void fill_pattern(std::byte* base, DType dtype, int64_t index, int64_t n, bool guard) {
  for (int64_t k = 0; k < n; ++k) {
    if (dtype == DType::BF16) {
      const uint16_t x = guard ? kBf16Guard : kBf16Poison;
      std::memcpy(base + (index + k) * 2, &x, 2);
    } else {
      const float nan = std::numeric_limits<float>::quiet_NaN();
      const uint32_t x = guard ? kF32Guard : std::bit_cast<uint32_t>(nan);
      std::memcpy(base + (index + k) * 4, &x, 4);
    }
  }
}

bool holds_guard(const std::byte* base, DType dtype, int64_t index) {
  if (dtype == DType::BF16) {
    uint16_t x;
    std::memcpy(&x, base + index * 2, 2);
    return x == kBf16Guard;
  }
  uint32_t x;
  std::memcpy(&x, base + index * 4, 4);
  return x == kF32Guard;
}

}  // namespace

Presenter::Presenter(const Presentation& how, int64_t tokens, int32_t heads)
    : how_(how), tokens_(tokens), heads_(heads) {
  const int64_t rows_t = rows();
  o_lat_.resize(static_cast<size_t>(rows_t * heads * kLatentDim));  // [T + tail, H, 512]
  lse_.resize(static_cast<size_t>(rows_t * heads));                 // [T + tail, H]
  if (presented_o()) {
    o_store_.resize(static_cast<size_t>(rows_t * heads * how.o_head_stride) *
                    static_cast<size_t>(dtype_bytes(how.o_dtype)));
  }
  poison_outputs();
}

void Presenter::present(VerifyParams& p, const LaunchInputs& in) {
  const int32_t h = heads_;
  const int64_t rows = this->rows();
  const VerifyMetadata& md = *in.metadata;
  // Every row is read below (presented copies of the tail rows too): short inputs are a caller's
  // bug, not something to read past.
  if (static_cast<int64_t>(in.q.size()) < rows * h * kRowDim) {
    throw InvalidInput("q", -1,
                       str(static_cast<int64_t>(in.q.size())) + " elements for " + str(rows) +
                           " rows of " + str(h) + " heads");
  }
  if (md.draft_source == DraftKvSource::ExtendRows &&
      static_cast<int64_t>(in.k_extend.size()) < rows * kRowDim * dtype_bytes(in.kv_dtype)) {
    throw InvalidInput(
        "k_extend", -1,
        str(static_cast<int64_t>(in.k_extend.size())) + " bytes for " + str(rows) + " rows");
  }
  p.max_total_q = rows;

  const bool presented_q =
      how_.q_dtype != DType::BF16 || how_.q_rope_first || how_.q_head_stride != kRowDim;
  p.q_dtype = how_.q_dtype;
  p.q_head_stride = how_.q_head_stride;
  p.q_token_stride = int64_t{h} * how_.q_head_stride;
  p.q_latent_offset = how_.q_rope_first ? kRopeDim : 0;
  p.q_rope_offset = how_.q_rope_first ? 0 : kLatentDim;
  if (presented_q) {
    // Rebuilt from q on every call, in place: the size never changes, so the pointer of an
    // earlier call stays valid.
    const int64_t n = rows * p.q_token_stride;
    q_store_.resize(static_cast<size_t>(n) * static_cast<size_t>(dtype_bytes(p.q_dtype)));
    fill_pattern(q_store_.data(), p.q_dtype, 0, n, false);  // padding reads as NaN
    for (int64_t t = 0; t < rows; ++t) {
      for (int32_t hh = 0; hh < h; ++hh) {
        const bf16* src = in.q.data() + (t * h + hh) * kRowDim;
        const int64_t row = t * p.q_token_stride + hh * p.q_head_stride;
        for (int k = 0; k < kLatentDim; ++k) {
          store_value(q_store_.data(), p.q_dtype, row + p.q_latent_offset + k,
                      bf16_to_float(src[k]));
        }
        for (int k = 0; k < kRopeDim; ++k) {
          store_value(q_store_.data(), p.q_dtype, row + p.q_rope_offset + k,
                      bf16_to_float(src[kLatentDim + k]));
        }
      }
    }
    p.q = q_store_.data();
  } else {
    p.q = in.q.data();
  }

  const int32_t bs = md.batch_size();
  p.kv_indexing = how_.kv_indexing;
  p.kv_indices_len = static_cast<int64_t>(md.kv_indices.size());
  p.kv_indices = nullptr;
  p.kv_indices_i32 = nullptr;
  p.block_table = nullptr;
  p.block_table_stride = 0;
  p.page_size = 1;
  switch (how_.kv_indexing) {
    case KvIndexing::TokenI64:
      p.kv_indices = md.kv_indices.data();
      break;
    case KvIndexing::TokenI32:
      kv_indices_i32_.assign(md.kv_indices.begin(), md.kv_indices.end());
      p.kv_indices_i32 = kv_indices_i32_.data();
      break;
    case KvIndexing::PageTable: {
      const int64_t ps = how_.page_size;
      int64_t widest = 1;
      for (int32_t i = 0; i < bs; ++i) {
        const int64_t len =
            md.kv_indptr[static_cast<size_t>(i) + 1] - md.kv_indptr[static_cast<size_t>(i)];
        widest = std::max(widest, ceil_div(len, ps));
      }
      block_table_stride_ = static_cast<int32_t>(widest);
      // Unused entries hold -1: a kernel that reads past a request's pages names no page.
      block_table_.assign(static_cast<size_t>(bs) * static_cast<size_t>(widest), -1);
      for (int32_t i = 0; i < bs; ++i) {
        const int64_t begin = md.kv_indptr[static_cast<size_t>(i)];
        const int64_t len = md.kv_indptr[static_cast<size_t>(i) + 1] - begin;
        const bool padded = i >= in.real_batch_size;
        for (int64_t k = 0; k < len; ++k) {
          const int64_t slot = md.kv_indices[static_cast<size_t>(begin + k)];
          int32_t& page = block_table_[static_cast<size_t>(i * widest + k / ps)];
          if (k % ps == 0) page = static_cast<int32_t>(padded ? 0 : slot / ps);
          if (!padded && slot != int64_t{page} * ps + k % ps) {
            throw InvalidInput("kv_indexing", i,
                               "request " + str(i) + "'s entry " + str(k) + " is slot " +
                                   str(slot) + ", not page-aligned: a page table of " + str(ps) +
                                   "-slot pages cannot name it");
          }
        }
      }
      p.block_table = block_table_.data();
      p.block_table_stride = block_table_stride_;
      p.page_size = static_cast<int32_t>(ps);
      p.kv_indices_len = 0;
      break;
    }
  }

  p.k_extend_stride = how_.k_extend_stride;
  if (md.draft_source != DraftKvSource::ExtendRows) {
    p.k_extend = nullptr;
  } else if (how_.k_extend_stride == kRowDim) {
    p.k_extend = in.k_extend.data();
  } else {
    const size_t eb = static_cast<size_t>(dtype_bytes(in.kv_dtype));
    k_extend_store_.resize(static_cast<size_t>(rows * how_.k_extend_stride) * eb);
    fill_pattern(k_extend_store_.data(), in.kv_dtype, 0, rows * how_.k_extend_stride, false);
    for (int64_t t = 0; t < rows; ++t) {
      std::memcpy(k_extend_store_.data() + static_cast<size_t>(t * how_.k_extend_stride) * eb,
                  in.k_extend.data() + static_cast<size_t>(t) * kRowDim * eb, kRowDim * eb);
    }
    p.k_extend = k_extend_store_.data();
  }

  p.o_dtype = how_.o_dtype;
  p.o_head_stride = how_.o_head_stride;
  p.o_token_stride = int64_t{h} * how_.o_head_stride;
  p.o_lat = presented_o() ? static_cast<void*>(o_store_.data()) : o_lat_.data();
  p.lse = lse_.data();
}

void Presenter::poison_outputs() {
  const int32_t h = heads_;
  const int64_t t_end = tokens_;
  const int64_t rows = this->rows();
  std::fill(o_lat_.begin(), o_lat_.end(), bf16{kBf16Poison});
  std::fill(lse_.begin(), lse_.end(), std::numeric_limits<float>::quiet_NaN());
  for (int64_t i = t_end * h; i < rows * h; ++i) {
    lse_[static_cast<size_t>(i)] = std::bit_cast<float>(kF32Guard);
  }
  if (!presented_o()) {
    for (int64_t i = t_end * h * kLatentDim; i < rows * h * kLatentDim; ++i) {
      o_lat_[static_cast<size_t>(i)] = bf16{kBf16Guard};
    }
    return;
  }
  const DType dt = how_.o_dtype;
  const int64_t hs = how_.o_head_stride;
  fill_pattern(o_store_.data(), dt, 0, rows * h * hs, true);
  for (int64_t t = 0; t < t_end; ++t) {
    for (int32_t hh = 0; hh < h; ++hh) {
      fill_pattern(o_store_.data(), dt, (t * h + hh) * hs, kLatentDim, false);
    }
  }
}

StrayWrites Presenter::stray_writes() const {
  StrayWrites out;
  const int32_t h = heads_;
  const int64_t t_end = tokens_;
  const int64_t rows = this->rows();
  auto note = [&](std::string where) {
    if (out.count++ == 0) out.first = std::move(where);
  };
  for (int64_t t = t_end; t < rows; ++t) {
    for (int32_t hh = 0; hh < h; ++hh) {
      if (std::bit_cast<uint32_t>(lse_[static_cast<size_t>(t * h + hh)]) != kF32Guard) {
        note("lse row " + str(t) + " head " + str(hh) + " (past T = " + str(t_end) + ")");
      }
    }
  }
  if (!presented_o()) {
    for (int64_t i = t_end * h * kLatentDim; i < rows * h * kLatentDim; ++i) {
      if (o_lat_[static_cast<size_t>(i)].bits != kBf16Guard) {
        note("o_lat row " + str(i / (h * kLatentDim)) + " (past T = " + str(t_end) + ")");
      }
    }
    return out;
  }
  const int64_t hs = how_.o_head_stride;
  for (int64_t t = 0; t < rows; ++t) {
    for (int32_t hh = 0; hh < h; ++hh) {
      const int64_t from = t < t_end ? kLatentDim : 0;  // rows past T: every element
      for (int64_t k = from; k < hs; ++k) {
        if (!holds_guard(o_store_.data(), how_.o_dtype, (t * h + hh) * hs + k)) {
          note("o_lat row " + str(t) + " head " + str(hh) + " element " + str(k) +
               (t < t_end ? " (a head-stride gap)" : " (past T)"));
        }
      }
    }
  }
  return out;
}

float Presenter::o_lat_value(int64_t t, int32_t h, int32_t k) const {
  if (t < 0 || t >= tokens_) throw InvalidInput("t", t, "token outside [0, T)");
  if (h < 0 || h >= heads_) throw InvalidInput("h", h, "head outside [0, H)");
  if (k < 0 || k >= kLatentDim) throw InvalidInput("k", k, "column outside [0, 512)");
  if (presented_o()) {
    // Exact: bf16 and fp32 embed in double.
    return static_cast<float>(
        load(how_.o_dtype, o_store_.data(), (t * heads_ + h) * how_.o_head_stride + k));
  }
  return bf16_to_float(o_lat_[static_cast<size_t>((t * heads_ + h) * kLatentDim + k)]);
}

float Presenter::lse_value(int64_t t, int32_t h) const {
  if (t < 0 || t >= tokens_) throw InvalidInput("t", t, "token outside [0, T)");
  if (h < 0 || h >= heads_) throw InvalidInput("h", h, "head outside [0, H)");
  return lse_[static_cast<size_t>(t * heads_ + h)];
}

}  // namespace mlaverify::model
