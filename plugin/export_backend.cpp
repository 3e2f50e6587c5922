// export_backend: any C++ Backend as an mlav_backend table (MLAV_MEMORY_HOST); open_exported and
// open_exported_device, the body of a plugin's mlav_plugin_open over a host Backend or over a
// device plugin's parts. Exceptions never cross the C boundary.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <utility>

#include "mlaverify/error.h"
#include "plugin/guard_call.h"
#include "plugin/plugin_backend.h"

namespace mlaverify::plugin {
namespace {

// What a table's entry points call: a C++ Backend's methods (export_backend) or a device
// plugin's parts (open_exported_device).
struct Exported {
  std::string name;
  std::function<Capabilities()> capabilities;
  std::function<Support(const VerifyParams&)> can_implement;
  std::function<uint64_t(const VerifyParams&)> workspace_bytes;
  std::function<void(const VerifyParams&, void* workspace, void* stream)> run;
};

Exported& self_of(void* self) { return *static_cast<Exported*>(self); }

mlav_status exported_capabilities(void* self, mlav_capabilities* caps, char* err, size_t err_size) {
  return guard_call(err, err_size, [&] {
    if (caps == nullptr) throw InvalidInput("caps", -1, "NULL");
    const mlav_capabilities c = to_c_capabilities(self_of(self).capabilities());
    // Only the bytes the caller's struct holds, its header kept.
    const size_t n = std::min<size_t>(caps->struct_size, sizeof(c));
    const uint32_t size = caps->struct_size, version = caps->abi_version;
    std::memcpy(caps, &c, n);
    caps->struct_size = size;
    caps->abi_version = version;
  });
}

mlav_status exported_can_implement(void* self, const mlav_params* p, char* why, size_t why_size) {
  Support s;
  const mlav_status st =
      guard_call(why, why_size, [&] { s = self_of(self).can_implement(from_c_params(p)); });
  if (st != MLAV_OK) return st;
  if (s) return MLAV_OK;
  write_error(why, why_size, s.reason);
  return MLAV_UNSUPPORTED;
}

mlav_status exported_workspace_bytes(void* self, const mlav_params* p, uint64_t* bytes, char* err,
                                     size_t err_size) {
  return guard_call(err, err_size, [&] {
    if (bytes == nullptr) throw InvalidInput("bytes", -1, "NULL");
    *bytes = self_of(self).workspace_bytes(from_c_params(p));
  });
}

mlav_status exported_run(void* self, const mlav_params* p, void* workspace,
                         uint64_t /*workspace_bytes*/, void* stream, char* err, size_t err_size) {
  return guard_call(err, err_size, [&] { self_of(self).run(from_c_params(p), workspace, stream); });
}

void exported_destroy(void* self) { delete static_cast<Exported*>(self); }

mlav_backend table_of(std::unique_ptr<Exported> e, int32_t memory) {
  mlav_backend t;
  std::memset(&t, 0, sizeof(t));
  t.struct_size = sizeof(t);
  t.abi_version = MLAV_ABI_VERSION;
  t.name = e->name.c_str();
  t.memory = memory;
  t.capabilities = exported_capabilities;
  t.can_implement = exported_can_implement;
  t.workspace_bytes = exported_workspace_bytes;
  t.run = exported_run;
  t.destroy = exported_destroy;
  t.self = e.release();
  return t;
}

// open_exported's and open_exported_device's body: out checked, make(config) guarded, and as many
// of the table's bytes copied as the caller's struct holds.
mlav_status open_table(uint32_t abi_version, const char* config, mlav_backend* out, char* err,
                       size_t err_size,
                       const std::function<mlav_backend(std::string_view config)>& make) {
  if (abi_version == 0) {
    write_error(err, err_size, "abi_version 0: not an mlaverify caller");
    return MLAV_INVALID_INPUT;
  }
  if (out == nullptr || out->struct_size < offsetof(mlav_backend, destroy)) {
    write_error(err, err_size, "out: NULL, or struct_size too small for an mlav_backend");
    return MLAV_INVALID_INPUT;
  }
  mlav_backend t;
  const mlav_status s = guard_call(err, err_size, [&] {
    t = make(config != nullptr ? std::string_view(config) : std::string_view());
  });
  if (s != MLAV_OK) return s;
  // A caller of an older ABI gets the fields its struct holds (destroy may fall outside it: then
  // self is never freed, which is the older caller's contract).
  const size_t n = std::min<size_t>(out->struct_size, sizeof(t));
  std::memcpy(out, &t, n);
  out->struct_size = static_cast<uint32_t>(n);
  return MLAV_OK;
}

}  // namespace

mlav_backend export_backend(std::shared_ptr<Backend> backend, std::string name) {
  if (name.empty()) name = backend->name();
  auto e = std::make_unique<Exported>();
  e->name = std::move(name);
  e->capabilities = [backend] { return backend->capabilities(); };
  e->can_implement = [backend](const VerifyParams& p) { return backend->can_implement(p); };
  // 0: Backend::run allocates its own scratch (Backend::workspace_bytes says how much it takes),
  // so a caller's workspace would go unused (and a guarded run would map it for nothing).
  e->workspace_bytes = [](const VerifyParams&) -> uint64_t { return 0; };
  e->run = [backend](const VerifyParams& p, void*, void*) { backend->run(p); };
  return table_of(std::move(e), MLAV_MEMORY_HOST);
}

mlav_status open_exported(uint32_t abi_version, const char* config, mlav_backend* out, char* err,
                          size_t err_size,
                          const std::function<BackendPtr(std::string_view config)>& make) {
  return open_table(abi_version, config, out, err, err_size, [&](std::string_view cfg) {
    BackendPtr backend = make(cfg);
    if (!backend) throw std::runtime_error("the plugin made no backend");
    return export_backend(std::move(backend));
  });
}

mlav_status open_exported_device(uint32_t abi_version, const char* config, mlav_backend* out,
                                 char* err, size_t err_size,
                                 const std::function<DeviceParts(std::string_view config)>& make) {
  return open_table(abi_version, config, out, err, err_size, [&](std::string_view cfg) {
    DeviceParts d = make(cfg);
    if (d.name.empty() || !d.can_implement || !d.run) {
      throw std::runtime_error("the plugin's parts lack a name, can_implement or run");
    }
    auto e = std::make_unique<Exported>();
    e->name = std::move(d.name);
    e->capabilities = [caps = d.capabilities] { return caps; };
    e->can_implement = std::move(d.can_implement);
    e->workspace_bytes = d.workspace_bytes
                             ? std::move(d.workspace_bytes)
                             : [](const VerifyParams&) -> uint64_t { return 0; };
    e->run = std::move(d.run);
    return table_of(std::move(e), MLAV_MEMORY_CUDA);
  });
}

}  // namespace mlaverify::plugin
