// The split-KV plan and the merge rule, defined once for the CPU backend and the CUDA kernel so
// that both run the same algorithm and agree far more tightly than either agrees with the model.
#pragma once

#include <cstdint>

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
// pairs; the batch's work W = sum of row_tiles_i * tiles_i. C is a chunk >= max(kMinSplitTiles,
// ceil(W / plan_blocks)) whose big blocks fit one wave of plan_blocks (plan_chunk: that bound
// itself when it fits, else a search): a block is big when its split holds >= 2/3 C tiles.
// Smaller blocks are not counted: taken largest first (the planning kernel orders them so), they
// fill in as others finish. With every request alike
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
// The chunk: the even share lo = max(kMinSplitTiles, ceil(work / blocks)) (capped at
// max_tiles) when its big blocks fit one wave, else a binary search over [lo + 1, hi] with
// big_blocks(c), the batch's sum of plan_big_blocks. Below lo one wave of `blocks` chunks could
// not hold the batch's work, so lo is the smallest chunk considered. hi is max(lo, max_tiles), or
// the wave chunk when it lies below that and fits: the chunk that gives the longest request the
// uniform plan's split count s = floor(blocks / busy_row_tiles) (busy_row_tiles: the row tiles of
// requests with tiles). It fits without a probe: with s >= 1 no request gets more than
// ceil(max_tiles / ceil(max_tiles / s)) <= s splits, so big blocks <= busy_row_tiles * s <=
// blocks (tests/model/test_split_plan.cpp checks it on random batches); with s < 1 it is
// max_tiles, not below hi. For a batch of equal requests it is the uniform plan's chunk, so such
// a batch takes one probe when its work divides into the wave at lo and a few when not (8 x 8
// requests of 256 tiles on 132 blocks: lo 125 does not fit, and the search has [126, 128] left:
// 127, 2 probes), instead of the plain search's 6-10; each probe is a block-wide pass over the
// batch in the planning kernel (cuda/NOTES.md v24, v25). The sum is not monotone in c (a request's blocks stop counting as big
// when c passes 3/2 of their size, and count again when its split count steps down), so the
// search finds a chunk whose big blocks fit, not always the smallest; at the top of the range
// every request has one split (prefix units <= the batch's row tiles). The same search on the
// CPU and the GPU: the same chunk.
template <class BigBlocks>
MLAV_HD int32_t plan_chunk(int64_t work, int32_t max_tiles, int64_t busy_row_tiles,
                           int32_t blocks, BigBlocks&& big_blocks) {
  const int64_t even = ceil_div(work, blocks < 1 ? 1 : blocks);
  int32_t lo = even > kMinSplitTiles ? static_cast<int32_t>(even < max_tiles ? even : max_tiles)
                                     : kMinSplitTiles;
  if (lo < kMinSplitTiles) lo = kMinSplitTiles;
  int32_t hi = max_tiles > lo ? max_tiles : lo;
  if (lo == hi || big_blocks(lo) <= blocks) return lo;
  ++lo;
  const int64_t per_request = busy_row_tiles > 0 ? blocks / busy_row_tiles : 0;
  const int32_t splits = static_cast<int32_t>(
      per_request < 1 ? 1 : (per_request < max_tiles ? per_request : max_tiles));
  const int32_t wave = ceil_div32(max_tiles, splits);
  if (wave >= lo && wave < hi) hi = wave;  // fits (above)
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo) / 2;
    if (big_blocks(mid) <= blocks)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}
// Serial form (host: the CPU backend and tests): the chunk of a batch whose request i has
// tiles_of(i) tiles and row_tiles_of(i) row tiles.
template <class Tiles, class RowTiles>
MLAV_HD int32_t plan_chunk_serial(int32_t batch_size, int32_t cap, int32_t blocks,
                                  Tiles&& tiles_of, RowTiles&& row_tiles_of) {
  int32_t max_tiles = 0;
  int64_t work = 0, busy_row_tiles = 0;
  for (int32_t i = 0; i < batch_size; ++i) {
    const int32_t t = tiles_of(i);
    if (t > max_tiles) max_tiles = t;
    work += int64_t{t} * row_tiles_of(i);
    if (t > 0) busy_row_tiles += row_tiles_of(i);
  }
  return plan_chunk(work, max_tiles, busy_row_tiles, blocks, [&](int32_t c) {
    int64_t big = 0;
    for (int32_t i = 0; i < batch_size; ++i)
      big += plan_big_blocks(tiles_of(i), row_tiles_of(i), c, cap);
    return big;
  });
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
