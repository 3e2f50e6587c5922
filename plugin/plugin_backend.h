// mlaverify's C ABI (include/mlaverify/c_api.h) on the C++ side: PluginBackend, a Backend over a
// plugin's mlav_backend table (a dlopen'ed .so, or a table whose entries are ctypes callbacks),
// load_plugin / make_plugin_backend for `--backend plugin:PATH.so[?config]`, and the reverse,
// export_backend, which turns any C++ Backend into a table a plugin's mlav_plugin_open returns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mlaverify/backend.h"
#include "mlaverify/c_api.h"
#include "mlaverify/verify_params.h"

namespace mlaverify::plugin {

// ---- conversions (struct_size aware: a reader takes the writer's fields it knows, defaults for
// the rest; c_api.h "Versioning") ----

// p's fields and pointers as the C struct (struct_size = sizeof(mlav_params), this ABI version).
mlav_params to_c_params(const VerifyParams& p);
// The C struct as a caller of any ABI version wrote it (c->struct_size bytes of it), the rest
// from VerifyParams' defaults. InvalidInput("mlav_params", -1, ...) when struct_size is smaller
// than the version-1 header or abi_version is 0.
VerifyParams from_c_params(const mlav_params* c);
Capabilities from_c_capabilities(const mlav_capabilities& c);
mlav_capabilities to_c_capabilities(const Capabilities& c);

// What a plugin's memory means for staging: MLAV_MEMORY_HOST or MLAV_MEMORY_CUDA.
const char* memory_name(int32_t memory);

// ---- PluginBackend: a Backend over an mlav_backend table ----

class DeviceStaging;  // device_staging.h: device copies of a run's buffers

// The C++ Backend rules (backend.h) over a table that follows c_api.h's:
//  - run() validates p on the host (model::validate_params: InvalidInput, as the built-in
//    backends do), checks can_implement (Unsupported), then calls the plugin. For a HOST plugin
//    the caller's pointers go through unchanged and the workspace is a host buffer this object
//    owns (grow-only). For a CUDA plugin every buffer (buffers.h: the static extents) is copied
//    to device memory of the current device, the outputs too (so rows the plugin must not write
//    come back as the caller left them), run on this object's stream, synchronized, and o_lat /
//    lse copied back. Without CUDA in this build, or without a device, can_implement says no.
//  - Statuses: MLAV_INVALID_INPUT -> InvalidInput("plugin <name>", -1, message),
//    MLAV_UNSUPPORTED -> Unsupported, MLAV_ERROR or any other value -> std::runtime_error, each
//    with the plugin's message.
//  - capabilities() is asked once, at construction (the defaults of mlav_capabilities_default
//    filled first), and can_implement() checks Capabilities::admits before asking the plugin.
//  - can_implement and workspace_bytes pass the plugin an mlav_params whose buffer pointers are
//    all NULL: they decide from shapes, strides, dtypes and formats (c_api.h).
// The table is copied; destroy(self) is called when this object dies, then `keep_alive` (a
// dlopen handle, Python's references to its ctypes callbacks) is released. Calls arrive on the
// caller's thread, one at a time.
class PluginBackend : public Backend {
 public:
  // InvalidInput("plugin", -1, ...) when the table is unusable: struct_size smaller than the
  // version-1 table, abi_version 0, a NULL can_implement / workspace_bytes / run, an unknown
  // memory kind, or a capabilities call that fails.
  explicit PluginBackend(const mlav_backend& table, std::shared_ptr<void> keep_alive = nullptr);
  ~PluginBackend() override;
  PluginBackend(const PluginBackend&) = delete;
  PluginBackend& operator=(const PluginBackend&) = delete;

  // "plugin:<the table's name>".
  std::string name() const override { return "plugin:" + plugin_name_; }
  Capabilities capabilities() const override { return caps_; }
  Support can_implement(const VerifyParams& p) const override;
  size_t workspace_bytes(const VerifyParams& p) const override;
  void run(const VerifyParams& p) override;

  int32_t memory() const { return table_.memory; }
  const std::string& plugin_name() const { return plugin_name_; }

  // The call itself, for the guarded worker (already validated and admitted): `guard_bytes` > 0
  // says every output (o_lat, lse) has that many bytes of caller memory before and after its
  // extent, and `workspace` (workspace_bytes long, also with guard_bytes either side) is the
  // caller's. A CUDA plugin then gets device copies of those guards too, and they come back with
  // the outputs, so the caller can see a write past either end on the device as on the host.
  // workspace == nullptr: this object's own workspace, no guards around it.
  void invoke(const VerifyParams& p, size_t guard_bytes, void* workspace, size_t workspace_bytes);

 private:
  void check(mlav_status s, const char* what, const char* err) const;
  mlav_backend table_{};
  std::shared_ptr<void> keep_alive_;
  std::string plugin_name_;
  Capabilities caps_;
  // Host plugins' workspace, grow-only and never zero-filled (a large one stays untouched until
  // the plugin uses it).
  std::unique_ptr<unsigned char[]> host_workspace_;
  size_t host_workspace_bytes_ = 0;
  std::unique_ptr<DeviceStaging> device_;  // CUDA plugins: null until the first run
};

// ---- loading ----

// `--backend plugin:SPEC`: SPEC is PATH[?ITEMS], ITEMS '&'-separated. Two items are mlaverify's
// and are not passed on: `guarded` (run every call in a worker process with guard regions; see
// GuardedPluginBackend) and `timeout=SECONDS` (the guarded worker's time limit per call, default
// 60). Whatever else remains, rejoined with '&', is the plugin's config string.
struct PluginSpec {
  std::string path;
  std::string config;
  bool guarded = false;
  double timeout_s = 60.0;
};
inline constexpr std::string_view kPluginPrefix = "plugin:";
// InvalidInput("backend", -1, ...) for an empty path or a bad timeout.
PluginSpec parse_plugin_spec(std::string_view spec);

// dlopen(path) (RTLD_NOW | RTLD_LOCAL; a name without '/' is searched as dlopen searches), its
// mlav_plugin_open called with MLAV_ABI_VERSION and config, and the table it fills wrapped. Every
// failure is one InvalidInput("backend", -1, "plugin:PATH: ...") line: the file cannot be
// loaded (dlerror's reason), has no mlav_plugin_open, open fails (the plugin's message), or the
// table breaks the ABI. The library stays loaded for the life of the process (a library with
// CUDA runtime, thread-local or atexit state cannot be unloaded safely).
std::shared_ptr<PluginBackend> load_plugin(const std::string& path, const std::string& config = "");

// The backend `plugin:SPEC` names: load_plugin in this process, or GuardedPluginBackend when
// SPEC has `guarded`.
BackendPtr make_plugin_backend(std::string_view spec);

// ---- the reverse: a C++ Backend as a table ----

// A table over `backend` (MLAV_MEMORY_HOST: Backend::run takes host pointers), self owning a
// reference to it: capabilities() converted, can_implement / workspace_bytes / run over the
// converted params, exceptions turned into statuses (InvalidInput -> MLAV_INVALID_INPUT,
// Unsupported -> MLAV_UNSUPPORTED, anything else -> MLAV_ERROR) with what() as the message.
// workspace_bytes answers 0: a Backend owns its scratch (Backend::workspace_bytes is what it
// allocates itself), so the caller provisions none. `name` defaults to backend->name().
mlav_backend export_backend(std::shared_ptr<Backend> backend, std::string name = "");

// The body of a plugin's mlav_plugin_open over a C++ backend, e.g. (cpu_plugin.cpp):
//   extern "C" MLAV_EXPORT mlav_status mlav_plugin_open(uint32_t abi, const char* config,
//                                                       mlav_backend* out, char* err, size_t n) {
//     return mlaverify::plugin::open_exported(abi, config, out, err, n,
//         [](std::string_view) { return mlaverify::cpu::make_cpu_backend(); });
//   }
// Checks out's struct_size, calls make(config) (an exception becomes MLAV_ERROR, InvalidInput
// MLAV_INVALID_INPUT, with what()), and fills *out with export_backend's table (as many bytes as
// the caller's struct_size holds).
mlav_status open_exported(uint32_t abi_version, const char* config, mlav_backend* out, char* err,
                          size_t err_size,
                          const std::function<BackendPtr(std::string_view config)>& make);

// A plugin on device memory (MLAV_MEMORY_CUDA), as parts: mlaverify stages every buffer to the
// device before the params reach them. capabilities is answered as given; can_implement and run
// are required; workspace_bytes may be empty (0 bytes). run enqueues on `stream` (the caller's
// cudaStream_t, NULL the legacy default stream) into `workspace` (workspace_bytes(p) bytes of
// device memory) and may return before its work ends: the caller synchronizes the stream.
// Exceptions from any part become statuses as export_backend's do.
struct DeviceParts {
  std::string name;
  Capabilities capabilities;
  std::function<Support(const VerifyParams&)> can_implement;
  std::function<uint64_t(const VerifyParams&)> workspace_bytes;
  std::function<void(const VerifyParams&, void* workspace, void* stream)> run;
};

// open_exported for a device plugin (cuda_plugin.cpp, and the test plugin
// tests/plugin/fault_cuda_plugin.cu): the same checks of out, make(config) guarded the same way,
// and a table of memory MLAV_MEMORY_CUDA over the parts it returns (their name must not be empty).
mlav_status open_exported_device(uint32_t abi_version, const char* config, mlav_backend* out,
                                 char* err, size_t err_size,
                                 const std::function<DeviceParts(std::string_view config)>& make);

// Writes `message` NUL-terminated into err (at most err_size bytes, truncated); nothing when err
// is NULL or err_size 0. For plugin authors writing their own entry points.
void write_error(char* err, size_t err_size, std::string_view message);

}  // namespace mlaverify::plugin
