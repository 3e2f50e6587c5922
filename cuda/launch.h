// Internal launch entry points, one per explicit instantiation (.cu file), and the POD argument
// block the kernels take by value. Plain C++: the lifecycle code calls these without CUDA headers.
#pragma once

#include <cstdint>

#include "mlaverify/verify_params.h"

struct CUstream_st;

namespace mlaverify::cuda::detail {

// Everything the device needs, passed by value as the kernel parameter.
struct PartialArgs {
  VerifyParams p;  // device pointers
  float* ws_o;     // [num_partials, max_total_q * H, 512] fp32, each partial normalized
  float* ws_lse;   // [num_partials, max_total_q * H] fp32, natural log, -inf when empty
  // The partial kernel's plan (split_plan.h): false, splits over the prefix and the draft's own
  // partial (the mma.sync kernels); true, the folded plan (the wgmma kernel), whose partial
  // num_splits is never written.
  bool folded = false;
  // The wgmma kernel, folded plan only: the num_splits blocks of a row tile run as one thread
  // block cluster and merge their partials through distributed shared memory themselves
  // (ws_o / ws_lse unused, no merge launch). launch_partial_wgmma launches the clusters.
  bool cluster_merge = false;
  // The balanced plan (split_plan.h, p.plan_blocks > 0): the buffer the planning kernel
  // (launch_plan) writes and the partial and merge kernels read (plan_* below); null for the
  // uniform plan, whose block of grid (row tile, request, split) is its own work.
  int32_t* plan = nullptr;
  // Whether the partial kernel is launched as the planning kernel's programmatic dependent (its
  // blocks start while the plan is written) or in stream order: choose_plan_pdl (verify_kernel.h).
  bool plan_pdl = true;
};

// The balanced plan's buffer, int32 words: [0] the number of work units, [1] the chunk (tiles
// per split), [2, 2 + bs) each request's split count n_i, then from word plan_units_word(bs) one
// uint2 per unit: x = request, y = row tile | split << 16 (split == num_splits: the draft block
// of the unfolded plan), in the order the partial kernel's blocks take them (big units first).
// Units at most: plan_blocks big prefix blocks, one prefix block per row tile of each request
// too small to count, and one draft block per row tile.
MLAV_HD int64_t plan_units_word(int32_t batch_size) { return (2 + int64_t{batch_size} + 1) / 2 * 2; }
MLAV_HD int64_t plan_max_units(const VerifyParams& p) {
  const int64_t rt = (int64_t{p.max_draft} * p.num_heads + 63) / 64;
  return int64_t{p.plan_blocks} + 2 * int64_t{p.batch_size} * rt;
}
inline size_t plan_bytes(const VerifyParams& p) {
  return p.plan_blocks > 0
             ? static_cast<size_t>(plan_units_word(p.batch_size) + 2 * plan_max_units(p)) * 4
             : 0;
}
// Enqueue the planning kernel (one block; the partial kernel launched after it waits for it).
void launch_plan(const PartialArgs& args, CUstream_st* stream);

// Raise the dynamic shared-memory limit of the partial kernel (host call; before capture). The
// sm_120-sized kernel has a ring of 2 chunk buffers (and P) or 3 (P in the ring), each plain
// (l1_ahead 0) or L1-staged (l1_ahead chunks prefetched into L1); stages2_supported says which
// are compiled. carveout_percent is the preferred shared-memory carveout
// (cudaFuncAttributePreferredSharedMemoryCarveout; -1: the driver's default).
bool stages2_supported(int ring, int l1_ahead);
void prepare_partial_stages2(int ring, int l1_ahead, int carveout_percent);
void prepare_partial_stages6();  // defined only where CMAKE_CUDA_ARCHITECTURES holds 90
// Enqueue the partial kernel, grid (row tiles, num_splits + 1, batch_size).
void launch_partial_stages2(const PartialArgs& args, CUstream_st* stream, int ring, int l1_ahead);
// Residency: blocks of the partial kernel per SM (after its prepare_*; the wgmma and 6-stage
// ones only where CMAKE_CUDA_ARCHITECTURES holds 90).
int blocks_per_sm_stages2(int ring, int l1_ahead);
int blocks_per_sm_stages6();
int blocks_per_sm_wgmma();
void launch_partial_stages6(const PartialArgs& args, CUstream_st* stream);
// The sm_90a wgmma kernel; defined only where CMAKE_CUDA_ARCHITECTURES holds 90.
void prepare_partial_wgmma();
void launch_partial_wgmma(const PartialArgs& args, CUstream_st* stream);
// How many clusters of `cluster_size` wgmma blocks (one SM each) the device holds at once
// (cudaOccupancyMaxActiveClusters; host call, after prepare_partial_wgmma).
int max_active_clusters_wgmma(int cluster_size);
// The warp-specialized sm_120 kernel (verify_partial_ws.cu, the default ring where its image
// runs, MLAV_MMA2_RING=ws): compiled unless cmake -DMLAV_WS_KERNEL=OFF, for sm_90a and sm_120a
// (setmaxnreg) where CMAKE_CUDA_ARCHITECTURES holds 90 or 120 (MLAV_HAVE_WS_VARIANT).
void prepare_partial_ws(int carveout_percent);
int blocks_per_sm_ws();
void launch_partial_ws(const PartialArgs& args, CUstream_st* stream);
// Enqueue the merge kernel, one warp per (token, head) row.
void launch_merge(const PartialArgs& args, CUstream_st* stream);

}  // namespace mlaverify::cuda::detail
