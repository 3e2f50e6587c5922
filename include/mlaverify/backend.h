// The Backend interface: how a property, a scenario replay or the CLI runs a verify launch
// without naming the implementation (model, cpu, cuda, a plugin, or a kernel a user brings).
//
// The rules every backend follows (the C ABI, c_api.h, states the same for plugins):
//  - Memory. Every pointer in the VerifyParams given to run() is host memory owned by the caller
//    and valid for the duration of the call only; a device backend stages its own copies. Inputs
//    are read-only. The backend owns whatever it allocates (workspace included) and frees it.
//  - Outputs. For every real token t (t < qo_indptr[bs]) and head h the backend writes
//    o_lat[t, h, 0:512] and, when it declares writes_lse, lse[t, h]. Rows of CUDA-graph padded
//    requests (P = 1, slot 0) may be written with anything finite or left alone; rows t >= T
//    (T = qo_indptr[bs], up to max_total_q) must not be written at all, nor any element between
//    heads or tokens that a stride skips. The suite checks this with poisoned and guarded buffers.
//  - num_splits is a request, not a promise: a backend may split the prefix any way it likes
//    (Numerics::max_partials bounds the result's rounding); one that declares honours_num_splits
//    runs exactly num_splits prefix chunks (split_plan.h), so its own plans can be compared;
//    under the balanced plan (VerifyParams::plan_blocks > 0) num_splits is its cap, and request i
//    runs the n_i <= num_splits chunks that plan gives it.
//  - One backend object serves many runs, one at a time, with different shapes and pointers
//    between runs: nothing may be cached by pointer or by shape without checking both.
//  - Errors. run() throws InvalidInput for metadata that breaks docs/spec.md §3 and Unsupported
//    when can_implement says no; any other exception, a crash or a hang is a failing case.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mlaverify/types.h"
#include "mlaverify/verify_params.h"

namespace mlaverify {

// Whether a backend can run a case; when not, a reason a person can act on.
struct Support {
  bool ok = true;
  std::string reason;
  static Support yes() { return {}; }
  static Support no(std::string why) { return {false, std::move(why)}; }
  explicit operator bool() const { return ok; }
};

// A set of enum values, one bit per value (bit 1 << int(value)).
template <typename E>
constexpr uint32_t bit(E value) {
  return uint32_t{1} << static_cast<uint32_t>(value);
}
template <typename E>
constexpr bool has(uint32_t set, E value) {
  return (set & bit(value)) != 0;
}

// The arithmetic a backend declares; the tolerance a foreign kernel is held to is derived from
// it (props/compare.h), not from this project's own split plan. Units are relative roundoffs.
struct Numerics {
  // Rounding applied to an operand stored as f32 before the products (2^-8: converted to bf16,
  // as mma.sync needs; 0: used as is). Operands stored as bf16 are read exactly.
  double operand_unit = 0x1.0p-8;
  // Accumulation of the 576-term scores, the softmax sums and P.V: fp32 adds (2^-24). Tensor-core
  // accumulation truncates inside a k-block on some parts: declare 2^-23 to cover it.
  double accumulate_unit = 0x1.0p-23;
  // P rounded to bf16 before P.V (2^-8), or kept in fp32 (2^-24).
  double p_unit = 0x1.0p-8;
  // Relative error of one exp (ex2.approx ~2^-22.5; glibc expf ~2^-23): 2^-21 covers both.
  double exp_unit = 0x1.0p-21;
  // Most partial results merged per (token, head) (split-KV chunks plus the draft block); 0 =
  // unknown, taken as 64.
  int32_t max_partials = 0;
  // Keys summed per rescale of the running sums (the KV tile; 64 here).
  int32_t tile_keys = 64;
  // The output rounding comes from VerifyParams::o_dtype (bf16 2^-8, f32 2^-24).
};

// What a backend takes. The generators draw only cases inside these sets (props/generators.h),
// and the coverage report shows what was drawn. Default: everything the model accepts.
struct Capabilities {
  uint32_t mask_formats = 0x1F;             // bit(MaskFormat)
  uint32_t mask_indptr_conventions = 0x3;   // bit(IndptrConvention), FullMask / FlashInferPacked
  uint32_t kv_dtypes = 0x3;                 // bit(DType) of the pool and k_extend
  uint32_t q_dtypes = 0x3;                  // bit(DType)
  uint32_t o_dtypes = 0x3;                  // bit(DType)
  uint32_t kv_layouts = 0x7;                // bit(LayoutKind); RopeFirst is a mutant's reading
  uint32_t draft_sources = 0x3;             // bit(DraftKvSource)
  uint32_t kv_indexings = 0x7;              // bit(KvIndexing)
  uint32_t page_sizes = 0xFFFFFFFF;         // PageTable page sizes: bit log2(page_size)
  bool padded_kv_rows = true;               // pool rows with a stride > 576
  bool strided_q = true;                    // q head/token strides beyond dense, q_pe first
  bool strided_o = true;                    // o head/token strides beyond dense
  bool padded_extend_rows = true;           // k_extend_stride > 576
  int32_t max_heads = 128;
  int32_t max_draft = 1024;
  int64_t max_prefix = int64_t{1} << 20;
  bool writes_lse = true;          // false: lse is left alone; properties on lse say so
  bool deterministic = true;       // same inputs, same bits (no atomics in the reduction order)
  bool honours_num_splits = false;  // runs exactly num_splits prefix chunks (split_plan.h)
  // VerifyParams::plan_blocks > 0 (the balanced split plan) reaches the backend: the generators
  // draw it only then. The C ABI does not carry plan_blocks (c_api.h), so a plugin's or a Python
  // backend's declaration says false and its campaigns stay on the uniform plan (a case it
  // would ignore the field of is a uniform case drawn twice).
  bool balanced_plan = true;
  Numerics numerics;

  // The first declared limit `p` breaks, or yes: what can_implement checks at least.
  Support admits(const VerifyParams& p) const;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // What this backend takes and how it computes (the suite fuzzes only inside it).
  virtual Capabilities capabilities() const { return {}; }
  // Whether this backend can run `p`, and why not. Never throws for unsupported shapes; throws
  // BackendLost once the backend can run nothing at all (a lost CUDA context), as run() does.
  virtual Support can_implement(const VerifyParams& p) const = 0;
  // Bytes of scratch `run` needs for `p` (split partials and the like).
  virtual size_t workspace_bytes(const VerifyParams& p) const = 0;
  // Runs one verify launch under the rules above. Throws InvalidInput for malformed metadata and
  // Unsupported when can_implement says no.
  virtual void run(const VerifyParams& p) = 0;
  // Device time of the last run's launches as the backend measured it (CUDA events around the
  // kernels, no host staging or copies), in ms; -1 when the backend does not measure one.
  virtual double last_device_ms() const { return -1; }
};

using BackendPtr = std::shared_ptr<Backend>;

inline Support Capabilities::admits(const VerifyParams& p) const {
  auto no = [](const char* what, int64_t value) {
    return Support::no(std::string(what) + " " + std::to_string(value) + " not declared");
  };
  if (!has(mask_formats, p.mask_format)) return no("mask_format", int(p.mask_format));
  if ((p.mask_format == MaskFormat::FullMask || p.mask_format == MaskFormat::FlashInferPacked) &&
      !has(mask_indptr_conventions, p.mask_indptr_convention)) {
    return no("mask_indptr_convention", int(p.mask_indptr_convention));
  }
  if (!has(kv_dtypes, p.kv_dtype)) return no("kv_dtype", int(p.kv_dtype));
  if (!has(q_dtypes, p.q_dtype)) return no("q_dtype", int(p.q_dtype));
  if (!has(o_dtypes, p.o_dtype)) return no("o_dtype", int(p.o_dtype));
  if (!has(kv_layouts, p.kv_layout.kind)) return no("kv_layout", int(p.kv_layout.kind));
  if (!has(draft_sources, p.draft_source)) return no("draft_source", int(p.draft_source));
  if (!has(kv_indexings, p.kv_indexing)) return no("kv_indexing", int(p.kv_indexing));
  if (p.kv_indexing == KvIndexing::PageTable) {
    bool pow2 = p.page_size > 0 && (p.page_size & (p.page_size - 1)) == 0;
    int log2 = 0;
    while (pow2 && (1 << log2) < p.page_size) ++log2;
    if (!pow2 || log2 >= 32 || (page_sizes & (uint32_t{1} << log2)) == 0) {
      return no("page_size", p.page_size);
    }
  }
  if (p.kv_layout.kind != LayoutKind::Split && !padded_kv_rows &&
      (p.kv_layout.latent_stride != kRowDim || p.kv_layout.rope_stride != kRowDim)) {
    return no("kv row stride", p.kv_layout.latent_stride);
  }
  const bool dense_q = p.q_head_stride == kRowDim && p.q_token_stride == p.num_heads * kRowDim &&
                       p.q_latent_offset == 0 && p.q_rope_offset == kLatentDim;
  if (!strided_q && !dense_q) return no("q head stride", p.q_head_stride);
  const bool dense_o =
      p.o_head_stride == kLatentDim && p.o_token_stride == p.num_heads * kLatentDim;
  if (!strided_o && !dense_o) return no("o head stride", p.o_head_stride);
  if (!padded_extend_rows && p.draft_source == DraftKvSource::ExtendRows &&
      p.k_extend_stride != kRowDim) {
    return no("k_extend_stride", p.k_extend_stride);
  }
  if (p.num_heads > max_heads) return no("num_heads", p.num_heads);
  if (p.max_draft > max_draft) return no("max_draft", p.max_draft);
  return Support::yes();
}

}  // namespace mlaverify
