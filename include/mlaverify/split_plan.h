// The split-KV plan and the merge rule, defined once for the CPU backend and the CUDA kernel so
// that both run the same algorithm and agree far more tightly than either agrees with the model.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "mlaverify/hd.h"

namespace mlaverify {

// Keys per tile: the online softmax rescales once per tile of this many prefix tokens.
inline constexpr int kKvTile = 64;

// Upper bound on NSPLIT: workspace holds (num_splits + 1) partials per (token, head).
inline constexpr int kMaxSplits = 64;

MLAV_HD int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Half-open range [begin, end) of prefix tokens that split `s` of `num_splits` covers.
// Chunks are whole tiles (so tile boundaries do not depend on NSPLIT beyond the chunk edge), the
// last non-empty chunk takes the remainder, and trailing splits may be empty (begin == end):
// an empty split contributes nothing to the merge (it is skipped, never merged as zeros).
struct SplitRange {
  int64_t begin;
  int64_t end;
  MLAV_HD bool empty() const { return begin >= end; }
};

MLAV_HD SplitRange split_range(int64_t prefix_len, int32_t num_splits, int32_t s) {
  int64_t tiles = ceil_div(prefix_len, kKvTile);
  int64_t tiles_per_split = ceil_div(tiles, num_splits);
  int64_t chunk = tiles_per_split * kKvTile;
  int64_t begin = s * chunk;
  int64_t end = begin + chunk;
  if (begin > prefix_len) begin = prefix_len;
  if (end > prefix_len) end = prefix_len;
  return {begin, end};
}

// The folded plan (the Hopper wgmma kernel, cuda/NOTES.md v14): no partial of its own for the
// draft. A request's keys form one sequence of whole tiles, its draft's ceil(D / kKvTile) tiles
// (keys in node order) and then its prefix's ceil(P / kKvTile); split s takes the s-th chunk of
// ceil(total / NSPLIT) tiles of it, so the splits are as even as whole tiles allow and the draft
// tiles come first in the blocks that hold them (usually split 0 alone). Partial s then covers
// draft keys [draft_begin, draft_end) and prefix keys [prefix_begin, prefix_end); trailing
// splits may be empty, and the merge skips them by this same function.
MLAV_HD int64_t clamp_i64(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}

struct FoldedRange {
  int64_t draft_begin, draft_end;    // draft columns (node indices), draft_end <= D
  int64_t prefix_begin, prefix_end;  // prefix positions, prefix_end <= P
  MLAV_HD int64_t draft_keys() const { return draft_end - draft_begin; }
  MLAV_HD int64_t prefix_keys() const { return prefix_end - prefix_begin; }
  MLAV_HD bool empty() const { return draft_begin >= draft_end && prefix_begin >= prefix_end; }
};

MLAV_HD FoldedRange folded_range(int64_t prefix_len, int64_t draft_nodes, int32_t num_splits,
                                 int32_t s) {
  const int64_t draft_tiles = ceil_div(draft_nodes, kKvTile);
  const int64_t total = draft_tiles + ceil_div(prefix_len, kKvTile);
  const int64_t chunk = ceil_div(total, num_splits);
  const int64_t t0 = clamp_i64(s * chunk, 0, total), t1 = clamp_i64(t0 + chunk, 0, total);
  FoldedRange r;
  r.draft_begin = clamp_i64(t0 * kKvTile, 0, draft_nodes);
  r.draft_end = clamp_i64(t1 * kKvTile, 0, draft_nodes);
  r.prefix_begin = clamp_i64((t0 - draft_tiles) * kKvTile, 0, prefix_len);
  r.prefix_end = clamp_i64((t1 - draft_tiles) * kKvTile, 0, prefix_len);
  return r;
}

// How many splits hold keys. Both plans fill splits from the front, so the non-empty ones are
// exactly splits 0 .. count - 1 (tests/model/test_split_plan.cpp checks this against the range
// functions).
MLAV_HD int32_t nonempty_splits(int64_t prefix_len, int32_t num_splits) {
  const int64_t tiles = ceil_div(prefix_len, kKvTile);
  if (tiles <= 0) return 0;
  return static_cast<int32_t>(ceil_div(tiles, ceil_div(tiles, num_splits)));
}
MLAV_HD int32_t folded_nonempty_splits(int64_t prefix_len, int64_t draft_nodes,
                                       int32_t num_splits) {
  const int64_t total = ceil_div(draft_nodes, kKvTile) + ceil_div(prefix_len, kKvTile);
  if (total <= 0) return 0;
  return static_cast<int32_t>(ceil_div(total, ceil_div(total, num_splits)));
}

// ---- The balanced plan (issue 13): splits by each request's real length ----
// Under the uniform plan every request takes num_splits splits, so one long request beside short
// ones runs on as few blocks as the short ones. The balanced plan (VerifyParams::plan_blocks > 0)
// gives request i its own split count n_i <= num_splits from the lengths the metadata holds, one
// chunk length C (tiles per split) for the whole batch: n_i = ceil(tiles_i / C), its splits as
// even as whole tiles allow (split_range / folded_range with n_i). Blocks are (row tile, split)
// pairs; the batch's work W = sum of row_tiles_i * tiles_i. C is the chunk >= max(
// kMinSplitTiles, ceil(W / plan_blocks)) that a binary search finds with its big blocks fitting
// one wave of plan_blocks (plan_chunk): a block is big when its split holds >= 2/3 C tiles. Smaller blocks are not counted: taken largest first
// (the planning kernel orders them so), they fill in as others finish. With every request alike
// this is the uniform plan of suggest_num_splits evened out (tests/model/test_split_plan.cpp).
// The CUDA kernel computes the same function on the device (a one-block planning kernel reading
// the metadata buffers, cuda/verify_plan.cu), so a captured graph replays with new lengths
// correctly; the CPU backend computes it serially. Integer arithmetic only (32-bit divisions:
// tiles < 2^26, chunk <= tiles): any summation order gives the same plan.
// Shortest split the balanced plan makes. 2, not the uniform rule's 4 (suggest_num_splits): a
// long request beside short ones has the machine to itself (mix-p0-p1-p4097, cuda/NOTES.md v17).
inline constexpr int32_t kMinSplitTiles = 2;
// Upper bound on VerifyParams::plan_blocks (resident blocks of a device; validated).
inline constexpr int32_t kMaxPlanBlocks = 1 << 20;

MLAV_HD int32_t ceil_div32(int32_t a, int32_t b) { return (a + b - 1) / b; }
// Key tiles request i's splits share: its prefix tiles, and its draft tiles when folded.
MLAV_HD int32_t plan_tiles(int64_t prefix_len, int64_t draft_nodes, bool folded) {
  return static_cast<int32_t>(ceil_div(prefix_len, kKvTile) +
                              (folded ? ceil_div(draft_nodes, kKvTile) : 0));
}
// Blocks of 64 (node, head) rows of a request (the kernels' M tile).
MLAV_HD int32_t plan_row_tiles(int64_t draft_nodes, int32_t num_heads) {
  return static_cast<int32_t>(ceil_div(draft_nodes * num_heads, 64));
}
// Splits of a request with `tiles` tiles at chunk `chunk` (>= 1), capped by `cap` (num_splits),
// counted as the range functions fill them (all non-empty): 0 for a request without tiles.
MLAV_HD int32_t planned_splits(int32_t tiles, int32_t chunk, int32_t cap) {
  if (tiles <= 0) return 0;
  int32_t n = ceil_div32(tiles, chunk);
  if (n > cap) n = cap;
  return ceil_div32(tiles, ceil_div32(tiles, n));
}
// Big blocks of one request at chunk `chunk` (see above).
MLAV_HD int64_t plan_big_blocks(int32_t tiles, int32_t row_tiles, int32_t chunk, int32_t cap) {
  const int32_t n = planned_splits(tiles, chunk, cap);
  if (n == 0) return 0;
  return 3 * int64_t{ceil_div32(tiles, n)} >= 2 * int64_t{chunk} ? int64_t{row_tiles} * n : 0;
}
// The chunk: binary search over [max(kMinSplitTiles, ceil(work / blocks)), max(that,
// max_tiles)] with big_blocks(c), the batch's sum of plan_big_blocks. That sum is not monotone
// in c (a request's blocks stop counting as big when c passes 3/2 of their size, and count
// again when its split count steps down), so the search finds a chunk whose big blocks fit, not
// always the smallest; at the top of the range every request has one split (prefix units <= the
// batch's row tiles). The same search on the CPU and the GPU: the same chunk.
template <class BigBlocks>
MLAV_HD int32_t plan_chunk(int64_t work, int32_t max_tiles, int32_t blocks,
                           BigBlocks&& big_blocks) {
  const int64_t even = ceil_div(work, blocks < 1 ? 1 : blocks);
  int32_t lo = even > kMinSplitTiles ? static_cast<int32_t>(even < max_tiles ? even : max_tiles)
                                     : kMinSplitTiles;
  if (lo < kMinSplitTiles) lo = kMinSplitTiles;
  int32_t hi = max_tiles > lo ? max_tiles : lo;
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo) / 2;
    if (big_blocks(mid) <= blocks)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}
// ---- The refinement: the chunk whose units a list schedule packs best (cuda/NOTES.md v23) ----
// One wave of big blocks is the right plan while the units fit one wave. When they do not (a
// batch of uneven requests: mix-64x100-4000 has 192 prefix units at chunk 32 on 132 blocks), the
// blocks run as a list schedule, largest first, and how well the second wave fills the gaps
// depends on the unit sizes: on the H200 chunk 20 ran that batch 10% faster than chunk 32, chunk
// 17 1% slower (both kernels alike). So when the chunk's prefix units exceed `blocks`, the plan
// tries the chunks C * k / 16, k = 16 .. 8 (C the searched chunk), each by a model of that
// schedule: its units in decreasing size dealt to the blocks in a snake order (round r gives the
// r-th `blocks` units to blocks 0, 1, .. in even rounds and in reverse in odd ones, so the
// largest of a round lands where the last round put the smallest: for at most two rounds this
// is the longest-first list schedule itself), each unit costing its tiles plus
// kPlanUnitCost (its prologue, epilogue and partial write: ~1.3 tiles measured for the sm_120
// kernel, v16e). The estimate is the largest block's total; the smallest estimate wins, ties to
// the larger chunk (fewer units), so the searched chunk stays unless another packs strictly
// better. A candidate with more than `blocks` + the batch's row tiles units is not taken: the
// partial kernel's grid (plan_max_units) holds that many prefix units, the searched chunk's bound
// (a grid twice that size cost the wgmma kernel ~5 us per call on every balanced batch, v23). Integer arithmetic: the CPU and the
// device compute the same estimates and the same chunk. Bounded work: only for at most
// kRefineMaxBlocks blocks and requests of at most kRefineMaxTiles tiles.
inline constexpr int32_t kPlanUnitCost = 1;
inline constexpr int32_t kRefineSteps = 9;  // k = 16 (the searched chunk) down to 8
inline constexpr int32_t kRefineMaxBlocks = 4096;
inline constexpr int32_t kRefineMaxTiles = 512;
// Candidate q (0 .. kRefineSteps - 1) of searched chunk `chunk`: chunk * (16 - q) / 16, at
// least kMinSplitTiles.
MLAV_HD int32_t refine_candidate(int32_t chunk, int32_t q) {
  const int32_t c = chunk * (16 - q) / 16;
  return c < kMinSplitTiles ? kMinSplitTiles : c;
}
// The units of one request at a chunk: n splits, the first n - 1 of `a` tiles, the last of
// `b` (split_range's division: 1 <= b <= a), each split one unit per row tile.
struct PlanUnits {
  int32_t n, a, b;
};
MLAV_HD PlanUnits plan_units(int32_t tiles, int32_t chunk, int32_t cap) {
  const int32_t n = planned_splits(tiles, chunk, cap);
  if (n == 0) return {0, 0, 0};
  const int32_t a = ceil_div32(tiles, n);
  return {n, a, tiles - (n - 1) * a};
}
// Whether the refinement runs: `units` prefix units at the searched chunk, the batch's longest
// request `max_tiles`.
MLAV_HD bool plan_refines(int64_t units, int32_t max_tiles, int32_t blocks) {
  return units > blocks && blocks <= kRefineMaxBlocks && max_tiles <= kRefineMaxTiles;
}
// Whether a candidate's `units` fit the grid: `blocks` + `row_tiles` (the batch's).
MLAV_HD bool plan_units_fit(int64_t units, int32_t blocks, int64_t row_tiles) {
  return units <= int64_t{blocks} + row_tiles;
}
// The k-th largest unit (0-based) from `at_least[s]`, the number of units of >= s tiles, which
// does not increase with s (at_least[1] = the unit count > k): the largest s in [1, top] with
// at_least[s] > k.
template <class AtLeast>
MLAV_HD int32_t plan_kth_size(AtLeast&& at_least, int32_t top, int64_t k) {
  int32_t lo = 1, hi = top;
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo + 1) / 2;
    if (at_least(mid) > k)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}
// Block j's total under the snake deal of `units` units: rounds r = 0, 1, .. give it unit
// r * blocks + j (even r) or r * blocks + blocks - 1 - j (odd r).
template <class AtLeast>
MLAV_HD int64_t plan_snake_load(AtLeast&& at_least, int32_t top, int64_t units, int32_t blocks,
                                int32_t j) {
  int64_t load = 0;
  for (int64_t r = 0;; ++r) {
    const int64_t k = r * blocks + ((r & 1) ? blocks - 1 - j : j);
    if (k >= units) break;
    load += plan_kth_size(at_least, top, k) + kPlanUnitCost;
  }
  return load;
}

// Serial forms (host: the CPU backend and tests) for a batch whose request i has tiles_of(i)
// tiles and row_tiles_of(i) row tiles. The searched chunk alone:
template <class Tiles, class RowTiles>
int32_t plan_search_serial(int32_t batch_size, int32_t cap, int32_t blocks, Tiles&& tiles_of,
                           RowTiles&& row_tiles_of) {
  int32_t max_tiles = 0;
  int64_t work = 0;
  for (int32_t i = 0; i < batch_size; ++i) {
    const int32_t t = tiles_of(i);
    if (t > max_tiles) max_tiles = t;
    work += int64_t{t} * row_tiles_of(i);
  }
  return plan_chunk(work, max_tiles, blocks, [&](int32_t c) {
    int64_t big = 0;
    for (int32_t i = 0; i < batch_size; ++i)
      big += plan_big_blocks(tiles_of(i), row_tiles_of(i), c, cap);
    return big;
  });
}
// The snake estimate of chunk `c`'s plan (-1 when its units do not fit the grid).
template <class Tiles, class RowTiles>
int64_t plan_estimate_serial(int32_t batch_size, int32_t cap, int32_t blocks, int32_t c,
                             Tiles&& tiles_of, RowTiles&& row_tiles_of) {
  int32_t max_tiles = 0;
  int64_t units = 0, row_tiles = 0;
  for (int32_t i = 0; i < batch_size; ++i)
    max_tiles = std::max(max_tiles, static_cast<int32_t>(tiles_of(i)));
  std::vector<int64_t> at_least(static_cast<size_t>(max_tiles) + 2, 0);  // counts, then sums
  for (int32_t i = 0; i < batch_size; ++i) {
    const PlanUnits u = plan_units(static_cast<int32_t>(tiles_of(i)), c, cap);
    const int64_t rt = row_tiles_of(i);
    units += rt * u.n;
    row_tiles += rt;
    if (u.n > 0) at_least[u.a] += rt * (u.n - 1), at_least[u.b] += rt;
  }
  if (!plan_units_fit(units, blocks, row_tiles)) return -1;
  for (int32_t s = max_tiles - 1; s >= 1; --s) at_least[s] += at_least[s + 1];
  auto get = [&](int32_t s) { return at_least[s]; };
  int64_t est = 0;
  for (int32_t j = 0; j < blocks; ++j)
    est = std::max(est, plan_snake_load(get, max_tiles, units, blocks, j));
  return est;
}
// The plan's chunk: the search, then the refinement.
template <class Tiles, class RowTiles>
int32_t plan_chunk_serial(int32_t batch_size, int32_t cap, int32_t blocks, Tiles&& tiles_of,
                          RowTiles&& row_tiles_of) {
  const int32_t chunk = plan_search_serial(batch_size, cap, blocks, tiles_of, row_tiles_of);
  int32_t max_tiles = 0;
  int64_t units = 0;
  for (int32_t i = 0; i < batch_size; ++i) {
    const int32_t t = static_cast<int32_t>(tiles_of(i));
    max_tiles = std::max(max_tiles, t);
    units += int64_t{row_tiles_of(i)} * planned_splits(t, chunk, cap);
  }
  if (!plan_refines(units, max_tiles, blocks)) return chunk;
  int32_t best = chunk;
  int64_t best_est = -1;
  for (int32_t q = 0; q < kRefineSteps; ++q) {
    const int32_t c = refine_candidate(chunk, q);
    const int64_t est = plan_estimate_serial(batch_size, cap, blocks, c, tiles_of, row_tiles_of);
    if (est >= 0 && (best_est < 0 || est < best_est)) best = c, best_est = est;
  }
  return best;
}

// Every request's split count (host: the CPU backend, the property suite's coverage), handed to
// set(i, n): num_splits under the uniform plan (plan_blocks 0), else the balanced plan's n_i,
// at least 1 (a request without tiles has empty ranges under any count, and the range functions
// divide by it).
template <class Tiles, class RowTiles, class Set>
void plan_split_counts(int32_t batch_size, int32_t num_splits, int32_t plan_blocks,
                       Tiles&& tiles_of, RowTiles&& row_tiles_of, Set&& set) {
  if (plan_blocks <= 0) {
    for (int32_t i = 0; i < batch_size; ++i) set(i, num_splits);
    return;
  }
  const int32_t chunk =
      plan_chunk_serial(batch_size, num_splits, plan_blocks, tiles_of, row_tiles_of);
  for (int32_t i = 0; i < batch_size; ++i) {
    const int32_t n = planned_splits(tiles_of(i), chunk, num_splits);
    set(i, n < 1 ? 1 : n);
  }
}

// Partials per (token, head): splits 0..num_splits-1 over the prefix, then one more (index
// num_splits) for the tree-masked draft block (unused, never read, under the folded plan). Each
// partial is (o[512] fp32 normalized, lse fp32).
MLAV_HD int32_t num_partials(int32_t num_splits) { return num_splits + 1; }

// Numerics contract, shared by cpu/ and cuda/ (docs/spec.md §5):
//  1. Scores: s = sm_scale * (q_lat . c + q_pe . k_pe) with bf16 operands and fp32 accumulation.
//  2. Online softmax per partial, one rescale per key tile of kKvTile (the draft block is one
//     tile sequence of its own, columns in node order): m_new = max(m, max_j s_j);
//     l = l * exp(m - m_new) + sum_j exp(s_j - m_new); acc = acc * exp(m - m_new) + P @ V, where P
//     is exp(s - m_new) rounded to bf16 (the tensor-core operand) and V = c in bf16; l sums the
//     fp32 (unrounded) probabilities. Masked entries are skipped (probability exactly 0).
//     A partial that saw no visible key has l = 0: it reports lse = -inf and o = 0.
//  3. A partial's result: o = acc / l, lse = m + log(l) (natural log).
//  4. Merge (exact): M = max over partials with lse > -inf; w_s = exp(lse_s - M);
//     o = sum_s w_s o_s / sum_s w_s; lse = M + log(sum_s w_s). Partials with lse = -inf are
//     skipped, so -inf - -inf never occurs; if every partial is -inf the row is fully masked:
//     o = 0, lse = -inf. Rescaling by exp(lse_s - M) is what makes the merge exact: each o_s is
//     normalized by its own sum, and w_s restores its share of the global sum.
//  5. o_lat is rounded to bf16 once, at the end of the merge.

}  // namespace mlaverify
