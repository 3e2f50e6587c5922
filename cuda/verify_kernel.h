// Host lifecycle of the production verify kernel (CUTLASS device-adapter style): plain C++, no
// CUDA headers, so callers (SGLang glue, the backend, the bench) never compile CUDA code.
#pragma once

#include <cstddef>
#include <cstdint>

#include "mlaverify/backend.h"
#include "mlaverify/verify_params.h"

struct CUstream_st;  // cudaStream_t is CUstream_st*; declared here so no CUDA header is needed

namespace mlaverify::cuda {
namespace detail {
struct PartialArgs;  // cuda/launch.h
}

// Kernel geometry shared by the launcher, the workspace size and the tests.
inline constexpr int kRowsPerBlock = 64;  // (node, head) rows per block: one GEMM M tile
inline constexpr int kThreadsPerBlock = 256;

// Dynamic shared memory of the partial kernel for `stages` KV chunk buffers of 64 keys x `cols`
// columns (see verify_kernel.cuh for the carve-up): Q tile 64 x 576 bf16, P tile 64 x 64 bf16,
// stages x (64 x cols bf16), row max/sum exchange 2 x 2 x 64 fp32, row scale and 1 / l for the
// PV warp layout 2 x 64 fp32, draft visibility 64 x uint64.
constexpr int partial_smem_bytes(int stages, int cols) {
  return kRowsPerBlock * 576 * 2 + 64 * 64 * 2 + stages * 64 * cols * 2 + 2 * 2 * 64 * 4 +
         2 * 64 * 4 + 64 * 8;
}
// sm_120 (RTX PRO 6000) allows 101,376 bytes per block: beside a separate P tile two 64-column
// buffers fit, three do not. (The sm_120 kernel's rings of 3 and 4 keep P in a ring buffer and,
// for 4, Q's k_pe columns out of shared memory: sm120_smem_bytes below, cuda/NOTES.md v16.)
inline constexpr int kStagesSm120 = 2;
inline constexpr int kColsSm120 = 64;
// Hopper allows 232,448 bytes: six 64-column buffers, more bytes in flight. (Six 128-column
// buffers halve the steps but spill with the 32-row PV warp tiles; cuda/NOTES.md v5, v6.)
inline constexpr int kStagesSm90 = 6;
inline constexpr int kColsSm90 = 64;
inline constexpr int kSm120SmemLimit = 101376;
// The sm_90a wgmma kernel (cuda/verify_partial_wgmma.cu): three whole 64-key KV tiles (P of a
// tile lives in its rope block), Q's rope block, three tiles' row factors and draft visibility,
// 1 / l, 14 mbarriers, the balanced plan's unit. Q's latent columns live in registers.
inline constexpr int kWgmmaSmemBytes = 232064;  // with the balanced plan's unit (16 B)
inline constexpr int kHopperSmemLimit = 232448;
static_assert(kWgmmaSmemBytes <= kHopperSmemLimit, "Hopper budget");
static_assert(partial_smem_bytes(kStagesSm120, kColsSm120) <= kSm120SmemLimit, "sm_120 budget");
static_assert(partial_smem_bytes(kStagesSm120 + 1, kColsSm120) > kSm120SmemLimit,
              "a third buffer would fit");
// The sm_120-sized kernel by ring (cuda/NOTES.md v16): 2 buffers and P, or 3 with P in the ring,
// both partial_smem_bytes(2, 64); 4 with P in the ring holds only Q's latent columns (its k_pe
// fragments come from global memory) and a 64-entry table of Q row offsets.
// MLAV_MMA2_RING=ws (kMma2RingWs): the warp-specialized kernel (verify_partial_ws.cu, NOTES
// v30-v42): Q's latent columns, 32 KB of chunk buffers (the S warps' ring of six 64-key x
// 32-column chunks with P over two of them, the PV warps' of two such chunks, or four of 32 keys
// in v31's form), row max and two tiles' row sums for 2 halves, row scale and 1 / l, draft
// visibility, and room for v31's table of the next tile's 64 KV row pointers (the count below
// is the largest form's; the kernel asserts its own bytes fit).
inline constexpr int kMma2RingWs = 8;
constexpr int sm120_smem_bytes(int ring) {
  if (ring == kMma2RingWs)
    return kRowsPerBlock * 512 * 2 + 64 * 64 * 2 + 6 * 64 * 32 * 2 + 2 * 64 * 4 + 4 * 64 * 4 +
           2 * 64 * 4 + 64 * 8 + 64 * 8;
  return ring == 4 ? kRowsPerBlock * 512 * 2 + 4 * 64 * 64 * 2 + 2 * 2 * 64 * 4 + 2 * 64 * 4 +
                         64 * 8 + 64 * 8
                   : partial_smem_bytes(kStagesSm120, kColsSm120);
}
// ws asks for the whole budget (v31: the row hand-over's 512 bytes), ring 4 for 512 fewer.
inline constexpr int kSm120MaxSmem = sm120_smem_bytes(kMma2RingWs) > sm120_smem_bytes(4)
                                         ? sm120_smem_bytes(kMma2RingWs)
                                         : sm120_smem_bytes(4);
static_assert(kSm120MaxSmem >= sm120_smem_bytes(2) && kSm120MaxSmem <= kSm120SmemLimit,
              "sm_120 budget");
#ifdef MLAV_SM120_DYN_SMEM
// cuda/CMakeLists.txt hands this number to the resource check: the largest request of any
// sm_120 launcher.
static_assert(kSm120MaxSmem == MLAV_SM120_DYN_SMEM,
              "update MLAV_SM120_DYN_SMEM in cuda/CMakeLists.txt");
#endif

// Row tiles per request: the (node, head) pairs t * H + h of a request, 64 per block.
inline int64_t row_tiles(int32_t max_draft, int32_t num_heads) {
  return (static_cast<int64_t>(max_draft) * num_heads + kRowsPerBlock - 1) / kRowsPerBlock;
}

// The split count whose prefix blocks fill one wave of the device: sm_count SMs holding
// blocks_per_sm partial blocks each (the kernel's residency, partial_blocks_per_sm; 1 for every
// variant today, each uses ~100-227 KB of shared memory and up to 255 registers x 256 threads).
// The grid holds batch_size * row_tiles * (num_splits + 1) blocks. Capped by kMaxSplits and by
// the prefix length (no split shorter than 4 tiles, where the merge would cost more than the
// split saves). On the RTX PRO 6000 that is 188 SMs x 1.
int32_t suggest_num_splits(int32_t batch_size, int32_t num_heads, int32_t max_draft,
                           int64_t typical_prefix_len, int sm_count, int blocks_per_sm = 1);
// The balanced plan (split_plan.h, VerifyParams::plan_blocks): the blocks of the partial kernel
// the current device holds at once (SM count x partial_blocks_per_sm(requested)), the value to
// put in plan_blocks. A host call: before capture.
int32_t plan_blocks(const char* requested);
// A num_splits for the balanced plan: the most splits one request of max_prefix_len could take
// (plan_blocks over its row tiles, splits of at least kMinSplitTiles, at most kMaxSplits), so
// the longest request of any batch can spread over the device; each request's own count comes
// from the plan on the device.
int32_t balanced_split_cap(int32_t num_heads, int32_t max_draft, int64_t max_prefix_len,
                           int32_t plan_blocks);
// How many blocks of the partial kernel one SM of the current device holds at once
// (cudaOccupancyMaxActiveBlocksPerMultiprocessor with its shared memory), for the variant
// choose_variant picks with `requested` (MLAV_CUDA_KERNEL; for mma2 also MLAV_MMA2_RING and
// MLAV_MMA2_L1). A host call that sets the kernel's attributes: before capture.
int partial_blocks_per_sm(const char* requested);

// The partial kernels: mma.sync with 2 stages (the sm_120-sized one, every device), mma.sync with
// 6 stages and wgmma (Hopper only, compiled where CMAKE_CUDA_ARCHITECTURES holds 90).
enum class KernelVariant { Mma2, Mma6, Wgmma };
const char* variant_name(KernelVariant v);
// The variant VerifyKernel runs on a device of compute capability major.minor: wgmma on Hopper,
// mma2 elsewhere. `requested` is MLAV_CUDA_KERNEL (null or "" for the default; "wgmma", "mma6"
// or "mma2" to compare them): an unknown value is InvalidInput naming MLAV_CUDA_KERNEL, a
// variant this device or build cannot run is Unsupported; neither is ever silently replaced.
KernelVariant choose_variant(const char* requested, int major, int minor, bool hopper_compiled);

// Whether the balanced plan's partial kernel is launched as the planning kernel's programmatic
// dependent (its blocks start while the plan is written and wait for it) or in stream order.
// `requested` is MLAV_PLAN_PDL: "1" or "0" force either, null or "" the default, anything else is
// InvalidInput naming it. The default (cuda/NOTES.md v26, three rounds on the H200): stream
// order for the wgmma kernel (1.3-4.8 us faster per call than the dependent launch on the six,
// 1.8 and 6.5 on two of the mixed batches, equal on the third), the dependent launch for the
// mma.sync kernels (measured on mma2, where stream order was 0-2.1 us slower, 7.8 on tree32;
// mma6 follows mma2 unmeasured).
bool choose_plan_pdl(const char* requested, KernelVariant variant);

// The sm_120-sized kernel's pipeline (cuda/NOTES.md v16). Ring: 2 chunk buffers and a P tile
// (the v6 kernel); 3 buffers with P in the ring (the same 100,352 bytes, 1.5-1.7x faster on
// the H200); 4 with P in the ring and Q's k_pe fragments loaded from global memory (100,864
// bytes, another 3-7%); ws, the warp-specialized kernel (NOTES v30-v42). L1 staging: how many
// 8 KB chunks each chunk is prefetched into L1 before its cp.async (0: none). `requested` is
// MLAV_MMA2_RING / MLAV_MMA2_L1: null or "" for the default, else a compiled pair (2/0, 3/0,
// 3/2, 4/0, ws/0); anything else is InvalidInput naming the variable.
// The default ring (NOTES v42) is ws on a device that runs its arch-specific image (compute
// capability 12.0: sm_120a, the RTX PRO 6000; 9.0: sm_90a, the Hopper stand-in) when the build
// holds it, else ring 4. Ring 4 is also where ws sends a batch of one row tile per request
// (route_mma2_ring).
inline constexpr int kMma2Ring4 = 4;
inline constexpr int kMma2L1Default = 0;
// Whether this build holds the warp-specialized kernel (MLAV_MMA2_RING=ws; cmake
// -DMLAV_WS_KERNEL=OFF leaves it out, and "ws" is then refused like any unknown ring).
bool mma2_ws_compiled();
// Whether a device of compute capability major.minor runs the ws kernel's images (9.0, 12.0).
bool mma2_ws_runs_on(int major, int minor);
int default_mma2_ring(int major, int minor);
// `requested` "ws" on a device that cannot run it is InvalidInput naming MLAV_MMA2_RING.
int choose_mma2_ring(const char* requested, int major, int minor);
// The ws ring (named or the default) routes a batch whose requests each fit one 64-row tile (num_heads x
// max_draft <= 64: chain4's 16 heads x 4) to ring 4: every KV tile then serves one row tile, the
// stream binds, and ring 4 is 1.12-1.38x faster there than the ws kernel (cuda/NOTES.md v37).
// `requested` is MLAV_WS_ROUTE: null, "" or "1" routes, "0" keeps ws on every batch (to measure
// it); anything else is InvalidInput naming the variable. Other rings pass through.
int route_mma2_ring(int ring, int64_t row_tiles_per_request, const char* requested);
int choose_mma2_l1(const char* requested, int ring);
// The preferred shared-memory carveout (percent of the SM's maximum) for a kernel that uses
// `block_smem` bytes per block, one block per SM, and wants the rest of the SM's L1/shared array
// as L1: the smallest percentage that holds the block and the 1 KB the driver reserves per
// block. `requested` is MLAV_SMEM_CARVEOUT (null or "": this rule; an integer -1..100 forces it,
// 100 leaving L1 the least, as the RTX PRO 6000 has with a 99 KB block).
int choose_carveout(const char* requested, int block_smem, int max_smem_per_sm);

// The split plan for the wgmma kernel, from static sizes only (so it holds for a captured graph):
// unfolded, the draft of each row tile gets a block of its own, which runs on the SMs the prefix
// blocks leave free; folded (split_plan.h), the draft tiles join the prefix splits and the splits
// are evened out in whole tiles. Folded unless the draft blocks fit in at most two rounds on the
// free SMs (cuda/NOTES.md v14 has the measurements). `requested` is MLAV_DRAFT_PLAN: null or ""
// for this rule, "folded" or "unfolded" to force one (anything else is InvalidInput naming it).
bool choose_folded(const char* requested, int32_t batch_size, int32_t num_heads, int32_t max_draft,
                   int32_t num_splits, int sm_count);

// Whether the wgmma kernel merges its partials itself, each row tile's num_splits blocks as one
// thread block cluster reading each other's shared memory (no fp32 partials through global
// memory, no merge launch), or leaves them to the merge kernel. Only the folded plan has all of
// a row tile's work in one cluster's blocks, and clusters of more than 8 blocks are not
// portable. By default: clusters when the device holds as many blocks at once as clusters as
// without them (max_active_clusters * num_splits >= min(grid blocks, SMs)), so the clusters
// cost no SM. `requested` is MLAV_MERGE: null or "" for this rule, "kernel" for the merge
// kernel, "cluster" to force clusters (Unsupported naming MLAV_MERGE where impossible);
// anything else is InvalidInput naming it.
bool choose_cluster_merge(const char* requested, bool folded, int32_t num_splits,
                          int max_active_clusters, int64_t grid_blocks, int sm_count);
inline constexpr int32_t kMaxClusterMerge = 8;

// One verify launch over DEVICE pointers. Lifecycle: can_implement -> workspace_bytes ->
// initialize (once, outside capture) -> run (any number of times, capturable in a CUDA graph).
// Every size that varies per step is read on the device from the metadata buffers; run() does no
// host synchronization, allocation or device-to-host read.
class VerifyKernel {
 public:
  // Static checks only (dtypes, sizes, 16-byte alignment of strides and pointers): the metadata
  // lives on the device and is trusted here (CudaBackend validates host copies before staging).
  static Support can_implement(const VerifyParams& p);
  // What the kernel over device pointers takes: bf16 Q and KV, num_splits honoured, and int64
  // token-level kv_indices only (int32 ids and page tables are translated on the host,
  // cuda::with_token_indices, which a caller whose buffers are already on the device cannot run).
  // CudaBackend widens the indexings (it translates); the device plugins take these as they are.
  static Capabilities capabilities();
  // fp32 partials: (num_splits + 1) x max_total_q x H x (512 + 1); under the balanced plan
  // (plan_blocks > 0) then, from plan_offset, the plan the planning kernel writes.
  static size_t workspace_bytes(const VerifyParams& p);
  static size_t plan_offset(const VerifyParams& p);

  // Binds params, workspace (>= workspace_bytes, 16-byte aligned) and stream. Throws Unsupported
  // when can_implement says no. Sets the kernel's shared-memory attribute (a host call, so do it
  // before capture).
  void initialize(const VerifyParams& p, void* workspace, CUstream_st* stream);
  // Enqueues the planning kernel (balanced plan only), then the partial kernel and the merge
  // kernel on the stream: plan() then attend(), the partial kernel launched as the plan's
  // programmatic dependent where choose_plan_pdl says so.
  void run();
  // The two halves of run(), for a plan computed once per forward pass and used by every layer
  // (as FlashMLA's tile-scheduler metadata is; FlashInfer plans on the host once per batch).
  // plan() enqueues the planning kernel, which writes the plan into the workspace from the
  // metadata buffers as they are when it runs; under the uniform plan it enqueues nothing.
  // attend() enqueues the partial and merge kernels, which read that plan: it must follow, in
  // stream order, a plan() or run() of a kernel initialized with the same workspace and the same
  // sizes, over metadata whose qo_indptr and kv_indptr hold the same values (Q, KV, kv_indices,
  // the mask and the outputs may differ: they are the layer's). Nothing checks this on the
  // device: attend() over a stale plan computes the wrong splits, and its results are wrong.
  void plan();
  void attend();
  // The partial kernel initialize() chose (choose_variant with MLAV_CUDA_KERNEL).
  const char* variant_name() const { return cuda::variant_name(variant_); }
  // Whether the draft keys join the prefix splits (split_plan.h's folded plan; the wgmma kernel
  // only: choose_folded with MLAV_DRAFT_PLAN) or get blocks of their own.
  bool folded() const { return folded_; }
  // Whether the partial kernel merges in clusters (choose_cluster_merge with MLAV_MERGE) rather
  // than through the merge kernel.
  bool cluster_merge() const { return cluster_merge_; }
  // The 2-stage kernel's L1 prefetch distance in chunks (choose_mma2_l1; 0 for other variants).
  int mma2_l1() const { return mma2_l1_; }
  // The 2-stage kernel's ring: 2 buffers and P, or 3 with P in the ring (choose_mma2_ring).
  int mma2_ring() const { return mma2_ring_; }

 private:
  detail::PartialArgs launch_args() const;
  void enqueue(bool plan, bool attend);
  VerifyParams params_{};
  void* workspace_ = nullptr;
  CUstream_st* stream_ = nullptr;
  KernelVariant variant_ = KernelVariant::Mma2;
  bool folded_ = false;
  bool cluster_merge_ = false;
  int mma2_ring_ = 2;
  int mma2_l1_ = 0;
  bool plan_pdl_ = true;  // choose_plan_pdl: the partial kernel as the plan's dependent
  bool initialized_ = false;
};

}  // namespace mlaverify::cuda
