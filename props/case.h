// A property-suite case (the scenario's CaseSpec), how it becomes a VerifyBatch, how a backend's
// outputs are captured, and the physical rewrites properties apply (slot permutation, compaction).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mlaverify/backend.h"
#include "model/attention.h"
#include "model/batch.h"
#include "scenarios/scenario.h"

namespace mlaverify::props {

// The case description is the scenario's: a failing case is written out as-is.
using Case = scenarios::CaseSpec;

// The model-side spec of the same case (SlotOrder::Defragmented builds scattered first; see
// build_batch).
model::BatchSpec to_batch_spec(const Case& c);

// Builds the batch; SlotOrder::Defragmented = scattered allocation followed by compact_slots, the
// layout tier-1 compaction (docs/spec.md §4) leaves behind.
model::VerifyBatch build_batch(const Case& c);

// One run's outputs, widened to float (exact for bf16): o [T, H, 512] and lse [T, H], padded rows
// included. NaN where the backend wrote nothing (outputs are NaN-poisoned before each run), so all
// of lse for a backend that declares no writes_lse: the comparisons take its Capabilities for that.
struct RunOutput {
  int64_t tokens = 0;  // T, padded rows included
  int32_t heads = 0;
  std::vector<float> o;    // [T, H, 512]
  std::vector<float> lse;  // [T, H]
  // Output elements written that no backend may write (head-stride gaps, rows past T).
  int64_t stray_writes = 0;
  std::string first_stray;
  float o_at(int64_t t, int32_t h, int32_t k) const {
    return o[(static_cast<size_t>(t) * heads + h) * kLatentDim + k];
  }
  float lse_at(int64_t t, int32_t h) const { return lse[static_cast<size_t>(t) * heads + h]; }
};

// What building and replaying a case costs, before anything is allocated: the bytes its
// buffers hold (pool, req_to_token, q, k_extend, mask, outputs, the model's double results) and
// the FLOPs of one model pass plus one backend pass. A bound, not a measurement: the pool is
// counted with its spare pages (model/batch.cpp: max(4, used / 8)).
struct CaseCost {
  int64_t batch_bytes = 0;  // the VerifyBatch's buffers (pool with spare pages, metadata, outputs)
  int64_t model_bytes = 0;  // the model's double results and per-request matrices
  int64_t bytes = 0;        // both
  double flops = 0;
};
CaseCost estimate_cost(const Case& c);

// Poisons the outputs, runs `backend` on batch.params(), and copies the outputs out.
RunOutput run_backend(Backend& backend, model::VerifyBatch& batch);
// The same for a launch built elsewhere (props/serving_case.cpp): `p` was presented by `outputs`
// (model::Presenter::present), whose buffers are poisoned, run into and read back, stray writes
// counted.
RunOutput run_presented(Backend& backend, const VerifyParams& p, model::Presenter& outputs);

// Moves every pool row of slot s to slot perm[s] (bit-exact, every layer of the one pool) and
// rewrites req_to_token and kv_indices to match. perm is a permutation of [0, pool_slots) with
// perm[0] == 0 (slot 0 is the padding sink). The logical batch is unchanged.
void apply_slot_permutation(model::VerifyBatch& batch, const std::vector<int64_t>& perm);

// A seeded random permutation of [1, pool_slots) (slot 0 fixed), for apply_slot_permutation.
std::vector<int64_t> random_slot_permutation(int64_t pool_slots, uint64_t seed);
// The same for a batch: whole pages when its kv indexing is a page table (a page table can only
// name page-aligned slots), single slots otherwise.
std::vector<int64_t> random_slot_permutation(const model::VerifyBatch& batch, uint64_t seed);

// The permutation tier-1 compaction performs: each real request's slots (prefix then draft, as
// req_to_token lists them) become one ascending run, requests packed from slot 1 in request order,
// every other slot after them in ascending order. Under a page table, whole pages move the same
// way, packed from page 1.
std::vector<int64_t> compaction_permutation(const model::VerifyBatch& batch);
void compact_slots(model::VerifyBatch& batch);

// Token ranges of one request in the batch (real or padded).
struct RequestView {
  int64_t q_begin;      // first token
  int32_t draft_nodes;  // D_i
  int64_t prefix_len;   // P_i
};
RequestView request_view(const model::VerifyBatch& batch, int32_t i);

// The stored values a kernel reads, widened to double: the model's own readers (model/attention.h).
using model::read_key;
using model::read_query;

}  // namespace mlaverify::props
