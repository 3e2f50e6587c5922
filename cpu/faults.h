// Faults the mutation catalog injects into the CPU backend (docs/spec.md §7), one realistic defect
// each, compiled only into mlaverify_cpu_faults (-DMLAV_CPU_FAULTS); mlaverify_cpu refuses them.
#pragma once

#include <cstdint>
#include <string_view>

namespace mlaverify::cpu {

enum class CpuFault : int32_t {
  None = 0,
  // §7.7: the merge adds partial outputs with weight 1 instead of exp(lse_s - M) (lse stays right).
  MergeWithoutRescale,
  // §7.7: an empty split writes o = 0, lse = 0 into its partial (instead of lse = -inf), so the
  // merge counts it as a partial of weight exp(0 - M).
  EmptySplitAsZeros,
  // §7.8: the last tile of every prefix split stops one key short (`< end - 1` for `< end`).
  SplitEndOffByOne,
  // §7.6: the tree mask keeps only the direct parent (and the diagonal), not every ancestor.
  ParentOnlyMask,
  // §7.6: the tree mask drops the diagonal: a draft node does not see itself.
  NoDiagonal,
  // §7.9: the last prefix split reads one key past kv_indptr[i+1] (into the next request's slots,
  // or into the draft slots on the CacheSlots path), whenever kv_indices has that entry.
  OverReadNextRequest,
  // §7.3: V is read at offset 64 within the latent-first row [c | k_pe] instead of offset 0.
  VFromWrongColumns,
  // §7.8: under the balanced plan (plan_blocks > 0) request i's n_i planned splits run, but each
  // cuts its range as split s of num_splits (the cap, the count the uniform plan's code reads)
  // instead of n_i, so the keys past the first n_i of num_splits uniform chunks are never read.
  // Wrong only where n_i is below the uniform plan's non-empty count; the uniform plan is exact.
  BalancedRangesFromCap,
};

inline constexpr CpuFault kAllCpuFaults[] = {
    CpuFault::MergeWithoutRescale, CpuFault::EmptySplitAsZeros, CpuFault::SplitEndOffByOne,
    CpuFault::ParentOnlyMask,      CpuFault::NoDiagonal,        CpuFault::OverReadNextRequest,
    CpuFault::VFromWrongColumns,   CpuFault::BalancedRangesFromCap,
};

inline std::string_view fault_name(CpuFault f) {
  switch (f) {
    case CpuFault::None:
      return "None";
    case CpuFault::MergeWithoutRescale:
      return "MergeWithoutRescale";
    case CpuFault::EmptySplitAsZeros:
      return "EmptySplitAsZeros";
    case CpuFault::SplitEndOffByOne:
      return "SplitEndOffByOne";
    case CpuFault::ParentOnlyMask:
      return "ParentOnlyMask";
    case CpuFault::NoDiagonal:
      return "NoDiagonal";
    case CpuFault::OverReadNextRequest:
      return "OverReadNextRequest";
    case CpuFault::VFromWrongColumns:
      return "VFromWrongColumns";
    case CpuFault::BalancedRangesFromCap:
      return "BalancedRangesFromCap";
  }
  return "unknown";
}

}  // namespace mlaverify::cpu
