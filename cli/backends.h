// The CLI's backend registry: a backend by name (model, cpu, cuda when built), so commands and
// scripts name what to run without linking to a particular implementation.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "mlaverify/backend.h"

namespace mlaverify::cli {

// Names this build can make, in a fixed order ("model", "cpu", and "cuda" with a CUDA build).
std::vector<std::string> backend_names();

// InvalidInput("backend", -1, ...) listing the known names when `name` is unknown.
// "plugin:PATH.so[?ITEMS]" loads a plugin through the C ABI (include/mlaverify/c_api.h): ITEMS
// are '&'-separated; `guarded` runs every call in a worker process with guard regions around the
// outputs and `timeout=SECONDS` bounds each call there (default 60); the rest is the plugin's
// config string. A bad path, a missing mlav_plugin_open or a broken table is one InvalidInput
// line naming the path.
BackendPtr make_backend(std::string_view name);

inline constexpr std::string_view kMutantPrefix = "mutant:";

// "mutant:<name>" (or a recorded label "mutant:<name>(<inner>)") wraps the CPU backend in a catalog
// mutant; any other name is make_backend's. InvalidInput listing the mutants for an unknown one.
BackendPtr make_backend_or_mutant(std::string_view name);

// "mutant:<name>" for every catalog mutant, in catalog order.
std::vector<std::string> mutant_names();

}  // namespace mlaverify::cli
