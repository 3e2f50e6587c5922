// Verify-batch metadata in SGLang's conventions (docs/spec.md §3): qo_indptr, kv_indptr, kv_indices
// and positions from req_to_token, and CUDA-graph padding with the stale garbage engines leave.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "mlaverify/types.h"
#include "model/mask.h"
#include "model/req_to_token.h"
#include "model/tree.h"

namespace mlaverify::model {

// The metadata of one verify launch (SGLang dtypes: int32 indptrs, int64 slot ids and positions).
struct VerifyMetadata {
  DraftKvSource draft_source = DraftKvSource::ExtendRows;
  std::vector<int32_t> qo_indptr;   // [bs + 1] CSR: D_i per request
  std::vector<int32_t> kv_indptr;   // [bs + 1] CSR: P_i (ExtendRows) or P_i + D_i (CacheSlots)
  std::vector<int64_t> kv_indices;  // [kv_indptr[bs]] token-level slot ids
  std::vector<int64_t> positions;   // [T] P_i + depth(t); empty when built from sizes only

  int32_t batch_size() const { return static_cast<int32_t>(qo_indptr.size()) - 1; }
  int64_t total_q() const { return qo_indptr.empty() ? 0 : qo_indptr.back(); }  // T
};

// Builds the metadata of bs requests from req_to_token [max_reqs + 1, max_context_len]:
//   qo_indptr[i+1] - qo_indptr[i] = D_i = draft_sizes[i];
//   kv_indices[kv_indptr[i] + j] = req_to_token[req_pool_indices[i], j] for j < kv_len_i, where
//   kv_len_i = P_i (ExtendRows: prefix only) or P_i + D_i (CacheSlots: the draft slots
//   req_to_token[r, P_i + t] follow the prefix).
// Rejects (InvalidInput): span lengths that differ from bs = req_pool_indices.size() or bs == 0
// ("prefix_lens" / "draft_sizes" / "req_pool_indices", -1); a row outside req_to_token
// ("req_pool_indices", i); P_i < 0 or kv_len_i past the row ("prefix_lens", i); D_i < 1
// ("draft_sizes", i); totals that overflow int32 ("qo_indptr" / "kv_indptr", i + 1); a negative
// slot id in a row that is read ("req_to_token", r * cols + j).
VerifyMetadata build_metadata(const ReqToToken& req_to_token,
                              std::span<const int32_t> req_pool_indices,  // [bs]
                              std::span<const int64_t> prefix_lens,       // [bs]
                              std::span<const int32_t> draft_sizes,       // [bs]
                              DraftKvSource draft_source);

// As above with D_i = trees[i].size(), and positions[qo_indptr[i] + t] = P_i + depth_i(t).
VerifyMetadata build_metadata(const ReqToToken& req_to_token,
                              std::span<const int32_t> req_pool_indices,  // [bs]
                              std::span<const int64_t> prefix_lens,       // [bs]
                              std::span<const DraftTree> trees,           // [bs]
                              DraftKvSource draft_source);

// CUDA-graph padding (docs/spec.md §3): the smallest captured batch size >= bs.
// InvalidInput("batch_size", -1) when none is large enough (the engine would run eagerly),
// ("captured_sizes", k) for an entry < 1, ("batch_size", -1) for bs < 1.
int32_t pad_batch_size(int32_t bs, std::span<const int32_t> captured_sizes);

// The request rows a CUDA-graph runner fills its static buffers with.
struct RequestRows {
  std::vector<int32_t> req_pool_indices;  // [bs]
  std::vector<int64_t> prefix_lens;       // [bs]
  std::vector<int32_t> draft_sizes;       // [bs]
};

// Appends padded_bs - bs padded rows as SGLang's graph runner fills them: request row 0 (reserved,
// so its slots are the sink slot 0), P = 1 (seq_lens fill value 1, so no kernel sees an empty
// prefix), and D = the batch's D. SGLang runs one D for every request; when the real rows differ
// we take their largest D, the size the graph was captured for. InvalidInput("padded_bs", -1) when
// padded_bs < bs, and the same span checks as build_metadata.
RequestRows pad_requests(std::span<const int32_t> req_pool_indices,  // [bs]
                         std::span<const int64_t> prefix_lens,       // [bs]
                         std::span<const int32_t> draft_sizes,       // [bs]
                         int32_t padded_bs);

// Byte range [begin, end) of mask.data that belongs to requests >= real_bs (tokens >= real_tokens
// for DraftBits, whose rows are per token): where padded rows' stale mask bytes live. Empty when
// there are no padded rows.
struct ByteRange {
  int64_t begin;
  int64_t end;
};
ByteRange padded_mask_bytes(const EncodedMask& mask, int32_t real_bs, int64_t real_tokens);

// Writes seeded garbage over padded rows' state, as a replayed graph finds whatever the previous
// step left there: every byte of padded_mask_bytes and positions[real_tokens..T) (any int64 bit
// pattern). Real rows' bytes and positions are not touched.
void scribble_padded_mask(EncodedMask& mask, int32_t real_bs, int64_t real_tokens, uint64_t seed);
void scribble_padded_positions(std::vector<int64_t>& positions, int64_t real_tokens, uint64_t seed);

// splitmix64: the fast, seedable generator the batch builder uses (one add, three xor-shift-mul
// rounds per 64 bits); good enough for test data and far faster than std::mt19937_64.
struct SplitMix64 {
  uint64_t state;
  explicit SplitMix64(uint64_t seed) : state(seed) {}
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) by multiply-high (bias <= n / 2^64, irrelevant for test data).
  uint64_t below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }
};

}  // namespace mlaverify::model
