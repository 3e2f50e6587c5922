// Defragmentation tiers and fragmentation metrics over a ServingState. compact() is a friend of
// ServingState: it is the one operation allowed to move ownership of slots wholesale.
#include "model/defrag.h"

#include <cstddef>
#include <vector>

namespace mlaverify::model {

namespace {

// Maximal runs where the next id is the previous + 1.
template <typename Seq>
int64_t count_runs(const Seq& ids) {
  int64_t runs = 0;
  bool first = true;
  int64_t prev = 0;
  for (int64_t id : ids) {
    if (first || id != prev + 1) ++runs;
    first = false;
    prev = id;
  }
  return runs;
}

}  // namespace

void enable_sorted_allocation(ServingState& state) { state.set_need_sort(true); }

void compact(ServingState& state) {
  const int64_t ps = state.cfg_.page_size;
  // New slot of every live (request, column), in request id order (std::map is ordered).
  struct Move {
    int64_t row;
    int64_t column;
    int64_t old_slot;
    int64_t new_slot;
  };
  std::vector<Move> moves;
  int64_t next = ps;  // first allocatable slot: slot 1, or page 1's slot 0
  for (const auto& [id, r] : state.requests_) {
    const int64_t len = r.prefix_len + r.draft_nodes;
    for (int64_t c = 0; c < len; ++c) {
      moves.push_back({r.row, c, state.req_to_token_.at(r.row, c), next + c});
    }
    // Paged: whole pages per request so positions keep their page offsets (next stays aligned).
    next += (len + ps - 1) / ps * ps;
  }
  // Snapshot then write: the old and new slot sets overlap arbitrarily, and the pool may be full,
  // so there is no spare slot to rotate permutation cycles through.
  for (KvPool& pool : state.layers_) {
    std::vector<std::vector<std::byte>> rows;  // [live tokens][576 * dtype_bytes]
    rows.reserve(moves.size());
    for (const Move& m : moves) rows.push_back(pool.raw_row(m.old_slot));
    for (size_t i = 0; i < moves.size(); ++i) pool.write_raw_row(moves[i].new_slot, rows[i]);
  }
  std::vector<int64_t> in_use;  // [live tokens]
  in_use.reserve(moves.size());
  for (const Move& m : moves) {
    state.req_to_token_.set(m.row, m.column, static_cast<int32_t>(m.new_slot));
    in_use.push_back(m.new_slot);
  }
  std::visit([&](auto& a) { a.rebuild(in_use); }, state.alloc_);
}

FragmentationMetrics measure(const ServingState& state) {
  FragmentationMetrics m;
  int64_t requests = 0, runs = 0, tokens = 0;
  const ReqToToken& r2t = state.req_to_token();
  for (int64_t id : state.live_requests()) {
    const int64_t len = state.prefix_len(id) + state.draft_nodes(id);
    if (len == 0) continue;
    std::span<const int32_t> row = r2t.row(state.row(id)).first(static_cast<size_t>(len));
    ++requests;
    runs += count_runs(row);
    tokens += len;
  }
  if (requests > 0) {
    m.runs_per_request = static_cast<double>(runs) / static_cast<double>(requests);
    m.mean_run_length = static_cast<double>(tokens) / static_cast<double>(runs);
  }
  if (const TokenAllocator* t = state.token_allocator()) {
    m.free_list_runs = count_runs(t->free_slots()) + count_runs(t->release_slots());
  } else {
    const PagedAllocator& pa = *state.paged_allocator();
    m.free_list_runs = count_runs(pa.free_pages()) + count_runs(pa.release_pages());
    const int64_t ps = pa.page_size();
    for (int64_t p = 1; p <= pa.num_pages(); ++p) {
      for (int64_t o = 0; o < ps; ++o) {
        if (pa.slot_state(p * ps + o) == PagedAllocator::SlotState::Reserved) {
          ++m.partial_pages;
          break;
        }
      }
    }
  }
  return m;
}

}  // namespace mlaverify::model
