// Case generators (rapidcheck, mapcat for dependent values: the tree size depends on the prefix
// and the per-request work budget) and the normalization and extra shrinks that keep cases valid.
#include "props/generators.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <initializer_list>
#include <utility>

#include "mlaverify/split_plan.h"
#include "model/config.h"

namespace mlaverify::props {

namespace gen = rc::gen;

std::vector<int32_t> make_tree(TreeShape shape, const std::vector<uint32_t>& raws) {
  const int32_t n = static_cast<int32_t>(raws.size()) + 1;
  std::vector<int32_t> parent(static_cast<size_t>(n), -1);
  std::vector<int32_t> depth(static_cast<size_t>(n), 0);
  auto set = [&](int32_t t, int32_t p) {
    parent[static_cast<size_t>(t)] = p;
    depth[static_cast<size_t>(t)] = depth[static_cast<size_t>(p)] + 1;
  };
  switch (shape) {
    case TreeShape::Chain:  // DeepSeek MTP: causal
      for (int32_t t = 1; t < n; ++t) set(t, t - 1);
      break;
    case TreeShape::Star:  // the widest tree
      for (int32_t t = 1; t < n; ++t) set(t, 0);
      break;
    case TreeShape::Eagle: {
      // EAGLE top-k per depth: nodes come level by level (depth <= 8), at most k per level, each
      // a child of one of the previous level's nodes. k and where a level ends come from the words.
      const uint32_t k = raws.empty() ? 1 : 1 + raws[0] % 10;
      int32_t prev_begin = 0, prev_count = 1, level_begin = 1, level_count = 0, level = 1;
      for (int32_t t = 1; t < n; ++t) {
        const uint32_t r = raws[static_cast<size_t>(t - 1)];
        const bool full =
            static_cast<uint32_t>(level_count) >= k || ((r >> 20) % 4 == 0 && level_count > 0);
        if (full && level < 8) {
          prev_begin = level_begin;
          prev_count = level_count;
          level_begin = t;
          level_count = 0;
          ++level;
        }
        set(t, prev_begin + static_cast<int32_t>(r % static_cast<uint32_t>(prev_count)));
        ++level_count;
      }
      break;
    }
    case TreeShape::DDTree: {
      // DDTree best-first budgets: shallow and very wide (depth <= 16). Parents are drawn with a
      // quadratic bias toward early (high-probability, shallow) nodes.
      for (int32_t t = 1; t < n; ++t) {
        const double u = static_cast<double>(raws[static_cast<size_t>(t - 1)]) / 4294967296.0;
        int32_t p = static_cast<int32_t>(u * u * t);
        while (depth[static_cast<size_t>(p)] >= 16) p = parent[static_cast<size_t>(p)];
        set(t, p);
      }
      break;
    }
    case TreeShape::RandomRecursive:  // docs/spec.md §8: parent[t] uniform in [0, t)
      for (int32_t t = 1; t < n; ++t) {
        set(t, static_cast<int32_t>(raws[static_cast<size_t>(t - 1)] % static_cast<uint32_t>(t)));
      }
      break;
  }
  return parent;
}

void showValue(TreeShape shape, std::ostream& os) {
  static const char* const kNames[] = {"chain", "star", "eagle", "ddtree", "random_recursive"};
  os << kNames[static_cast<int32_t>(shape)];
}

rc::Gen<TreeShape> gen_tree_shape() {
  // Simplest first, for reading. rapidcheck does not shrink an element choice (its element
  // generators return unshrinkable values); simpler_cases turns a failing tree into a chain or a
  // star instead.
  return gen::weightedElement<TreeShape>({{2, TreeShape::Chain},
                                          {1, TreeShape::Star},
                                          {3, TreeShape::Eagle},
                                          {2, TreeShape::DDTree},
                                          {3, TreeShape::RandomRecursive}});
}

namespace {

rc::Gen<int32_t> gen_tree_size(int32_t max_nodes) {
  auto clamp = [max_nodes](int32_t v) { return std::max(1, std::min(v, max_nodes)); };
  return gen::map(gen::weightedOneOf<int32_t>({
                      {3, gen::just<int32_t>(1)},
                      {6, gen::inRange<int32_t>(2, 9)},  // MTP chains, small trees
                      {2, gen::element<int32_t>(31, 32, 33, 63, 64, 65)},  // word and tile edges
                      {4, gen::inRange<int32_t>(9, 65)},                   // EAGLE / Medusa
                      {1, gen::inRange<int32_t>(65, 257)},                 // Sequoia
                      {1, gen::inRange<int32_t>(257, 1025)},               // DDTree budgets
                  }),
                  clamp);
}

// Values weighted as given, only those in `set` (a capability set; all when ~0): each value
// appears `weight` times. The choice does not shrink (rapidcheck's element generators return
// unshrinkable values): simpler_cases moves such fields to their plain values (layout, KV
// dtype, mask format, page size, the q / o / k_extend / index presentation); the draft source
// stays as drawn. None in the set: the first value
// (normalize_case then moves the case to one the backend takes).
template <typename E>
rc::Gen<E> gen_in(uint32_t set, std::initializer_list<std::pair<int, E>> weighted) {
  std::vector<E> pool;
  for (const auto& [w, v] : weighted) {
    if (has(set, v)) pool.insert(pool.end(), static_cast<size_t>(w), v);
  }
  if (pool.empty()) pool.push_back(weighted.begin()->second);
  return gen::elementOf(pool);
}

template <typename T>
rc::Gen<T> gen_weighted(std::initializer_list<std::pair<int, T>> weighted) {
  std::vector<T> pool;
  for (const auto& [w, v] : weighted) pool.insert(pool.end(), static_cast<size_t>(w), v);
  return gen::elementOf(pool);
}

}  // namespace

// The split plan: plan_blocks 0 (the uniform plan) in half the cases, else the balanced plan
// over few blocks, 1..8 most often and up to 48. Few blocks over many tiles put the even share
// ceil(W / plan_blocks) above the shortest split (kMinSplitTiles), so the chunk search binds and
// requests get fewer splits than num_splits allows; the larger counts reach the cap instead.
// Measured over 2000 default cases (seed 20261129): 1015 balanced, 502 of them with a request
// on fewer splits than the uniform plan gives it (Generators.BothSplitPlansAreDrawn). The value
// shrinks towards 0 (rapidcheck's element choices do not shrink at all).
rc::Gen<int32_t> gen_plan_blocks(const Capabilities& k) {
  if (!k.balanced_plan) return gen::just<int32_t>(0);
  const rc::Gen<int32_t> draw = gen::weightedOneOf<int32_t>({{4, gen::just<int32_t>(0)},
                                                             {3, gen::inRange<int32_t>(1, 9)},
                                                             {1, gen::inRange<int32_t>(9, 49)}});
  return rc::Gen<int32_t>([draw](const rc::Random& random, int size) {
    return rc::shrinkable::shrinkRecur(draw(random, size).value(), [](int32_t x) {
      return rc::shrink::towards<int32_t>(x, 0);
    });
  });
}

rc::Gen<std::vector<int32_t>> gen_tree(int32_t max_nodes) {
  return gen::mapcat(
      gen::pair(gen_tree_shape(), gen_tree_size(max_nodes)),
      [](const std::pair<TreeShape, int32_t>& sn) {
        const TreeShape shape = sn.first;
        return gen::map(
            gen::container<std::vector<uint32_t>>(static_cast<size_t>(sn.second - 1),
                                                  gen::arbitrary<uint32_t>()),
            [shape](const std::vector<uint32_t>& raws) { return make_tree(shape, raws); });
      });
}

rc::Gen<int64_t> gen_prefix_len(int64_t max_prefix) {
  auto clamp = [max_prefix](int64_t v) { return std::min(v, max_prefix); };
  const int64_t t = kKvTile;
  return gen::map(gen::weightedOneOf<int64_t>({
                      {3, gen::just<int64_t>(0)},
                      {2, gen::just<int64_t>(1)},
                      // Tile edges and split edges (a split is a whole number of tiles).
                      {3, gen::element<int64_t>(t - 1, t, t + 1, 2 * t - 1, 2 * t, 2 * t + 1,
                                                3 * t - 1, 3 * t, 3 * t + 1, 8 * t + 1)},
                      {4, gen::inRange<int64_t>(2, 300)},
                      {1, gen::inRange<int64_t>(300, 4097)},
                      {1, gen::inRange<int64_t>(4097, 65537)},
                  }),
                  clamp);
}

int64_t case_work(const Case& c) {
  int64_t w = 0;
  for (const auto& r : c.requests) {
    const int64_t d = static_cast<int64_t>(r.parents.size());
    w += d * (r.prefix_len + d);
  }
  if (c.graph_padded_bs > c.batch_size()) {
    const int64_t d = c.max_draft();
    w += (c.graph_padded_bs - c.batch_size()) * d * (1 + d);
  }
  return w * c.num_heads;
}

namespace {

// The first value of `order` the set holds (the preferred fallbacks first), else `order[0]`.
template <typename E>
E fit(E value, uint32_t set, std::initializer_list<E> order) {
  if (has(set, value)) return value;
  for (E e : order) {
    if (has(set, e)) return e;
  }
  return *order.begin();
}

void fit_to_caps(Case& c, const Capabilities& k) {
  c.kv_dtype = fit(c.kv_dtype, k.kv_dtypes, {DType::BF16, DType::F32});
  c.q_dtype = fit(c.q_dtype, k.q_dtypes, {DType::BF16, DType::F32});
  c.o_dtype = fit(c.o_dtype, k.o_dtypes, {DType::BF16, DType::F32});
  c.layout = fit(c.layout, k.kv_layouts,
                 {LayoutKind::LatentFirst, LayoutKind::Split, LayoutKind::RopeFirst});
  c.draft_source = fit(c.draft_source, k.draft_sources,
                       {DraftKvSource::ExtendRows, DraftKvSource::CacheSlots});
  // QlenOnlyBitpacking falls back to QlenOnly (its unpacked form) before anything else.
  c.mask_format = fit(c.mask_format, k.mask_formats,
                      {c.mask_format == MaskFormat::QlenOnlyBitpacking ? MaskFormat::QlenOnly
                                                                       : MaskFormat::FullMask,
                       MaskFormat::FullMask, MaskFormat::FlashInferPacked, MaskFormat::DraftBits,
                       MaskFormat::QlenOnly, MaskFormat::QlenOnlyBitpacking});
  c.mask_indptr_convention = fit(c.mask_indptr_convention, k.mask_indptr_conventions,
                                 {IndptrConvention::Csr, IndptrConvention::OffsetsOnly});
  c.kv_indexing = fit(c.kv_indexing, k.kv_indexings,
                      {KvIndexing::TokenI64, KvIndexing::TokenI32, KvIndexing::PageTable});
  if (c.kv_indexing == KvIndexing::PageTable) {
    // The page size the allocator used must be one the page table takes: the smallest declared
    // one at least as large, else the largest declared.
    // A power of two whose bit log2(ps) the declaration sets (Capabilities::page_sizes).
    auto ok = [&](int32_t ps) {
      const auto u = static_cast<uint32_t>(ps);
      return ps > 0 && std::has_single_bit(u) && ((k.page_sizes >> std::countr_zero(u)) & 1u);
    };
    if (!ok(c.page_size)) {
      int32_t best = 0;
      for (int b = 0; b < 13; ++b) {
        if ((k.page_sizes >> b) & 1u) {
          best = 1 << b;
          if (best >= c.page_size) break;
        }
      }
      if (best > 0) c.page_size = best;
    }
  }
  if (!k.padded_kv_rows) c.row_stride = kRowDim;
  if (!k.strided_q) {
    c.q_rope_first = false;
    c.q_head_stride = kRowDim;
  }
  if (!k.strided_o) c.o_head_stride = kLatentDim;
  if (!k.padded_extend_rows) c.k_extend_stride = kRowDim;
  if (!k.balanced_plan) c.plan_blocks = 0;
  c.num_heads = std::min(c.num_heads, std::max(1, k.max_heads));
  for (auto& r : c.requests) {
    if (static_cast<int32_t>(r.parents.size()) > k.max_draft) {
      r.parents.resize(static_cast<size_t>(std::max(1, k.max_draft)));
    }
    r.prefix_len = std::min(r.prefix_len, k.max_prefix);
  }
}

}  // namespace

Case normalize_case(Case c, const GenOptions& o) {
  fit_to_caps(c, o.caps);
  const int32_t max_d = c.max_draft();
  if (c.mask_format == MaskFormat::QlenOnlyBitpacking) {
    if (max_d > 32) {
      c.mask_format = MaskFormat::QlenOnly;
    } else {
      // The narrowest word that holds D bits, or the generated one when wider.
      const int32_t need = max_d <= 8 ? 1 : max_d <= 16 ? 2 : 4;
      c.mask_word_bytes = std::max(c.mask_word_bytes, need);
    }
  }
  if (c.mask_word_bytes != 1 && c.mask_word_bytes != 2) c.mask_word_bytes = 4;
  if (c.mask_format == MaskFormat::QlenOnly && !has(o.caps.mask_formats, MaskFormat::QlenOnly)) {
    fit_to_caps(c, o.caps);  // bitpacking fell back to a format the backend does not take
  }
  if (c.graph_padded_bs != 0 && c.graph_padded_bs <= c.batch_size()) c.graph_padded_bs = 0;
  // Prefixes are cut (largest first) until the case fits the work budget; padding goes first.
  if (case_work(c) > o.max_work) c.graph_padded_bs = 0;
  while (case_work(c) > o.max_work) {
    auto it =
        std::max_element(c.requests.begin(), c.requests.end(),
                         [](const auto& a, const auto& b) { return a.prefix_len < b.prefix_len; });
    if (it->prefix_len == 0) break;
    it->prefix_len /= 2;
  }
  return c;
}

namespace {

// The fields that present the same values differently (queries, outputs, draft rows, kv
// indexing, rows past T), each drawn from what the backend declares.
struct Presentation {
  DType q_dtype;
  int32_t q_form;  // 0 dense, 1 rope-first, 2 padded, 3 both
  DType o_dtype;
  int64_t o_head_stride;
  int64_t k_extend_stride;
  KvIndexing kv_indexing;
  int32_t tail_rows;
};

rc::Gen<Presentation> gen_presentation(const Capabilities& k) {
  auto q_form = k.strided_q ? gen_weighted<int32_t>({{6, 0}, {1, 1}, {1, 2}, {1, 3}})
                            : gen::just<int32_t>(0);
  auto o_stride = k.strided_o ? gen_weighted<int64_t>({{6, kLatentDim}, {1, 576}, {1, 1024}})
                              : gen::just<int64_t>(kLatentDim);
  auto ext = k.padded_extend_rows ? gen_weighted<int64_t>({{6, kRowDim}, {1, 640}})
                                  : gen::just<int64_t>(kRowDim);
  return gen::apply(
      [](DType q, int32_t qf, DType od, int64_t os, int64_t es, KvIndexing ki, int32_t tail) {
        return Presentation{q, qf, od, os, es, ki, tail};
      },
      gen_in<DType>(k.q_dtypes, {{4, DType::BF16}, {1, DType::F32}}), q_form,
      gen_in<DType>(k.o_dtypes, {{4, DType::BF16}, {1, DType::F32}}), o_stride, ext,
      gen_in<KvIndexing>(k.kv_indexings, {{3, KvIndexing::TokenI64},
                                          {1, KvIndexing::TokenI32},
                                          {1, KvIndexing::PageTable}}),
      gen::weightedOneOf<int32_t>({{4, gen::just<int32_t>(0)}, {1, gen::inRange<int32_t>(1, 9)}}));
}

void apply_presentation(Case& c, const Presentation& v) {
  c.q_dtype = v.q_dtype;
  c.q_rope_first = v.q_form == 1 || v.q_form == 3;
  c.q_head_stride = v.q_form >= 2 ? 640 : kRowDim;
  c.o_dtype = v.o_dtype;
  c.o_head_stride = v.o_head_stride;
  c.k_extend_stride = v.k_extend_stride;
  c.kv_indexing = v.kv_indexing;
  c.tail_rows = v.tail_rows;
}

// A SPEC §8-sized request: a large tree (D >= 128) over a long prefix (P >= 1024), one or two
// heads, the tree as large as the budget allows at that prefix.
rc::Gen<Case> gen_large_case(const GenOptions& o) {
  const int32_t cap_d = std::max(128, std::min({o.caps.max_draft, o.max_draft, 1024}));
  auto shape = gen::mapcat(gen::pair(gen::element<int32_t>(1, 2), gen::inRange<int64_t>(1024, 4097)),
                           [o, cap_d](const std::pair<int32_t, int64_t>& hp) {
    // Not a structured binding: clang 14 (the fuzz build) cannot capture one in a lambda.
    const int32_t h = hp.first;
    const int64_t p = hp.second;
    const double share = static_cast<double>(o.large_work) / h;
    const double disc = static_cast<double>(p) * p + 4.0 * share;
    const int32_t dmax = std::max(
        128, std::min(cap_d, static_cast<int32_t>((std::sqrt(disc) - static_cast<double>(p)) / 2)));
    return gen::map(
        gen::mapcat(gen::inRange<int32_t>(128, dmax + 1),
                    [](int32_t d) {
                      return gen::pair(gen_tree_shape(),
                                       gen::container<std::vector<uint32_t>>(
                                           static_cast<size_t>(d - 1), gen::arbitrary<uint32_t>()));
                    }),
        [h, p](const std::pair<TreeShape, std::vector<uint32_t>>& t) {
          return std::make_pair(h, scenarios::RequestDesc{make_tree(t.first, t.second), p});
        });
  });
  return gen::apply(
      [o](std::pair<int32_t, scenarios::RequestDesc> hr, Presentation v, uint64_t seed,
          int32_t splits, int32_t plan_blocks) {
        Case c;
        c.requests = {std::move(hr.second)};
        c.num_heads = hr.first;
        c.seed = seed;
        c.num_splits = splits;
        c.plan_blocks = plan_blocks;
        apply_presentation(c, v);
        GenOptions big = o;
        big.max_work = o.large_work;
        return normalize_case(std::move(c), big);
      },
      shape, gen_presentation(o.caps), gen::arbitrary<uint64_t>(),
      gen::inRange<int32_t>(1, kMaxSplits + 1), gen_plan_blocks(o.caps));
}

}  // namespace

rc::Gen<Case> gen_case(const GenOptions& o) {
  const Capabilities& k = o.caps;
  auto gen_bs = gen::weightedOneOf<int32_t>({
      {4, gen::just<int32_t>(1)},
      {4, gen::inRange<int32_t>(2, 5)},
      {2, gen::inRange<int32_t>(5, std::max(6, std::min(17, o.max_batch + 1)))},
      {1, gen::inRange<int32_t>(17, std::max(18, o.max_batch + 1))},
  });
  // H = 3, 5, 12, 40 and 96: head counts that are not powers of two (DeepSeek-V3 at tp 5 has 25
  // and Kimi K2 at tp 3 about 21).
  const int32_t max_heads = std::max(1, std::min(o.max_heads, k.max_heads));
  auto gen_heads = gen::map(gen_weighted<int32_t>({{1, 1},
                                                   {1, 2},
                                                   {1, 3},
                                                   {2, 4},
                                                   {1, 5},
                                                   {4, 8},
                                                   {1, 12},
                                                   {3, 16},
                                                   {1, 40},
                                                   {1, 64},
                                                   {1, 96},
                                                   {3, 128}}),
                            [max_heads](int32_t h) { return std::min(h, max_heads); });
  // The shipped presets' scales (each with its mscale^2), so a missing mscale^2 is visible.
  static const std::vector<double> kScales = {model::preset("deepseek-v3").sm_scale(),
                                              model::preset("kimi-k2").sm_scale(),
                                              model::preset("kimi-k2-0905").sm_scale()};
  auto regular = gen::mapcat(gen::pair(gen_bs, gen_heads), [o, k](const std::pair<int32_t, int32_t>& bh) {
    const int32_t bs = std::min(bh.first, o.max_batch);
    const int32_t heads = bh.second;
    // Each request gets an equal share of the budget: P first, then a tree that fits.
    const int64_t share = std::max<int64_t>(2, o.max_work / (int64_t{bs} * heads));
    const int32_t max_draft = std::max(1, std::min(o.max_draft, k.max_draft));
    auto gen_request = gen::mapcat(
        gen_prefix_len(std::min({o.max_prefix, k.max_prefix, share - 1})),
        [max_draft, share](int64_t p) {
          // Largest D with D * (P + D) <= share.
          const double disc = static_cast<double>(p) * p + 4.0 * static_cast<double>(share);
          int32_t dmax = static_cast<int32_t>((std::sqrt(disc) - static_cast<double>(p)) / 2.0);
          dmax = std::max(1, std::min(dmax, max_draft));
          return gen::map(gen_tree(dmax), [p](std::vector<int32_t> parents) {
            return scenarios::RequestDesc{std::move(parents), p};
          });
        });
    const auto row_strides = k.padded_kv_rows
                                 ? gen_weighted<int64_t>({{6, kRowDim}, {1, 640}, {1, 1152}})
                                 : gen::just<int64_t>(kRowDim);
    auto layout = gen::tuple(
        gen_in<LayoutKind>(k.kv_layouts, {{5, LayoutKind::LatentFirst},
                                          {2, LayoutKind::Split},
                                          {1, LayoutKind::RopeFirst}}),
        row_strides, gen_in<DType>(k.kv_dtypes, {{4, DType::BF16}, {1, DType::F32}}),
        gen_in<DraftKvSource>(k.draft_sources,
                              {{1, DraftKvSource::ExtendRows}, {1, DraftKvSource::CacheSlots}}),
        gen_in<MaskFormat>(k.mask_formats, {{3, MaskFormat::FullMask},
                                            {1, MaskFormat::QlenOnly},
                                            {2, MaskFormat::QlenOnlyBitpacking},
                                            {2, MaskFormat::FlashInferPacked},
                                            {2, MaskFormat::DraftBits}}),
        gen_in<IndptrConvention>(k.mask_indptr_conventions,
                                 {{3, IndptrConvention::Csr}, {1, IndptrConvention::OffsetsOnly}}),
        gen::element<int32_t>(1, 2, 4),
        gen_weighted<int32_t>({{3, 1}, {1, 16}, {1, 32}, {1, 64}}));
    auto run = gen::tuple(
        gen_weighted<scenarios::SlotOrder>({{3, scenarios::SlotOrder::Scattered},
                                            {1, scenarios::SlotOrder::Contiguous},
                                            {1, scenarios::SlotOrder::Defragmented}}),
        // Extra padded rows: none, a few, or -1: pad up to max D (bs == D under replay).
        gen::weightedOneOf<int32_t>({{4, gen::just<int32_t>(0)},
                                     {2, gen::inRange<int32_t>(1, 9)},
                                     {1, gen::just<int32_t>(-1)}}),
        gen_weighted<bool>({{4, true}, {1, false}}),
        // Bounded values: 4 and 16 give large-magnitude scores (|s| in the hundreds), 1e-3
        // nearly uniform attention; never arbitrary floats (they overflow the softmax).
        gen_weighted<double>({{6, 1.0}, {1, 0.1}, {2, 4.0}, {1, 16.0}, {1, 1e-3}}),
        gen::weightedOneOf<int32_t>({{2, gen::just<int32_t>(1)},
                                     {3, gen::inRange<int32_t>(2, 5)},
                                     {1, gen::inRange<int32_t>(5, kMaxSplits + 1)}}),
        gen::elementOf(kScales), gen::arbitrary<uint64_t>(),
        // num_splits above is the balanced plan's cap when this is > 0.
        gen_plan_blocks(k));
    return gen::apply(
        [o, heads](
            std::vector<scenarios::RequestDesc> reqs,
            std::tuple<LayoutKind, int64_t, DType, DraftKvSource, MaskFormat, IndptrConvention,
                       int32_t, int32_t>
                lay,
            std::tuple<scenarios::SlotOrder, int32_t, bool, double, int32_t, double, uint64_t,
                       int32_t>
                r,
            Presentation v) {
          Case c;
          c.requests = std::move(reqs);
          c.num_heads = heads;
          std::tie(c.layout, c.row_stride, c.kv_dtype, c.draft_source, c.mask_format,
                   c.mask_indptr_convention, c.mask_word_bytes, c.page_size) = lay;
          int32_t pad = 0;
          std::tie(c.slot_order, pad, c.poison_unused_slots, c.value_scale, c.num_splits,
                   c.sm_scale, c.seed, c.plan_blocks) = r;
          apply_presentation(c, v);
          const int32_t bs = c.batch_size();
          c.graph_padded_bs = pad == 0 ? 0 : pad > 0 ? bs + pad : std::max(bs + 1, c.max_draft());
          return normalize_case(std::move(c), o);
        },
        gen::container<std::vector<scenarios::RequestDesc>>(static_cast<size_t>(bs), gen_request),
        layout, run, gen_presentation(k));
  });
  if (o.large_every <= 0) return regular;
  return gen::weightedOneOf<Case>({{static_cast<size_t>(o.large_every - 1), regular},
                                   {1, gen_large_case(o)}});
}

Case plain_presentation(Case c, int group) {
  if (group < 0 || group == 0) {  // the query
    c.q_dtype = DType::BF16;
    c.q_rope_first = false;
    c.q_head_stride = kRowDim;
  }
  if (group < 0 || group == 1) {  // the output
    c.o_dtype = DType::BF16;
    c.o_head_stride = kLatentDim;
  }
  if (group < 0 || group == 2) c.k_extend_stride = kRowDim;
  if (group < 0 || group == 3) c.kv_indexing = KvIndexing::TokenI64;
  if (group < 0 || group == 4) c.tail_rows = 0;
  return c;
}

std::vector<Case> simpler_cases(const Case& c, const Capabilities& caps) {
  std::vector<Case> out;
  auto push = [&](Case s) {
    if (!(s == c)) out.push_back(std::move(s));
  };
  // Fewer requests first: a one-request counterexample reads best.
  if (c.batch_size() > 1) {
    for (size_t i = 0; i < c.requests.size(); ++i) {
      Case s = c;
      s.requests.erase(s.requests.begin() + static_cast<std::ptrdiff_t>(i));
      // Keep the number of padded rows, not the padded size (that would add a padded row).
      if (s.graph_padded_bs != 0) --s.graph_padded_bs;
      if (s.graph_padded_bs != 0 && s.graph_padded_bs <= s.batch_size()) s.graph_padded_bs = 0;
      push(s);
    }
  }
  if (c.graph_padded_bs != 0) {
    Case s = c;
    s.graph_padded_bs = 0;
    push(s);
    // Half the padded rows, for failures that need padding but not fifty rows of it.
    Case h = c;
    h.graph_padded_bs = c.batch_size() + (c.graph_padded_bs - c.batch_size()) / 2;
    if (h.graph_padded_bs <= h.batch_size()) h.graph_padded_bs = h.batch_size() + 1;
    push(h);
  }
  // One head early: it divides the cost of every later evaluation.
  {
    Case heads = c;
    heads.num_heads = 1;
    push(heads);
  }
  for (size_t i = 0; i < c.requests.size(); ++i) {
    const int64_t p = c.requests[i].prefix_len;
    for (int64_t np : {int64_t{0}, p / 2, p - 1}) {
      if (np >= 0 && np < p) {
        Case s = c;
        s.requests[i].prefix_len = np;
        push(s);
      }
    }
    const auto& par = c.requests[i].parents;
    if (par.size() > 1) {
      // Drop the last node (always a leaf: children come after parents), or halve the tree. A
      // large tree tries the half first: one leaf at a time would spend the shrink budget on a
      // SPEC §8-sized tree (each evaluation of it costs seconds).
      Case s = c;
      s.requests[i].parents.pop_back();
      Case h = c;
      h.requests[i].parents.resize((par.size() + 1) / 2);
      if (par.size() > 16) std::swap(s, h);
      push(s);
      push(h);
    }
  }
  for (size_t i = 0; i < c.requests.size(); ++i) {
    // Whole-tree simplifications in a strict order, any tree > chain > star, so the greedy
    // shrinker cannot toggle between two equally small failing shapes.
    const auto& par = c.requests[i].parents;
    Case chain = c, star = c;
    bool is_star = true;
    for (size_t t = 1; t < par.size(); ++t) {
      chain.requests[i].parents[t] = static_cast<int32_t>(t) - 1;
      star.requests[i].parents[t] = 0;
      is_star = is_star && par[t] == 0;
    }
    push(star);
    if (!is_star) push(chain);
  }
  Case plain = c;
  plain.layout = LayoutKind::LatentFirst;
  plain.row_stride = kRowDim;
  plain.kv_dtype = DType::BF16;
  push(plain);
  Case mask = c;
  mask.mask_format = MaskFormat::FullMask;
  mask.mask_indptr_convention = IndptrConvention::Csr;
  push(mask);
  Case misc = c;
  misc.num_splits = 1;
  push(misc);
  // The uniform plan, else the simplest balanced one: one block, so one split per request.
  if (c.plan_blocks != 0) {
    Case uniform = c;
    uniform.plan_blocks = 0;
    push(uniform);
    Case one = c;
    one.plan_blocks = 1;
    push(one);
  }
  Case pages = c;
  pages.page_size = 1;
  pages.slot_order = scenarios::SlotOrder::Scattered;
  push(pages);
  // The plain presentation: the drawn one never shrinks by itself (element choices), and a
  // shrunk case that keeps "q=f32 tail=7 page_table" for a bug that needs none of it points the
  // wrong way. All at once first; then, where more than one group differs, one group at a time
  // for the bugs that need the others (with one group the two would be the same candidate).
  const Case presented = plain_presentation(c);
  push(presented);
  std::vector<Case> groups;
  for (int g = 0; g < kPresentationGroups; ++g) {
    Case s = plain_presentation(c, g);
    if (!(s == c)) groups.push_back(std::move(s));
  }
  if (groups.size() > 1)
    for (Case& s : groups) push(std::move(s));
  Case values = c;
  values.value_scale = 1.0;
  values.poison_unused_slots = true;
  push(values);
  GenOptions unbounded;
  unbounded.max_work = int64_t{1} << 40;
  unbounded.caps = caps;
  for (Case& s : out) s = normalize_case(std::move(s), unbounded);
  return out;
}

}  // namespace mlaverify::props
