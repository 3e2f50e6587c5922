// CUDA staging for MLAV_MEMORY_CUDA plugins: every buffer copied to the device by its static
// extent (buffers.h), the outputs copied back. The only CUDA runtime code in plugin/.
#include "plugin/device_staging.h"

#include <stdexcept>
#include <string>

#include "mlaverify/error.h"
#include "plugin/buffers.h"

#ifdef MLAV_HAVE_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#endif

namespace mlaverify::plugin {

#ifndef MLAV_HAVE_CUDA

Support device_available() {
  return Support::no(
      "a MLAV_MEMORY_CUDA plugin needs mlaverify built with CUDA (nvcc not found "
      "at configure time)");
}

std::unique_ptr<DeviceStaging> make_device_staging() {
  throw Unsupported(device_available().reason);
}

#else

namespace {

// A failed call. A sticky error (a kernel fault: the plugin's, on the stream) has lost the CUDA
// context, and every later call in this process reports it whatever its input: BackendLost, as
// CudaBackend reports it (a campaign stops at the case instead of shrinking against a dead
// context; a guarded worker exits and the next call starts a fresh one). Otherwise the error is
// cleared, so the next run does not inherit it.
void cuda_check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  const std::string msg =
      std::string("CUDA ") + what + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  if (cudaDeviceSynchronize() != cudaSuccess) throw BackendLost::cuda_context(msg);
  cudaGetLastError();
  throw std::runtime_error(msg);
}

// A grow-only device allocation.
struct DeviceBuffer {
  unsigned char* ptr = nullptr;
  size_t bytes = 0;
  unsigned char* reserve(size_t n) {
    n = std::max<size_t>(n, 256);
    if (n > bytes) {
      if (ptr != nullptr) cudaFree(ptr);
      ptr = nullptr;
      bytes = 0;
      cuda_check(cudaMalloc(reinterpret_cast<void**>(&ptr), n), "cudaMalloc");
      bytes = n;
    }
    return ptr;
  }
  ~DeviceBuffer() {
    if (ptr != nullptr) cudaFree(ptr);  // destructor: nothing to report to
  }
};

class CudaStaging final : public DeviceStaging {
 public:
  ~CudaStaging() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  void stage(const VerifyParams& p, size_t ws_bytes, size_t guard, void* host_ws) override {
    keeping_lost([&] { stage_on_device(p, ws_bytes, guard, host_ws); });
  }

  const VerifyParams& params() const override { return d_; }
  void* workspace() override { return ws_ptr_; }
  void* stream() override { return stream_; }
  const std::string& lost() const override { return lost_; }

  void finish(const VerifyParams& p, size_t guard, void* host_ws, size_t ws_bytes) override {
    keeping_lost([&] { finish_on_device(p, guard, host_ws, ws_bytes); });
  }

 private:
  // Runs `f` unless the context is already lost (then BackendLost before any runtime call), and
  // remembers a loss that `f` meets.
  template <class F>
  void keeping_lost(F&& f) {
    if (!lost_.empty()) throw BackendLost(lost_);
    try {
      f();
    } catch (const BackendLost& e) {
      lost_ = e.what();
      throw;
    }
  }

  void stage_on_device(const VerifyParams& p, size_t ws_bytes, size_t guard, void* host_ws) {
    if (stream_ == nullptr) {
      cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream create");
    }
    d_ = p;
    const auto bytes = buffer_bytes(p);
    for (int id = 0; id < kNumBuffers; ++id) {
      const BufferId b = BufferId(id);
      if (bytes[id] == 0) {
        set_buffer_ptr(d_, b, nullptr);
        continue;
      }
      const size_t g = is_output(b) ? guard : 0;  // outputs carry their guards down and back
      unsigned char* dev = buf_[id].reserve(bytes[id] + 2 * g);
      const auto* host = static_cast<const unsigned char*>(buffer_ptr(p, b)) - g;
      cuda_check(cudaMemcpyAsync(dev, host, bytes[id] + 2 * g, cudaMemcpyHostToDevice, stream_),
                 "copy to device");
      set_buffer_ptr(d_, b, dev + g);
    }
    const size_t wg = host_ws != nullptr ? guard : 0;
    unsigned char* ws = ws_.reserve(ws_bytes + 2 * wg);
    if (wg > 0) {
      const auto* h = static_cast<const unsigned char*>(host_ws);
      cuda_check(cudaMemcpyAsync(ws, h - wg, wg, cudaMemcpyHostToDevice, stream_), "guard");
      cuda_check(
          cudaMemcpyAsync(ws + wg + ws_bytes, h + ws_bytes, wg, cudaMemcpyHostToDevice, stream_),
          "guard");
    }
    ws_ptr_ = ws + wg;
  }

  void finish_on_device(const VerifyParams& p, size_t guard, void* host_ws, size_t ws_bytes) {
    cuda_check(cudaStreamSynchronize(stream_), "the plugin's work on its stream");
    const auto bytes = buffer_bytes(p);
    for (BufferId b : {kOLat, kLse}) {
      if (bytes[b] == 0) continue;
      auto* host = static_cast<unsigned char*>(const_cast<void*>(buffer_ptr(p, b))) - guard;
      cuda_check(cudaMemcpy(host, buf_[b].ptr, bytes[b] + 2 * guard, cudaMemcpyDeviceToHost),
                 "copy back");
    }
    if (host_ws != nullptr && guard > 0) {
      auto* h = static_cast<unsigned char*>(host_ws);
      cuda_check(cudaMemcpy(h - guard, ws_.ptr, guard, cudaMemcpyDeviceToHost), "guard back");
      cuda_check(
          cudaMemcpy(h + ws_bytes, ws_.ptr + guard + ws_bytes, guard, cudaMemcpyDeviceToHost),
          "guard back");
    }
  }

  cudaStream_t stream_ = nullptr;
  std::array<DeviceBuffer, kNumBuffers> buf_;
  DeviceBuffer ws_;
  unsigned char* ws_ptr_ = nullptr;
  VerifyParams d_{};
  std::string lost_;  // BackendLost's message once the context is lost
};

}  // namespace

Support device_available() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return Support::no(std::string("no CUDA device: cudaGetDeviceCount: ") +
                       cudaGetErrorString(err));
  }
  if (n == 0) return Support::no("no CUDA device: cudaGetDeviceCount reports 0 devices");
  return Support::yes();
}

std::unique_ptr<DeviceStaging> make_device_staging() { return std::make_unique<CudaStaging>(); }

#endif

}  // namespace mlaverify::plugin
