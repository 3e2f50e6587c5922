// Coverage counting: a fixed table of (field, value) rows built from the capabilities, one
// increment per case for each row the case takes.
#include "props/coverage.h"

#include <algorithm>
#include <bit>
#include <iomanip>
#include <iterator>
#include <sstream>
#include <vector>

#include "mlaverify/split_plan.h"
#include "scenarios/scenario.h"

namespace mlaverify::props {

namespace {

constexpr int32_t kPageSizes[] = {1, 16, 32, 64};

bool page_ok(const Capabilities& k, int32_t ps) {
  const auto u = static_cast<uint32_t>(ps);
  return std::has_single_bit(u) && ((k.page_sizes >> std::countr_zero(u)) & 1u) != 0;
}

const char* const kEdges[] = {
    "P = 0",
    "P = 1",
    "P at a tile edge (63, 64, 65 mod 64)",
    "P >= 4097",
    "an empty split (a partial that sees no key)",
    "split count > 1",
    "D = 1",
    "D not a power of two",
    "D >= 257",
    "D at a word or tile edge (31-33, 63-65)",
    "H not a power of two",
    "H = the most the backend takes (128 by default)",
    "bs == D (graph padded to D)",
    "CUDA-graph padded rows",
    "bs >= 17",
    "SPEC §8 size: D >= 128 with P >= 1024",
    "value scale 16 (|s| in the hundreds)",
    "value scale 1e-3 (near-uniform softmax)",
    "pool not NaN-poisoned",
    // The balanced split plan's (accepted only where plan_blocks reaches the backend):
    "balanced split plan (plan_blocks > 0)",
    "balanced plan: a request on fewer splits than the uniform plan gives it",
};
constexpr size_t kFirstPlanEdge = 19;
static_assert(std::size(kEdges) == kFirstPlanEdge + 2, "Coverage::add flags the edges by index");

// Each real request's split count under the case's plan, as the CPU backend plans it unfolded
// (the folded plan counts the draft's tiles too, so its counts can differ by a split): num_splits
// under the uniform plan; under the balanced one the planned n_i (at least 1) over every row,
// the CUDA-graph padded ones (P = 1, D = max D) included.
std::vector<int32_t> planned_split_counts(const Case& c) {
  const int32_t real = c.batch_size();
  std::vector<int32_t> out(static_cast<size_t>(real), c.num_splits);
  const int32_t rows = std::max(real, c.graph_padded_bs);
  auto prefix = [&](int32_t i) {
    return i < real ? c.requests[static_cast<size_t>(i)].prefix_len : int64_t{1};
  };
  auto draft = [&](int32_t i) {
    return i < real ? static_cast<int64_t>(c.requests[static_cast<size_t>(i)].parents.size())
                    : int64_t{c.max_draft()};
  };
  plan_split_counts(
      rows, c.num_splits, c.plan_blocks,
      [&](int32_t i) { return plan_tiles(prefix(i), draft(i), false); },
      [&](int32_t i) { return plan_row_tiles(draft(i), c.num_heads); },
      [&](int32_t i, int32_t n) {
        if (i < real) out[static_cast<size_t>(i)] = n;
      });
  return out;
}

}  // namespace

Coverage::Coverage(const Capabilities& k) : max_heads_(k.max_heads) {
  auto add = [&](std::string field, std::string_view value, bool accepted) {
    rows_.push_back({std::move(field), std::string(value), accepted, 0});
  };
  for (MaskFormat f : {MaskFormat::FullMask, MaskFormat::QlenOnly, MaskFormat::QlenOnlyBitpacking,
                       MaskFormat::FlashInferPacked, MaskFormat::DraftBits}) {
    add("mask_format", scenarios::to_string(f), has(k.mask_formats, f));
  }
  for (IndptrConvention c : {IndptrConvention::Csr, IndptrConvention::OffsetsOnly}) {
    // The convention only exists for the formats with a mask_indptr.
    const bool any_indptr_format = has(k.mask_formats, MaskFormat::FullMask) ||
                                   has(k.mask_formats, MaskFormat::FlashInferPacked);
    add("mask_indptr_convention", scenarios::to_string(c),
        any_indptr_format && has(k.mask_indptr_conventions, c));
  }
  for (int32_t w : {1, 2, 4}) {
    add("mask_word_bytes", std::to_string(w), has(k.mask_formats, MaskFormat::QlenOnlyBitpacking));
  }
  for (DType d : {DType::BF16, DType::F32}) add("kv_dtype", scenarios::to_string(d), has(k.kv_dtypes, d));
  for (DType d : {DType::BF16, DType::F32}) add("q_dtype", scenarios::to_string(d), has(k.q_dtypes, d));
  for (DType d : {DType::BF16, DType::F32}) add("o_dtype", scenarios::to_string(d), has(k.o_dtypes, d));
  for (LayoutKind l : {LayoutKind::LatentFirst, LayoutKind::RopeFirst, LayoutKind::Split}) {
    add("kv_layout", scenarios::to_string(l), has(k.kv_layouts, l));
  }
  add("kv_row_stride", "576", true);
  add("kv_row_stride", "padded (640, 1152)", k.padded_kv_rows);
  for (DraftKvSource s : {DraftKvSource::ExtendRows, DraftKvSource::CacheSlots}) {
    add("draft_source", scenarios::to_string(s), has(k.draft_sources, s));
  }
  for (KvIndexing x : {KvIndexing::TokenI64, KvIndexing::TokenI32, KvIndexing::PageTable}) {
    add("kv_indexing", scenarios::to_string(x), has(k.kv_indexings, x));
  }
  for (int32_t ps : kPageSizes) add("page_size", std::to_string(ps), true);
  for (int32_t ps : kPageSizes) {
    add("page_table page_size", std::to_string(ps),
        has(k.kv_indexings, KvIndexing::PageTable) && page_ok(k, ps));
  }
  for (scenarios::SlotOrder o : {scenarios::SlotOrder::Scattered, scenarios::SlotOrder::Contiguous,
                                 scenarios::SlotOrder::Defragmented}) {
    add("slot_order", scenarios::to_string(o), true);
  }
  add("q layout", "dense latent-first", true);
  add("q layout", "q_pe first", k.strided_q);
  add("q layout", "padded head stride", k.strided_q);
  add("o layout", "dense", true);
  add("o layout", "padded head stride", k.strided_o);
  add("k_extend rows", "576", has(k.draft_sources, DraftKvSource::ExtendRows));
  add("k_extend rows", "padded", has(k.draft_sources, DraftKvSource::ExtendRows) &&
                                     k.padded_extend_rows);
  add("rows past T", "none", true);
  add("rows past T", "some", true);
  for (size_t e = 0; e < std::size(kEdges); ++e) {
    add("edge", kEdges[e], e < kFirstPlanEdge || k.balanced_plan);
  }
}

void Coverage::count(const std::string& field, const std::string& value) {
  for (CoverageRow& r : rows_) {
    if (r.field == field && r.value == value) {
      ++r.cases;
      return;
    }
  }
}

void Coverage::add(const Case& c) {
  ++cases_;
  count("mask_format", std::string(scenarios::to_string(c.mask_format)));
  if (c.mask_format == MaskFormat::FullMask || c.mask_format == MaskFormat::FlashInferPacked) {
    count("mask_indptr_convention", std::string(scenarios::to_string(c.mask_indptr_convention)));
  }
  if (c.mask_format == MaskFormat::QlenOnlyBitpacking) {
    count("mask_word_bytes", std::to_string(c.mask_word_bytes));
  }
  count("kv_dtype", std::string(scenarios::to_string(c.kv_dtype)));
  count("q_dtype", std::string(scenarios::to_string(c.q_dtype)));
  count("o_dtype", std::string(scenarios::to_string(c.o_dtype)));
  count("kv_layout", std::string(scenarios::to_string(c.layout)));
  if (c.layout != LayoutKind::Split) {
    count("kv_row_stride", c.row_stride == kRowDim ? "576" : "padded (640, 1152)");
  }
  count("draft_source", std::string(scenarios::to_string(c.draft_source)));
  count("kv_indexing", std::string(scenarios::to_string(c.kv_indexing)));
  count("page_size", std::to_string(c.page_size));
  if (c.kv_indexing == KvIndexing::PageTable) count("page_table page_size", std::to_string(c.page_size));
  count("slot_order", std::string(scenarios::to_string(c.slot_order)));
  if (!c.q_rope_first && c.q_head_stride == kRowDim) count("q layout", "dense latent-first");
  if (c.q_rope_first) count("q layout", "q_pe first");
  if (c.q_head_stride != kRowDim) count("q layout", "padded head stride");
  count("o layout", c.o_head_stride == kLatentDim ? "dense" : "padded head stride");
  if (c.draft_source == DraftKvSource::ExtendRows) {
    count("k_extend rows", c.k_extend_stride == kRowDim ? "576" : "padded");
  }
  count("rows past T", c.tail_rows == 0 ? "none" : "some");

  bool p0 = false, p1 = false, tile = false, big_p = false, empty_split = false, d1 = false,
       d_npot = false, d_big = false, d_edge = false, large = false, fewer_splits = false;
  const std::vector<int32_t> splits = planned_split_counts(c);
  for (size_t i = 0; i < c.requests.size(); ++i) {
    const auto& r = c.requests[i];
    const int64_t p = r.prefix_len;
    const auto d = static_cast<int32_t>(r.parents.size());
    p0 = p0 || p == 0;
    p1 = p1 || p == 1;
    tile = tile || (p >= kKvTile - 1 && (p % kKvTile == kKvTile - 1 || p % kKvTile <= 1));
    big_p = big_p || p >= 4097;
    // Partials 0..num_splits-1 run under either plan, each over split s of the request's count.
    for (int32_t s = 0; s < c.num_splits; ++s) {
      empty_split = empty_split || split_range(p, splits[i], s).empty();
    }
    fewer_splits =
        fewer_splits || (c.plan_blocks > 0 && splits[i] < nonempty_splits(p, c.num_splits));
    d1 = d1 || d == 1;
    d_npot = d_npot || !std::has_single_bit(static_cast<uint32_t>(d));
    d_big = d_big || d >= 257;
    d_edge = d_edge || (d >= 31 && d <= 33) || (d >= 63 && d <= 65);
    large = large || (d >= 128 && p >= 1024);
  }
  const auto flag = [&](bool on, const char* edge) {
    if (on) count("edge", edge);
  };
  flag(p0, kEdges[0]);
  flag(p1, kEdges[1]);
  flag(tile, kEdges[2]);
  flag(big_p, kEdges[3]);
  flag(empty_split, kEdges[4]);
  flag(c.num_splits > 1, kEdges[5]);
  flag(d1, kEdges[6]);
  flag(d_npot, kEdges[7]);
  flag(d_big, kEdges[8]);
  flag(d_edge, kEdges[9]);
  flag(!std::has_single_bit(static_cast<uint32_t>(c.num_heads)), kEdges[10]);
  flag(c.num_heads == max_heads_, kEdges[11]);
  flag(c.graph_padded_bs != 0 && c.graph_padded_bs == c.max_draft(), kEdges[12]);
  flag(c.graph_padded_bs != 0, kEdges[13]);
  flag(c.batch_size() >= 17, kEdges[14]);
  flag(large, kEdges[15]);
  flag(c.value_scale == 16.0, kEdges[16]);
  flag(c.value_scale == 1e-3, kEdges[17]);
  flag(!c.poison_unused_slots, kEdges[18]);
  flag(c.plan_blocks > 0, kEdges[19]);
  flag(fewer_splits, kEdges[20]);
}

void Coverage::merge(const Coverage& other) {
  if (rows_.empty()) {
    *this = other;
    return;
  }
  cases_ += other.cases_;
  for (const CoverageRow& r : other.rows_) {
    for (CoverageRow& mine : rows_) {
      if (mine.field == r.field && mine.value == r.value) mine.cases += r.cases;
    }
  }
}

std::vector<std::string> coverage_missing(const std::vector<CoverageRow>& rows) {
  std::vector<std::string> out;
  for (const CoverageRow& r : rows) {
    if (r.accepted && r.cases == 0) out.push_back(r.field + "=" + r.value);
  }
  return out;
}

std::vector<std::string> Coverage::missing() const { return coverage_missing(rows_); }

std::string Coverage::to_string() const {
  std::ostringstream os;
  os << "coverage over " << cases_ << " cases (cases per value):\n";
  size_t width = 0;
  for (const CoverageRow& r : rows_) width = std::max(width, r.field.size() + r.value.size() + 3);
  for (const CoverageRow& r : rows_) {
    os << "  " << std::left << std::setw(static_cast<int>(width)) << (r.field + " = " + r.value)
       << std::right << std::setw(6) << r.cases;
    if (!r.accepted) {
      os << "  (not accepted by the backend)";
    } else if (r.cases == 0) {
      os << "  MISSING";
    }
    os << "\n";
  }
  const auto miss = missing();
  if (!miss.empty()) os << "  " << miss.size() << " accepted values never generated\n";
  return os.str();
}

}  // namespace mlaverify::props
