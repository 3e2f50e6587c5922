// The properties, each a function of a Backend and a Case: true of every correct verify kernel,
// false (with a pointed diagnostic) for each docs/spec.md §7 bug class. Backends only via Backend.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mlaverify/backend.h"
#include "props/case.h"
#include "props/compare.h"

namespace mlaverify::props {

struct PropertyResult {
  bool ok = true;
  bool skipped = false;  // the backend cannot implement this case (Support::no); not a failure
  std::string property;
  std::string detail;  // what went wrong, where; or why skipped
  std::optional<Comparison> comparison;
  bool backend_lost = false;  // the backend threw BackendLost: this and every later run fails

  static PropertyResult pass(std::string property) {
    return {true, false, std::move(property), "", {}};
  }
};

// Backend vs model::reference_verify, per request, within derive_tolerance's bounds; any NaN, any
// exception (InvalidInput on a valid case is a failure too) fails.
PropertyResult check_vs_model(Backend& backend, const Case& c);

// The same case with num_splits = 1 and with the case's own count (or 3 when it is 1): both within
// the derived bound of each other (compare_runs_within): split-count invariance. Under the
// balanced plan (plan_blocks > 0, kept in both runs) the count is each request's cap.
PropertyResult check_split_invariance(Backend& backend, const Case& c);

// Every tree replaced by a chain of the same size: the backend matches an independent causal
// attention (bottom-right rule, key j of P + D visible to query i iff j <= P + i) in double,
// written here with plain loops rather than through the tree mask.
PropertyResult check_chain_causal(Backend& backend, const Case& c);

// Draft KV from k_extend rows == from the cache slots: bit-identical outputs (the algorithm is the
// same; only where the draft keys are read from changes). A backend that takes one source only:
// ExtendRows, NaN written into the draft tokens' cache slots changes nothing; CacheSlots, every
// draft slot moved to a free slot (metadata rewritten) changes nothing.
PropertyResult check_draft_source(Backend& backend, const Case& c);

// A random permutation of physical pool slots (rows moved, req_to_token and kv_indices rewritten)
// leaves every output bit-identical.
PropertyResult check_slot_permutation(Backend& backend, const Case& c);

// Tier-1 compaction (each request one ascending run) leaves every output bit-identical, and so
// does running the same backend object again afterwards (stale cached metadata is caught).
PropertyResult check_defrag(Backend& backend, const Case& c);

// Batch independence: for each request in turn (padded rows included), every OTHER request's
// queries, KV rows and k_extend rows are overwritten with fresh values; the request's outputs must
// stay bit-identical. Catches over-reads, padding leaks and cross-request indexing.
PropertyResult check_batch_independence(Backend& backend, const Case& c);

// The same logical batch in another representation — layout, row stride, dtype, mask format,
// indptr convention, page size, slot order — gives bit-identical outputs (bf16 values are exact in
// fp32 storage, and every format encodes the same trees).
PropertyResult check_representation(Backend& backend, const Case& c);

// The case realized through model::ServingState: fillers admitted and finished between requests
// (holes), odd requests reach their prefix through an accepted verify round, then every request's
// draft is allocated; the launch is run, model::compact relocates every live row, and the launch
// (metadata rebuilt from the rewritten req_to_token) must give bit-identical outputs. Both
// launches are presented as the case says (model::Presenter, as build_batch's are), and a write
// into a head-stride gap or a row past T fails it.
PropertyResult check_serving_defrag(Backend& backend, const Case& c);

// docs/spec.md §3 metadata invariants of the built batch (the backend is not run): qo/kv/mask
// indptr CSR rules, kv_indices == req_to_token rows, slot 0 only in padded rows, real slots unique
// and inside the pool, padded rows P = 1 at request row 0, masks decode to the case's trees,
// positions.
PropertyResult check_metadata(Backend& backend, const Case& c);

// backend.h's output rule: a failure when the run wrote an output element no backend may write
// (a head-stride gap, a row past T), nullopt otherwise.
std::optional<PropertyResult> stray_write_failure(const RunOutput& out);

// Runs `body` and turns what escapes into a result: Unsupported is a skip, any other exception a
// failure naming it (a backend that rejects or crashes on a valid case is wrong).
PropertyResult guarded_property(std::string_view name, const std::function<PropertyResult()>& body);

// The catalog, by stable name, in a fixed order.
using PropertyFn = PropertyResult (*)(Backend&, const Case&);
struct PropertyInfo {
  std::string_view name;
  PropertyFn fn;
  std::string_view what;  // one line
};
const std::vector<PropertyInfo>& all_properties();
// By name; InvalidInput("property", -1, ...) listing the known names when unknown.
const PropertyInfo& property_by_name(std::string_view name);

}  // namespace mlaverify::props
