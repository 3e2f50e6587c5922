// Scenario validation, names of enum values and the one-line summary; no JSON here (that is
// scenario_json.cpp, kept alone because nlohmann_json is slow to compile on 2 cores).
#include "scenarios/scenario.h"

#include <algorithm>
#include <cmath>
#include <ostream>
#include <sstream>

#include "mlaverify/error.h"
#include "mlaverify/split_plan.h"

namespace mlaverify::scenarios {

int32_t CaseSpec::max_draft() const {
  int32_t m = 0;
  for (const auto& r : requests) m = std::max(m, static_cast<int32_t>(r.parents.size()));
  return m;
}

int64_t CaseSpec::total_draft() const {
  int64_t t = 0;
  for (const auto& r : requests) t += static_cast<int64_t>(r.parents.size());
  return t;
}

int64_t CaseSpec::total_prefix() const {
  int64_t t = 0;
  for (const auto& r : requests) t += r.prefix_len;
  return t;
}

namespace {

std::string req_field(size_t i, const char* leaf) {
  return "case.requests[" + std::to_string(i) + "]." + leaf;
}

}  // namespace

void validate_case(const CaseSpec& s) {
  if (s.requests.empty() || s.requests.size() > static_cast<size_t>(kMaxScenarioRequests)) {
    throw InvalidInput("case.requests", -1,
                       "need 1.." + std::to_string(kMaxScenarioRequests) + " requests, got " +
                           std::to_string(s.requests.size()));
  }
  int64_t tokens = 0;
  for (size_t i = 0; i < s.requests.size(); ++i) {
    const auto& r = s.requests[i];
    const auto& par = r.parents;
    if (par.empty() || par.size() > static_cast<size_t>(kMaxScenarioDraft)) {
      throw InvalidInput(req_field(i, "parents"), -1,
                         "need 1.." + std::to_string(kMaxScenarioDraft) + " nodes, got " +
                             std::to_string(par.size()));
    }
    if (par[0] != -1) {
      throw InvalidInput(req_field(i, "parents"), 0,
                         "the root's parent must be -1, got " + std::to_string(par[0]));
    }
    for (size_t t = 1; t < par.size(); ++t) {
      if (par[t] < 0 || par[t] >= static_cast<int32_t>(t)) {
        throw InvalidInput(req_field(i, "parents"), static_cast<int64_t>(t),
                           "parent " + std::to_string(par[t]) + " outside [0, " +
                               std::to_string(t) + "): parents come before children");
      }
    }
    if (r.prefix_len < 0 || r.prefix_len > kMaxScenarioPrefix) {
      throw InvalidInput(req_field(i, "prefix_len"), -1,
                         "need 0.." + std::to_string(kMaxScenarioPrefix) + ", got " +
                             std::to_string(r.prefix_len));
    }
    tokens += r.prefix_len + static_cast<int64_t>(par.size());
  }
  if (tokens > kMaxScenarioTokens) {
    throw InvalidInput("case.requests", -1,
                       "sum of prefix and draft tokens " + std::to_string(tokens) + " exceeds " +
                           std::to_string(kMaxScenarioTokens));
  }
  if (s.num_heads < 1 || s.num_heads > 128) {
    throw InvalidInput("case.num_heads", -1, "need 1..128, got " + std::to_string(s.num_heads));
  }
  if (!std::isfinite(s.sm_scale) || s.sm_scale <= 0.0) {
    throw InvalidInput("case.sm_scale", -1, "need a finite value > 0");
  }
  if (s.kv_dtype != DType::BF16 && s.kv_dtype != DType::F32) {
    throw InvalidInput("case.kv_dtype", -1, "unknown dtype");
  }
  if (s.layout != LayoutKind::LatentFirst && s.layout != LayoutKind::RopeFirst &&
      s.layout != LayoutKind::Split) {
    throw InvalidInput("case.layout", -1, "unknown layout");
  }
  if (s.row_stride < kRowDim || s.row_stride > kMaxRowStride) {
    throw InvalidInput(
        "case.row_stride", -1,
        "need 576.." + std::to_string(kMaxRowStride) + ", got " + std::to_string(s.row_stride));
  }
  if (s.draft_source != DraftKvSource::ExtendRows && s.draft_source != DraftKvSource::CacheSlots) {
    throw InvalidInput("case.draft_source", -1, "unknown draft source");
  }
  if (s.mask_indptr_convention != IndptrConvention::Csr &&
      s.mask_indptr_convention != IndptrConvention::OffsetsOnly) {
    throw InvalidInput("case.mask_indptr_convention", -1, "unknown convention");
  }
  if (s.mask_word_bytes != 1 && s.mask_word_bytes != 2 && s.mask_word_bytes != 4) {
    throw InvalidInput("case.mask_word_bytes", -1,
                       "need 1, 2 or 4, got " + std::to_string(s.mask_word_bytes));
  }
  switch (s.mask_format) {
    case MaskFormat::FullMask:
    case MaskFormat::QlenOnly:
    case MaskFormat::FlashInferPacked:
    case MaskFormat::DraftBits:
      break;
    case MaskFormat::QlenOnlyBitpacking:
      // One word per row holds the whole draft block, so D must fit in the word (docs/spec.md §3).
      if (s.max_draft() > 8 * s.mask_word_bytes) {
        throw InvalidInput("case.mask_format", -1,
                           "qlen_only_bitpacking with " + std::to_string(s.mask_word_bytes) +
                               "-byte words holds D <= " + std::to_string(8 * s.mask_word_bytes) +
                               ", but max D is " + std::to_string(s.max_draft()));
      }
      break;
    default:
      throw InvalidInput("case.mask_format", -1, "unknown mask format");
  }
  if (s.page_size < 1 || s.page_size > kMaxPageSize) {
    throw InvalidInput(
        "case.page_size", -1,
        "need 1.." + std::to_string(kMaxPageSize) + ", got " + std::to_string(s.page_size));
  }
  if (s.slot_order != SlotOrder::Scattered && s.slot_order != SlotOrder::Contiguous &&
      s.slot_order != SlotOrder::Defragmented) {
    throw InvalidInput("case.slot_order", -1, "unknown slot order");
  }
  if (s.graph_padded_bs != 0 &&
      (s.graph_padded_bs < s.batch_size() || s.graph_padded_bs > kMaxScenarioRequests)) {
    throw InvalidInput("case.graph_padded_bs", -1,
                       "need 0 (no padding) or bs.." + std::to_string(kMaxScenarioRequests) +
                           " (bs = " + std::to_string(s.batch_size()) + "), got " +
                           std::to_string(s.graph_padded_bs));
  }
  auto dtype_ok = [](DType d) { return d == DType::BF16 || d == DType::F32; };
  if (!dtype_ok(s.q_dtype)) throw InvalidInput("case.q_dtype", -1, "unknown dtype");
  if (!dtype_ok(s.o_dtype)) throw InvalidInput("case.o_dtype", -1, "unknown dtype");
  auto stride_ok = [](const char* field, int64_t v, int64_t lo) {
    if (v < lo || v > kMaxRowStride) {
      throw InvalidInput(field, -1,
                         "need " + std::to_string(lo) + ".." + std::to_string(kMaxRowStride) +
                             ", got " + std::to_string(v));
    }
  };
  stride_ok("case.q_head_stride", s.q_head_stride, kRowDim);
  stride_ok("case.o_head_stride", s.o_head_stride, kLatentDim);
  stride_ok("case.k_extend_stride", s.k_extend_stride, kRowDim);
  if (s.kv_indexing != KvIndexing::TokenI64 && s.kv_indexing != KvIndexing::TokenI32 &&
      s.kv_indexing != KvIndexing::PageTable) {
    throw InvalidInput("case.kv_indexing", -1, "unknown kv indexing");
  }
  if (s.tail_rows < 0 || s.tail_rows > 64) {
    throw InvalidInput("case.tail_rows", -1,
                       "need 0..64, got " + std::to_string(s.tail_rows));
  }
  // Bounded values: |x| up to ~1e4 keeps scores finite in fp32 (a 576-term dot of 1e4-sized
  // operands is ~6e10, far below FLT_MAX), while still reaching large-magnitude scores.
  if (!std::isfinite(s.value_scale) || s.value_scale <= 0.0 || s.value_scale > 1e4) {
    throw InvalidInput("case.value_scale", -1, "need a finite value in (0, 1e4]");
  }
  if (s.num_splits < 1 || s.num_splits > kMaxSplits) {
    throw InvalidInput(
        "case.num_splits", -1,
        "need 1.." + std::to_string(kMaxSplits) + ", got " + std::to_string(s.num_splits));
  }
  if (s.plan_blocks < 0 || s.plan_blocks > kMaxPlanBlocks) {
    throw InvalidInput("case.plan_blocks", -1,
                       "need 0.." + std::to_string(kMaxPlanBlocks) + " (0: the uniform plan), got " +
                           std::to_string(s.plan_blocks));
  }
}

std::string_view to_string(SlotOrder v) {
  switch (v) {
    case SlotOrder::Scattered:
      return "scattered";
    case SlotOrder::Contiguous:
      return "contiguous";
    case SlotOrder::Defragmented:
      return "defragmented";
  }
  return "?";
}

std::string_view to_string(DType v) {
  switch (v) {
    case DType::BF16:
      return "bf16";
    case DType::F32:
      return "f32";
  }
  return "?";
}

std::string_view to_string(LayoutKind v) {
  switch (v) {
    case LayoutKind::LatentFirst:
      return "latent_first";
    case LayoutKind::RopeFirst:
      return "rope_first";
    case LayoutKind::Split:
      return "split";
  }
  return "?";
}

std::string_view to_string(DraftKvSource v) {
  switch (v) {
    case DraftKvSource::ExtendRows:
      return "extend_rows";
    case DraftKvSource::CacheSlots:
      return "cache_slots";
  }
  return "?";
}

std::string_view to_string(MaskFormat v) {
  switch (v) {
    case MaskFormat::FullMask:
      return "full_mask";
    case MaskFormat::QlenOnly:
      return "qlen_only";
    case MaskFormat::QlenOnlyBitpacking:
      return "qlen_only_bitpacking";
    case MaskFormat::FlashInferPacked:
      return "flashinfer_packed";
    case MaskFormat::DraftBits:
      return "draft_bits";
  }
  return "?";
}

std::string_view to_string(IndptrConvention v) {
  switch (v) {
    case IndptrConvention::Csr:
      return "csr";
    case IndptrConvention::OffsetsOnly:
      return "offsets_only";
  }
  return "?";
}

std::string_view to_string(KvIndexing v) {
  switch (v) {
    case KvIndexing::TokenI64:
      return "token_i64";
    case KvIndexing::TokenI32:
      return "token_i32";
    case KvIndexing::PageTable:
      return "page_table";
  }
  return "?";
}

std::string summary(const CaseSpec& s) {
  std::ostringstream os;
  os << "bs=" << s.batch_size() << " H=" << s.num_heads << " D=[";
  for (size_t i = 0; i < s.requests.size(); ++i) {
    os << (i ? "," : "") << s.requests[i].parents.size();
  }
  os << "] P=[";
  for (size_t i = 0; i < s.requests.size(); ++i) os << (i ? "," : "") << s.requests[i].prefix_len;
  os << "] " << to_string(s.kv_dtype) << " " << to_string(s.layout) << "/" << s.row_stride << " "
     << to_string(s.draft_source) << " " << to_string(s.mask_format) << "("
     << to_string(s.mask_indptr_convention);
  if (s.mask_format == MaskFormat::QlenOnlyBitpacking) os << ",w" << s.mask_word_bytes;
  os << ") page=" << s.page_size << " " << to_string(s.slot_order)
     << " pad_bs=" << s.graph_padded_bs << (s.poison_unused_slots ? " nan-poison" : "")
     << " scale=" << s.value_scale << " splits=" << s.num_splits << " sm_scale=" << s.sm_scale
     << " seed=" << s.seed;
  if (s.plan_blocks != 0) os << " plan_blocks=" << s.plan_blocks;
  // The presentation, only where it differs from the default.
  if (s.q_dtype != DType::BF16 || s.q_rope_first || s.q_head_stride != kRowDim) {
    os << " q=" << to_string(s.q_dtype) << (s.q_rope_first ? "/rope_first" : "") << "/"
       << s.q_head_stride;
  }
  if (s.o_dtype != DType::BF16 || s.o_head_stride != kLatentDim) {
    os << " o=" << to_string(s.o_dtype) << "/" << s.o_head_stride;
  }
  if (s.k_extend_stride != kRowDim) os << " k_extend/" << s.k_extend_stride;
  if (s.kv_indexing != KvIndexing::TokenI64) os << " " << to_string(s.kv_indexing);
  if (s.tail_rows != 0) os << " tail=" << s.tail_rows;
  // Small trees are printed whole: a counterexample should read as a scenario, not as sizes.
  if (s.total_draft() <= 48) {
    os << " trees=";
    for (size_t i = 0; i < s.requests.size(); ++i) {
      os << (i ? ";" : "") << "[";
      for (size_t t = 0; t < s.requests[i].parents.size(); ++t) {
        os << (t ? "," : "") << s.requests[i].parents[t];
      }
      os << "]";
    }
  }
  return os.str();
}

void showValue(const CaseSpec& spec, std::ostream& os) { os << summary(spec); }

}  // namespace mlaverify::scenarios
