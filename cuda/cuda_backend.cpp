// CudaBackend: host staging around VerifyKernel. Device buffers grow and are reused across runs,
// so a property suite of thousands of small cases pays no allocation per case.
#include "cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/host_validate.h"
#include "cuda/static_checks.h"
#include "cuda/verify_kernel.h"
#include "mlaverify/error.h"

namespace mlaverify::cuda {
namespace {

// A grow-only device allocation.
struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  void* reserve(size_t n) {
    n = std::max<size_t>(n, 16);
    if (n > bytes) {
      if (ptr != nullptr) CUDA_CHECK(cudaFree(ptr));
      ptr = nullptr;
      bytes = 0;
      CUDA_CHECK(cudaMalloc(&ptr, n));
      bytes = n;
    }
    return ptr;
  }
  ~DeviceBuffer() {
    if (ptr != nullptr) cudaFree(ptr);  // destructor: nothing to report an error to
  }
};

// Elements from a base pointer to one past the last element the kernel may touch.
int64_t q_extent(const VerifyParams& p) {
  return (p.max_total_q - 1) * p.q_token_stride + (p.num_heads - 1) * p.q_head_stride +
         std::max(p.q_latent_offset + kLatentDim, p.q_rope_offset + kRopeDim);
}
int64_t pool_extent(const VerifyParams& p) {
  const KvLayout& l = p.kv_layout;
  const int64_t last =
      p.pool_slots - 1;  // strides are non-negative: the last slot reaches furthest
  return std::max(l.latent_index(last) + kLatentDim, l.rope_index(last) + kRopeDim);
}
int64_t o_extent(const VerifyParams& p) {
  return (p.max_total_q - 1) * p.o_token_stride + (p.num_heads - 1) * p.o_head_stride + kLatentDim;
}

}  // namespace

Support cuda_device_available() {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls are not confused
    return Support::no(std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err));
  }
  if (n == 0) return Support::no("cudaGetDeviceCount reports 0 devices");
  return Support::yes();
}

struct CudaBackend::State {
  cudaStream_t stream = nullptr;
  cudaEvent_t before = nullptr, after = nullptr;  // around the kernels of one run
  DeviceBuffer q, pool, qo, kv, idx, kext, mask, mask_indptr, o, lse, ws;
  std::vector<int32_t> kv_indptr;   // host: with_token_indices' translation of other indexings
  std::vector<int64_t> kv_indices;
  ~State() {
    if (before != nullptr) cudaEventDestroy(before);
    if (after != nullptr) cudaEventDestroy(after);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

CudaBackend::CudaBackend() : state_(std::make_unique<State>()) {}
CudaBackend::~CudaBackend() = default;

Capabilities CudaBackend::capabilities() const {
  // The kernel's, with every indexing: run() translates the others to token_i64 on the host.
  Capabilities c = VerifyKernel::capabilities();
  c.kv_indexings = Capabilities{}.kv_indexings;
  return c;
}

Support CudaBackend::can_implement(const VerifyParams& p) const {
  // Once the context is lost nothing can run: BackendLost, as from run(), not a refusal (which a
  // property campaign would count as a skipped case and go on).
  if (!lost_.empty()) throw BackendLost(lost_);
  if (Support dev = cuda_device_available(); !dev)
    return Support::no("no CUDA device: " + dev.reason);
  return detail::check_static(p, /*check_pointers=*/false);
}

size_t CudaBackend::workspace_bytes(const VerifyParams& p) const {
  return VerifyKernel::workspace_bytes(p);
}

void CudaBackend::run(const VerifyParams& given) {
  // The kernel reads int64 token-level indices: int32 ids and page tables are translated on the
  // host first (their own checks included). Bad metadata is InvalidInput whether or not a device
  // is present (checked on the host first), once the context is lost BackendLost.
  if (!lost_.empty()) throw BackendLost(lost_);  // before any runtime call: the context is gone
  const VerifyParams p = with_token_indices(given, state_->kv_indptr, state_->kv_indices);
  validate_host_params(p);
  if (Support s = can_implement(p); !s) throw Unsupported("cuda backend: " + s.reason);
  try {
    run_on_device(p);
  } catch (const CudaError& e) {
    // A fault inside a kernel (illegal address, trap) poisons the CUDA context: every later call
    // in this process fails with the same error, whatever its input. Reported as BackendLost, so
    // a property campaign stops at this case instead of counting every later case as failed and
    // "shrinking" to the first simpler case it tries (it did: an illegal address at case 6 became
    // bs 1, P 0). cudaDeviceReset does not bring the device back here (the next context's first
    // call fails with cudaErrorDevicesUnavailable, measured on the H200), so nothing is retried.
    if (cudaDeviceSynchronize() == cudaSuccess) {
      cudaGetLastError();  // an ordinary failure (out of memory, ...): not left for the next run
      throw;
    }
    const BackendLost lost = BackendLost::cuda_context(e.what());
    lost_ = lost.what();
    throw lost;
  }
}

void CudaBackend::run_on_device(const VerifyParams& p) {
  State& st = *state_;
  if (st.stream == nullptr)
    CUDA_CHECK(cudaStreamCreateWithFlags(&st.stream, cudaStreamNonBlocking));
  if (st.before == nullptr) {
    CUDA_CHECK(cudaEventCreate(&st.before));
    CUDA_CHECK(cudaEventCreate(&st.after));
  }

  auto stage = [&](DeviceBuffer& buf, const void* host, size_t bytes) -> void* {
    void* d = buf.reserve(bytes);
    CUDA_CHECK(cudaMemcpyAsync(d, host, bytes, cudaMemcpyHostToDevice, st.stream));
    return d;
  };
  const size_t bs = static_cast<size_t>(p.batch_size);
  const int obytes = dtype_bytes(p.o_dtype);

  VerifyParams d = p;
  d.q = stage(st.q, p.q, q_extent(p) * 2);
  d.kv_pool = stage(st.pool, p.kv_pool, pool_extent(p) * 2);
  d.qo_indptr = static_cast<const int32_t*>(stage(st.qo, p.qo_indptr, (bs + 1) * 4));
  d.kv_indptr = static_cast<const int32_t*>(stage(st.kv, p.kv_indptr, (bs + 1) * 4));
  const size_t n_idx = static_cast<size_t>(std::max<int64_t>(p.kv_indices_len, 0));
  d.kv_indices = n_idx == 0 ? static_cast<const int64_t*>(st.idx.reserve(8))
                            : static_cast<const int64_t*>(stage(st.idx, p.kv_indices, n_idx * 8));
  if (p.draft_source == DraftKvSource::ExtendRows)
    d.k_extend =
        stage(st.kext, p.k_extend, ((p.max_total_q - 1) * p.k_extend_stride + kRowDim) * 2);
  const size_t mask_unit = p.mask_format == MaskFormat::DraftBits ? 4 : 1;
  d.mask =
      stage(st.mask, p.mask, static_cast<size_t>(std::max<int64_t>(p.mask_len, 1)) * mask_unit);
  if (p.mask_format == MaskFormat::FullMask || p.mask_format == MaskFormat::FlashInferPacked)
    d.mask_indptr = static_cast<const int64_t*>(stage(
        st.mask_indptr, p.mask_indptr, indptr_length(p.mask_indptr_convention, p.batch_size) * 8));
  // Outputs go down too, so rows the kernel does not write come back as the caller left them.
  d.o_lat = stage(st.o, p.o_lat, o_extent(p) * obytes);
  d.lse = static_cast<float*>(stage(st.lse, p.lse, p.max_total_q * p.num_heads * 4));
  const size_t ws_bytes = VerifyKernel::workspace_bytes(d);
  void* ws = st.ws.reserve(ws_bytes);
  // The kernel may assume nothing about the workspace it is given (a server hands it the buffer
  // the last step used): every run gets one full of 0x7f bytes (int32 2,139,062,143, float
  // 3.4e38), so a read of an entry this run did not write is loud now, and in a replay of the
  // case alone, not only after some earlier case happened to leave the wrong values behind.
  CUDA_CHECK(cudaMemsetAsync(ws, kWorkspacePoison, ws_bytes, st.stream));

  VerifyKernel kernel;
  kernel.initialize(d, ws, st.stream);
  last_run_folded_ = kernel.folded();
  last_device_ms_ = -1;
  CUDA_CHECK(cudaEventRecord(st.before, st.stream));
  kernel.run();
  CUDA_CHECK(cudaEventRecord(st.after, st.stream));
  CUDA_CHECK(
      cudaMemcpyAsync(p.o_lat, d.o_lat, o_extent(p) * obytes, cudaMemcpyDeviceToHost, st.stream));
  CUDA_CHECK(cudaMemcpyAsync(p.lse, d.lse, p.max_total_q * p.num_heads * 4, cudaMemcpyDeviceToHost,
                             st.stream));
  CUDA_CHECK(cudaStreamSynchronize(st.stream));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, st.before, st.after));
  last_device_ms_ = ms;
}

BackendPtr make_cuda_backend() { return std::make_shared<CudaBackend>(); }

}  // namespace mlaverify::cuda
