// KV-cache defragmentation (docs/spec.md §4): tier 0 keeps allocation sorted, tier 1 compacts every
// live request into ascending contiguous slots; and the fragmentation metrics that show it.
#pragma once

#include <cstdint>

#include "model/serving.h"

namespace mlaverify::model {

// Tier 0: forces need_sort on the allocator, so freed slots (pages) wait on the release list and
// are merged in ascending order when the free list runs short; new requests then tend to get
// ascending, contiguous runs. Cheap, moves nothing.
void enable_sorted_allocation(ServingState& state);

// Tier 1: relocates every live token (prefix and open draft slots alike) so that each request,
// taken in ascending id order, occupies one ascending contiguous run of slots starting right after
// the previous request's (paged: consecutive pages from page 1, each token at its page offset).
// Copies the KV row of every layer byte for byte, rewrites req_to_token and rebuilds the allocator
// (free list sorted ascending, release list empty). Nothing is lost: the same (request, column)
// reads the same bytes before and after.
void compact(ServingState& state);

struct FragmentationMetrics {
  // Mean over live requests with at least one token of the number of maximal runs of consecutive
  // ascending slots along req_to_token[row, 0 : P + D]; 1.0 when every request is one run.
  double runs_per_request = 0;
  // Live tokens / runs over all live requests (0 when none).
  double mean_run_length = 0;
  // Maximal runs of consecutive ascending ids in the free list, in alloc order, plus those of the
  // release list (slot ids for the token allocator, page ids for the paged one).
  int64_t free_list_runs = 0;
  // Allocated pages with at least one reserved slot (always 0 for the token allocator).
  int64_t partial_pages = 0;
};

FragmentationMetrics measure(const ServingState& state);

}  // namespace mlaverify::model
