// Host lifecycle of the verify kernel: static support checks, workspace size, variant choice by
// device, and the two launches. No device-to-host reads, syncs or allocations happen in run().
#include "cuda/verify_kernel.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "cuda/cuda_check.h"
#include "cuda/launch.h"
#include "cuda/static_checks.h"
#include "mlaverify/error.h"
#include "mlaverify/split_plan.h"

namespace mlaverify::cuda {

int32_t suggest_num_splits(int32_t batch_size, int32_t num_heads, int32_t max_draft,
                           int64_t typical_prefix_len, int sm_count, int blocks_per_sm) {
  const int64_t blocks_per_split =
      std::max<int64_t>(1, batch_size * row_tiles(max_draft, num_heads));
  // One block per SM fits (~240 registers x 256 threads): one wave of prefix blocks. On the H200
  // (cuda/NOTES.md v1 sweep) this picks the measured best split for all six docs/spec.md §8
  // workloads; one more split spills into a second wave and lost 5-45% to the tail.
  // Draft blocks (one per row tile) are short and fill in as prefix blocks finish, so only the
  // prefix blocks are fitted: the most splits whose blocks still fit one wave.
  const int64_t slots = int64_t{std::max(sm_count, 1)} * std::max(blocks_per_sm, 1);
  int64_t splits = std::max<int64_t>(1, slots / blocks_per_split);
  // A split shorter than 4 tiles costs a partial write and read for little prefix work.
  const int64_t max_by_len = std::max<int64_t>(1, ceil_div(typical_prefix_len, kKvTile) / 4);
  splits = std::clamp<int64_t>(splits, 1, std::min<int64_t>(max_by_len, kMaxSplits));
  return static_cast<int32_t>(splits);
}

bool choose_folded(const char* requested, int32_t batch_size, int32_t num_heads, int32_t max_draft,
                   int32_t num_splits, int sm_count) {
  const std::string want = requested ? requested : "";
  if (want == "folded") return true;
  if (want == "unfolded") return false;
  if (!want.empty())
    throw InvalidInput("MLAV_DRAFT_PLAN", -1,
                       "\"" + want + "\" is not a plan: expected folded or unfolded");
  const int64_t draft_blocks = std::max<int64_t>(1, batch_size * row_tiles(max_draft, num_heads));
  const int64_t free_sms = sm_count - draft_blocks * num_splits;
  return free_sms <= 0 || ceil_div(draft_blocks, free_sms) > 2;
}

bool choose_cluster_merge(const char* requested, bool folded, int32_t num_splits,
                          int max_active_clusters, int64_t grid_blocks, int sm_count) {
  const std::string want = requested ? requested : "";
  if (want == "kernel") return false;
  if (!want.empty() && want != "cluster")
    throw InvalidInput("MLAV_MERGE", -1,
                       "\"" + want + "\" is not a merge: expected cluster or kernel");
  const bool possible = folded && num_splits >= 1 && num_splits <= kMaxClusterMerge &&
                        max_active_clusters >= 1;
  if (want == "cluster") {
    if (!possible)
      throw Unsupported("MLAV_MERGE=cluster needs the wgmma kernel's folded plan, at most " +
                        std::to_string(kMaxClusterMerge) + " splits (here " +
                        std::to_string(num_splits) + ") and a device that runs such clusters");
    return true;
  }
  return possible && int64_t{max_active_clusters} * num_splits >=
                         std::min<int64_t>(grid_blocks, sm_count);
}

bool choose_plan_pdl(const char* requested, KernelVariant variant) {
  const std::string want = requested ? requested : "";
  if (want.empty()) return variant != KernelVariant::Wgmma;
  if (want != "0" && want != "1")
    throw InvalidInput("MLAV_PLAN_PDL", -1, "\"" + want + "\" is not 0 or 1");
  return want == "1";
}

bool mma2_ws_compiled() {
#ifdef MLAV_HAVE_WS_VARIANT
  return true;
#else
  return false;
#endif
}

bool mma2_ws_runs_on(int major, int minor) {
  // An arch-specific cubin (sm_90a, sm_120a) runs only on its own compute capability.
  bool runs = false;
#ifdef MLAV_WS_IMAGE_SM90A
  runs = runs || (major == 9 && minor == 0);
#endif
#ifdef MLAV_WS_IMAGE_SM120A
  runs = runs || (major == 12 && minor == 0);
#endif
  (void)major;
  (void)minor;
  return runs;
}

int default_mma2_ring(int major, int minor) {
  return mma2_ws_runs_on(major, minor) ? kMma2RingWs : kMma2Ring4;
}

int choose_mma2_ring(const char* requested, int major, int minor) {
  const std::string want = requested ? requested : "";
  if (want.empty()) return default_mma2_ring(major, minor);
  if (want == "2") return 2;
  if (want == "3") return 3;
  if (want == "4") return 4;
#ifdef MLAV_HAVE_WS_VARIANT
  if (want == "ws") {
    if (!mma2_ws_runs_on(major, minor))
      throw InvalidInput("MLAV_MMA2_RING", -1,
                         "\"ws\" runs on devices of compute capability 9.0 or 12.0 that this build "
                         "compiled it for (sm_90a / sm_120a images); this device is " +
                             std::to_string(major) + "." + std::to_string(minor));
    return kMma2RingWs;
  }
#endif
  throw InvalidInput("MLAV_MMA2_RING", -1,
                     "\"" + want + "\" is not a ring: expected 2 (buffers and P), 3 or 4 (P in the ring)"
#ifdef MLAV_HAVE_WS_VARIANT
                     " or ws (warp-specialized)"
#endif
                     );
}

int route_mma2_ring(int ring, int64_t row_tiles_per_request, const char* requested) {
  const std::string want = requested ? requested : "";
  if (!want.empty() && want != "0" && want != "1")
    throw InvalidInput("MLAV_WS_ROUTE", -1,
                       "\"" + want + "\" is not 0 (ws on every batch) or 1 (ring 4 for a batch of "
                       "one row tile per request)");
  if (ring != kMma2RingWs || want == "0") return ring;
  return row_tiles_per_request <= 1 ? kMma2Ring4 : ring;
}

namespace {
bool ring_l1_supported(int ring, int l1_ahead) {
#ifdef MLAV_HAVE_WS_VARIANT
  if (ring == kMma2RingWs) return l1_ahead == 0;  // no L1-staged form (cuda/NOTES.md v30)
#endif
  return detail::stages2_supported(ring, l1_ahead);
}
// The ring the sm_120-sized kernel runs for this batch: MLAV_MMA2_RING, routed by its shape.
int mma2_ring_for(const VerifyParams& p, int major, int minor) {
  return route_mma2_ring(choose_mma2_ring(std::getenv("MLAV_MMA2_RING"), major, minor),
                         row_tiles(p.max_draft, p.num_heads), std::getenv("MLAV_WS_ROUTE"));
}
}  // namespace

int choose_mma2_l1(const char* requested, int ring) {
  const std::string want = requested ? requested : "";
  if (want.empty()) return kMma2L1Default;
  char* end = nullptr;
  const long v = std::strtol(want.c_str(), &end, 10);
  if (end == want.c_str() || *end != '\0' || v < 0 || v > 64 ||
      !ring_l1_supported(ring, static_cast<int>(v)))
    throw InvalidInput("MLAV_MMA2_L1", -1,
                       "\"" + want + "\" is not a compiled L1 prefetch distance for ring " +
                           (ring == kMma2RingWs ? std::string("ws") : std::to_string(ring)) +
                           (ring == 3 ? ": expected 0 or 2" : ": expected 0"));
  return static_cast<int>(v);
}

int choose_carveout(const char* requested, int block_smem, int max_smem_per_sm) {
  const std::string want = requested ? requested : "";
  if (!want.empty()) {
    char* end = nullptr;
    const long v = std::strtol(want.c_str(), &end, 10);
    if (end == want.c_str() || *end != '\0' || v < -1 || v > 100)
      throw InvalidInput("MLAV_SMEM_CARVEOUT", -1,
                         "\"" + want + "\" is not a carveout: expected -1 or a percentage 0..100");
    return static_cast<int>(v);
  }
  if (max_smem_per_sm <= 0) return -1;
  const int64_t need = int64_t{block_smem} + 1024;
  return static_cast<int>(std::min<int64_t>(100, ceil_div(need * 100, max_smem_per_sm)));
}

int partial_blocks_per_sm(const char* requested) {
  int device = 0, major = 0, minor = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
#ifdef MLAV_HAVE_SM90_VARIANT
  constexpr bool kHopperCompiled = true;
#else
  constexpr bool kHopperCompiled = false;
#endif
  const KernelVariant v = choose_variant(requested, major, minor, kHopperCompiled);
#ifdef MLAV_HAVE_SM90_VARIANT
  if (v == KernelVariant::Wgmma) return detail::blocks_per_sm_wgmma();
  if (v == KernelVariant::Mma6) return detail::blocks_per_sm_stages6();
#endif
  const int ring = choose_mma2_ring(std::getenv("MLAV_MMA2_RING"), major, minor);
#ifdef MLAV_HAVE_WS_VARIANT
  // The plan is sized before the batch is known, and ws routes a batch of one row tile per
  // request to ring 4 (route_mma2_ring): size it for the fewer blocks of the two, so a routed
  // batch's "one wave" holds on ring 4 too (both hold 1 block per SM today).
  if (ring == kMma2RingWs) {
    const int ws = detail::blocks_per_sm_ws();
    if (route_mma2_ring(kMma2RingWs, 1, std::getenv("MLAV_WS_ROUTE")) == kMma2RingWs) return ws;
    return std::min(ws, detail::blocks_per_sm_stages2(kMma2Ring4, kMma2L1Default));
  }
#endif
  return detail::blocks_per_sm_stages2(ring, choose_mma2_l1(std::getenv("MLAV_MMA2_L1"), ring));
}

Capabilities VerifyKernel::capabilities() {
  Capabilities c;
  c.q_dtypes = bit(DType::BF16);
  c.kv_dtypes = bit(DType::BF16);
  c.kv_indexings = bit(KvIndexing::TokenI64);
  c.honours_num_splits = true;
  c.numerics.accumulate_unit = 0x1.0p-23;
  return c;
}

Support VerifyKernel::can_implement(const VerifyParams& p) {
  // The kernels read int64 token-level kv_indices on the device; CudaBackend translates the
  // other indexings on the host before it gets here, a device-pointer caller must do the same.
  if (p.kv_indexing != KvIndexing::TokenI64) {
    return Support::no("kv_indexing must be token_i64 (int32 ids and page tables: translate "
                       "first, cuda::with_token_indices)");
  }
  return detail::check_static(p, /*check_pointers=*/true);
}

size_t VerifyKernel::workspace_bytes(const VerifyParams& p) {
  if (p.num_splits < 1 || p.max_total_q < 0 || p.num_heads < 1) return 0;
  return plan_offset(p) + detail::plan_bytes(p);
}

size_t VerifyKernel::plan_offset(const VerifyParams& p) {
  const size_t rows = static_cast<size_t>(p.max_total_q) * static_cast<size_t>(p.num_heads);
  const size_t partials =
      static_cast<size_t>(num_partials(p.num_splits)) * rows * (kLatentDim + 1) * sizeof(float);
  return p.plan_blocks > 0 ? (partials + 15) / 16 * 16 : partials;
}

int32_t plan_blocks(const char* requested) {
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms * std::max(1, partial_blocks_per_sm(requested));
}

int32_t balanced_split_cap(int32_t num_heads, int32_t max_draft, int64_t max_prefix_len,
                           int32_t plan_blocks) {
  const int64_t rt = std::max<int64_t>(1, row_tiles(max_draft, num_heads));
  const int64_t by_len =
      std::max<int64_t>(1, ceil_div(max_prefix_len, kKvTile) / kMinSplitTiles);
  return static_cast<int32_t>(
      std::clamp<int64_t>(plan_blocks / rt, 1, std::min<int64_t>(by_len, kMaxSplits)));
}

void VerifyKernel::initialize(const VerifyParams& p, void* workspace, CUstream_st* stream) {
  if (Support s = can_implement(p); !s) throw Unsupported("cuda verify kernel: " + s.reason);
  if (workspace == nullptr || reinterpret_cast<uintptr_t>(workspace) % 16 != 0)
    throw Unsupported("cuda verify kernel: workspace must be non-null and 16-byte aligned");
  int device = 0, major = 0, minor = 0, optin = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
#ifdef MLAV_HAVE_SM90_VARIANT
  constexpr bool kHopperCompiled = true;
#else
  constexpr bool kHopperCompiled = false;
#endif
  // Read once per initialize, never per launch.
  variant_ = choose_variant(std::getenv("MLAV_CUDA_KERNEL"), major, minor, kHopperCompiled);
  // The sm_120-sized kernel's ring, worked out once (its environment is read only for that kernel).
  const int ring = variant_ == KernelVariant::Mma2 ? mma2_ring_for(p, major, minor) : kMma2Ring4;
  const int need = variant_ == KernelVariant::Wgmma  ? kWgmmaSmemBytes
                   : variant_ == KernelVariant::Mma6 ? partial_smem_bytes(kStagesSm90, kColsSm90)
                                                     : sm120_smem_bytes(ring);
  if (optin < need)
    throw Unsupported("cuda verify kernel: device allows " + std::to_string(optin) +
                      " bytes of shared memory per block, the " + variant_name() +
                      " kernel needs " + std::to_string(need));
#ifdef MLAV_HAVE_SM90_VARIANT
  if (variant_ == KernelVariant::Wgmma) detail::prepare_partial_wgmma();
  if (variant_ == KernelVariant::Mma6) detail::prepare_partial_stages6();
#endif
  mma2_ring_ = ring;  // the default for the other kernels, whose launches never read it
  mma2_l1_ = 0;
  if (variant_ == KernelVariant::Mma2) {
    mma2_l1_ = choose_mma2_l1(std::getenv("MLAV_MMA2_L1"), mma2_ring_);
    int per_sm = 0;
    CUDA_CHECK(
        cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
    // The plain kernel keeps the driver's default carveout (as measured through v6) unless
    // MLAV_SMEM_CARVEOUT says otherwise; the L1-staged one asks for the L1 it stages into.
    const char* carve = std::getenv("MLAV_SMEM_CARVEOUT");
    const int carveout = mma2_l1_ > 0 || (carve && *carve)
                             ? choose_carveout(carve, sm120_smem_bytes(mma2_ring_), per_sm)
                             : -1;
#ifdef MLAV_HAVE_WS_VARIANT
    if (mma2_ring_ == kMma2RingWs)
      detail::prepare_partial_ws(carveout);
    else
#endif
      detail::prepare_partial_stages2(mma2_ring_, mma2_l1_, carveout);
  }
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  // Under the balanced plan num_splits is only a cap: the draft-plan rule sees the split count
  // that plan gives a batch of equal requests (plan_blocks over the batch's row tiles).
  const int64_t batch_row_tiles =
      std::max<int64_t>(1, int64_t{p.batch_size} * row_tiles(p.max_draft, p.num_heads));
  const int32_t splits_for_rule =
      p.plan_blocks > 0
          ? static_cast<int32_t>(std::clamp<int64_t>(p.plan_blocks / batch_row_tiles, 1, p.num_splits))
          : p.num_splits;
  folded_ = variant_ == KernelVariant::Wgmma &&
            choose_folded(std::getenv("MLAV_DRAFT_PLAN"), p.batch_size, p.num_heads, p.max_draft,
                          splits_for_rule, sms);
  // Clusters exist only for the wgmma kernel's folded plan; for the others choose_cluster_merge
  // still rejects MLAV_MERGE=cluster (or a misspelling) loudly.
  int clusters = 0;
  int64_t blocks = 0;
#ifdef MLAV_HAVE_SM90_VARIANT
  if (folded_ && p.num_splits <= kMaxClusterMerge) {
    clusters = detail::max_active_clusters_wgmma(p.num_splits);
    blocks = int64_t{p.batch_size} * row_tiles(p.max_draft, p.num_heads) * p.num_splits;
  }
#endif
  // The balanced plan's blocks take their units from a list, not a cluster's shape: it merges
  // with the merge kernel (MLAV_MERGE=cluster is Unsupported there, like any impossible merge).
  cluster_merge_ = choose_cluster_merge(std::getenv("MLAV_MERGE"), folded_ && p.plan_blocks == 0,
                                        p.num_splits, clusters, blocks, sms);
  plan_pdl_ = choose_plan_pdl(std::getenv("MLAV_PLAN_PDL"), variant_);
  params_ = p;
  workspace_ = workspace;
  stream_ = stream;
  initialized_ = true;
}

detail::PartialArgs VerifyKernel::launch_args() const {
  if (!initialized_)
    throw Unsupported("cuda verify kernel: run(), plan() or attend() before initialize()");
  detail::PartialArgs args;
  args.p = params_;
  args.ws_o = static_cast<float*>(workspace_);
  const size_t rows = static_cast<size_t>(params_.max_total_q) * params_.num_heads;
  args.ws_lse =
      args.ws_o + static_cast<size_t>(num_partials(params_.num_splits)) * rows * kLatentDim;
  args.folded = folded_;
  args.cluster_merge = cluster_merge_;
  if (params_.plan_blocks > 0)
    args.plan = reinterpret_cast<int32_t*>(static_cast<char*>(workspace_) + plan_offset(params_));
  return args;
}

void VerifyKernel::enqueue(bool plan, bool attend) {
  detail::PartialArgs args = launch_args();
  // The partial kernel is the plan's programmatic dependent only right behind its plan.
  args.plan_pdl = plan && plan_pdl_;
  if (plan && args.plan != nullptr) detail::launch_plan(args, stream_);
  if (!attend) return;
#ifdef MLAV_HAVE_SM90_VARIANT
  if (variant_ == KernelVariant::Wgmma) detail::launch_partial_wgmma(args, stream_);
  if (variant_ == KernelVariant::Mma6) detail::launch_partial_stages6(args, stream_);
#endif
#ifdef MLAV_HAVE_WS_VARIANT
  if (variant_ == KernelVariant::Mma2 && mma2_ring_ == kMma2RingWs)
    detail::launch_partial_ws(args, stream_);
  else
#endif
  if (variant_ == KernelVariant::Mma2) detail::launch_partial_stages2(args, stream_, mma2_ring_, mma2_l1_);
  if (!cluster_merge_) detail::launch_merge(args, stream_);
}

void VerifyKernel::run() { enqueue(true, true); }
void VerifyKernel::plan() { enqueue(true, false); }
void VerifyKernel::attend() { enqueue(false, true); }

const char* variant_name(KernelVariant v) {
  switch (v) {
    case KernelVariant::Wgmma: return "wgmma";
    case KernelVariant::Mma6: return "mma.sync x6";
    case KernelVariant::Mma2: return "mma.sync x2";
  }
  return "?";
}

KernelVariant choose_variant(const char* requested, int major, int minor, bool hopper_compiled) {
  const bool hopper = major == 9 && minor == 0 && hopper_compiled;
  const std::string want = requested ? requested : "";
  if (want.empty()) return hopper ? KernelVariant::Wgmma : KernelVariant::Mma2;
  if (want == "mma2") return KernelVariant::Mma2;
  if (want != "wgmma" && want != "mma6")
    throw InvalidInput("MLAV_CUDA_KERNEL", -1,
                       "\"" + want + "\" is not a kernel: expected wgmma, mma6 or mma2");
  if (!hopper)
    throw Unsupported("MLAV_CUDA_KERNEL=" + want + " needs an sm_90 device and a build for it (" +
                      (hopper_compiled ? "this device is sm_" + std::to_string(major * 10 + minor)
                                       : std::string("not compiled: CMAKE_CUDA_ARCHITECTURES "
                                                     "lacks 90")) +
                      ")");
  return want == "wgmma" ? KernelVariant::Wgmma : KernelVariant::Mma6;
}

}  // namespace mlaverify::cuda
