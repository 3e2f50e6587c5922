// libmlaverify_c.so: the library-side C API (include/mlaverify/c_suite.h) over the suite's C++
// (props/ campaigns, scenario replay, dump replay and diagnose, the built-in backends), for callers
// that reach mlaverify through C (the Python package, by ctypes). The one TU with JSON in capi/.
#include "mlaverify/c_suite.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/backends.h"
#include "cli/commands.h"
#include "cli/dump_commands.h"
#include "capi/c_options.h"
#include "cli/json_io.h"
#include "mlaverify/error.h"
#include "model/validate.h"
#include "plugin/guard_call.h"
#include "plugin/plugin_backend.h"
#include "props/properties.h"
#ifdef MLAV_HAVE_CUDA
#include "cuda/cuda_backend.h"
#endif

#define MLAV_API extern "C" __attribute__((visibility("default")))

namespace {

using mlaverify::BackendPtr;
using mlaverify::InvalidInput;
using mlaverify::plugin::write_error;
using json = nlohmann::json;

// The built-in tables this library made, by their self pointer: fuzz and replay run these
// backends directly (as the command line does, so scenario files name "cpu" or "mutant:x", and a
// recorded mutant is re-checked), not through a second trip over the C ABI.
struct Builtin {
  BackendPtr backend;
  std::string name;
  void (*destroy)(void*);
};
std::mutex registry_mutex;
std::map<void*, Builtin>& registry() {
  static std::map<void*, Builtin> r;
  return r;
}

void destroy_builtin(void* self) {
  void (*destroy)(void*) = nullptr;
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    auto it = registry().find(self);
    if (it == registry().end()) return;
    destroy = it->second.destroy;
    registry().erase(it);
  }
  if (destroy) destroy(self);
}

// The backend a table stands for, with its label for reports: a built-in one directly, anything
// else (a Python callable's table, a plugin's) as a PluginBackend over the table.
struct Resolved {
  BackendPtr backend;
  std::string label;
};
Resolved resolve(const mlav_backend* table) {
  if (table == nullptr) throw InvalidInput("backend", -1, "NULL table");
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    auto it = registry().find(table->self);
    if (table->self != nullptr && it != registry().end()) {
      return {it->second.backend, it->second.name};
    }
  }
  auto b = std::make_shared<mlaverify::plugin::PluginBackend>(*table);
  return {b, b->plugin_name()};
}

// Runs body under plugin::guard_call. JSON's exceptions are caught first and reported as the
// options' fault (MLAV_INVALID_INPUT, "options: ..."): guard_call alone would say MLAV_ERROR.
template <typename F>
mlav_status guarded(char* err, size_t err_size, F&& body) {
  return mlaverify::plugin::guard_call(err, err_size, [&] {
    try {
      body();
      return MLAV_OK;
    } catch (const json::exception& e) {
      write_error(err, err_size, std::string("options: ") + e.what());
      return MLAV_INVALID_INPUT;
    }
  });
}

char* dup(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out == nullptr) throw std::bad_alloc();
  std::memcpy(out, s.data(), s.size() + 1);
  return out;
}

// The human-readable log: stderr when verbose, else nowhere.
struct Log {
  explicit Log(bool verbose) : verbose_(verbose) {}
  std::ostream& out() { return verbose_ ? std::cerr : sink_; }
  bool verbose_;
  std::ostringstream sink_;
};

// A dump command's --json document; bad input (exit 2 with an "error" object) becomes InvalidInput.
// Its bad-input form (cli/dump_commands.cpp bad_input) is {"file", "field", "index", "error"}.
json dump_document(const std::string& text) {
  json d = json::parse(text);
  if (d.contains("error") && d.value("exit_code", 0) == mlaverify::cli::kExitBadInput) {
    const std::string file = d.value("file", std::string());
    const std::string what = d["error"].is_string() ? d["error"].get<std::string>() : d.dump();
    // what() already reads "<field>[<index>]: why"; the file is said once, in front.
    throw InvalidInput(file.empty() ? "file" : file, -1, what);
  }
  return d;
}

}  // namespace

MLAV_API uint32_t mlav_suite_abi_version(void) { return MLAV_ABI_VERSION; }
MLAV_API const char* mlav_suite_version(void) { return "0.1.0"; }

#define MLAV_FIELD(S, F) \
  if (std::strcmp(field, #F) == 0) return static_cast<int64_t>(offsetof(S, F));

MLAV_API int64_t mlav_suite_sizeof(const char* name) {
  if (name == nullptr) return -1;
  if (std::strcmp(name, "mlav_params") == 0) return sizeof(mlav_params);
  if (std::strcmp(name, "mlav_capabilities") == 0) return sizeof(mlav_capabilities);
  if (std::strcmp(name, "mlav_backend") == 0) return sizeof(mlav_backend);
  if (std::strcmp(name, "mlav_kv_layout") == 0) return sizeof(mlav_kv_layout);
  return -1;
}

MLAV_API int64_t mlav_suite_offsetof(const char* name, const char* field) {
  if (name == nullptr || field == nullptr) return -1;
  if (std::strcmp(name, "mlav_kv_layout") == 0) {
    MLAV_FIELD(mlav_kv_layout, kind) MLAV_FIELD(mlav_kv_layout, reserved)
    MLAV_FIELD(mlav_kv_layout, latent_offset) MLAV_FIELD(mlav_kv_layout, latent_stride)
    MLAV_FIELD(mlav_kv_layout, rope_offset) MLAV_FIELD(mlav_kv_layout, rope_stride)
  } else if (std::strcmp(name, "mlav_params") == 0) {
    MLAV_FIELD(mlav_params, struct_size) MLAV_FIELD(mlav_params, abi_version)
    MLAV_FIELD(mlav_params, batch_size) MLAV_FIELD(mlav_params, num_heads)
    MLAV_FIELD(mlav_params, max_draft) MLAV_FIELD(mlav_params, num_splits)
    MLAV_FIELD(mlav_params, max_total_q) MLAV_FIELD(mlav_params, sm_scale)
    MLAV_FIELD(mlav_params, reserved0) MLAV_FIELD(mlav_params, q)
    MLAV_FIELD(mlav_params, q_dtype) MLAV_FIELD(mlav_params, reserved1)
    MLAV_FIELD(mlav_params, q_token_stride) MLAV_FIELD(mlav_params, q_head_stride)
    MLAV_FIELD(mlav_params, q_latent_offset) MLAV_FIELD(mlav_params, q_rope_offset)
    MLAV_FIELD(mlav_params, kv_pool) MLAV_FIELD(mlav_params, kv_dtype)
    MLAV_FIELD(mlav_params, reserved2) MLAV_FIELD(mlav_params, kv_layout)
    MLAV_FIELD(mlav_params, pool_slots) MLAV_FIELD(mlav_params, qo_indptr)
    MLAV_FIELD(mlav_params, kv_indptr) MLAV_FIELD(mlav_params, kv_indexing)
    MLAV_FIELD(mlav_params, reserved3) MLAV_FIELD(mlav_params, kv_indices)
    MLAV_FIELD(mlav_params, kv_indices_i32) MLAV_FIELD(mlav_params, kv_indices_len)
    MLAV_FIELD(mlav_params, block_table) MLAV_FIELD(mlav_params, block_table_stride)
    MLAV_FIELD(mlav_params, page_size) MLAV_FIELD(mlav_params, draft_source)
    MLAV_FIELD(mlav_params, reserved4) MLAV_FIELD(mlav_params, k_extend)
    MLAV_FIELD(mlav_params, k_extend_stride) MLAV_FIELD(mlav_params, mask_format)
    MLAV_FIELD(mlav_params, mask_indptr_convention) MLAV_FIELD(mlav_params, mask)
    MLAV_FIELD(mlav_params, mask_len) MLAV_FIELD(mlav_params, mask_indptr)
    MLAV_FIELD(mlav_params, mask_draft_stride) MLAV_FIELD(mlav_params, mask_word_bytes)
    MLAV_FIELD(mlav_params, o_lat) MLAV_FIELD(mlav_params, o_dtype)
    MLAV_FIELD(mlav_params, reserved5) MLAV_FIELD(mlav_params, o_token_stride)
    MLAV_FIELD(mlav_params, o_head_stride) MLAV_FIELD(mlav_params, lse)
  } else if (std::strcmp(name, "mlav_capabilities") == 0) {
    MLAV_FIELD(mlav_capabilities, struct_size) MLAV_FIELD(mlav_capabilities, abi_version)
    MLAV_FIELD(mlav_capabilities, mask_formats)
    MLAV_FIELD(mlav_capabilities, mask_indptr_conventions)
    MLAV_FIELD(mlav_capabilities, kv_dtypes) MLAV_FIELD(mlav_capabilities, q_dtypes)
    MLAV_FIELD(mlav_capabilities, o_dtypes) MLAV_FIELD(mlav_capabilities, kv_layouts)
    MLAV_FIELD(mlav_capabilities, draft_sources) MLAV_FIELD(mlav_capabilities, kv_indexings)
    MLAV_FIELD(mlav_capabilities, page_sizes) MLAV_FIELD(mlav_capabilities, flags)
    MLAV_FIELD(mlav_capabilities, max_heads) MLAV_FIELD(mlav_capabilities, max_draft)
    MLAV_FIELD(mlav_capabilities, max_prefix) MLAV_FIELD(mlav_capabilities, operand_unit)
    MLAV_FIELD(mlav_capabilities, accumulate_unit) MLAV_FIELD(mlav_capabilities, p_unit)
    MLAV_FIELD(mlav_capabilities, exp_unit) MLAV_FIELD(mlav_capabilities, max_partials)
    MLAV_FIELD(mlav_capabilities, tile_keys)
  } else if (std::strcmp(name, "mlav_backend") == 0) {
    MLAV_FIELD(mlav_backend, struct_size) MLAV_FIELD(mlav_backend, abi_version)
    MLAV_FIELD(mlav_backend, self) MLAV_FIELD(mlav_backend, name)
    MLAV_FIELD(mlav_backend, memory) MLAV_FIELD(mlav_backend, reserved)
    MLAV_FIELD(mlav_backend, capabilities) MLAV_FIELD(mlav_backend, can_implement)
    MLAV_FIELD(mlav_backend, workspace_bytes) MLAV_FIELD(mlav_backend, run)
    MLAV_FIELD(mlav_backend, destroy)
  }
  return -1;
}
#undef MLAV_FIELD

MLAV_API mlav_status mlav_suite_info(char** out, char* err, size_t err_size) {
  if (out == nullptr) {
    write_error(err, err_size, "out: NULL");
    return MLAV_INVALID_INPUT;
  }
  *out = nullptr;
  return guarded(err, err_size, [&] {
    json j;
    j["version"] = mlav_suite_version();
    j["abi_version"] = MLAV_ABI_VERSION;
    j["backends"] = mlaverify::cli::backend_names();
    j["mutants"] = mlaverify::cli::mutant_names();
    json props = json::array();
    for (const auto& p : mlaverify::props::all_properties()) props.push_back(std::string(p.name));
    j["properties"] = props;
#ifdef MLAV_HAVE_CUDA
    const mlaverify::Support s = mlaverify::cuda::cuda_device_available();
    std::string why = s.reason;
    if (!s.ok && why.rfind("no CUDA device", 0) != 0) why = "no CUDA device: " + why;
    j["cuda"] = {{"built", true}, {"available", s.ok}, {"reason", s.ok ? "" : why}};
#else
    j["cuda"] = {{"built", false},
                 {"available", false},
                 {"reason", "no device: this library was built without CUDA"}};
#endif
    *out = dup(j.dump());
  });
}

MLAV_API mlav_status mlav_builtin_backend(const char* name, mlav_backend* out, char* err,
                                          size_t err_size) {
  if (name == nullptr || out == nullptr) {
    write_error(err, err_size, "name/out: NULL");
    return MLAV_INVALID_INPUT;
  }
  return guarded(err, err_size, [&] {
    if (out->struct_size < sizeof(mlav_backend)) {
      throw InvalidInput("mlav_backend.struct_size", -1,
                         std::to_string(out->struct_size) + " < " +
                             std::to_string(sizeof(mlav_backend)) + " (this library's)");
    }
    BackendPtr b = mlaverify::cli::make_backend_or_mutant(name);
    mlav_backend t = mlaverify::plugin::export_backend(b, name);
    std::lock_guard<std::mutex> lock(registry_mutex);
    registry()[t.self] = {b, name, t.destroy};
    t.destroy = destroy_builtin;
    *out = t;
  });
}

MLAV_API mlav_status mlav_run(const mlav_backend* backend, const mlav_params* p, char* err,
                              size_t err_size) {
  return guarded(err, err_size, [&] {
    if (p == nullptr) throw InvalidInput("params", -1, "NULL");
    if (backend != nullptr && backend->memory != MLAV_MEMORY_HOST) {
      throw InvalidInput("backend", -1,
                         "mlav_run takes host-memory tables (this one is " +
                             std::string(mlaverify::plugin::memory_name(backend->memory)) + ")");
    }
    Resolved r = resolve(backend);
    const mlaverify::VerifyParams vp = mlaverify::plugin::from_c_params(p);
    mlaverify::model::validate_params(vp);  // InvalidInput naming the field, for any backend
    mlaverify::Support s = r.backend->capabilities().admits(vp);
    if (s) s = r.backend->can_implement(vp);
    if (!s) throw mlaverify::Unsupported(r.label + ": " + s.reason);
    r.backend->run(vp);
  });
}

MLAV_API mlav_status mlav_fuzz(const mlav_backend* backend, const char* options_json,
                               char** report_json, char* err, size_t err_size) {
  if (report_json == nullptr) {
    write_error(err, err_size, "report_json: NULL");
    return MLAV_INVALID_INPUT;
  }
  *report_json = nullptr;
  return guarded(err, err_size, [&] {
    const mlaverify::capi::FuzzRequest o = mlaverify::capi::parse_fuzz_options(options_json);
    Resolved r = resolve(backend);
    mlaverify::cli::FuzzOptions f;
    f.backend = o.label.value_or(r.label);
    f.cases = o.cases.value_or(f.cases);
    f.seed = o.seed.value_or(f.seed);
    f.properties = o.properties.value_or(f.properties);
    if (o.out_dir) f.out_dir = *o.out_dir;
    if (o.shard && !o.shard->empty()) {
      try {
        mlaverify::cli::parse_shard(*o.shard, f.shard_index, f.shard_count);
      } catch (const InvalidInput& e) {
        throw InvalidInput("options.shard", -1, e.detail());
      }
    }
    Log log(o.verbose.value_or(false));
    const mlaverify::cli::CampaignReport rep = mlaverify::cli::run_fuzz(*r.backend, f, log.out());
    std::ostringstream doc;
    mlaverify::cli::write_json("fuzz", rep, doc);
    *report_json = dup(doc.str());
  });
}

MLAV_API mlav_status mlav_replay(const mlav_backend* backend, const char* options_json,
                                 char** report_json, char* err, size_t err_size) {
  if (report_json == nullptr) {
    write_error(err, err_size, "report_json: NULL");
    return MLAV_INVALID_INPUT;
  }
  *report_json = nullptr;
  return guarded(err, err_size, [&] {
    const mlaverify::capi::ReplayRequest o = mlaverify::capi::parse_replay_options(options_json);
    const std::vector<std::string>& paths = o.paths;
    Resolved r;
    if (backend != nullptr) r = resolve(backend);
    Log log(o.verbose.value_or(false));
    mlaverify::cli::ReplayOptions ro;
    ro.allow_skipped = o.allow_skipped.value_or(ro.allow_skipped);
    ro.check_recorded = o.check_recorded.value_or(ro.check_recorded);
    ro.max_memory = o.max_memory.value_or(ro.max_memory);
    ro.max_seconds = o.max_seconds.value_or(ro.max_seconds);
    mlaverify::cli::DumpOptions dopt;
    dopt.json = true;
    dopt.max_memory = ro.max_memory;
    dopt.max_seconds = ro.max_seconds;
    if (r.backend) {
      dopt.backend = r.label;
      dopt.backend_object = r.backend.get();
    }
    json result;
    result["command"] = "replay";
    result["scenarios"] = nullptr;
    result["dumps"] = json::array();
    int exit_code = 0;
    for (const std::string& path : paths) {
      if (mlaverify::cli::is_dump_path(path)) {
        std::ostringstream doc;
        const int rc = mlaverify::cli::replay_dump(path, dopt, doc);
        result["dumps"].push_back(dump_document(doc.str()));
        exit_code = std::max(exit_code, rc);
      } else {
        if (!r.backend) {
          throw InvalidInput("backend", -1, "replaying scenario " + path + " needs a backend");
        }
        ro.paths.emplace_back(path);
      }
    }
    if (!ro.paths.empty()) {
      const mlaverify::cli::ReplayResult rr = mlaverify::cli::run_replay(*r.backend, ro, log.out());
      std::ostringstream doc;
      mlaverify::cli::write_json(rr, doc);
      result["scenarios"] = json::parse(doc.str());
      exit_code = std::max(exit_code, rr.exit_code);
    }
    result["exit_code"] = exit_code;
    *report_json = dup(result.dump());
  });
}

MLAV_API mlav_status mlav_diagnose(const char* path, const char* options_json, char** report_json,
                                   char* err, size_t err_size) {
  if (report_json == nullptr || path == nullptr) {
    write_error(err, err_size, "path/report_json: NULL");
    return MLAV_INVALID_INPUT;
  }
  *report_json = nullptr;
  return guarded(err, err_size, [&] {
    const mlaverify::capi::DiagnoseRequest o = mlaverify::capi::parse_diagnose_options(options_json);
    mlaverify::cli::DumpOptions dopt;
    dopt.json = true;
    dopt.readings = o.readings.value_or(dopt.readings);
    dopt.max_memory = o.max_memory.value_or(dopt.max_memory);
    dopt.max_seconds = o.max_seconds.value_or(dopt.max_seconds);
    std::ostringstream doc;
    mlaverify::cli::diagnose_dump(path, dopt, doc);
    *report_json = dup(dump_document(doc.str()).dump());
  });
}

MLAV_API void mlav_free(char* s) { std::free(s); }
