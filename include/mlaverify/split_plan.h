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

// Partials per (token, head): splits 0..num_splits-1 over the prefix, then one more (index
// num_splits) for the tree-masked draft block. Each partial is (o[512] fp32 normalized, lse fp32).
MLAV_HD int32_t num_partials(int32_t num_splits) { return num_splits + 1; }

// Numerics contract, shared by cpu/ and cuda/ (SPEC §5):
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
