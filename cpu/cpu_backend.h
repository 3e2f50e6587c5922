// The CPU backend: runs the production kernel's own split-KV algorithm (split_plan.h) on the CPU,
// so model-vs-cpu finds algorithm bugs and cpu-vs-cuda finds GPU bugs, with or without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cpu/faults.h"
#include "mlaverify/backend.h"
#include "mlaverify/verify_params.h"

// mlaverify_cpu and mlaverify_cpu_faults compile the same source; the inline namespace gives the
// two builds different symbols, so one binary may link both without an ODR clash.
#if defined(MLAV_CPU_FAULTS)
#define MLAV_CPU_VARIANT with_faults
#else
#define MLAV_CPU_VARIANT no_faults
#endif

namespace mlaverify::cpu {

struct CpuOptions {
  int threads = 0;                  // worker threads including the caller; 0 = hardware concurrency
  CpuFault fault = CpuFault::None;  // anything but None needs mlaverify_cpu_faults
  // The split plan (split_plan.h): false, num_splits prefix splits and the draft's own partial;
  // true, the folded plan the wgmma kernel runs where choose_folded picks it (the draft tiles
  // first in split 0's tile sequence, no draft partial). The CUDA tests set it to the plan the
  // kernel ran, so CPU and GPU round the same sums.
  bool folded = false;
};

class ThreadPool;

inline namespace MLAV_CPU_VARIANT {

// Numerics (split_plan.h, made concrete here; the CUDA kernel follows the same contract):
//  - Operands: q, c, k_pe are rounded to bf16 when loaded. A pool or query stored as fp32 is read
//    as fp32 and rounded to bf16 (RNE) for the products, as the kernel's tensor-core path does; a
//    bf16 buffer is read exactly.
//  - Score: s = sm_scale * dot576([q_lat | q_pe], [c | k_pe]) in fp32 with a fixed order:
//    16 interleaved lane sums (lane u adds the products of elements k = u, u+16, ... in increasing
//    k, 36 terms each), then a fixed pairwise tree (u += u+8, u += u+4, u += u+2, u += u+1).
//    No FMA contraction (-ffp-contract=off) and no -ffast-math, so the order is what runs.
//  - Online softmax per (token, head, partial), tiles of kKvTile keys: m_new = max(m, tile max);
//    alpha = exp(m - m_new); l = l * alpha + sum_j p_j (fp32, keys in increasing order);
//    acc = acc * alpha + pv where pv = sum_j bf16(p_j) * v_j (keys in increasing order),
//    p_j = exp(s_j - m_new). A tile with no visible key so far leaves the state empty.
//  - Partial: o = acc / l, lse = m + log(l); no visible key: o = 0, lse = -inf.
//  - Merge over partials s = 0..num_splits (the last is the draft block; folded: 0..num_splits-1)
//    in increasing s, exactly as split_plan.h item 4; then o is rounded once to p.o_dtype.
// Work items are (request, partial, block of heads, block of draft queries): each gathers a key
// tile once for all its (head, query) rows, writes its own slice of the partials, and the merge
// writes each (token, head) once, so results are bit-identical for any thread count.
class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(CpuOptions options = {});
  ~CpuBackend() override;

  // "cpu", "cpu[folded]" on the folded plan, "cpu[fault=Name]" when a fault is injected.
  std::string name() const override;
  // Every case the model takes; deterministic, num_splits honoured exactly; numerics as above
  // (fp32 accumulation 2^-24, bf16 P, f32 operands rounded to bf16).
  Capabilities capabilities() const override;
  // No for max_draft > 1024, dtypes other than bf16 / f32, or a fault this build compiled out.
  Support can_implement(const VerifyParams& p) const override;
  // num_partials(num_splits) * max_total_q * H * (512 + 1) floats: every partial (o, lse).
  size_t workspace_bytes(const VerifyParams& p) const override;
  // validate_params (InvalidInput), can_implement (Unsupported), then the algorithm above.
  // One run at a time per backend object.
  void run(const VerifyParams& p) override;

  int threads() const;
  CpuFault fault() const { return options_.fault; }
  // Whether this build honours faults (true only in mlaverify_cpu_faults).
  static bool faults_compiled_in();

 private:
  CpuOptions options_;
  std::unique_ptr<ThreadPool> pool_;
  std::vector<float> workspace_;  // [num_partials, T, H, 513]: o (512) then lse
  std::vector<int32_t> kv_indptr_;   // [bs + 1] when run translated the kv indexing
  std::vector<int64_t> kv_indices_;  // token-level slots of that translation
};

BackendPtr make_cpu_backend(CpuOptions options = {});

}  // namespace MLAV_CPU_VARIANT
}  // namespace mlaverify::cpu
