// Backend registry for the CLI. The only place outside tests/ and bench/ that names backends.
// The CUDA backend joins when the build found nvcc; it still says no at run time without a device.
#include "cli/backends.h"

#include "cpu/cpu_backend.h"
#include "mlaverify/error.h"
#include "model/model_backend.h"
#include "plugin/plugin_backend.h"
#include "props/mutants.h"
#ifdef MLAV_HAVE_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace mlaverify::cli {

std::vector<std::string> backend_names() {
  std::vector<std::string> names{"model", "cpu", "cpu-folded"};
#ifdef MLAV_HAVE_CUDA
  names.push_back("cuda");
#endif
  return names;
}

BackendPtr make_backend(std::string_view name) {
  // plugin:PATH.so[?config]: a kernel behind the C ABI (plugin/plugin_backend.h); ?guarded runs
  // it in a worker process with guard regions (plugin/guarded.h).
  if (name.starts_with(plugin::kPluginPrefix)) {
    return plugin::make_plugin_backend(name.substr(plugin::kPluginPrefix.size()));
  }
  if (name == "model") return std::make_shared<model::ModelBackend>();
  if (name == "cpu") return cpu::make_cpu_backend();
  // The CPU backend on the wgmma kernel's folded split plan (CpuOptions::folded).
  if (name == "cpu-folded") return cpu::make_cpu_backend({.folded = true});
#ifdef MLAV_HAVE_CUDA
  if (name == "cuda") return std::make_shared<cuda::CudaBackend>();
#endif
  std::string known;
  for (const std::string& n : backend_names()) known += (known.empty() ? "" : ", ") + n;
  throw InvalidInput("backend", -1,
                     "unknown backend '" + std::string(name) + "' (known: " + known +
                         ", plugin:PATH.so[?config])");
}

BackendPtr make_backend_or_mutant(std::string_view name) {
  if (!name.starts_with(kMutantPrefix)) return make_backend(name);
  std::string_view mutant = name.substr(kMutantPrefix.size());
  // A recorded label reads "mutant:<name>(<inner>)": the inner backend is always cpu here.
  if (size_t paren = mutant.find('('); paren != std::string_view::npos) {
    mutant = mutant.substr(0, paren);
  }
  for (const props::MutantInfo& m : props::all_mutants()) {
    if (m.name == mutant) return props::make_mutant(m.mutant, make_backend("cpu"));
  }
  std::string known;
  for (const props::MutantInfo& m : props::all_mutants()) {
    known += (known.empty() ? "" : ", ") + std::string(m.name);
  }
  throw InvalidInput("backend", -1,
                     "unknown mutant '" + std::string(mutant) + "' (known: " + known + ")");
}

std::vector<std::string> mutant_names() {
  std::vector<std::string> names;
  for (const props::MutantInfo& m : props::all_mutants()) {
    names.push_back(std::string(kMutantPrefix) + std::string(m.name));
  }
  return names;
}

}  // namespace mlaverify::cli
