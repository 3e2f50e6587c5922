// The request lifecycle of a speculative-decoding server over one req_to_token map, one allocator
// and N KV-pool layers: admit, begin_verify, accept, finish (SGLang conventions, docs/spec.md §4).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <variant>
#include <vector>

#include "mlaverify/types.h"
#include "model/allocator.h"
#include "model/kv_pool.h"
#include "model/req_to_token.h"

namespace mlaverify::model {

enum class AllocatorKind : int32_t {
  Token = 0,  // TokenAllocator; page_size must be 1
  Paged = 1,  // PagedAllocator with page_size >= 1
};

struct ServingConfig {
  int64_t pool_size = 0;  // allocatable slots; each layer's pool has pool_size + page_size
  int64_t page_size = 1;
  AllocatorKind allocator = AllocatorKind::Token;
  int32_t num_layers = 1;
  int64_t max_reqs = 0;         // req_to_token rows 1..max_reqs (row 0 is padding)
  int64_t max_context_len = 0;  // req_to_token columns: P + D of any request must fit
  DType dtype = DType::BF16;
  KvLayout layout = KvLayout::latent_first();  // for Split: KvPool::split_regions(pool + page)
};

// Produces the KV row of one token of one layer: `column` is the token's req_to_token column
// (position j < P for a prefix token, P + t for draft node t). Writes 576 floats, latent-first.
using RowGenerator = std::function<void(int32_t layer, int64_t req, int64_t column, float* row)>;

// A broken internal invariant (slot owned twice, leaked slot, ...): a bug in this code or in a
// caller that wrote through the mutable accessors, never bad input.
class InvariantViolation : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

struct ServingStateTestAccess;  // sim/faults.cpp: planted faults, for the simulation's tests

class ServingState {
 public:
  explicit ServingState(const ServingConfig& cfg);

  // A new request holding `prefix_len` committed tokens whose KV rows `gen` writes in every
  // layer. Returns its id (ids are never reused), or nullopt when no req_to_token row or not
  // enough slots are free (nothing taken). InvalidInput("prefix_len", -1) if negative or beyond
  // max_context_len; InvalidInput("row_generator", -1) if empty.
  std::optional<int64_t> admit(int64_t prefix_len, const RowGenerator& gen);

  // Allocates `draft_nodes` slots for the draft tree of `req`, writes them to
  // req_to_token[row, P : P + D] and their KV rows (columns P + t) through `gen`; returns the
  // slots [D], or nullopt when short (nothing taken). Errors: InvalidInput("request", req) when
  // not live or already verifying; InvalidInput("draft_nodes", req) when < 1 or P + D exceeds
  // max_context_len.
  std::optional<std::vector<int64_t>> begin_verify(int64_t req, int32_t draft_nodes,
                                                   const RowGenerator& gen);

  // Keeps the accepted path (node ids, root first: path[0] == 0, each an ancestor of the next)
  // as tokens P .. P + a - 1, frees the other draft slots and advances P += a. `parents` [D], when
  // given, is checked against the path (each node the parent of the next). Token allocator
  // (SGLang, page_size == 1): the accepted slots stay where they are and req_to_token is
  // rewritten to name them. Paged allocator (SGLang, page_size > 1, topk > 1): the accepted rows
  // are copied to the first a draft slots, so positions stay page-aligned; the rest of that page
  // goes back to reserved and whole pages beyond it are freed.
  // Errors: InvalidInput("request", req) when not verifying; ("path", k) for an empty path, a
  // path not starting at the root, out of range or not increasing; ("parents", ...) when parents
  // has the wrong length or path[k - 1] is not parents[path[k]].
  void accept(int64_t req, std::span<const int32_t> path, std::span<const int32_t> parents = {});

  // Frees every slot of `req` (prefix and any draft) and its req_to_token row (zeroed: SGLang
  // leaves the stale ids; zeros make a stale read land on the sink, which is never owned).
  // InvalidInput("request", req) when not live.
  void finish(int64_t req);

  // Accessors. Each takes a live request id, else InvalidInput("request", req).
  int64_t prefix_len(int64_t req) const;
  int32_t draft_nodes(int64_t req) const;                // D while verifying, else 0
  int64_t row(int64_t req) const;                        // req_to_token row, never 0
  std::vector<int64_t> prefix_slots(int64_t req) const;  // [P]
  std::vector<int64_t> draft_slots(int64_t req) const;   // [D]
  std::vector<int64_t> live_requests() const;            // ascending ids

  const ServingConfig& config() const { return cfg_; }
  const ReqToToken& req_to_token() const { return req_to_token_; }
  int32_t num_layers() const { return static_cast<int32_t>(layers_.size()); }
  const KvPool& layer(int32_t i) const;
  // Mutable pool access for tests that poison slots no request owns (contents only: ownership
  // cannot be changed through it).
  KvPool& layer(int32_t i);
  bool paged() const { return cfg_.allocator == AllocatorKind::Paged; }
  const TokenAllocator* token_allocator() const { return std::get_if<TokenAllocator>(&alloc_); }
  const PagedAllocator* paged_allocator() const { return std::get_if<PagedAllocator>(&alloc_); }
  void set_need_sort(bool need_sort);

  // Throws InvariantViolation on: a slot owned twice or by no allocator record, slot 0 (page 0)
  // owned, free + owned != all slots, a leaked page, paged positions off their page offsets,
  // req_to_token rows shared or non-zero outside live columns, allocator accounting off.
  void check_invariants() const;

 private:
  struct Request {
    int64_t row;
    int64_t prefix_len;
    int32_t draft_nodes;  // 0 when not verifying
  };
  const Request& live(int64_t req) const;
  Request& live(int64_t req);
  void write_rows(int64_t req, const Request& r, int64_t begin, int64_t end,
                  const RowGenerator& gen);
  void free_slots(std::span<const int64_t> slots);

  friend void compact(ServingState& state);  // defrag.h: relocates rows, rebuilds the allocator
  friend struct ServingStateTestAccess;

  ServingConfig cfg_;
  ReqToToken req_to_token_;     // [max_reqs + 1, max_context_len]
  std::vector<KvPool> layers_;  // [num_layers] pools
  std::variant<TokenAllocator, PagedAllocator> alloc_;
  std::vector<int64_t> free_rows_;       // req_to_token rows not in use, FIFO
  std::map<int64_t, Request> requests_;  // live requests by id
  int64_t next_id_ = 1;
};

}  // namespace mlaverify::model
