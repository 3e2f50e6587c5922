// Wrapper mutants: each copies the part of the params a buggy integration gets wrong, corrupts
// the copy exactly as that bug would, and runs the inner backend on it.
#include "props/mutants.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

#include "mlaverify/error.h"
#include "model/validate.h"

namespace mlaverify::props {

const std::vector<MutantInfo>& all_mutants() {
  static const std::vector<MutantInfo> list = {
      {Mutant::MaskIndptrShifted, "mask_indptr_shifted", 1,
       "mask_indptr[1:bs+1] handed to a kernel that reads offsets [bs]"},
      {Mutant::RopeFirstRead, "rope_first_read", 2, "latent-first pool rows read as [k_pe, c]"},
      {Mutant::LatentStride512, "latent_stride_512", 3,
       "latent view (V) of a latent-first pool with stride 512 instead of the row stride"},
      {Mutant::SmScale576, "sm_scale_576", 4, "sm_scale = 576^-0.5"},
      {Mutant::NoMscale, "no_mscale", 4, "sm_scale = 192^-0.5 (YaRN mscale^2 missing)"},
      {Mutant::MaskRowStrideD, "mask_row_stride_d", 5, "FULL_MASK row stride D instead of P + D"},
      {Mutant::PaddedRowsReadReal, "padded_rows_read_real", 10,
       "graph-padded rows read a real request's slots"},
      {Mutant::StaleSlots, "stale_slots", 11,
       "kv_indices cached from an earlier launch on the same pool (not rewritten after defrag)"},
      {Mutant::PageIdsAsSlots, "page_ids_as_slots", 12, "page ids (slot / 16) passed as slot ids"},
      {Mutant::BigEndianBits, "big_endian_bits", 13, "packed mask words read MSB-first"},
      {Mutant::GlobalBitPacking, "global_bit_packing", 13,
       "FlashInfer mask read as one global bit stream instead of per-request bytes"},
      {Mutant::Int32IndexWrap, "int32_index_wrap", 14,
       "slot * stride wrapped (scaled-down int32 overflow)"},
  };
  return list;
}

const MutantInfo& mutant_info(Mutant m) {
  for (const auto& i : all_mutants()) {
    if (i.mutant == m) return i;
  }
  throw InvalidInput("mutant", static_cast<int64_t>(m), "unknown mutant");
}

namespace {

// Elements of the pool buffer the layout addresses for slots [0, pool_slots): the end of the
// furthest latent or rope view (strides are positive, so the last slot reaches furthest).
int64_t pool_extent(const VerifyParams& p) {
  if (p.pool_slots <= 0) return 0;
  const int64_t last = p.pool_slots - 1;
  return std::max(p.kv_layout.latent_index(last) + kLatentDim,
                  p.kv_layout.rope_index(last) + kRopeDim);
}

// Element count of request i's mask segment in FullMask (elements) or FlashInferPacked (bytes).
int64_t mask_segment(const VerifyParams& p, int32_t i) {
  RequestExtent e = request_extent(p, i);
  const int64_t n = int64_t{e.draft_nodes} * (e.prefix_len + e.draft_nodes);
  return p.mask_format == MaskFormat::FullMask ? n : (n + 7) / 8;
}

bool has_mask_indptr(const VerifyParams& p) {
  return p.mask_format == MaskFormat::FullMask || p.mask_format == MaskFormat::FlashInferPacked;
}

class MutantBackend final : public Backend {
 public:
  MutantBackend(Mutant m, BackendPtr inner) : m_(m), inner_(std::move(inner)) {}

  std::string name() const override {
    return "mutant:" + std::string(mutant_info(m_).name) + "(" + inner_->name() + ")";
  }
  Capabilities capabilities() const override { return inner_->capabilities(); }
  Support can_implement(const VerifyParams& p) const override { return inner_->can_implement(p); }
  size_t workspace_bytes(const VerifyParams& p) const override {
    return inner_->workspace_bytes(p);
  }

  void run(const VerifyParams& original) override {
    // The bugs are written against token-level int64 kv_indices; other indexings are translated
    // first (after the checks the translation relies on).
    model::validate_params(original);
    VerifyParams p = model::with_token_indices(original, token_indptr_, token_indices_);
    switch (m_) {
      case Mutant::MaskIndptrShifted:
        shift_mask_indptr(p);
        break;
      case Mutant::RopeFirstRead:
        if (p.kv_layout.kind == LayoutKind::LatentFirst) {
          p.kv_layout = KvLayout::rope_first(p.kv_layout.latent_stride);
        }
        break;
      case Mutant::LatentStride512:
        if (p.kv_layout.kind == LayoutKind::LatentFirst) p.kv_layout.latent_stride = kLatentDim;
        break;
      case Mutant::SmScale576:
        p.sm_scale = static_cast<float>(1.0 / std::sqrt(576.0));
        break;
      case Mutant::NoMscale:
        p.sm_scale = static_cast<float>(1.0 / std::sqrt(192.0));
        break;
      case Mutant::MaskRowStrideD:
        mask_row_stride_d(p);
        break;
      case Mutant::PaddedRowsReadReal:
        padded_rows_read_real(p);
        break;
      case Mutant::StaleSlots:
        stale_slots(p);
        break;
      case Mutant::PageIdsAsSlots:
        indices_.assign(p.kv_indices, p.kv_indices + p.kv_indices_len);
        for (int64_t& s : indices_) s /= 16;
        p.kv_indices = indices_.data();
        break;
      case Mutant::BigEndianBits:
        big_endian_bits(p);
        break;
      case Mutant::GlobalBitPacking:
        global_bit_packing(p);
        break;
      case Mutant::Int32IndexWrap:
        int32_index_wrap(p);
        break;
    }
    inner_->run(p);
  }

 private:
  // The kernel reads request i's start from the array it was given; handing it the CSR's ends
  // (a [1:bs+1] slice) makes request i read request i+1's segment, and the last one run off the
  // end (caught by the inner backend's bounds check as InvalidInput: a failure on a valid case).
  void shift_mask_indptr(VerifyParams& p) {
    if (!has_mask_indptr(p)) return;
    mask_indptr_.resize(static_cast<size_t>(p.batch_size));
    for (int32_t i = 0; i < p.batch_size; ++i) {
      mask_indptr_[static_cast<size_t>(i)] = p.mask_indptr[i] + mask_segment(p, i);
    }
    p.mask_indptr = mask_indptr_.data();
    p.mask_indptr_convention = IndptrConvention::OffsetsOnly;
  }

  // The buggy kernel reads (t, j) of request i at start + t * D + P + j. Build the buffer a
  // correct reader would have to be given to see exactly that: B[start + t(P+D) + P + j] =
  // A[start + t D + P + j]. The source index stays inside the segment: t D + P + j < D (P + D).
  void mask_row_stride_d(VerifyParams& p) {
    if (p.mask_format != MaskFormat::FullMask) return;
    const auto* a = static_cast<const uint8_t*>(p.mask);
    mask_.assign(a, a + p.mask_len);
    for (int32_t i = 0; i < p.batch_size; ++i) {
      RequestExtent e = request_extent(p, i);
      const int64_t start = p.mask_indptr[i];
      const int64_t d = e.draft_nodes, pl = e.prefix_len;
      for (int64_t t = 0; t < d; ++t) {
        for (int64_t j = 0; j < d; ++j) {
          mask_[static_cast<size_t>(start + t * (pl + d) + pl + j)] = a[start + t * d + pl + j];
        }
      }
    }
    p.mask = mask_.data();
  }

  // Padded rows are the ones whose every slot is the sink (real requests never own slot 0).
  void padded_rows_read_real(VerifyParams& p) {
    indices_.assign(p.kv_indices, p.kv_indices + p.kv_indices_len);
    int64_t real_slot = -1;
    std::vector<int32_t> padded;
    for (int32_t i = 0; i < p.batch_size; ++i) {
      const int64_t b = p.kv_indptr[i], e = p.kv_indptr[i + 1];
      bool all_zero = e > b;
      for (int64_t k = b; k < e; ++k) {
        if (indices_[static_cast<size_t>(k)] != 0) {
          all_zero = false;
          if (real_slot < 0) real_slot = indices_[static_cast<size_t>(k)];
        }
      }
      if (all_zero) padded.push_back(i);
    }
    if (real_slot < 0) return;
    for (int32_t i : padded) {
      for (int64_t k = p.kv_indptr[i]; k < p.kv_indptr[i + 1]; ++k) {
        indices_[static_cast<size_t>(k)] = real_slot;
      }
    }
    p.kv_indices = indices_.data();
  }

  // A launch on a pool this mutant has seen before, with the same shape, reuses the kv_indices of
  // that earlier launch: the integration rewrote the pool (defrag, slot moves) but not the indices.
  // Only the last launch is remembered (what an integration caching "the" indices would hold).
  void stale_slots(VerifyParams& p) {
    auto key = std::make_tuple(p.kv_pool, p.kv_indices_len, p.batch_size);
    if (has_stale_ && key == stale_key_) {
      p.kv_indices = stale_.data();
      return;
    }
    has_stale_ = true;
    stale_key_ = key;
    stale_.assign(p.kv_indices, p.kv_indices + p.kv_indices_len);
  }

  // Bit j of each packed word moves to bit W-1-j: what an MSB-first reader sees in an LSB-first
  // buffer. Words: 1 byte (FlashInfer), mask_word_bytes (QLEN_ONLY_BITPACKING), 4 (DraftBits).
  void big_endian_bits(VerifyParams& p) {
    int32_t word = 0;
    int64_t bytes = 0;
    switch (p.mask_format) {
      case MaskFormat::FlashInferPacked:
        word = 1;
        bytes = p.mask_len;
        break;
      case MaskFormat::QlenOnlyBitpacking:
        word = p.mask_word_bytes;
        bytes = p.mask_len;
        break;
      case MaskFormat::DraftBits:
        word = 4;
        bytes = p.mask_len * 4;
        break;
      default:
        return;
    }
    const auto* a = static_cast<const uint8_t*>(p.mask);
    mask_.assign(a, a + bytes);
    const int32_t bits = 8 * word;
    for (int64_t w = 0; w + word <= bytes; w += word) {
      uint32_t v = 0;
      for (int32_t b = 0; b < word; ++b) v |= uint32_t{a[w + b]} << (8 * b);
      uint32_t r = 0;
      for (int32_t b = 0; b < bits; ++b) {
        if (v >> b & 1u) r |= 1u << (bits - 1 - b);
      }
      for (int32_t b = 0; b < word; ++b)
        mask_[static_cast<size_t>(w + b)] = static_cast<uint8_t>(r >> (8 * b));
    }
    p.mask = mask_.data();
  }

  // The buggy reader takes request i's element k from global bit (sum of earlier segments' bit
  // counts) + k; the buffer pads each request to whole bytes. Rebuild what a per-request reader
  // would need to see the same bits. Bits past the buffer read as 0.
  void global_bit_packing(VerifyParams& p) {
    if (p.mask_format != MaskFormat::FlashInferPacked) return;
    const auto* a = static_cast<const uint8_t*>(p.mask);
    mask_.assign(a, a + p.mask_len);
    auto bit = [&](int64_t g) -> int { return g / 8 < p.mask_len ? (a[g / 8] >> (g % 8)) & 1 : 0; };
    int64_t global = 0;
    for (int32_t i = 0; i < p.batch_size; ++i) {
      RequestExtent e = request_extent(p, i);
      const int64_t n = int64_t{e.draft_nodes} * (e.prefix_len + e.draft_nodes);
      const int64_t start_bit = p.mask_indptr[i] * 8;
      for (int64_t k = 0; k < n; ++k) {
        const int64_t dst = start_bit + k;
        uint8_t& byte = mask_[static_cast<size_t>(dst / 8)];
        byte = static_cast<uint8_t>((byte & ~(1u << (dst % 8))) | (bit(global + k) << (dst % 8)));
      }
      global += n;
    }
    p.mask = mask_.data();
  }

  // Every slot's row is replaced by what a reader computing (slot * stride) mod 2^16 would load.
  void int32_index_wrap(VerifyParams& p) {
    const int64_t extent = pool_extent(p);
    const size_t eb = static_cast<size_t>(dtype_bytes(p.kv_dtype));
    const auto* src = static_cast<const std::byte*>(p.kv_pool);
    pool_.assign(src, src + static_cast<size_t>(extent) * eb);
    const KvLayout& l = p.kv_layout;
    for (int64_t s = 0; s < p.pool_slots; ++s) {
      const int64_t lat = l.latent_offset + (s * l.latent_stride) % kWrapModulus;
      const int64_t rope = l.rope_offset + (s * l.rope_stride) % kWrapModulus;
      if (lat == l.latent_index(s) && rope == l.rope_index(s)) continue;
      std::memcpy(pool_.data() + static_cast<size_t>(l.latent_index(s)) * eb,
                  src + static_cast<size_t>(lat) * eb, kLatentDim * eb);
      std::memcpy(pool_.data() + static_cast<size_t>(l.rope_index(s)) * eb,
                  src + static_cast<size_t>(rope) * eb, kRopeDim * eb);
    }
    p.kv_pool = pool_.data();
  }

  Mutant m_;
  BackendPtr inner_;
  std::vector<int64_t> mask_indptr_;  // [bs]
  std::vector<uint8_t> mask_;         // [mask bytes]
  std::vector<int64_t> indices_;      // [kv_indices_len]
  std::vector<int32_t> token_indptr_;   // with_token_indices' translation of other indexings
  std::vector<int64_t> token_indices_;
  std::vector<std::byte> pool_;       // [pool extent * dtype bytes]
  bool has_stale_ = false;
  std::tuple<const void*, int64_t, int32_t> stale_key_;
  std::vector<int64_t> stale_;  // [kv_indices_len] of the remembered launch
};

}  // namespace

BackendPtr make_mutant(Mutant m, BackendPtr inner) {
  if (!inner) throw InvalidInput("inner", -1, "null backend");
  return std::make_shared<MutantBackend>(m, std::move(inner));
}

BackendPtr make_mutant(std::string_view name, BackendPtr inner) {
  std::string known;
  for (const auto& i : all_mutants()) {
    if (i.name == name) return make_mutant(i.mutant, std::move(inner));
    known += (known.empty() ? "" : ", ") + std::string(i.name);
  }
  throw InvalidInput("mutant", -1,
                     "unknown mutant \"" + std::string(name) + "\" (known: " + known + ")");
}

}  // namespace mlaverify::props
