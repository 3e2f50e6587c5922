// VerifyBatch::build: slot allocation through a ReqToToken, random bf16 KV and queries from a
// table-driven splitmix64 stream, the tree mask, SGLang metadata, graph padding and NaN poisoning.
#include "model/batch.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <string>
#include <utility>

#include "mlaverify/error.h"
#include "mlaverify/split_plan.h"
#include "model/validate.h"

namespace mlaverify::model {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

// Independent streams per purpose, so that e.g. the slot permutation never shifts the values:
// a spec differing only in slot order, layout or draft source holds the same logical data.
enum Stream : uint64_t { kKvValues = 1, kQueries = 2, kSlots = 3, kRows = 4, kGarbage = 5 };
uint64_t stream_seed(uint64_t seed, Stream s) {
  SplitMix64 mix(seed ^ (0xa0761d6478bd642full * static_cast<uint64_t>(s)));
  return mix.next();
}

// 65536 standard normal draws (Box-Muller from a fixed stream), shared by every batch. A value is
// table[16 random bits]: four values per splitmix64 call, no transcendental per value. The table
// is an empirical N(0, 1) sample (|x| < ~4.5), which is all test data needs: values are rounded
// to bf16 (8 significant bits) anyway, far coarser than the table's spacing near the centre.
const std::array<float, 65536>& normal_table() {
  static const std::array<float, 65536> table = [] {
    std::array<float, 65536> t{};
    SplitMix64 rng(0x6e6f726d616c7462ull);
    for (size_t k = 0; k < t.size(); k += 2) {
      // u1 in (0, 1] so log(u1) is finite; u2 in [0, 1).
      const double u1 = (static_cast<double>(rng.next() >> 11) + 1.0) * 0x1.0p-53;
      const double u2 = static_cast<double>(rng.next() >> 11) * 0x1.0p-53;
      const double r = std::sqrt(-2.0 * std::log(u1));
      t[k] = static_cast<float>(r * std::cos(2.0 * std::numbers::pi * u2));
      t[k + 1] = static_cast<float>(r * std::sin(2.0 * std::numbers::pi * u2));
    }
    return t;
  }();
  return table;
}

// Draws bf16 values ~ N(0, scale^2) rounded to bf16, through a per-scale table of bf16 values.
class Bf16Normal {
 public:
  Bf16Normal(uint64_t seed, double scale) : rng_(seed) {
    const auto& n = normal_table();
    for (size_t k = 0; k < n.size(); ++k) {
      table_[k] = float_to_bf16(static_cast<float>(scale * static_cast<double>(n[k])));
    }
  }
  // Fills out[0, count) with bf16 draws.
  void fill(bf16* out, int64_t count) {
    int64_t k = 0;
    for (; k + 4 <= count; k += 4) {
      const uint64_t r = rng_.next();
      out[k] = table_[r & 0xffff];
      out[k + 1] = table_[(r >> 16) & 0xffff];
      out[k + 2] = table_[(r >> 32) & 0xffff];
      out[k + 3] = table_[r >> 48];
    }
    const int64_t rem = count - k;  // 0..3 values left: one more call covers them
    if (rem > 0) {
      const uint64_t r = rng_.next();
      for (int64_t m = 0; m < rem && m < 4; ++m) out[k + m] = table_[(r >> (16 * m)) & 0xffff];
    }
  }

 private:
  SplitMix64 rng_;
  std::array<bf16, 65536> table_;
};

// Fisher-Yates with splitmix64.
template <class T>
void shuffle(std::vector<T>& v, SplitMix64& rng) {
  for (size_t k = v.size(); k > 1; --k) {
    const size_t j = static_cast<size_t>(rng.below(k));
    std::swap(v[k - 1], v[j]);
  }
}

void check_spec(const BatchSpec& s) {
  if (s.requests.empty()) throw InvalidInput("requests", -1, "empty batch (bs must be >= 1)");
  for (size_t i = 0; i < s.requests.size(); ++i) {
    const auto ii = static_cast<int64_t>(i);
    if (s.requests[i].prefix_len < 0) {
      throw InvalidInput("requests.prefix_len", ii,
                         "negative prefix length " + str(s.requests[i].prefix_len));
    }
    if (s.requests[i].tree.size() > kMaxDraft) {
      throw InvalidInput("requests.tree", ii,
                         "D = " + str(s.requests[i].tree.size()) + " > " + str(kMaxDraft));
    }
  }
  if (s.requests.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max() - 1)) {
    throw InvalidInput("requests", -1, "more requests than an int32 batch size holds");
  }
  if (s.num_heads < 1 || s.num_heads > kMaxHeads) {
    throw InvalidInput("num_heads", -1, str(s.num_heads) + " outside [1, " + str(kMaxHeads) + "]");
  }
  if (!std::isfinite(s.sm_scale) || !(s.sm_scale > 0.0)) {
    throw InvalidInput("sm_scale", -1, "must be finite and > 0");
  }
  if (s.kv_dtype != DType::BF16 && s.kv_dtype != DType::F32) {
    throw InvalidInput("kv_dtype", -1, "unknown dtype " + str(static_cast<int32_t>(s.kv_dtype)));
  }
  const LayoutKind kind = s.layout.kind;
  if (kind != LayoutKind::LatentFirst && kind != LayoutKind::RopeFirst &&
      kind != LayoutKind::Split) {
    throw InvalidInput("layout.kind", -1, "unknown layout " + str(static_cast<int32_t>(kind)));
  }
  if (kind != LayoutKind::Split && s.row_stride < kRowDim) {
    throw InvalidInput("row_stride", -1, str(s.row_stride) + " < 576");
  }
  if (s.page_size < 1) throw InvalidInput("page_size", -1, str(s.page_size) + " < 1");
  if (s.slot_order != BatchSpec::SlotOrder::Scattered &&
      s.slot_order != BatchSpec::SlotOrder::Contiguous) {
    throw InvalidInput("slot_order", -1,
                       "unknown order " + str(static_cast<int32_t>(s.slot_order)));
  }
  if (s.graph_padded_bs != 0 && s.graph_padded_bs < static_cast<int64_t>(s.requests.size())) {
    throw InvalidInput(
        "graph_padded_bs", -1,
        str(s.graph_padded_bs) + " < bs " + str(static_cast<int64_t>(s.requests.size())));
  }
  if (!std::isfinite(s.value_scale) || !(s.value_scale > 0.0)) {
    throw InvalidInput("value_scale", -1, "must be finite and > 0");
  }
  if (s.num_splits < 1 || s.num_splits > kMaxSplits) {
    throw InvalidInput("num_splits", -1,
                       str(s.num_splits) + " outside [1, " + str(kMaxSplits) + "]");
  }
  if (s.spare_pages < -1) throw InvalidInput("spare_pages", -1, str(s.spare_pages) + " < -1");
  if (s.q_dtype != DType::BF16 && s.q_dtype != DType::F32) {
    throw InvalidInput("q_dtype", -1, "unknown dtype " + str(static_cast<int32_t>(s.q_dtype)));
  }
  if (s.o_dtype != DType::BF16 && s.o_dtype != DType::F32) {
    throw InvalidInput("o_dtype", -1, "unknown dtype " + str(static_cast<int32_t>(s.o_dtype)));
  }
  if (s.q_head_stride < kRowDim || s.q_head_stride > 4096) {
    throw InvalidInput("q_head_stride", -1, str(s.q_head_stride) + " outside [576, 4096]");
  }
  if (s.o_head_stride < kLatentDim || s.o_head_stride > 4096) {
    throw InvalidInput("o_head_stride", -1, str(s.o_head_stride) + " outside [512, 4096]");
  }
  if (s.k_extend_stride < kRowDim || s.k_extend_stride > 4096) {
    throw InvalidInput("k_extend_stride", -1, str(s.k_extend_stride) + " outside [576, 4096]");
  }
  if (s.kv_indexing != KvIndexing::TokenI64 && s.kv_indexing != KvIndexing::TokenI32 &&
      s.kv_indexing != KvIndexing::PageTable) {
    throw InvalidInput("kv_indexing", -1,
                       "unknown indexing " + str(static_cast<int32_t>(s.kv_indexing)));
  }
  if (s.tail_rows < 0 || s.tail_rows > 64) {
    throw InvalidInput("tail_rows", -1, str(s.tail_rows) + " outside [0, 64]");
  }
}

// Where request i's tokens live: page-granular allocation in the spec's order. Returns, per real
// request, its token-level slots [P_i + D_i], and the pool's allocatable size in slots.
struct Allocation {
  std::vector<std::vector<int64_t>> slots;  // [bs_real][P_i + D_i]
  int64_t pool_size = 0;                    // allocatable slots; the pool adds one sink page
};

Allocation allocate(const BatchSpec& s) {
  const int64_t ps = s.page_size;
  int64_t used_pages = 0;
  for (const RequestSpec& r : s.requests) {
    used_pages += ceil_div(r.prefix_len + r.tree.size(), ps);
  }
  const int64_t spare = s.spare_pages >= 0 ? s.spare_pages : std::max<int64_t>(4, used_pages / 8);
  const int64_t num_pages = used_pages + spare;  // allocatable pages 1..num_pages
  // Slot ids go through int32 req_to_token (docs/spec.md §3), so the largest must fit.
  if ((num_pages + 1) > std::numeric_limits<int32_t>::max() / ps) {
    throw InvalidInput("requests", -1,
                       "batch needs " + str((num_pages + 1) * ps) +
                           " pool slots; req_to_token holds int32 slot ids");
  }
  std::vector<int64_t> pages(static_cast<size_t>(num_pages));  // [num_pages] allocation order
  for (int64_t k = 0; k < num_pages; ++k) pages[static_cast<size_t>(k)] = k + 1;  // page 0: sink
  if (s.slot_order == BatchSpec::SlotOrder::Scattered) {
    SplitMix64 rng(stream_seed(s.seed, kSlots));
    shuffle(pages, rng);
  }
  Allocation a;
  a.pool_size = num_pages * ps;
  a.slots.resize(s.requests.size());
  size_t next_page = 0;
  for (size_t i = 0; i < s.requests.size(); ++i) {
    const int64_t n = s.requests[i].prefix_len + s.requests[i].tree.size();
    std::vector<int64_t>& slots = a.slots[i];  // [P_i + D_i]
    slots.resize(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      if (j % ps == 0) ++next_page;
      slots[static_cast<size_t>(j)] = pages[next_page - 1] * ps + j % ps;
    }
  }
  return a;
}

KvLayout pool_layout(const BatchSpec& s, int64_t pool_size) {
  switch (s.layout.kind) {
    case LayoutKind::RopeFirst:
      return KvLayout::rope_first(s.row_stride);
    case LayoutKind::Split:
      return KvPool::split_regions(pool_size + s.page_size);
    case LayoutKind::LatentFirst:
    default:
      return KvLayout::latent_first(s.row_stride);
  }
}

}  // namespace

VerifyBatch::VerifyBatch(BatchSpec spec, ReqToToken rtt, KvPool pool)
    : spec_(std::move(spec)), req_to_token_(std::move(rtt)), pool_(std::move(pool)) {}

VerifyBatch VerifyBatch::build(const BatchSpec& spec) {
  check_spec(spec);
  const auto real_bs = static_cast<int32_t>(spec.requests.size());
  const int32_t bs = spec.graph_padded_bs != 0 ? spec.graph_padded_bs : real_bs;
  const int32_t h = spec.num_heads;

  Allocation alloc = allocate(spec);

  // The batch's D (SGLang runs one): the padded rows' draft size.
  int32_t batch_d = 0;
  int64_t max_context = 1;
  for (const RequestSpec& r : spec.requests) {
    batch_d = std::max(batch_d, r.tree.size());
    max_context = std::max(max_context, r.prefix_len + r.tree.size());
  }
  // Padded rows read req_to_token[0, 0 : 1 + D] on the CacheSlots path.
  if (bs > real_bs) max_context = std::max<int64_t>(max_context, 1 + batch_d);

  VerifyBatch b(
      spec, ReqToToken(real_bs, max_context),
      KvPool(alloc.pool_size, spec.page_size, spec.kv_dtype, pool_layout(spec, alloc.pool_size)));
  b.real_bs_ = real_bs;

  // Request rows 1..bs (row 0 is the padding row): scattered order permutes them too, so a
  // backend that indexes req_to_token by request number instead of req_pool_indices is caught.
  std::vector<int32_t> rows(static_cast<size_t>(real_bs));  // [bs_real]
  for (int32_t i = 0; i < real_bs; ++i) rows[static_cast<size_t>(i)] = i + 1;
  if (spec.slot_order == BatchSpec::SlotOrder::Scattered) {
    SplitMix64 rng(stream_seed(spec.seed, kRows));
    shuffle(rows, rng);
  }

  std::vector<int64_t> real_prefix(static_cast<size_t>(real_bs));  // [bs_real]
  std::vector<int32_t> real_draft(static_cast<size_t>(real_bs));   // [bs_real]
  for (int32_t i = 0; i < real_bs; ++i) {
    const RequestSpec& r = spec.requests[static_cast<size_t>(i)];
    real_prefix[static_cast<size_t>(i)] = r.prefix_len;
    real_draft[static_cast<size_t>(i)] = r.tree.size();
    const std::vector<int64_t>& slots = alloc.slots[static_cast<size_t>(i)];
    int32_t* row = b.req_to_token_.data() + int64_t{rows[static_cast<size_t>(i)]} * max_context;
    for (size_t j = 0; j < slots.size(); ++j) row[j] = static_cast<int32_t>(slots[j]);
  }
  RequestRows padded = pad_requests(rows, real_prefix, real_draft, bs);
  b.req_pool_indices_ = std::move(padded.req_pool_indices);
  b.prefix_lens_ = std::move(padded.prefix_lens);
  b.trees_.reserve(static_cast<size_t>(bs));
  for (const RequestSpec& r : spec.requests) b.trees_.push_back(r.tree);
  // Padded rows need some tree of D nodes to lay out their mask segment; the bytes are then
  // overwritten with garbage, so which tree is irrelevant.
  while (static_cast<int32_t>(b.trees_.size()) < bs) b.trees_.push_back(DraftTree::chain(batch_d));
  b.max_draft_ = batch_d;

  b.metadata_ = build_metadata(b.req_to_token_, b.req_pool_indices_, b.prefix_lens_, b.trees_,
                               spec.draft_source);
  const int64_t real_t = b.metadata_.qo_indptr[static_cast<size_t>(real_bs)];
  const int64_t total_t = b.metadata_.total_q();
  const int64_t rows_t = total_t + spec.tail_rows;  // buffer rows: max_total_q
  scribble_padded_positions(b.metadata_.positions, real_t, stream_seed(spec.seed, kGarbage));

  b.mask_ = encode_mask(spec.mask_format, b.trees_, b.prefix_lens_, spec.mask_indptr_convention,
                        spec.mask_word_bytes);
  scribble_padded_mask(b.mask_, real_bs, real_t, stream_seed(spec.seed, kGarbage) + 1);

  // KV: every unused slot NaN first (padding between rows too), then the rows requests own.
  if (spec.poison_unused_slots) b.pool_.fill_nan_all();
  const size_t eb = static_cast<size_t>(dtype_bytes(spec.kv_dtype));
  b.k_extend_.assign(static_cast<size_t>(rows_t) * kRowDim * eb, std::byte{0});  // [T+tail, 576]
  Bf16Normal kv_gen(stream_seed(spec.seed, kKvValues), spec.value_scale);
  std::array<bf16, kRowDim> row16;   // [576] latent-first
  std::array<float, kRowDim> row32;  // [576] latent-first, exact widening of row16
  auto store_extend = [&](int64_t t) {
    std::byte* dst = b.k_extend_.data() + static_cast<size_t>(t) * kRowDim * eb;
    if (spec.kv_dtype == DType::BF16) {
      std::memcpy(dst, row16.data(), sizeof row16);
    } else {
      std::memcpy(dst, row32.data(), sizeof row32);
    }
  };
  auto draw_row = [&](Bf16Normal& gen) {
    gen.fill(row16.data(), kRowDim);
    for (int k = 0; k < kRowDim; ++k)
      row32[static_cast<size_t>(k)] = bf16_to_float(row16[static_cast<size_t>(k)]);
  };
  for (int32_t i = 0; i < real_bs; ++i) {
    const std::vector<int64_t>& slots = alloc.slots[static_cast<size_t>(i)];
    const int64_t p = real_prefix[static_cast<size_t>(i)];
    for (size_t j = 0; j < slots.size(); ++j) {
      draw_row(kv_gen);
      b.pool_.write_row(slots[j], row32.data());
      // Draft token t = j - P: the same values in its k_extend row and its cache slot, so both
      // DraftKvSource paths see identical keys.
      if (static_cast<int64_t>(j) >= p)
        store_extend(b.metadata_.qo_indptr[static_cast<size_t>(i)] + static_cast<int64_t>(j) - p);
    }
  }
  // Slot 0 is not poisoned: padded rows read it (P = 1, request row 0), so it holds finite
  // garbage, as a real sink holds whatever padded tokens last wrote. Padded tokens' k_extend rows
  // are finite garbage for the same reason.
  Bf16Normal garbage_gen(stream_seed(spec.seed, kGarbage) + 2, spec.value_scale);
  draw_row(garbage_gen);
  b.pool_.write_row(0, row32.data());
  for (int64_t t = real_t; t < rows_t; ++t) {
    draw_row(garbage_gen);
    store_extend(t);
  }
  // A page table names whole pages, so padded rows on the CacheSlots path read slots 0..D of the
  // sink page (not slot 0 D + 1 times): the whole sink page holds finite garbage there.
  if (spec.kv_indexing == KvIndexing::PageTable) {
    for (int64_t slot = 1; slot < spec.page_size; ++slot) {
      draw_row(garbage_gen);
      b.pool_.write_row(slot, row32.data());
    }
  }

  // Queries [T, H, 576]; padded tokens' queries are finite stale values.
  b.q_.resize(static_cast<size_t>(rows_t * h * kRowDim));
  Bf16Normal q_gen(stream_seed(spec.seed, kQueries), spec.value_scale);
  q_gen.fill(b.q_.data(), real_t * h * kRowDim);
  garbage_gen.fill(b.q_.data() + real_t * h * kRowDim, (rows_t - real_t) * h * kRowDim);

  b.presenter_ = Presenter(spec.presentation(), total_t, h);  // outputs sized and poisoned
  return b;
}

VerifyParams VerifyBatch::params() {
  VerifyParams p;
  p.batch_size = metadata_.batch_size();
  p.num_heads = spec_.num_heads;
  p.max_draft = max_draft_;
  p.num_splits = spec_.num_splits;
  p.plan_blocks = spec_.plan_blocks;
  p.sm_scale = static_cast<float>(spec_.sm_scale);

  pool_.attach(p);

  p.qo_indptr = metadata_.qo_indptr.data();
  p.kv_indptr = metadata_.kv_indptr.data();
  p.draft_source = metadata_.draft_source;
  attach_mask(p, mask_);
  // q, kv indexing, k_extend, outputs and max_total_q: as the spec presents them.
  presenter_.present(p, {q_, k_extend_, pool_.dtype(), &metadata_, real_bs_});
  return p;
}

void VerifyBatch::check_request(int32_t i) const {
  if (i < 0 || i >= batch_size()) {
    throw InvalidInput("request", i, "outside [0, " + str(batch_size()) + ")");
  }
}

const DraftTree& VerifyBatch::tree(int32_t i) const {
  check_request(i);
  return trees_[static_cast<size_t>(i)];
}

int64_t VerifyBatch::prefix_len(int32_t i) const {
  check_request(i);
  return prefix_lens_[static_cast<size_t>(i)];
}

int32_t VerifyBatch::req_pool_index(int32_t i) const {
  check_request(i);
  return req_pool_indices_[static_cast<size_t>(i)];
}

std::vector<int64_t> VerifyBatch::prefix_slots(int32_t i) const {
  check_request(i);
  const std::span<const int32_t> row = req_to_token_.row(req_pool_indices_[static_cast<size_t>(i)]);
  const auto p = static_cast<size_t>(prefix_lens_[static_cast<size_t>(i)]);
  return std::vector<int64_t>(row.begin(), row.begin() + static_cast<std::ptrdiff_t>(p));
}

std::vector<int64_t> VerifyBatch::draft_slots(int32_t i) const {
  check_request(i);
  const std::span<const int32_t> row = req_to_token_.row(req_pool_indices_[static_cast<size_t>(i)]);
  const auto p = static_cast<std::ptrdiff_t>(prefix_lens_[static_cast<size_t>(i)]);
  const auto d = static_cast<std::ptrdiff_t>(trees_[static_cast<size_t>(i)].size());
  return std::vector<int64_t>(row.begin() + p, row.begin() + p + d);
}

}  // namespace mlaverify::model
