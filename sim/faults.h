// Planted faults of the serving lifecycle (sim/simulation.h PlantedFault): each one a realistic
// allocator bug (docs/spec.md §7 classes 11 and 12), applied right after a correct accept.
#pragma once

#include <cstdint>
#include <span>

#include "model/serving.h"
#include "sim/simulation.h"

namespace mlaverify::sim {

// Applies `fault` to request `req` that has just accepted `path` (its draft slots were
// `draft` and its prefix `prefix_before` tokens). Returns false when the fault cannot act on
// this acceptance (e.g. no rejected node, no partial last page); nothing is changed then.
// StaleSlotAfterAccept on a paged state is the simulation's own (it needs the rows before
// accept) and returns false here.
bool plant(PlantedFault fault, model::ServingState& state, int64_t req, int64_t prefix_before,
           std::span<const int64_t> draft, std::span<const int32_t> path);

}  // namespace mlaverify::sim
