// rapidcheck generators for verify cases, weighted toward the edges where kernels break (P = 0, 1,
// tile +- 1; D = 1, non-powers of two; bs == D; padding; paging) with the work per case capped.
#pragma once

#include <rapidcheck.h>

#include <cstdint>
#include <ostream>
#include <vector>

#include "mlaverify/backend.h"
#include "props/case.h"

namespace mlaverify::props {

// Bounds on what a generated case may cost. Work = sum over rows (padded ones too) of
// D_i * (P_i + D_i) * H, the (query, key, head) triples every backend and the model evaluate.
struct GenOptions {
  // 2^18 triples is ~0.6 GFLOP for the model in double: a fraction of a second on one core, so a
  // campaign of ~100 cases x 9 properties fits the CI budget. Big P, big D and big bs still occur,
  // one at a time (the budget is shared: a 64K prefix comes with small D and H).
  int64_t max_work = int64_t{1} << 18;
  int32_t max_batch = 64;
  int32_t max_heads = 128;
  int32_t max_draft = 1024;
  int64_t max_prefix = 65536;
  // One case in `large_every` is a SPEC §8-sized one (D 128..1024 with P 1024..8192, few heads)
  // under `large_work` instead; 0 turns them off. 2^21 triples is a few seconds per property.
  int32_t large_every = 32;
  int64_t large_work = int64_t{1} << 21;
  // What the backend takes: every field is drawn from these sets only (run_campaign fills it
  // from Backend::capabilities()), so no case is generated only to be skipped.
  Capabilities caps;
};

// Tree shapes seen in practice (docs/spec.md §2).
enum class TreeShape : int32_t { Chain = 0, Star, Eagle, DDTree, RandomRecursive };
// rapidcheck's printer (ADL): "eagle" rather than <???>.
void showValue(TreeShape shape, std::ostream& os);

// A parent array of the given shape from raw random words (one per node after the root): the
// shape fixes the structure rule, the words fill it in. Any raw vector gives a valid tree of
// raws.size() + 1 nodes, so shrinking the vector shrinks the tree and keeps it valid.
std::vector<int32_t> make_tree(TreeShape shape, const std::vector<uint32_t>& raws);

rc::Gen<TreeShape> gen_tree_shape();
// Trees of 1..max_nodes nodes (parents), every shape, sizes weighted to 1, 2-8, 31-33, 63-65.
rc::Gen<std::vector<int32_t>> gen_tree(int32_t max_nodes);
// Prefix lengths 0..max_prefix weighted to 0, 1, kKvTile +- 1 and multiples, small and rare big.
rc::Gen<int64_t> gen_prefix_len(int64_t max_prefix);
// VerifyParams::plan_blocks: 0 (the uniform split plan) in about half the draws, else a small
// count of resident blocks for the balanced plan (1..48, mostly 1..8); always 0 when the
// declaration excludes the balanced plan. Shrinks towards 0.
rc::Gen<int32_t> gen_plan_blocks(const Capabilities& caps = {});
// Whole cases.
rc::Gen<Case> gen_case(const GenOptions& options = {});

// Makes a case consistent and within budget (bitpacking only when D fits the word, padding only
// when affordable, prefixes cut to the work budget) and inside options.caps (a field the backend
// does not take moves to the nearest value it does). Idempotent; gen_case applies it last.
Case normalize_case(Case c, const GenOptions& options = {});

// The work measure above, for a case (padded rows included).
int64_t case_work(const Case& c);

// Smaller variants of a failing case tried before rapidcheck's own shrinks: drop a request, halve
// a prefix, drop tree leaves, plain layout and mask, one split, the uniform split plan (or the
// balanced one over a single block), no padding. Each stays inside `caps` (the backend's
// declaration).
std::vector<Case> simpler_cases(const Case& c, const Capabilities& caps = {});

// The case presented plainly (CaseSpec's presentation fields at their defaults: bf16 q, latent
// first and dense; bf16 o, dense; dense k_extend rows; int64 token indices; no rows past T), or
// only group `group` of them (0 q, 1 o, 2 k_extend, 3 kv indexing, 4 tail rows) when >= 0.
inline constexpr int kPresentationGroups = 5;
Case plain_presentation(Case c, int group = -1);

}  // namespace mlaverify::props
