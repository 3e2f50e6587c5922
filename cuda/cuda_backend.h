// CudaBackend: the production kernel behind the Backend interface, for the property suite and
// the CLI. run() takes host pointers, stages device copies, runs the kernel, copies outputs back.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "mlaverify/backend.h"

namespace mlaverify::cuda {

// The byte CudaBackend fills every run's workspace with before the kernels (run()).
inline constexpr int kWorkspacePoison = 0x7f;

// Whether a CUDA device is usable here; when not, why (for GTEST_SKIP and can_implement).
Support cuda_device_available();

class CudaBackend : public Backend {
 public:
  CudaBackend();
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override { return "cuda"; }
  // bf16 queries and pools, every kv indexing (int32 ids and page tables translated on the host
  // to the int64 token indices the kernel reads), every mask format and draft source;
  // deterministic, num_splits honoured; tensor-core accumulation declared as 2^-23.
  Capabilities capabilities() const override;
  // No for: no device, non-bf16 q or pool, misaligned strides (VerifyKernel::can_implement).
  Support can_implement(const VerifyParams& p) const override;
  size_t workspace_bytes(const VerifyParams& p) const override;
  // Validates the host metadata (InvalidInput), stages every input buffer by its static extent
  // (max_total_q rows, the pool's extent from kv_layout and pool_slots, kv_indices_len, mask_len),
  // fills the workspace with kWorkspacePoison bytes, launches, and copies o_lat and lse back
  // (unwritten rows keep the caller's contents). A CUDA failure throws CudaError; one that lost
  // the context (a kernel fault) throws BackendLost, as does every later run of this backend.
  void run(const VerifyParams& p) override;
  // The split plan of the last run (VerifyKernel::folded): the CPU backend's CpuOptions::folded
  // that runs the same sums, for CPU-vs-CUDA comparisons.
  bool last_run_folded() const { return last_run_folded_; }
  // The last run's kernels (planning, partial, merge) between two CUDA events on its stream.
  double last_device_ms() const override { return last_device_ms_; }

 private:
  void run_on_device(const VerifyParams& p);  // run() past the host checks
  struct State;
  std::unique_ptr<State> state_;
  std::string lost_;  // why the context was lost; empty while it is not
  bool last_run_folded_ = false;
  double last_device_ms_ = -1;
};

// The backend as the property suite holds backends (cpu/ has make_cpu_backend likewise).
BackendPtr make_cuda_backend();

}  // namespace mlaverify::cuda
