// validate_params: the single host-side gate every backend calls before touching a VerifyParams.
// Each rejection names the field and the index at fault (InvalidInput), never a crash or UB.
#include "model/validate.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "mlaverify/error.h"
#include "mlaverify/split_plan.h"
#include "mlaverify/types.h"
#include "model/indptr.h"
#include "model/mask.h"

namespace mlaverify::model {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

void require_range(const char* field, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) {
    throw InvalidInput(field, -1, str(v) + " outside [" + str(lo) + ", " + str(hi) + "]");
  }
}

void require_non_null(const char* field, const void* ptr) {
  if (ptr == nullptr) throw InvalidInput(field, -1, "null pointer");
}

void require_dtype(const char* field, DType d) {
  if (d != DType::BF16 && d != DType::F32) {
    throw InvalidInput(field, -1, "unknown dtype " + str(static_cast<int32_t>(d)));
  }
}

// A row view of `width` elements at `offset` inside a row of `stride` elements must fit the row;
// otherwise a backend reading element k of head h touches head h + 1 (or past the buffer).
void require_in_row(const char* offset_field, int64_t offset, int64_t width, int64_t stride) {
  if (offset < 0 || offset > stride - width) {
    throw InvalidInput(offset_field, -1,
                       "elements [" + str(offset) + ", " + str(offset) + "+" + str(width) +
                           ") do not fit a row of stride " + str(stride));
  }
}

// One view of the pool (c or k_pe): its rows must not overlap each other, and the last slot's
// index, offset + (pool_slots - 1) * stride + width, must fit int64 (docs/spec.md §7 class 14 is
// the int32 version of this overflow; int64 cannot overflow for any real pool, but a garbage stride
// can).
void require_pool_view(const char* offset_field, const char* stride_field, int64_t offset,
                       int64_t stride, int64_t width, int64_t pool_slots) {
  if (offset < 0) throw InvalidInput(offset_field, -1, "negative offset " + str(offset));
  if (stride < width) {
    throw InvalidInput(stride_field, -1,
                       "stride " + str(stride) + " < " + str(width) + ": slots would overlap");
  }
  const int64_t room = std::numeric_limits<int64_t>::max() - offset - width;
  if (pool_slots > 1 && (pool_slots - 1) > room / stride) {
    throw InvalidInput(
        stride_field, -1,
        "offset + (pool_slots - 1) * stride overflows int64 for " + str(pool_slots) + " slots");
  }
}

// Rows of `rows` elements strided by `stride` must be addressable in int64: backends compute
// token * token_stride + head * head_stride in int64, and a garbage stride must not wrap it.
void require_addressable(const char* field, int64_t stride, int64_t rows) {
  if (stride > std::numeric_limits<int64_t>::max() / rows) {
    throw InvalidInput(field, -1, str(stride) + " * " + str(rows) + " rows overflows int64");
  }
}

void validate_static_sizes(const VerifyParams& p) {
  require_range("batch_size", p.batch_size, 1, std::numeric_limits<int32_t>::max() - 1);
  require_range("num_heads", p.num_heads, 1, kMaxHeads);
  require_range("max_draft", p.max_draft, 1, kMaxDraft);
  require_range("num_splits", p.num_splits, 1, kMaxSplits);
  require_range("max_total_q", p.max_total_q, 1, std::numeric_limits<int32_t>::max());
  if (!std::isfinite(p.sm_scale) || !(p.sm_scale > 0.f)) {
    throw InvalidInput("sm_scale", -1, "must be finite and > 0, got " + std::to_string(p.sm_scale));
  }
}

void validate_enums(const VerifyParams& p) {
  require_dtype("q_dtype", p.q_dtype);
  require_dtype("kv_dtype", p.kv_dtype);
  require_dtype("o_dtype", p.o_dtype);
  const auto kind = p.kv_layout.kind;
  if (kind != LayoutKind::LatentFirst && kind != LayoutKind::RopeFirst &&
      kind != LayoutKind::Split) {
    throw InvalidInput("kv_layout.kind", -1, "unknown layout " + str(static_cast<int32_t>(kind)));
  }
  if (p.draft_source != DraftKvSource::ExtendRows && p.draft_source != DraftKvSource::CacheSlots) {
    throw InvalidInput("draft_source", -1,
                       "unknown draft source " + str(static_cast<int32_t>(p.draft_source)));
  }
  const auto f = static_cast<int32_t>(p.mask_format);
  if (f < static_cast<int32_t>(MaskFormat::FullMask) ||
      f > static_cast<int32_t>(MaskFormat::DraftBits)) {
    throw InvalidInput("mask_format", -1, "unknown mask format " + str(f));
  }
  if (p.mask_indptr_convention != IndptrConvention::Csr &&
      p.mask_indptr_convention != IndptrConvention::OffsetsOnly) {
    throw InvalidInput("mask_indptr_convention", -1,
                       "unknown convention " + str(static_cast<int32_t>(p.mask_indptr_convention)));
  }
  if (p.kv_indexing != KvIndexing::TokenI64 && p.kv_indexing != KvIndexing::TokenI32 &&
      p.kv_indexing != KvIndexing::PageTable) {
    throw InvalidInput("kv_indexing", -1,
                       "unknown kv indexing " + str(static_cast<int32_t>(p.kv_indexing)));
  }
}

// A [rows, H, width] buffer addressed as token * token_stride + head * head_stride + k: each head's
// row holds `width` elements, each token's row holds H heads, and no product overflows int64.
void require_token_head_strides(const char* head_field, int64_t head_stride, int64_t width,
                                const char* token_field, int64_t token_stride, int64_t heads,
                                int64_t rows) {
  if (head_stride < width) {
    throw InvalidInput(head_field, -1, str(head_stride) + " < " + str(width));
  }
  require_addressable(head_field, head_stride, heads);
  if (token_stride < heads * head_stride) {
    throw InvalidInput(token_field, -1,
                       str(token_stride) + " < H * " + head_field + " = " +
                           str(heads * head_stride));
  }
  require_addressable(token_field, token_stride, rows);
}

void validate_buffers(const VerifyParams& p) {
  // Queries [max_total_q, H, q_row]: q_lat (512) and q_pe (64) inside each head's row, heads
  // inside each token's row.
  require_non_null("q", p.q);
  require_token_head_strides("q_head_stride", p.q_head_stride, kRowDim, "q_token_stride",
                             p.q_token_stride, p.num_heads, p.max_total_q);
  require_in_row("q_latent_offset", p.q_latent_offset, kLatentDim, p.q_head_stride);
  require_in_row("q_rope_offset", p.q_rope_offset, kRopeDim, p.q_head_stride);

  // One layer's pool, addressed only through kv_layout.
  require_non_null("kv_pool", p.kv_pool);
  if (p.pool_slots < 1) throw InvalidInput("pool_slots", -1, str(p.pool_slots) + " < 1");
  require_pool_view("kv_layout.latent_offset", "kv_layout.latent_stride", p.kv_layout.latent_offset,
                    p.kv_layout.latent_stride, kLatentDim, p.pool_slots);
  require_pool_view("kv_layout.rope_offset", "kv_layout.rope_stride", p.kv_layout.rope_offset,
                    p.kv_layout.rope_stride, kRopeDim, p.pool_slots);

  // Outputs o_lat [max_total_q, H, 512] and lse [max_total_q, H].
  require_non_null("o_lat", p.o_lat);
  require_token_head_strides("o_head_stride", p.o_head_stride, kLatentDim, "o_token_stride",
                             p.o_token_stride, p.num_heads, p.max_total_q);
  require_non_null("lse", p.lse);

  if (p.draft_source == DraftKvSource::ExtendRows) {
    require_non_null("k_extend", p.k_extend);  // [max_total_q, k_extend_stride]
    if (p.k_extend_stride < kRowDim) {
      throw InvalidInput("k_extend_stride", -1, str(p.k_extend_stride) + " < 576");
    }
    require_addressable("k_extend_stride", p.k_extend_stride, p.max_total_q);
  }
}

void validate_metadata(const VerifyParams& p) {
  const int32_t bs = p.batch_size;
  require_non_null("qo_indptr", p.qo_indptr);
  check_indptr<int32_t>("qo_indptr", p.qo_indptr, bs + 1, IndptrConvention::Csr, bs);
  for (int32_t i = 0; i < bs; ++i) {
    const int64_t d = static_cast<int64_t>(p.qo_indptr[i + 1]) - p.qo_indptr[i];
    if (d < 1 || d > p.max_draft) {
      throw InvalidInput("qo_indptr", i + 1,
                         "request " + str(i) + " has D = " + str(d) +
                             " draft nodes; need 1..max_draft=" + str(p.max_draft));
    }
  }
  const int64_t total_q = p.qo_indptr[bs];
  if (total_q > p.max_total_q) {
    throw InvalidInput(
        "max_total_q", -1,
        "T = qo_indptr[bs] = " + str(total_q) + " exceeds max_total_q = " + str(p.max_total_q));
  }

  require_non_null("kv_indptr", p.kv_indptr);
  const bool paged = p.kv_indexing == KvIndexing::PageTable;
  if (paged) {
    // Only the lengths are read: non-decreasing is the whole rule.
    for (int32_t i = 0; i < bs; ++i) {
      if (p.kv_indptr[i + 1] < p.kv_indptr[i]) {
        throw InvalidInput("kv_indptr", i + 1,
                           str(p.kv_indptr[i + 1]) + " < kv_indptr[" + str(i) + "] = " +
                               str(p.kv_indptr[i]) + " (a negative kv length)");
      }
    }
  } else {
    check_indptr<int32_t>("kv_indptr", p.kv_indptr, bs + 1, IndptrConvention::Csr, bs);
    const int64_t kv_total = p.kv_indptr[bs];
    if (kv_total > p.kv_indices_len) {
      throw InvalidInput("kv_indices_len", -1,
                         "kv_indptr[bs] = " + str(kv_total) +
                             " exceeds kv_indices_len = " + str(p.kv_indices_len));
    }
  }
  if (p.draft_source == DraftKvSource::CacheSlots) {
    // The unified path puts the D_i draft slots at the end of each request's kv range, so the
    // prefix length kv_len - D_i must not go negative.
    for (int32_t i = 0; i < bs; ++i) {
      const int64_t kv_len = static_cast<int64_t>(p.kv_indptr[i + 1]) - p.kv_indptr[i];
      const int64_t d = static_cast<int64_t>(p.qo_indptr[i + 1]) - p.qo_indptr[i];
      if (kv_len < d) {
        throw InvalidInput("kv_indptr", i + 1,
                           "CacheSlots: request " + str(i) + " has kv length " + str(kv_len) +
                               " < D = " + str(d) + " (the draft slots belong in kv_indices)");
      }
    }
  }
  auto check_slot = [&](const char* field, int64_t index, int64_t slot) {
    if (slot < 0 || slot >= p.pool_slots) {
      throw InvalidInput(field, index,
                         "slot " + str(slot) + " outside pool of " + str(p.pool_slots));
    }
  };
  switch (p.kv_indexing) {
    case KvIndexing::TokenI64:
    case KvIndexing::TokenI32: {
      const int64_t kv_total = p.kv_indptr[bs];
      const bool i32 = p.kv_indexing == KvIndexing::TokenI32;
      const char* field = i32 ? "kv_indices_i32" : "kv_indices";
      if (kv_total > 0) {
        require_non_null(field, i32 ? static_cast<const void*>(p.kv_indices_i32)
                                    : static_cast<const void*>(p.kv_indices));
      }
      // kv_indptr is CSR from 0 and non-decreasing, so [0, kv_total) is exactly what is read.
      for (int64_t k = 0; k < kv_total; ++k) {
        check_slot(field, k, i32 ? p.kv_indices_i32[k] : p.kv_indices[k]);
      }
      break;
    }
    case KvIndexing::PageTable: {
      if (p.page_size < 1) throw InvalidInput("page_size", -1, str(p.page_size) + " < 1");
      if (p.block_table_stride < 0) {
        throw InvalidInput("block_table_stride", -1, str(p.block_table_stride) + " < 0");
      }
      bool any = false;
      for (int32_t i = 0; i < bs; ++i) {
        const int64_t kv_len = static_cast<int64_t>(p.kv_indptr[i + 1]) - p.kv_indptr[i];
        const int64_t pages = (kv_len + p.page_size - 1) / p.page_size;
        if (pages > p.block_table_stride) {
          throw InvalidInput("block_table_stride", i,
                             "request " + str(i) + " needs " + str(pages) + " pages of " +
                                 str(p.page_size) + " for kv length " + str(kv_len) +
                                 "; the table row holds " + str(p.block_table_stride));
        }
        any = any || pages > 0;
      }
      if (any) require_non_null("block_table", p.block_table);
      for (int32_t i = 0; i < bs; ++i) {
        const int64_t kv_len = static_cast<int64_t>(p.kv_indptr[i + 1]) - p.kv_indptr[i];
        const int64_t pages = (kv_len + p.page_size - 1) / p.page_size;
        for (int64_t g = 0; g < pages; ++g) {
          const int64_t at = static_cast<int64_t>(i) * p.block_table_stride + g;
          const int64_t page = p.block_table[at];
          // The last slot of the page this request reads.
          const int64_t used = std::min<int64_t>(p.page_size, kv_len - g * p.page_size);
          if (page < 0 || (page * p.page_size + used - 1) >= p.pool_slots) {
            throw InvalidInput("block_table", at,
                               "page " + str(page) + " of " + str(p.page_size) +
                                   " slots reaches outside the pool of " + str(p.pool_slots));
          }
        }
      }
      break;
    }
    default:
      throw InvalidInput("kv_indexing", -1, "unknown value " + str(int(p.kv_indexing)));
  }
}

}  // namespace

VerifyParams with_token_indices(const VerifyParams& p, std::vector<int32_t>& kv_indptr,
                                std::vector<int64_t>& kv_indices) {
  if (p.kv_indexing == KvIndexing::TokenI64) return p;
  VerifyParams out = p;
  kv_indptr.assign(static_cast<size_t>(p.batch_size) + 1, 0);
  int64_t total = 0;
  for (int32_t i = 0; i < p.batch_size; ++i) {
    total += static_cast<int64_t>(p.kv_indptr[i + 1]) - p.kv_indptr[i];
    kv_indptr[static_cast<size_t>(i) + 1] = static_cast<int32_t>(total);
  }
  kv_indices.resize(static_cast<size_t>(total));
  for (int32_t i = 0; i < p.batch_size; ++i) {
    const RequestExtent e = request_extent(p, i);
    const int64_t kv_len = static_cast<int64_t>(p.kv_indptr[i + 1]) - p.kv_indptr[i];
    for (int64_t k = 0; k < kv_len; ++k) {
      kv_indices[static_cast<size_t>(kv_indptr[static_cast<size_t>(i)] + k)] = kv_slot(p, e, k);
    }
  }
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

void validate_params(const VerifyParams& p) {
  validate_static_sizes(p);
  validate_enums(p);
  validate_buffers(p);
  validate_metadata(p);
  // Last: validate_mask assumes qo_indptr and kv_indptr are sound (it reads D_i and P_i).
  validate_mask(p);
}

}  // namespace mlaverify::model
