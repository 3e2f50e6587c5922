// export_backend: any C++ Backend as an mlav_backend table (MLAV_MEMORY_HOST), and open_exported,
// the body of a plugin's mlav_plugin_open. Exceptions never cross the C boundary.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "mlaverify/error.h"
#include "plugin/guard_call.h"
#include "plugin/plugin_backend.h"

namespace mlaverify::plugin {
namespace {

struct Exported {
  std::shared_ptr<Backend> backend;
  std::string name;
};

Exported& self_of(void* self) { return *static_cast<Exported*>(self); }

mlav_status exported_capabilities(void* self, mlav_capabilities* caps, char* err, size_t err_size) {
  return guard_call(err, err_size, [&] {
    if (caps == nullptr) throw InvalidInput("caps", -1, "NULL");
    const mlav_capabilities c = to_c_capabilities(self_of(self).backend->capabilities());
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
  const mlav_status st = guard_call(
      why, why_size, [&] { s = self_of(self).backend->can_implement(from_c_params(p)); });
  if (st != MLAV_OK) return st;
  if (s) return MLAV_OK;
  write_error(why, why_size, s.reason);
  return MLAV_UNSUPPORTED;
}

// 0: Backend::run allocates its own scratch (Backend::workspace_bytes says how much it takes),
// so a caller's workspace would go unused (and a guarded run would map it for nothing).
mlav_status exported_workspace_bytes(void* /*self*/, const mlav_params* p, uint64_t* bytes,
                                     char* err, size_t err_size) {
  return guard_call(err, err_size, [&] {
    if (bytes == nullptr) throw InvalidInput("bytes", -1, "NULL");
    from_c_params(p);  // still an mlav_params of ABI >= 1
    *bytes = 0;
  });
}

mlav_status exported_run(void* self, const mlav_params* p, void* /*workspace*/,
                         uint64_t /*workspace_bytes*/, void* /*stream*/, char* err,
                         size_t err_size) {
  return guard_call(err, err_size, [&] { self_of(self).backend->run(from_c_params(p)); });
}

void exported_destroy(void* self) { delete static_cast<Exported*>(self); }

}  // namespace

mlav_backend export_backend(std::shared_ptr<Backend> backend, std::string name) {
  auto* e = new Exported{std::move(backend), std::move(name)};
  if (e->name.empty()) e->name = e->backend->name();
  mlav_backend t;
  std::memset(&t, 0, sizeof(t));
  t.struct_size = sizeof(t);
  t.abi_version = MLAV_ABI_VERSION;
  t.self = e;
  t.name = e->name.c_str();
  t.memory = MLAV_MEMORY_HOST;
  t.capabilities = exported_capabilities;
  t.can_implement = exported_can_implement;
  t.workspace_bytes = exported_workspace_bytes;
  t.run = exported_run;
  t.destroy = exported_destroy;
  return t;
}

mlav_status open_exported(uint32_t abi_version, const char* config, mlav_backend* out, char* err,
                          size_t err_size,
                          const std::function<BackendPtr(std::string_view config)>& make) {
  if (abi_version == 0) {
    write_error(err, err_size, "abi_version 0: not an mlaverify caller");
    return MLAV_INVALID_INPUT;
  }
  if (out == nullptr || out->struct_size < offsetof(mlav_backend, destroy)) {
    write_error(err, err_size, "out: NULL, or struct_size too small for an mlav_backend");
    return MLAV_INVALID_INPUT;
  }
  BackendPtr backend;
  const mlav_status s = guard_call(err, err_size, [&] {
    backend = make(config != nullptr ? std::string_view(config) : std::string_view());
    if (!backend) throw std::runtime_error("the plugin made no backend");
  });
  if (s != MLAV_OK) return s;
  const mlav_backend t = export_backend(std::move(backend));
  // A caller of an older ABI gets the fields its struct holds (destroy may fall outside it: then
  // self is never freed, which is the older caller's contract).
  const size_t n = std::min<size_t>(out->struct_size, sizeof(t));
  std::memcpy(out, &t, n);
  out->struct_size = static_cast<uint32_t>(n);
  return MLAV_OK;
}

}  // namespace mlaverify::plugin
