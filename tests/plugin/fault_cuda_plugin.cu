// libmlav_test_fault_cuda_plugin.so: a MLAV_MEMORY_CUDA plugin that loses its CUDA context on
// purpose, for the tests that a lost context is BackendLost in process and a fresh worker when
// guarded (test_cuda_plugin.cpp). Config "fault_bs=N": a run of batch size N stores through a
// null pointer on the caller's stream (cudaErrorIllegalAddress, sticky); any other run returns at
// once and writes nothing (its outputs are not what these tests look at). "fault_bs=N,fail": the
// faulting run also returns MLAV_ERROR with the text "failed on purpose", as a plugin that sees
// its own launch fail would.
#include <cuda_runtime.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "cuda/cuda_backend.h"
#include "mlaverify/c_api.h"
#include "plugin/guard_call.h"
#include "plugin/plugin_backend.h"

namespace {

using namespace mlaverify;

__global__ void store_through_null(int* p) { *p = 1; }

struct FaultPlugin {
  std::string name = "fault-cuda";
  Capabilities caps;
  int32_t fault_bs = -1;
  bool fail = false;  // the faulting run also reports an error
};

FaultPlugin& self_of(void* self) { return *static_cast<FaultPlugin*>(self); }

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

mlav_status can_implement(void*, const mlav_params*, char*, size_t) { return MLAV_OK; }

mlav_status workspace_bytes(void*, const mlav_params*, uint64_t* bytes, char*, size_t) {
  *bytes = 0;
  return MLAV_OK;
}

mlav_status run(void* self, const mlav_params* p, void*, uint64_t, void* stream, char* err,
                size_t err_size) {
  return plugin::guard_call(err, err_size, [&] {
    const FaultPlugin& me = self_of(self);
    if (plugin::from_c_params(p).batch_size != me.fault_bs) return MLAV_OK;
    store_through_null<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(nullptr);
    if (!me.fail) return MLAV_OK;
    plugin::write_error(err, err_size, "fault-cuda plugin: failed on purpose");
    return MLAV_ERROR;
  });
}

void destroy(void* self) { delete static_cast<FaultPlugin*>(self); }

}  // namespace

extern "C" MLAV_EXPORT mlav_status mlav_plugin_open(uint32_t abi_version, const char* config,
                                                    mlav_backend* out, char* err, size_t err_size) {
  if (abi_version == 0 || out == nullptr || out->struct_size < sizeof(mlav_backend)) {
    plugin::write_error(err, err_size, "fault-cuda plugin: needs an ABI >= 1 mlav_backend");
    return MLAV_INVALID_INPUT;
  }
  const std::string want = config != nullptr ? config : "";
  if (want.rfind("fault_bs=", 0) != 0) {
    plugin::write_error(err, err_size, "fault-cuda plugin: config must be fault_bs=N");
    return MLAV_INVALID_INPUT;
  }
  return plugin::guard_call(err, err_size, [&] {
    size_t used = 0;
    const int32_t fault_bs = std::stoi(want.substr(9), &used);
    const std::string rest = want.substr(9 + used);
    if (rest != "" && rest != ",fail") {
      throw std::invalid_argument("fault-cuda plugin: config must be fault_bs=N[,fail]");
    }
    auto* self = new FaultPlugin();
    self->caps = cuda::CudaBackend().capabilities();
    self->caps.kv_indexings = bit(KvIndexing::TokenI64);
    self->fault_bs = fault_bs;
    self->fail = rest == ",fail";
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
