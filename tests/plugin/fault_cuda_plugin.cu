// libmlav_test_fault_cuda_plugin.so: a MLAV_MEMORY_CUDA plugin that loses its CUDA context on
// purpose, for the tests that a lost context is BackendLost in process and a fresh worker when
// guarded (test_cuda_plugin.cpp). Config "fault_bs=N": a run of batch size N stores through a
// null pointer on the caller's stream (cudaErrorIllegalAddress, sticky); any other run returns at
// once and writes nothing (its outputs are not what these tests look at). "fault_bs=N,fail": the
// faulting run also returns MLAV_ERROR with the text "failed on purpose", as a plugin that sees
// its own launch fail would. Built on plugin::open_exported_device, as the CUDA plugin is.
#include <cuda_runtime.h>

#include <exception>
#include <stdexcept>
#include <string>

#include "cuda/verify_kernel.h"
#include "mlaverify/c_api.h"
#include "mlaverify/error.h"
#include "plugin/plugin_backend.h"

namespace {

using namespace mlaverify;

__global__ void store_through_null(int* p) { *p = 1; }

plugin::DeviceParts fault_parts(std::string_view config) {
  const auto bad = [] {
    return InvalidInput("config", -1, "the fault-cuda plugin takes fault_bs=N[,fail]");
  };
  if (config.rfind("fault_bs=", 0) != 0) throw bad();
  const std::string rest(config.substr(9));
  size_t used = 0;
  int32_t fault_bs = -1;
  try {
    fault_bs = std::stoi(rest, &used);
  } catch (const std::exception&) {
    throw bad();
  }
  if (rest.substr(used) != "" && rest.substr(used) != ",fail") throw bad();
  const bool fail = rest.substr(used) == ",fail";  // the faulting run also reports an error
  plugin::DeviceParts d;
  d.name = "fault-cuda";
  d.capabilities = cuda::VerifyKernel::capabilities();
  d.can_implement = [](const VerifyParams&) { return Support::yes(); };
  d.run = [fault_bs, fail](const VerifyParams& p, void*, void* stream) {
    if (p.batch_size != fault_bs) return;
    store_through_null<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(nullptr);
    if (fail) throw std::runtime_error("fault-cuda plugin: failed on purpose");
  };
  return d;
}

}  // namespace

extern "C" MLAV_EXPORT mlav_status mlav_plugin_open(uint32_t abi_version, const char* config,
                                                    mlav_backend* out, char* err, size_t err_size) {
  return plugin::open_exported_device(abi_version, config, out, err, err_size, fault_parts);
}
