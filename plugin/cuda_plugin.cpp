// libmlaverify_cuda_plugin.so: the production kernel as a plugin on DEVICE memory
// (MLAV_MEMORY_CUDA). mlaverify stages every buffer to the device; this plugin runs
// cuda/verify_kernel.h's device-pointer lifecycle on them (can_implement, workspace_bytes,
// initialize + run on the caller's stream), so the ABI's device path is exercised end to end.
// No host validation here: the caller validated its host copies before staging (c_api.h). The
// table is plugin::open_exported_device's over this file's parts.
#include <string>

#include "cuda/cuda_backend.h"
#include "cuda/verify_kernel.h"
#include "mlaverify/c_api.h"
#include "mlaverify/error.h"
#include "plugin/plugin_backend.h"

namespace {

using namespace mlaverify;

plugin::DeviceParts cuda_parts(std::string_view config) {
  if (!config.empty()) {
    throw InvalidInput("config", -1,
                       "the cuda plugin takes none (got '" + std::string(config) + "')");
  }
  plugin::DeviceParts d;
  d.name = "cuda";
  d.capabilities = cuda::VerifyKernel::capabilities();  // token_i64 only: buffers on the device
  d.can_implement = [](const VerifyParams& p) {
    Support s = cuda::cuda_device_available();
    return s ? cuda::VerifyKernel::can_implement(p) : s;
  };
  d.workspace_bytes = [](const VerifyParams& p) -> uint64_t {
    return cuda::VerifyKernel::workspace_bytes(p);
  };
  d.run = [](const VerifyParams& p, void* workspace, void* stream) {
    cuda::VerifyKernel kernel;
    kernel.initialize(p, workspace, static_cast<CUstream_st*>(stream));
    kernel.run();
  };
  return d;
}

}  // namespace

extern "C" MLAV_EXPORT mlav_status mlav_plugin_open(uint32_t abi_version, const char* config,
                                                    mlav_backend* out, char* err, size_t err_size) {
  return plugin::open_exported_device(abi_version, config, out, err, err_size, cuda_parts);
}
