// The mutation catalog's wrapper mutants: Backends that hand an inner backend what a buggy
// integration would (docs/spec.md §7). CPU-internal faults: cpu/faults.h (mlaverify_cpu_faults).
#pragma once

#include <string_view>
#include <vector>

#include "mlaverify/backend.h"

namespace mlaverify::props {

enum class Mutant : int32_t {
  MaskIndptrShifted,   // §7.1: mask_indptr[1:bs+1] (the ends) handed to an offsets-only reader
  RopeFirstRead,       // §7.2: a latent-first pool read rope-first
  LatentStride512,     // §7.3: the latent (and so V) view of a latent-first pool with stride 512
  SmScale576,          // §7.4: sm_scale = 576^-0.5
  NoMscale,            // §7.4: sm_scale = 192^-0.5, the mscale^2 of YaRN dropped
  MaskRowStrideD,      // §7.5: FULL_MASK rows read with stride D instead of P + D
  PaddedRowsReadReal,  // §7.10: CUDA-graph padded rows pointed at a real request's slots
  StaleSlots,          // §7.11: kv_indices cached from an earlier launch on the same pool
  PageIdsAsSlots,      // §7.12: page ids (slot / 16) handed where token slot ids are expected
  BigEndianBits,       // §7.13: packed masks read MSB-first within each word
  GlobalBitPacking,    // §7.13: FlashInfer packed mask read as one global bit stream
  Int32IndexWrap,      // §7.14: slot * stride wrapped in a narrow integer (scaled-down: 2^16)
  // Numerical faults a worst-case bound is too loose to see (issue 12; the probable bound of
  // props/compare.h catches them):
  DroppedKeyP256,   // §7.8: the last prefix key of every request with P >= 256 never read
  OScale1Percent,   // o_lat scaled by 1.01 before its final rounding
  OneWrongElement,  // o_lat[0, H-1, 511] scaled by 1.05 before its final rounding
};

struct MutantInfo {
  Mutant mutant;
  std::string_view name;
  int32_t bug_class;  // docs/spec.md §7 number; 0 for a numerical fault outside §7
  std::string_view what;
};

// Every wrapper mutant, in docs/spec.md §7 order.
const std::vector<MutantInfo>& all_mutants();
const MutantInfo& mutant_info(Mutant m);

// A Backend named "mutant:<name>(<inner name>)" that corrupts the params (copies: the caller's
// buffers are never written) and runs `inner` on them, or (the output faults) runs `inner` into
// its own fp32 buffer and writes a corrupted copy, rounded once to the caller's o_dtype.
// can_implement, workspace_bytes and capabilities defer to `inner` on the original params: the
// bug is in what is handed over, not in what is asked or declared.
BackendPtr make_mutant(Mutant m, BackendPtr inner);

// By the catalog name ("rope_first_read", ...), for the CLI; InvalidInput("mutant", -1, ...)
// listing the known names when unknown.
BackendPtr make_mutant(std::string_view name, BackendPtr inner);

// The modulus of the Int32IndexWrap emulation, in elements. A real int32 `slot * 576` wraps past
// 3.7M slots (a 4 GB bf16 pool per layer), too big for a test; the mutant wraps the same product
// at 2^16 elements instead (114 slots of 576), which gives the same bug shape — rows read from
// (slot * stride) mod 2^k, misaligned with the real rows — on pools of test size.
inline constexpr int64_t kWrapModulus = int64_t{1} << 16;

}  // namespace mlaverify::props
