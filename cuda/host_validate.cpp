// Host-side validation for CudaBackend: sizes, indptr conventions, slot ranges and mask extents,
// so that nothing the device reads can fall outside the buffers CudaBackend stages.
#include "cuda/host_validate.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "mlaverify/error.h"
#include "mlaverify/split_plan.h"

namespace mlaverify::cuda {
namespace {

void require(bool ok, const char* field, int64_t index, const std::string& detail) {
  if (!ok) throw InvalidInput(field, index, detail);
}

std::string s(int64_t v) { return std::to_string(v); }

}  // namespace

void validate_host_params(const VerifyParams& p) {
  require(p.batch_size >= 1, "batch_size", -1, "must be >= 1, got " + s(p.batch_size));
  require(p.num_heads >= 1 && p.num_heads <= 128, "num_heads", -1,
          "must be in [1, 128], got " + s(p.num_heads));
  require(p.max_draft >= 1 && p.max_draft <= 1024, "max_draft", -1,
          "must be in [1, 1024], got " + s(p.max_draft));
  require(p.num_splits >= 1 && p.num_splits <= kMaxSplits, "num_splits", -1,
          "must be in [1, " + s(kMaxSplits) + "], got " + s(p.num_splits));
  require(p.max_total_q >= 1, "max_total_q", -1, "must be >= 1, got " + s(p.max_total_q));
  require(std::isfinite(p.sm_scale) && p.sm_scale > 0.f, "sm_scale", -1,
          "must be finite and > 0, got " + std::to_string(p.sm_scale));
  const auto fmt = static_cast<int32_t>(p.mask_format);
  require(fmt >= 0 && fmt <= static_cast<int32_t>(MaskFormat::DraftBits), "mask_format", -1,
          "unknown format " + s(fmt));
  require(p.q != nullptr, "q", -1, "null pointer");
  require(p.kv_pool != nullptr, "kv_pool", -1, "null pointer");
  require(p.qo_indptr != nullptr, "qo_indptr", -1, "null pointer");
  require(p.kv_indptr != nullptr, "kv_indptr", -1, "null pointer");
  require(p.o_lat != nullptr, "o_lat", -1, "null pointer");
  require(p.lse != nullptr, "lse", -1, "null pointer");
  require(p.mask != nullptr, "mask", -1, "null pointer");
  require(p.pool_slots >= 1, "pool_slots", -1, "must be >= 1, got " + s(p.pool_slots));
  // Strides: a query row holds 512 latent and 64 rope entries inside its head stride.
  require(p.q_latent_offset >= 0 && p.q_latent_offset + kLatentDim <= p.q_head_stride,
          "q_latent_offset", -1, "latent [offset, offset + 512) must lie inside q_head_stride");
  require(p.q_rope_offset >= 0 && p.q_rope_offset + kRopeDim <= p.q_head_stride, "q_rope_offset",
          -1, "rope [offset, offset + 64) must lie inside q_head_stride");
  require(p.q_token_stride >= p.num_heads * p.q_head_stride, "q_token_stride", -1,
          "must be >= H * q_head_stride");
  require(p.o_head_stride >= kLatentDim, "o_head_stride", -1, "must be >= 512");
  require(p.o_token_stride >= p.num_heads * p.o_head_stride, "o_token_stride", -1,
          "must be >= H * o_head_stride");
  const KvLayout& l = p.kv_layout;
  require(l.latent_offset >= 0 && l.latent_stride >= 0, "kv_layout", -1,
          "latent offset and stride must be non-negative");
  require(l.rope_offset >= 0 && l.rope_stride >= 0, "kv_layout", -1,
          "rope offset and stride must be non-negative");

  // qo_indptr: CSR [bs + 1] from 0, every D_i in [1, max_draft], T <= max_total_q.
  require(p.qo_indptr[0] == 0, "qo_indptr", 0, "CSR must start at 0, got " + s(p.qo_indptr[0]));
  for (int32_t i = 0; i < p.batch_size; ++i) {
    const int64_t d = static_cast<int64_t>(p.qo_indptr[i + 1]) - p.qo_indptr[i];
    require(d >= 1 && d <= p.max_draft, "qo_indptr", i + 1,
            "draft size " + s(d) + " of request " + s(i) +
                " outside [1, max_draft=" + s(p.max_draft) + "]");
  }
  const int64_t total_q = p.qo_indptr[p.batch_size];
  require(total_q <= p.max_total_q, "qo_indptr", p.batch_size,
          "T = " + s(total_q) + " exceeds max_total_q = " + s(p.max_total_q));

  // kv_indptr: CSR [bs + 1] from 0, non-decreasing, inside kv_indices.
  require(p.kv_indptr[0] == 0, "kv_indptr", 0, "CSR must start at 0, got " + s(p.kv_indptr[0]));
  for (int32_t i = 0; i < p.batch_size; ++i) {
    const int64_t len = static_cast<int64_t>(p.kv_indptr[i + 1]) - p.kv_indptr[i];
    require(len >= 0, "kv_indptr", i + 1,
            "not non-decreasing (" + s(p.kv_indptr[i + 1]) + " < " + s(p.kv_indptr[i]) + ")");
    if (p.draft_source == DraftKvSource::CacheSlots) {
      const int64_t d = static_cast<int64_t>(p.qo_indptr[i + 1]) - p.qo_indptr[i];
      require(len >= d, "kv_indptr", i + 1,
              "kv length " + s(len) + " shorter than the " + s(d) + " draft slots (CacheSlots)");
    }
  }
  const int64_t kv_total = p.kv_indptr[p.batch_size];
  require(kv_total <= p.kv_indices_len, "kv_indptr", p.batch_size,
          "total " + s(kv_total) + " exceeds kv_indices_len = " + s(p.kv_indices_len));
  require(kv_total == 0 || p.kv_indices != nullptr, "kv_indices", -1, "null pointer");
  for (int64_t k = 0; k < kv_total; ++k) {
    const int64_t slot = p.kv_indices[k];
    require(slot >= 0 && slot < p.pool_slots, "kv_indices", k,
            "slot " + s(slot) + " outside pool of " + s(p.pool_slots));
  }
  if (p.draft_source == DraftKvSource::ExtendRows) {
    require(p.k_extend != nullptr, "k_extend", -1, "null pointer (ExtendRows)");
    require(p.k_extend_stride >= kRowDim, "k_extend_stride", -1, "must be >= 576");
  }

  // Mask extents: every element the decoder reads lies inside [0, mask_len).
  const bool indptr_format =
      p.mask_format == MaskFormat::FullMask || p.mask_format == MaskFormat::FlashInferPacked;
  if (indptr_format) require(p.mask_indptr != nullptr, "mask_indptr", -1, "null pointer");
  if (indptr_format && p.mask_indptr_convention == IndptrConvention::Csr)
    require(p.mask_indptr[0] == 0, "mask_indptr", 0,
            "CSR must start at 0, got " + s(p.mask_indptr[0]));
  for (int32_t i = 0; i < p.batch_size; ++i) {
    const RequestExtent e = request_extent(p, i);
    const int64_t d = e.draft_nodes;
    const int64_t elems = d * (e.prefix_len + d);
    switch (p.mask_format) {
      case MaskFormat::FullMask:
      case MaskFormat::FlashInferPacked: {
        const int64_t need =
            p.mask_format == MaskFormat::FullMask ? elems : (elems + 7) / 8;  // bytes
        const int64_t start = p.mask_indptr[i];
        if (p.mask_indptr_convention == IndptrConvention::Csr) {
          const int64_t got = p.mask_indptr[i + 1] - start;
          require(got == need, "mask_indptr", i + 1,
                  "segment of request " + s(i) + " is " + s(got) + ", expected D*(P+D)" +
                      (p.mask_format == MaskFormat::FullMask ? "" : "/8 rounded up") + " = " +
                      s(need));
        }
        require(start >= 0 && start + need <= p.mask_len, "mask_indptr", i,
                "segment [" + s(start) + ", " + s(start + need) + ") outside mask_len " +
                    s(p.mask_len));
        break;
      }
      case MaskFormat::QlenOnly: {
        const int64_t st = p.mask_draft_stride;
        require(st >= d, "mask_draft_stride", i, "stride " + s(st) + " < D = " + s(d));
        require((i + 1) * st * st <= p.mask_len, "mask", -1,
                "mask_len " + s(p.mask_len) + " too small for request " + s(i));
        break;
      }
      case MaskFormat::QlenOnlyBitpacking: {
        const int64_t wb = p.mask_word_bytes;
        require(wb == 1 || wb == 2 || wb == 4, "mask_word_bytes", -1, "must be 1, 2 or 4");
        require(d <= 8 * wb, "qo_indptr", i + 1,
                "D = " + s(d) + " does not fit a " + s(wb) + "-byte mask word");
        const int64_t st = p.mask_draft_stride;
        require(st >= d, "mask_draft_stride", i, "stride " + s(st) + " < D = " + s(d));
        require((static_cast<int64_t>(i) * st + d) * wb <= p.mask_len, "mask", -1,
                "mask_len " + s(p.mask_len) + " too small for request " + s(i));
        break;
      }
      case MaskFormat::DraftBits: {
        const int64_t st = p.mask_draft_stride;
        require(st * 32 >= d, "mask_draft_stride", i,
                "stride " + s(st) + " words < ceil(D/32) for D = " + s(d));
        require((e.q_begin + d) * st <= p.mask_len, "mask", -1,
                "mask_len " + s(p.mask_len) + " too small for request " + s(i));
        break;
      }
    }
  }
}

VerifyParams with_token_indices(const VerifyParams& p, std::vector<int32_t>& kv_indptr,
                                std::vector<int64_t>& kv_indices) {
  if (p.kv_indexing == KvIndexing::TokenI64) return p;
  require(p.kv_indexing == KvIndexing::TokenI32 || p.kv_indexing == KvIndexing::PageTable,
          "kv_indexing", -1, "unknown value " + s(static_cast<int32_t>(p.kv_indexing)));
  require(p.batch_size >= 1, "batch_size", -1, "must be >= 1, got " + s(p.batch_size));
  require(p.kv_indptr != nullptr, "kv_indptr", -1, "null pointer");
  require(p.qo_indptr != nullptr, "qo_indptr", -1, "null pointer");
  const bool paged = p.kv_indexing == KvIndexing::PageTable;
  if (!paged) require(p.kv_indptr[0] == 0, "kv_indptr", 0, "CSR must start at 0");
  kv_indptr.assign(static_cast<size_t>(p.batch_size) + 1, 0);
  int64_t total = 0;
  for (int32_t i = 0; i < p.batch_size; ++i) {
    const int64_t len = static_cast<int64_t>(p.kv_indptr[i + 1]) - p.kv_indptr[i];
    require(len >= 0, "kv_indptr", i + 1, "not non-decreasing");
    total += len;
    require(total <= std::numeric_limits<int32_t>::max(), "kv_indptr", i + 1, "total overflows");
    kv_indptr[static_cast<size_t>(i) + 1] = static_cast<int32_t>(total);
  }
  if (paged) {
    require(p.page_size >= 1, "page_size", -1, "must be >= 1, got " + s(p.page_size));
    require(p.block_table_stride >= 0, "block_table_stride", -1, "must be >= 0");
    require(total == 0 || p.block_table != nullptr, "block_table", -1, "null pointer");
  } else {
    require(total <= p.kv_indices_len, "kv_indptr", p.batch_size,
            "total " + s(total) + " exceeds kv_indices_len = " + s(p.kv_indices_len));
    require(total == 0 || p.kv_indices_i32 != nullptr, "kv_indices_i32", -1, "null pointer");
  }
  kv_indices.resize(static_cast<size_t>(total));
  for (int32_t i = 0; i < p.batch_size; ++i) {
    const int64_t begin = kv_indptr[static_cast<size_t>(i)];
    const int64_t len = kv_indptr[static_cast<size_t>(i) + 1] - begin;
    if (paged) {
      require((len + p.page_size - 1) / p.page_size <= p.block_table_stride, "block_table_stride",
              i, "request " + s(i) + " needs more pages than a table row holds");
    }
    for (int64_t k = 0; k < len; ++k) {
      int64_t slot;
      if (paged) {
        const int64_t at = static_cast<int64_t>(i) * p.block_table_stride + k / p.page_size;
        slot = static_cast<int64_t>(p.block_table[at]) * p.page_size + k % p.page_size;
        require(p.block_table[at] >= 0 && slot < p.pool_slots, "block_table", at,
                "page " + s(p.block_table[at]) + " reaches outside the pool");
      } else {
        slot = p.kv_indices_i32[p.kv_indptr[i] + k];
        require(slot >= 0 && slot < p.pool_slots, "kv_indices_i32", p.kv_indptr[i] + k,
                "slot " + s(slot) + " outside pool of " + s(p.pool_slots));
      }
      kv_indices[static_cast<size_t>(begin + k)] = slot;
    }
  }
  VerifyParams out = p;
  out.kv_indexing = KvIndexing::TokenI64;
  out.kv_indptr = kv_indptr.data();
  out.kv_indices = kv_indices.data();
  out.kv_indices_len = total;
  out.kv_indices_i32 = nullptr;
  out.block_table = nullptr;
  out.block_table_stride = 0;
  out.page_size = 1;
  return out;
}

}  // namespace mlaverify::cuda
