// A scenario: the complete, replayable description of one verify case plus the property it checks
// and the backend (or mutant) it ran on. Plain data; the JSON form lives in scenario_json.cpp only.
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "mlaverify/types.h"

namespace mlaverify::scenarios {

// One request of the batch: its draft tree as a parent array (parent[0] = -1, 0 <= parent[t] < t)
// and its committed prefix length P_i.
struct RequestDesc {
  std::vector<int32_t> parents;  // [D_i]
  int64_t prefix_len = 0;
  bool operator==(const RequestDesc&) const = default;
};

// How prefix slots are laid out in the pool (docs/spec.md §4): a seeded permutation of the free
// slots, an ascending run, or the layout tier-1 compaction leaves (each request one ascending run,
// requests in the order the scattered allocation placed them).
enum class SlotOrder : int32_t { Scattered = 0, Contiguous = 1, Defragmented = 2 };

// Everything needed to rebuild the exact same batch: the builder is deterministic in `seed`.
struct CaseSpec {
  std::vector<RequestDesc> requests;  // [bs] real requests (graph padding comes on top)
  int32_t num_heads = 8;
  double sm_scale = 0.1352338;  // deepseek-v3's (docs/spec.md §1)
  DType kv_dtype = DType::BF16;
  LayoutKind layout = LayoutKind::LatentFirst;
  int64_t row_stride = kRowDim;  // elements per pool row (>= 576: padded strides)
  DraftKvSource draft_source = DraftKvSource::ExtendRows;
  MaskFormat mask_format = MaskFormat::FullMask;
  IndptrConvention mask_indptr_convention = IndptrConvention::Csr;
  int32_t mask_word_bytes = 4;  // QlenOnlyBitpacking only
  int32_t page_size = 1;
  SlotOrder slot_order = SlotOrder::Scattered;
  int32_t graph_padded_bs = 0;  // 0: no CUDA-graph padding; else the captured size >= bs
  bool poison_unused_slots = true;
  double value_scale = 1.0;  // q and kv ~ N(0, value_scale^2) before rounding to bf16
  int32_t num_splits = 1;
  // The split plan (VerifyParams::plan_blocks): 0, the uniform plan (every request num_splits
  // splits); > 0, the balanced plan for that many resident blocks, in which num_splits is only
  // the cap of each request's own count (split_plan.h). Optional in the JSON form (absent: 0),
  // and written only when nonzero, so files of the uniform plan read and write as before.
  int32_t plan_blocks = 0;
  uint64_t seed = 0;
  // How the same values are presented to the backend (model::BatchSpec has the meanings). Each
  // is optional in the JSON form (a file written before they existed reads with these defaults).
  DType q_dtype = DType::BF16;
  bool q_rope_first = false;
  int64_t q_head_stride = kRowDim;
  DType o_dtype = DType::BF16;
  int64_t o_head_stride = kLatentDim;
  int64_t k_extend_stride = kRowDim;
  KvIndexing kv_indexing = KvIndexing::TokenI64;
  int32_t tail_rows = 0;

  int32_t batch_size() const { return static_cast<int32_t>(requests.size()); }
  int32_t max_draft() const;     // max D_i
  int64_t total_draft() const;   // T = sum D_i
  int64_t total_prefix() const;  // sum P_i
  bool operator==(const CaseSpec&) const = default;
};

// A case plus why it was saved: the property that failed and the backend it failed on.
struct Scenario {
  CaseSpec spec;
  std::string property;  // e.g. "vs_model", "split_invariance"
  std::string backend;   // e.g. "cpu", "mutant:v_stride_512"
  std::string note;      // free text: what was seen (worst index, errors), how it was found
  bool operator==(const Scenario&) const = default;
};

// Limits the loader enforces, so a hostile or corrupted file cannot ask for unbounded memory.
inline constexpr int32_t kMaxScenarioRequests = 1024;
inline constexpr int32_t kMaxScenarioDraft = 1024;
inline constexpr int64_t kMaxScenarioPrefix = int64_t{1} << 20;
inline constexpr int64_t kMaxScenarioTokens = int64_t{1} << 22;  // sum (P_i + D_i) over the batch
inline constexpr int64_t kMaxRowStride = 4096;
inline constexpr int32_t kMaxPageSize = 4096;

// Checks every field; throws InvalidInput naming the JSON path of the field at fault
// ("case.requests[2].parents", index = the node) so an error points into the file.
void validate_case(const CaseSpec& spec);

// JSON text <-> Scenario. parse_scenario rejects malformed JSON, wrong types, unknown fields and
// out-of-range values with InvalidInput (field = JSON path, index = element or -1; a syntax error
// names field "json" and the byte offset).
Scenario parse_scenario(std::string_view json_text);
std::string to_json(const Scenario& scenario);

// File helpers. load_scenario names the path in the error detail; save writes atomically enough
// for tests (write then rename).
Scenario load_scenario(const std::filesystem::path& path);
void save_scenario(const std::filesystem::path& path, const Scenario& scenario);

// Every *.json under `dir`, sorted by name (deterministic replay order).
std::vector<std::filesystem::path> list_scenarios(const std::filesystem::path& dir);

// Stable names used in the JSON form (and in diagnostics).
std::string_view to_string(SlotOrder v);
std::string_view to_string(DType v);
std::string_view to_string(LayoutKind v);
std::string_view to_string(DraftKvSource v);
std::string_view to_string(MaskFormat v);
std::string_view to_string(IndptrConvention v);
std::string_view to_string(KvIndexing v);

// A one-line summary for logs and rapidcheck's showValue: "bs=2 H=8 D=[3,1] P=[65,0] ...".
std::string summary(const CaseSpec& spec);

// rapidcheck prints counterexamples through an ADL-found showValue: a case reads as its summary.
void showValue(const CaseSpec& spec, std::ostream& os);

}  // namespace mlaverify::scenarios
