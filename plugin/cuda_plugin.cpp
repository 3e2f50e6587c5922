// libmlaverify_cuda_plugin.so: the production kernel as a plugin on DEVICE memory
// (MLAV_MEMORY_CUDA). mlaverify stages every buffer to the device; this plugin runs
// cuda/verify_kernel.h's device-pointer lifecycle on them (can_implement, workspace_bytes,
// initialize + run on the caller's stream), so the ABI's device path is exercised end to end.
// No host validation here: the caller validated its host copies before staging (c_api.h).
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "cuda/cuda_backend.h"
#include "cuda/verify_kernel.h"
#include "mlaverify/c_api.h"
#include "mlaverify/error.h"
#include "plugin/guard_call.h"
#include "plugin/plugin_backend.h"

namespace {

using namespace mlaverify;

// The kernel over device pointers reads int64 token-level kv_indices only: the CUDA backend's
// host-side translation of int32 ids and page tables (cuda::with_token_indices) cannot run on
// buffers already on the device, so the plugin declares token_i64 alone.
Capabilities plugin_capabilities() {
  Capabilities c = cuda::CudaBackend().capabilities();
  c.kv_indexings = bit(KvIndexing::TokenI64);
  return c;
}

struct CudaPlugin {
  std::string name = "cuda";
  Capabilities caps = plugin_capabilities();
};

CudaPlugin& self_of(void* self) { return *static_cast<CudaPlugin*>(self); }

mlav_status capabilities(void* self, mlav_capabilities* caps, char* err, size_t err_size) {
  return plugin::guard_call(err, err_size, [&] {
    const mlav_capabilities c = plugin::to_c_capabilities(self_of(self).caps);
    const size_t n = std::min<size_t>(caps->struct_size, sizeof(c));
    const uint32_t size = caps->struct_size, version = caps->abi_version;
    std::memcpy(caps, &c, n);
    caps->struct_size = size;
    caps->abi_version = version;
    return MLAV_OK;
  });
}

mlav_status can_implement(void*, const mlav_params* p, char* why, size_t why_size) {
  return plugin::guard_call(why, why_size, [&] {
    Support s = cuda::cuda_device_available();
    if (s) s = cuda::VerifyKernel::can_implement(plugin::from_c_params(p));
    if (s) return MLAV_OK;
    plugin::write_error(why, why_size, s.reason);
    return MLAV_UNSUPPORTED;
  });
}

mlav_status workspace_bytes(void*, const mlav_params* p, uint64_t* bytes, char* err,
                            size_t err_size) {
  return plugin::guard_call(err, err_size, [&] {
    *bytes = cuda::VerifyKernel::workspace_bytes(plugin::from_c_params(p));
    return MLAV_OK;
  });
}

mlav_status run(void*, const mlav_params* p, void* workspace, uint64_t, void* stream, char* err,
                size_t err_size) {
  return plugin::guard_call(err, err_size, [&] {
    cuda::VerifyKernel kernel;
    kernel.initialize(plugin::from_c_params(p), workspace, static_cast<CUstream_st*>(stream));
    kernel.run();
    return MLAV_OK;
  });
}

void destroy(void* self) { delete static_cast<CudaPlugin*>(self); }

}  // namespace

extern "C" MLAV_EXPORT mlav_status mlav_plugin_open(uint32_t abi_version, const char* config,
                                                    mlav_backend* out, char* err, size_t err_size) {
  if (abi_version == 0 || out == nullptr || out->struct_size < sizeof(mlav_backend)) {
    plugin::write_error(err, err_size, "cuda plugin: needs an ABI >= 1 mlav_backend to fill");
    return MLAV_INVALID_INPUT;
  }
  if (config != nullptr && config[0] != '\0') {
    plugin::write_error(err, err_size,
                        std::string("cuda plugin: takes no config (got '") + config + "')");
    return MLAV_INVALID_INPUT;
  }
  return plugin::guard_call(err, err_size, [&] {
    auto* self = new CudaPlugin();
    std::memset(out, 0, sizeof(mlav_backend));
    out->struct_size = sizeof(mlav_backend);
    out->abi_version = MLAV_ABI_VERSION;
    out->self = self;
    out->name = self->name.c_str();
    out->memory = MLAV_MEMORY_CUDA;
    out->capabilities = capabilities;
    out->can_implement = can_implement;
    out->workspace_bytes = workspace_bytes;
    out->run = run;
    out->destroy = destroy;
    return MLAV_OK;
  });
}
