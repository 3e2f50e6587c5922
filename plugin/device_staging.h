// Device copies of one run's buffers for a MLAV_MEMORY_CUDA plugin (PluginBackend::invoke):
// grow-only device allocations reused across runs, one stream. Without CUDA in the build, every
// entry point says so (device_available is no, make_device_staging throws Unsupported).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "mlaverify/backend.h"
#include "mlaverify/verify_params.h"

namespace mlaverify::plugin {

// Whether a CUDA device is usable from this process; when not, why.
Support device_available();

class DeviceStaging {
 public:
  virtual ~DeviceStaging() = default;
  // Copies every buffer of host params `p` (buffers.h extents) to the device; outputs (and the
  // workspace's guards, when host_workspace is given) with `guard` bytes of host memory either
  // side. Allocates a workspace of ws_bytes (plus the guards).
  virtual void stage(const VerifyParams& p, size_t ws_bytes, size_t guard,
                     void* host_workspace) = 0;
  // p with every pointer replaced by its device copy (valid until the next stage).
  virtual const VerifyParams& params() const = 0;
  virtual void* workspace() = 0;
  virtual void* stream() = 0;  // a cudaStream_t
  // Synchronizes the stream and copies the outputs (with their guards) and the workspace's
  // guards back to the host. Throws std::runtime_error on a CUDA error, BackendLost on one that
  // lost the context (a faulting kernel); stage and finish throw BackendLost from then on.
  virtual void finish(const VerifyParams& p, size_t guard, void* host_workspace,
                      size_t ws_bytes) = 0;
  // BackendLost's message once the context is lost, else empty.
  virtual const std::string& lost() const = 0;
};

std::unique_ptr<DeviceStaging> make_device_staging();

}  // namespace mlaverify::plugin
