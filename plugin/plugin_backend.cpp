// PluginBackend (a Backend over an mlav_backend table), the C <-> C++ conversions, and loading a
// plugin with dlopen. CUDA staging lives in device_staging.cpp, the guarded worker in guarded.cpp.
#include "plugin/plugin_backend.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "mlaverify/error.h"
#include "model/validate.h"
#include "plugin/buffers.h"
#include "plugin/device_staging.h"
#include "plugin/guarded.h"

namespace mlaverify::plugin {
namespace {

// The version-1 sizes: a writer of any later version writes at least these many bytes (fields are
// only appended), so anything shorter is not an mlaverify struct.
constexpr uint32_t kParamsV1Size = sizeof(mlav_params);
constexpr uint32_t kBackendV1Size = sizeof(mlav_backend);
constexpr uint32_t kCapabilitiesHeader = 2 * sizeof(uint32_t);
constexpr size_t kErrSize = 1024;

// Reads a struct written by another ABI version: the writer's bytes that fit, then `defaults`.
template <typename T>
T read_versioned(const T* src, T defaults) {
  const size_t n = std::min<size_t>(src->struct_size, sizeof(T));
  std::memcpy(&defaults, src, n);
  defaults.struct_size = sizeof(T);
  return defaults;
}

// A status with the plugin's message, or a placeholder when it left none.
std::string message_of(const char* err) {
  return err != nullptr && err[0] != '\0' ? std::string(err) : std::string("(no message)");
}

// The pointers of p cleared: what can_implement and workspace_bytes get (c_api.h).
mlav_params shape_only(const VerifyParams& p) {
  VerifyParams s = p;
  for (int id = 0; id < kNumBuffers; ++id) set_buffer_ptr(s, BufferId(id), nullptr);
  return to_c_params(s);
}

}  // namespace

void write_error(char* err, size_t err_size, std::string_view message) {
  if (err == nullptr || err_size == 0) return;
  const size_t n = std::min(message.size(), err_size - 1);
  std::memcpy(err, message.data(), n);
  err[n] = '\0';
}

const char* memory_name(int32_t memory) {
  switch (memory) {
    case MLAV_MEMORY_HOST:
      return "host";
    case MLAV_MEMORY_CUDA:
      return "cuda";
    default:
      return "unknown";
  }
}

mlav_params to_c_params(const VerifyParams& p) {
  mlav_params c;
  std::memset(&c, 0, sizeof(c));  // reserved fields and padding are zero
  c.struct_size = sizeof(mlav_params);
  c.abi_version = MLAV_ABI_VERSION;
  c.batch_size = p.batch_size;
  c.num_heads = p.num_heads;
  c.max_draft = p.max_draft;
  c.num_splits = p.num_splits;
  c.max_total_q = p.max_total_q;
  c.sm_scale = p.sm_scale;
  c.q = p.q;
  c.q_dtype = static_cast<int32_t>(p.q_dtype);
  c.q_token_stride = p.q_token_stride;
  c.q_head_stride = p.q_head_stride;
  c.q_latent_offset = p.q_latent_offset;
  c.q_rope_offset = p.q_rope_offset;
  c.kv_pool = p.kv_pool;
  c.kv_dtype = static_cast<int32_t>(p.kv_dtype);
  c.kv_layout.kind = static_cast<int32_t>(p.kv_layout.kind);
  c.kv_layout.latent_offset = p.kv_layout.latent_offset;
  c.kv_layout.latent_stride = p.kv_layout.latent_stride;
  c.kv_layout.rope_offset = p.kv_layout.rope_offset;
  c.kv_layout.rope_stride = p.kv_layout.rope_stride;
  c.pool_slots = p.pool_slots;
  c.qo_indptr = p.qo_indptr;
  c.kv_indptr = p.kv_indptr;
  c.kv_indexing = static_cast<int32_t>(p.kv_indexing);
  c.kv_indices = p.kv_indices;
  c.kv_indices_i32 = p.kv_indices_i32;
  c.kv_indices_len = p.kv_indices_len;
  c.block_table = p.block_table;
  c.block_table_stride = p.block_table_stride;
  c.page_size = p.page_size;
  c.draft_source = static_cast<int32_t>(p.draft_source);
  c.k_extend = p.k_extend;
  c.k_extend_stride = p.k_extend_stride;
  c.mask_format = static_cast<int32_t>(p.mask_format);
  c.mask_indptr_convention = static_cast<int32_t>(p.mask_indptr_convention);
  c.mask = p.mask;
  c.mask_len = p.mask_len;
  c.mask_indptr = p.mask_indptr;
  c.mask_draft_stride = p.mask_draft_stride;
  c.mask_word_bytes = p.mask_word_bytes;
  c.o_lat = p.o_lat;
  c.o_dtype = static_cast<int32_t>(p.o_dtype);
  c.o_token_stride = p.o_token_stride;
  c.o_head_stride = p.o_head_stride;
  c.lse = p.lse;
  return c;
}

VerifyParams from_c_params(const mlav_params* in) {
  if (in == nullptr) throw InvalidInput("mlav_params", -1, "NULL");
  if (in->struct_size < kParamsV1Size || in->abi_version == 0) {
    throw InvalidInput("mlav_params", -1,
                       "struct_size " + std::to_string(in->struct_size) + ", abi_version " +
                           std::to_string(in->abi_version) + ": not an mlav_params of ABI >= 1 (" +
                           std::to_string(kParamsV1Size) + " bytes)");
  }
  const mlav_params c = read_versioned(in, to_c_params(VerifyParams{}));
  VerifyParams p;
  p.batch_size = c.batch_size;
  p.num_heads = c.num_heads;
  p.max_draft = c.max_draft;
  p.num_splits = c.num_splits;
  p.max_total_q = c.max_total_q;
  p.sm_scale = c.sm_scale;
  p.q = c.q;
  p.q_dtype = static_cast<DType>(c.q_dtype);
  p.q_token_stride = c.q_token_stride;
  p.q_head_stride = c.q_head_stride;
  p.q_latent_offset = c.q_latent_offset;
  p.q_rope_offset = c.q_rope_offset;
  p.kv_pool = c.kv_pool;
  p.kv_dtype = static_cast<DType>(c.kv_dtype);
  p.kv_layout = {static_cast<LayoutKind>(c.kv_layout.kind), c.kv_layout.latent_offset,
                 c.kv_layout.latent_stride, c.kv_layout.rope_offset, c.kv_layout.rope_stride};
  p.pool_slots = c.pool_slots;
  p.qo_indptr = c.qo_indptr;
  p.kv_indptr = c.kv_indptr;
  p.kv_indexing = static_cast<KvIndexing>(c.kv_indexing);
  p.kv_indices = c.kv_indices;
  p.kv_indices_i32 = c.kv_indices_i32;
  p.kv_indices_len = c.kv_indices_len;
  p.block_table = c.block_table;
  p.block_table_stride = c.block_table_stride;
  p.page_size = c.page_size;
  p.draft_source = static_cast<DraftKvSource>(c.draft_source);
  p.k_extend = c.k_extend;
  p.k_extend_stride = c.k_extend_stride;
  p.mask_format = static_cast<MaskFormat>(c.mask_format);
  p.mask_indptr_convention = static_cast<IndptrConvention>(c.mask_indptr_convention);
  p.mask = c.mask;
  p.mask_len = c.mask_len;
  p.mask_indptr = c.mask_indptr;
  p.mask_draft_stride = c.mask_draft_stride;
  p.mask_word_bytes = c.mask_word_bytes;
  p.o_lat = c.o_lat;
  p.o_dtype = static_cast<DType>(c.o_dtype);
  p.o_token_stride = c.o_token_stride;
  p.o_head_stride = c.o_head_stride;
  p.lse = c.lse;
  return p;
}

Capabilities from_c_capabilities(const mlav_capabilities& in) {
  const mlav_capabilities c = read_versioned(&in, mlav_capabilities_default());
  Capabilities k;
  k.mask_formats = c.mask_formats;
  k.mask_indptr_conventions = c.mask_indptr_conventions;
  k.kv_dtypes = c.kv_dtypes;
  k.q_dtypes = c.q_dtypes;
  k.o_dtypes = c.o_dtypes;
  k.kv_layouts = c.kv_layouts;
  k.draft_sources = c.draft_sources;
  k.kv_indexings = c.kv_indexings;
  k.page_sizes = c.page_sizes;
  k.writes_lse = (c.flags & MLAV_CAP_WRITES_LSE) != 0;
  k.deterministic = (c.flags & MLAV_CAP_DETERMINISTIC) != 0;
  k.honours_num_splits = (c.flags & MLAV_CAP_HONOURS_NUM_SPLITS) != 0;
  k.padded_kv_rows = (c.flags & MLAV_CAP_PADDED_KV_ROWS) != 0;
  k.strided_q = (c.flags & MLAV_CAP_STRIDED_Q) != 0;
  k.strided_o = (c.flags & MLAV_CAP_STRIDED_O) != 0;
  k.padded_extend_rows = (c.flags & MLAV_CAP_PADDED_EXTEND_ROWS) != 0;
  k.balanced_plan = false;  // mlav_params has no plan_blocks: a plugin never sees the balanced plan
  k.max_heads = c.max_heads;
  k.max_draft = c.max_draft;
  k.max_prefix = c.max_prefix;
  k.numerics.operand_unit = c.operand_unit;
  k.numerics.accumulate_unit = c.accumulate_unit;
  k.numerics.p_unit = c.p_unit;
  k.numerics.exp_unit = c.exp_unit;
  k.numerics.max_partials = c.max_partials;
  k.numerics.tile_keys = c.tile_keys;
  return k;
}

mlav_capabilities to_c_capabilities(const Capabilities& k) {
  mlav_capabilities c = mlav_capabilities_default();
  c.mask_formats = k.mask_formats;
  c.mask_indptr_conventions = k.mask_indptr_conventions;
  c.kv_dtypes = k.kv_dtypes;
  c.q_dtypes = k.q_dtypes;
  c.o_dtypes = k.o_dtypes;
  c.kv_layouts = k.kv_layouts;
  c.draft_sources = k.draft_sources;
  c.kv_indexings = k.kv_indexings;
  c.page_sizes = k.page_sizes;
  c.flags = (k.writes_lse ? MLAV_CAP_WRITES_LSE : 0u) |
            (k.deterministic ? MLAV_CAP_DETERMINISTIC : 0u) |
            (k.honours_num_splits ? MLAV_CAP_HONOURS_NUM_SPLITS : 0u) |
            (k.padded_kv_rows ? MLAV_CAP_PADDED_KV_ROWS : 0u) |
            (k.strided_q ? MLAV_CAP_STRIDED_Q : 0u) | (k.strided_o ? MLAV_CAP_STRIDED_O : 0u) |
            (k.padded_extend_rows ? MLAV_CAP_PADDED_EXTEND_ROWS : 0u);
  c.max_heads = k.max_heads;
  c.max_draft = k.max_draft;
  c.max_prefix = k.max_prefix;
  c.operand_unit = k.numerics.operand_unit;
  c.accumulate_unit = k.numerics.accumulate_unit;
  c.p_unit = k.numerics.p_unit;
  c.exp_unit = k.numerics.exp_unit;
  c.max_partials = k.numerics.max_partials;
  c.tile_keys = k.numerics.tile_keys;
  return c;
}

// ---- PluginBackend ----

PluginBackend::PluginBackend(const mlav_backend& table, std::shared_ptr<void> keep_alive)
    : keep_alive_(std::move(keep_alive)) {
  auto bad = [&](const std::string& why) {
    // The table is not ours to keep: destroy what the plugin made, if it said how.
    if (table.struct_size >= kBackendV1Size && table.destroy != nullptr) table.destroy(table.self);
    throw InvalidInput("plugin", -1, "mlav_backend table: " + why);
  };
  if (table.struct_size < kBackendV1Size || table.abi_version == 0) {
    bad("struct_size " + std::to_string(table.struct_size) + ", abi_version " +
        std::to_string(table.abi_version) + ": not an mlav_backend of ABI >= 1 (" +
        std::to_string(kBackendV1Size) + " bytes)");
  }
  mlav_backend defaults;
  std::memset(&defaults, 0, sizeof(defaults));
  table_ = read_versioned(&table, defaults);
  if (table_.can_implement == nullptr || table_.workspace_bytes == nullptr ||
      table_.run == nullptr) {
    bad("can_implement, workspace_bytes and run must not be NULL");
  }
  if (table_.memory != MLAV_MEMORY_HOST && table_.memory != MLAV_MEMORY_CUDA) {
    bad("unknown memory kind " + std::to_string(table_.memory));
  }
  plugin_name_ = table_.name != nullptr && table_.name[0] != '\0' ? table_.name : "unnamed";
  mlav_capabilities c = mlav_capabilities_default();
  if (table_.capabilities != nullptr) {
    char err[kErrSize] = {0};
    const mlav_status s = table_.capabilities(table_.self, &c, err, sizeof(err));
    if (s != MLAV_OK) bad("capabilities failed: " + message_of(err));
  }
  caps_ = from_c_capabilities(c);
}

PluginBackend::~PluginBackend() {
  device_.reset();  // device buffers before the plugin (which may own the CUDA context's users)
  if (table_.destroy != nullptr) table_.destroy(table_.self);
}

void PluginBackend::check(mlav_status s, const char* what, const char* err) const {
  if (s == MLAV_OK) return;
  const std::string msg = std::string(what) + ": " + message_of(err);
  switch (s) {
    case MLAV_INVALID_INPUT:
      throw InvalidInput("plugin " + plugin_name_, -1, msg);
    case MLAV_UNSUPPORTED:
      throw Unsupported("plugin " + plugin_name_ + ": " + msg);
    default:
      throw std::runtime_error("plugin " + plugin_name_ + ": " + msg +
                               (s == MLAV_ERROR ? "" : " (status " + std::to_string(int(s)) + ")"));
  }
}

Support PluginBackend::can_implement(const VerifyParams& p) const {
  // Once the CUDA context is lost nothing runs: BackendLost, as CudaBackend throws, and the
  // plugin is not asked (its can_implement may call into the dead context).
  if (device_ && !device_->lost().empty()) throw BackendLost(device_->lost());
  if (Support s = caps_.admits(p); !s) return s;
  if (table_.memory == MLAV_MEMORY_CUDA) {
    if (Support s = device_available(); !s) return s;
  }
  const mlav_params c = shape_only(p);
  char why[kErrSize] = {0};
  const mlav_status s = table_.can_implement(table_.self, &c, why, sizeof(why));
  if (s == MLAV_OK) return Support::yes();
  if (s == MLAV_UNSUPPORTED) return Support::no(message_of(why));
  // An error here is the plugin's failure to answer, not a refusal: run() will report it.
  return Support::no("can_implement returned status " + std::to_string(int(s)) + ": " +
                     message_of(why));
}

size_t PluginBackend::workspace_bytes(const VerifyParams& p) const {
  const mlav_params c = shape_only(p);
  uint64_t bytes = 0;
  char err[kErrSize] = {0};
  check(table_.workspace_bytes(table_.self, &c, &bytes, err, sizeof(err)), "workspace_bytes", err);
  return static_cast<size_t>(bytes);
}

void PluginBackend::run(const VerifyParams& p) {
  // A lost CUDA context (device_staging.h) first: the plugin's can_implement may call into it.
  if (device_ && !device_->lost().empty()) throw BackendLost(device_->lost());
  model::validate_params(p);
  if (Support s = can_implement(p); !s) throw Unsupported(name() + ": " + s.reason);
  invoke(p, 0, nullptr, 0);
}

void PluginBackend::invoke(const VerifyParams& p, size_t guard_bytes, void* workspace,
                           size_t ws_bytes) {
  if (table_.memory == MLAV_MEMORY_CUDA) {
    if (!device_) device_ = make_device_staging();
    const size_t need = workspace != nullptr ? ws_bytes : workspace_bytes(p);
    device_->stage(p, need, guard_bytes, workspace);
    const mlav_params c = to_c_params(device_->params());
    char err[kErrSize] = {0};
    const mlav_status s = table_.run(table_.self, &c, device_->workspace(), need, device_->stream(),
                                     err, sizeof(err));
    // Synchronize and copy back even after an error, so the stream is idle before the next run.
    // A loss found there keeps what the plugin said about its run, if it reported an error.
    try {
      device_->finish(p, guard_bytes, workspace, need);
    } catch (const BackendLost& e) {
      if (s == MLAV_OK) throw;
      throw BackendLost(std::string(e.what()) + " (the plugin's run returned status " +
                        std::to_string(int(s)) + ": " + message_of(err) + ")");
    }
    check(s, "run", err);
    return;
  }
  if (workspace == nullptr) {
    ws_bytes = workspace_bytes(p);
    if (host_workspace_bytes_ < ws_bytes) {
      host_workspace_.reset();
      host_workspace_.reset(new unsigned char[ws_bytes]);  // default-initialized: not touched
      host_workspace_bytes_ = ws_bytes;
    }
    workspace = host_workspace_.get();
  }
  const mlav_params c = to_c_params(p);
  char err[kErrSize] = {0};
  check(table_.run(table_.self, &c, ws_bytes == 0 ? nullptr : workspace, ws_bytes, nullptr, err,
                   sizeof(err)),
        "run", err);
}

// ---- loading ----

PluginSpec parse_plugin_spec(std::string_view spec) {
  PluginSpec s;
  const size_t q = spec.find('?');
  s.path = std::string(spec.substr(0, q));
  if (s.path.empty()) {
    throw InvalidInput("backend", -1, "plugin: needs a path (plugin:PATH.so[?config])");
  }
  if (q == std::string_view::npos) return s;
  std::string_view items = spec.substr(q + 1);
  while (!items.empty()) {
    const size_t amp = items.find('&');
    const std::string_view item = items.substr(0, amp);
    items = amp == std::string_view::npos ? std::string_view() : items.substr(amp + 1);
    if (item == "guarded") {
      s.guarded = true;
    } else if (item.starts_with("timeout=")) {
      const std::string v(item.substr(8));
      char* end = nullptr;
      const double t = std::strtod(v.c_str(), &end);
      if (v.empty() || end != v.c_str() + v.size() || !(t > 0) || t > 86400) {
        std::string msg = "plugin:";
        msg.append(spec);
        msg += ": timeout '" + v + "' is not a number of seconds in (0, 86400]";
        throw InvalidInput("backend", -1, msg);
      }
      s.timeout_s = t;
    } else if (!item.empty()) {
      if (!s.config.empty()) s.config += '&';
      s.config.append(item);
    }
  }
  return s;
}

std::shared_ptr<PluginBackend> load_plugin(const std::string& path, const std::string& config) {
  auto fail = [&](const std::string& why) -> std::shared_ptr<PluginBackend> {
    throw InvalidInput("backend", -1, "plugin:" + path + ": " + why);
  };
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = dlerror();
    return fail(std::string("cannot load: ") + (e != nullptr ? e : "dlopen failed"));
  }
  dlerror();
  auto open = reinterpret_cast<mlav_plugin_open_fn>(dlsym(handle, MLAV_PLUGIN_OPEN_SYMBOL));
  if (open == nullptr) {
    return fail("no symbol " MLAV_PLUGIN_OPEN_SYMBOL
                " (a plugin exports it as extern \"C\" "
                "MLAV_EXPORT; c_api.h)");
  }
  mlav_backend table;
  std::memset(&table, 0, sizeof(table));
  table.struct_size = sizeof(table);
  table.abi_version = MLAV_ABI_VERSION;
  char err[kErrSize] = {0};
  const mlav_status s = open(MLAV_ABI_VERSION, config.c_str(), &table, err, sizeof(err));
  if (s != MLAV_OK) {
    return fail("mlav_plugin_open failed (status " + std::to_string(int(s)) +
                "): " + message_of(err));
  }
  // Never dlclose (see plugin_backend.h): the handle is not kept, only the table.
  try {
    return std::make_shared<PluginBackend>(table);
  } catch (const InvalidInput& e) {
    return fail(e.detail());
  }
}

BackendPtr make_plugin_backend(std::string_view spec_text) {
  const PluginSpec spec = parse_plugin_spec(spec_text);
  if (spec.guarded) return std::make_shared<GuardedPluginBackend>(spec);
  return load_plugin(spec.path, spec.config);
}

}  // namespace mlaverify::plugin
