// Loading a server dump: every tensor's dtype, shape and values checked against the others before
// a VerifyParams points at them, so replay and diagnose never read out of range.
#include "dump/dump.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "dump/safetensors.h"
#include "mlaverify/error.h"
#include "model/config.h"
#include "model/mask.h"
#include "model/tree.h"
#include "model/validate.h"

namespace mlaverify::dump {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

// fp16 -> float, exactly (every fp16 value, subnormals included, is a float).
float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const int exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ffu;
  float f;
  if (exp == 0) {
    f = std::ldexp(static_cast<float>(mant), -24);  // subnormal (or zero)
  } else if (exp == 31) {
    f = mant ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    f = std::ldexp(static_cast<float>(mant | 0x400u), exp - 25);
  }
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  u |= sign;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Tracks the bytes the loaded buffers hold, so a file cannot make the loader allocate more than
// the budget even where a conversion widens its values (int8 indices to int64, fp16 to fp32).
class Budget {
 public:
  Budget(std::string file, int64_t max_bytes, int64_t already)
      : file_(std::move(file)), max_(max_bytes), used_(already) {}
  void take(const std::string& what, int64_t bytes) {
    if (bytes > max_ - used_) {
      throw InvalidInput(file_ + ": " + what, -1,
                         "needs " + str(bytes) + " more bytes, over the memory budget of " +
                             str(max_) + " (" + str(used_) + " in use; raise it with --max-memory)");
    }
    used_ += bytes;
  }

 private:
  std::string file_;
  int64_t max_, used_;
};

class Reader {
 public:
  Reader(const SafetensorsFile& f, Budget& budget) : f_(f), budget_(budget) {}

  std::string field(const std::string& tensor) const { return f_.file() + ": " + tensor; }

  const TensorInfo* optional(const std::string& name) const { return f_.find(name); }
  const TensorInfo& required(const std::string& name) const {
    const TensorInfo* t = f_.find(name);
    if (t == nullptr) throw InvalidInput(field(name), -1, "missing (a verify dump needs it)");
    return *t;
  }

  // Shape checks, each an InvalidInput naming the tensor and printing the shape it has; the
  // caller checks sizes against each other afterwards.
  void require_rank(const TensorInfo& t, size_t rank, const std::string& expect) const {
    if (t.shape.size() != rank) {
      throw InvalidInput(field(t.name), -1,
                         "shape " + shape_string(t.shape) + ", expected " + expect);
    }
  }
  void require_dim(const TensorInfo& t, size_t d, int64_t want, const std::string& expect) const {
    if (t.shape[d] != want) {
      throw InvalidInput(field(t.name), -1,
                         "shape " + shape_string(t.shape) + ", expected " + expect);
    }
  }

  // Any integer dtype SGLang uses (bool and uint8 for masks too), widened to int64.
  std::vector<int64_t> ints(const TensorInfo& t) const {
    const int64_t n = t.numel();
    budget_.take(t.name, n * 8);
    std::vector<int64_t> out(static_cast<size_t>(n));
    const std::byte* p = f_.data(t);
    auto get = [&](auto tag, int64_t k) {
      decltype(tag) v;
      std::memcpy(&v, p + k * static_cast<int64_t>(sizeof v), sizeof v);
      return v;
    };
    for (int64_t k = 0; k < n; ++k) {
      switch (t.dtype) {
        case StDType::BOOL:
        case StDType::U8: out[k] = get(uint8_t{}, k); break;
        case StDType::I8: out[k] = get(int8_t{}, k); break;
        case StDType::I16: out[k] = get(int16_t{}, k); break;
        case StDType::U16: out[k] = get(uint16_t{}, k); break;
        case StDType::I32: out[k] = get(int32_t{}, k); break;
        case StDType::U32: out[k] = get(uint32_t{}, k); break;
        case StDType::I64: out[k] = get(int64_t{}, k); break;
        case StDType::U64: {
          const uint64_t u = get(uint64_t{}, k);
          if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
            throw InvalidInput(field(t.name), k, "value " + std::to_string(u) + " out of range");
          }
          out[k] = static_cast<int64_t>(u);
          break;
        }
        default:
          throw InvalidInput(field(t.name), -1,
                             "dtype " + std::string(to_string(t.dtype)) +
                                 " is not an integer type");
      }
    }
    return out;
  }

  // A float tensor as stored for a VerifyParams: bf16 kept bit for bit, fp32 kept, fp16 widened
  // to fp32 exactly. Returns the storage dtype.
  DType floats(const TensorInfo& t, std::vector<std::byte>& out) const {
    const int64_t n = t.numel();
    const std::byte* p = f_.data(t);
    switch (t.dtype) {
      case StDType::BF16:
      case StDType::F32: {
        const int64_t bytes = n * st_dtype_bytes(t.dtype);
        budget_.take(t.name, bytes);
        out.assign(p, p + bytes);
        return t.dtype == StDType::BF16 ? DType::BF16 : DType::F32;
      }
      case StDType::F16: {
        budget_.take(t.name, n * 4);
        out.resize(static_cast<size_t>(n) * 4);
        for (int64_t k = 0; k < n; ++k) {
          uint16_t h;
          std::memcpy(&h, p + 2 * k, 2);
          const float f = half_to_float(h);
          std::memcpy(out.data() + 4 * k, &f, 4);
        }
        return DType::F32;
      }
      default:
        throw InvalidInput(field(t.name), -1,
                           "dtype " + std::string(to_string(t.dtype)) +
                               ": expected BF16, F16 or F32");
    }
  }

  // A float tensor widened to float (the server's outputs), straight from the file's bytes.
  std::vector<float> widened(const TensorInfo& t) const {
    const int64_t n = t.numel();
    const std::byte* p = f_.data(t);
    if (t.dtype != StDType::BF16 && t.dtype != StDType::F16 && t.dtype != StDType::F32) {
      throw InvalidInput(field(t.name), -1,
                         "dtype " + std::string(to_string(t.dtype)) +
                             ": expected BF16, F16 or F32");
    }
    budget_.take(t.name, n * 4);
    std::vector<float> out(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
      if (t.dtype == StDType::F32) {
        std::memcpy(&out[k], p + 4 * k, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, p + 2 * k, 2);
        out[k] = t.dtype == StDType::BF16 ? bf16_to_float(bf16{h}) : half_to_float(h);
      }
    }
    return out;
  }

 private:
  const SafetensorsFile& f_;
  Budget& budget_;
};

// An integer metadata value (safetensors.h metadata_int); callers check presence first.
int64_t meta_int(const SafetensorsFile& f, const std::string& key, int64_t lo, int64_t hi) {
  return metadata_int(f, key, lo, hi);
}

double meta_double(const SafetensorsFile& f, const std::string& key) {
  const std::string& s = f.metadata().at(key);
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != s.size() || !std::isfinite(v)) {
    throw InvalidInput(f.file() + ": __metadata__." + key, -1, "\"" + s + "\" is not a number");
  }
  return v;
}

// A CSR indptr [bs + 1] from 0, non-decreasing; `what` names the tensor.
void require_csr(const std::string& field, const std::vector<int64_t>& v) {
  if (v.empty() || v[0] != 0) throw InvalidInput(field, 0, "a CSR indptr starts at 0");
  for (size_t i = 1; i < v.size(); ++i) {
    if (v[i] < v[i - 1]) {
      throw InvalidInput(field, static_cast<int64_t>(i),
                         "decreases (" + str(v[i]) + " < " + str(v[i - 1]) + ")");
    }
  }
}

}  // namespace

void rotate_rope_to_back(std::vector<std::byte>& data, int64_t rows, int elem_bytes) {
  const size_t eb = static_cast<size_t>(elem_bytes);
  std::vector<std::byte> row(kRowDim * eb);
  for (int64_t t = 0; t < rows; ++t) {
    std::byte* at = data.data() + static_cast<size_t>(t) * kRowDim * eb;
    std::memcpy(row.data(), at + kRopeDim * eb, kLatentDim * eb);
    std::memcpy(row.data() + kLatentDim * eb, at, kRopeDim * eb);
    std::memcpy(at, row.data(), row.size());
  }
}

int64_t ServerDump::held_bytes() const {
  auto b = [](const auto& v) { return static_cast<int64_t>(v.size() * sizeof(v[0])); };
  return b(q_) + b(pool_) + b(k_extend_) + b(qo_indptr_) + b(kv_indptr_) + b(kv_indices_) +
         b(unified_indptr_) + b(unified_indices_) + b(rtt_indices_) + b(mask_) + b(mask_indptr_) +
         b(out_cache_loc_) + b(server_o_) + b(server_lse_) + b(replay_o_) + b(replay_lse_);
}

ServerDump ServerDump::load(const std::filesystem::path& path, const LoadLimits& limits) {
  return from_file(SafetensorsFile::read(path, limits.max_bytes), limits);
}

ServerDump ServerDump::from_bytes(std::vector<std::byte> bytes, std::string name,
                                  const LoadLimits& limits) {
  if (static_cast<int64_t>(bytes.size()) > limits.max_bytes) {
    throw InvalidInput(name, -1,
                       std::to_string(bytes.size()) + " bytes exceed the memory budget of " +
                           std::to_string(limits.max_bytes) +
                           " bytes (raise it with --max-memory)");
  }
  return from_file(SafetensorsFile::parse(std::move(bytes), std::move(name)), limits);
}

ServerDump ServerDump::from_file(const SafetensorsFile& f, const LoadLimits& limits) {
  Budget budget(f.file(), limits.max_bytes, f.file_bytes());
  Reader r(f, budget);
  ServerDump d;
  d.file_ = f.file();
  auto meta = [&](const std::string& key) { return f.metadata().count(key) > 0; };
  auto meta_field = [&](const std::string& key) { return f.file() + ": __metadata__." + key; };

  // ---- queries: [T, H, 576] ----
  const TensorInfo& q = r.required("q");
  r.require_rank(q, 3, "[T, H, 576]");
  r.require_dim(q, 2, kRowDim, "[T, H, 576] (latent 512 then rope 64)");
  if (q.shape[0] < 1 || q.shape[1] < 1 || q.shape[1] > model::kMaxHeads) {
    throw InvalidInput(r.field("q"), -1,
                       "shape " + shape_string(q.shape) + ": T >= 1 and 1 <= H <= " +
                           str(model::kMaxHeads) + " required");
  }
  d.total_q_ = q.shape[0];
  d.heads_ = static_cast<int32_t>(q.shape[1]);
  d.q_dtype_ = r.floats(q, d.q_);

  // ---- the pool: [N, 1, 576] or [N, 576] ----
  const TensorInfo& kv = r.required("kv_buffer");
  if (kv.shape.size() == 3) r.require_dim(kv, 1, 1, "[N, 1, 576] or [N, 576]");
  if (kv.shape.size() != 2 && kv.shape.size() != 3) {
    throw InvalidInput(r.field("kv_buffer"), -1,
                       "shape " + shape_string(kv.shape) + ", expected [N, 1, 576] or [N, 576]");
  }
  r.require_dim(kv, kv.shape.size() - 1, kRowDim, "[N, 1, 576] or [N, 576]");
  if (kv.shape[0] < 1) throw InvalidInput(r.field("kv_buffer"), -1, "holds no slot");
  d.pool_slots_ = kv.shape[0];
  d.kv_dtype_ = r.floats(kv, d.pool_);

  // ---- metadata: layout, heads, scale ----
  // A mask file in another format (docs/spec.md §11) is no dump until converted.
  if (meta("mask_format") && f.metadata().at("mask_format") != "full_mask" &&
      f.metadata().at("mask_format") != "full") {
    throw InvalidInput(meta_field("mask_format"), -1,
                       "\"" + f.metadata().at("mask_format") + "\": a dump's custom_mask is "
                       "FULL_MASK bytes; convert it first (mlaverify convert IN OUT --to full_mask)");
  }
  if (meta("layout")) {
    const std::string& l = f.metadata().at("layout");
    if (l == "latent-first") {
      d.layout_ = LayoutKind::LatentFirst;
    } else if (l == "rope-first") {
      d.layout_ = LayoutKind::RopeFirst;
    } else {
      throw InvalidInput(meta_field("layout"), -1,
                         "\"" + l + "\": expected \"latent-first\" or \"rope-first\"");
    }
  }
  if (meta("heads") && meta_int(f, "heads", 1, model::kMaxHeads) != d.heads_) {
    throw InvalidInput(meta_field("heads"), -1,
                       f.metadata().at("heads") + " disagrees with q's " + str(d.heads_) +
                           " heads");
  }
  if (meta("tp")) d.tp_ = static_cast<int32_t>(meta_int(f, "tp", 1, 1024));
  double preset_scale = 0;
  if (meta("preset")) {
    d.preset_ = f.metadata().at("preset");
    model::MlaConfig cfg;
    try {
      cfg = model::preset(d.preset_);
    } catch (const InvalidInput& e) {
      throw InvalidInput(meta_field("preset"), -1, e.detail());
    }
    preset_scale = cfg.sm_scale();
    if (d.tp_ > 0) {
      if (cfg.heads % d.tp_ != 0 || cfg.heads / d.tp_ != d.heads_) {
        throw InvalidInput(meta_field("tp"), -1,
                           d.preset_ + " has " + str(cfg.heads) + " heads: tp " + str(d.tp_) +
                               " disagrees with q's " + str(d.heads_) + " heads");
      }
    } else if (cfg.heads % d.heads_ == 0) {
      d.tp_ = cfg.heads / d.heads_;
    } else {
      throw InvalidInput(r.field("q"), -1,
                         str(d.heads_) + " heads is no tensor-parallel share of " + d.preset_ +
                             "'s " + str(cfg.heads));
    }
  }
  if (meta("sm_scale")) {
    const double s = meta_double(f, "sm_scale");
    if (!(s > 0)) throw InvalidInput(meta_field("sm_scale"), -1, "must be > 0");
    // The metadata prints 7 significant digits, so it agrees with the preset's exact value to
    // within 5e-7 relative; 1e-6 leaves room for either rounding and nothing more.
    if (preset_scale > 0 && std::fabs(s - preset_scale) > 1e-6 * preset_scale) {
      throw InvalidInput(meta_field("sm_scale"), -1,
                         f.metadata().at("sm_scale") + " is not " + d.preset_ + "'s " +
                             std::to_string(preset_scale) +
                             " (the metadata disagrees with itself)");
    }
    d.sm_scale_ = static_cast<float>(s);
  } else if (preset_scale > 0) {
    d.sm_scale_ = static_cast<float>(preset_scale);
  } else {
    throw InvalidInput(meta_field("sm_scale"), -1,
                       "missing, and no preset names one (give sm_scale or preset)");
  }
  if (meta("page_size")) d.page_size_ = static_cast<int32_t>(meta_int(f, "page_size", 1, 4096));

  // ---- batch metadata ----
  const TensorInfo& qo_t = r.required("qo_indptr");
  r.require_rank(qo_t, 1, "[bs + 1]");
  if (qo_t.shape[0] < 2) throw InvalidInput(r.field("qo_indptr"), -1, "needs bs + 1 >= 2 entries");
  if (qo_t.shape[0] - 1 > std::numeric_limits<int32_t>::max() / 2) {
    throw InvalidInput(r.field("qo_indptr"), -1, "too many requests");
  }
  d.bs_ = static_cast<int32_t>(qo_t.shape[0] - 1);
  const std::vector<int64_t> qo = r.ints(qo_t);
  require_csr(r.field("qo_indptr"), qo);
  if (qo.back() != d.total_q_) {
    throw InvalidInput(r.field("qo_indptr"), d.bs_,
                       "ends at " + str(qo.back()) + " but q holds " + str(d.total_q_) +
                           " tokens");
  }
  for (int32_t i = 0; i < d.bs_; ++i) {
    const int64_t D = qo[i + 1] - qo[i];
    if (D < 1 || D > model::kMaxDraft) {
      throw InvalidInput(r.field("qo_indptr"), i + 1,
                         "request " + str(i) + " has " + str(D) + " draft tokens (1.." +
                             str(model::kMaxDraft) + ")");
    }
    d.max_draft_ = std::max<int32_t>(d.max_draft_, static_cast<int32_t>(D));
  }
  d.qo_indptr_.assign(qo.begin(), qo.end());
  if (meta("bs") && meta_int(f, "bs", 1, std::numeric_limits<int32_t>::max()) != d.bs_) {
    throw InvalidInput(meta_field("bs"), -1,
                       f.metadata().at("bs") + " disagrees with qo_indptr's " + str(d.bs_) +
                           " requests");
  }
  d.raw_bs_ = d.bs_;
  if (meta("raw_bs")) {
    const int64_t raw = meta_int(f, "raw_bs", 1, std::numeric_limits<int32_t>::max());
    if (raw > d.bs_) {
      throw InvalidInput(meta_field("raw_bs"), -1,
                         str(raw) + " real requests is above the batch's " + str(d.bs_) +
                             " (the metadata disagrees with itself)");
    }
    d.raw_bs_ = static_cast<int32_t>(raw);
  }
  if (meta("draft_tokens")) {
    const int64_t dt = meta_int(f, "draft_tokens", 1, model::kMaxDraft);
    for (int32_t i = 0; i < d.bs_; ++i) {
      if (qo[i + 1] - qo[i] > dt) {
        throw InvalidInput(r.field("qo_indptr"), i + 1,
                           "request " + str(i) + " has " + str(qo[i + 1] - qo[i]) +
                               " draft tokens, more than metadata draft_tokens " + str(dt));
      }
    }
  }

  const TensorInfo& kvp_t = r.required("kv_indptr");
  r.require_rank(kvp_t, 1, "[bs + 1]");
  if (kvp_t.shape[0] != d.bs_ + 1) {
    throw InvalidInput(r.field("kv_indptr"), -1,
                       str(kvp_t.shape[0]) + " entries, qo_indptr says bs + 1 = " +
                           str(d.bs_ + 1));
  }
  const std::vector<int64_t> kvp = r.ints(kvp_t);
  require_csr(r.field("kv_indptr"), kvp);
  const TensorInfo& kvi_t = r.required("kv_indices");
  r.require_rank(kvi_t, 1, "[sum P]");
  if (kvp.back() > kvi_t.shape[0]) {
    throw InvalidInput(r.field("kv_indptr"), d.bs_,
                       "ends at " + str(kvp.back()) + " but kv_indices holds " +
                           str(kvi_t.shape[0]));
  }
  if (kvp.back() > std::numeric_limits<int32_t>::max()) {
    throw InvalidInput(r.field("kv_indptr"), d.bs_, "exceeds int32 (SGLang's dtype)");
  }
  d.kv_indptr_.assign(kvp.begin(), kvp.end());
  d.kv_indices_ = r.ints(kvi_t);
  for (int64_t k = 0; k < kvp.back(); ++k) {
    if (d.kv_indices_[k] < 0 || d.kv_indices_[k] >= d.pool_slots_) {
      throw InvalidInput(r.field("kv_indices"), k,
                         "slot " + str(d.kv_indices_[k]) + " outside the pool's [0, " +
                             str(d.pool_slots_) + ")");
    }
  }

  const TensorInfo& ocl_t = r.required("out_cache_loc");
  r.require_rank(ocl_t, 1, "[T]");
  if (ocl_t.shape[0] != d.total_q_) {
    throw InvalidInput(r.field("out_cache_loc"), -1,
                       str(ocl_t.shape[0]) + " entries for " + str(d.total_q_) + " tokens");
  }
  d.out_cache_loc_ = r.ints(ocl_t);
  for (int64_t t = 0; t < d.total_q_; ++t) {
    if (d.out_cache_loc_[t] < 0 || d.out_cache_loc_[t] >= d.pool_slots_) {
      throw InvalidInput(r.field("out_cache_loc"), t,
                         "slot " + str(d.out_cache_loc_[t]) + " outside the pool's [0, " +
                             str(d.pool_slots_) + ")");
    }
  }

  if (const TensorInfo* ke = r.optional("k_extend")) {
    const bool ok3 = ke->shape.size() == 3 && ke->shape[1] == 1 && ke->shape[2] == kRowDim;
    const bool ok2 = ke->shape.size() == 2 && ke->shape[1] == kRowDim;
    if (!(ok2 || ok3) || ke->shape[0] != d.total_q_) {
      throw InvalidInput(r.field("k_extend"), -1,
                         "shape " + shape_string(ke->shape) + ", expected [T, 1, 576] or [T, 576]" +
                             " with T = " + str(d.total_q_));
    }
    const DType kd = r.floats(*ke, d.k_extend_);
    if (kd != d.kv_dtype_) {
      throw InvalidInput(r.field("k_extend"), -1,
                         "stored as " + std::string(to_string(ke->dtype)) +
                             ", unlike kv_buffer (the kernel reads both as one dtype)");
    }
    if (d.layout_ == LayoutKind::RopeFirst) {
      // k_extend rows are handed to backends latent-first (verify_params.h): swap once here.
      rotate_rope_to_back(d.k_extend_, d.total_q_, dtype_bytes(kd));
    }
    d.draft_source_ = DraftKvSource::ExtendRows;
  } else {
    d.draft_source_ = DraftKvSource::CacheSlots;
  }
  // The unified path's indices (prefix slots, then each draft token's out_cache_loc), built for
  // every dump: diagnose compares the two draft sources when both exist.
  d.unified_indptr_.assign(1, 0);
  for (int32_t i = 0; i < d.bs_; ++i) {
    for (int64_t k = kvp[i]; k < kvp[i + 1]; ++k) d.unified_indices_.push_back(d.kv_indices_[k]);
    for (int64_t t = qo[i]; t < qo[i + 1]; ++t) d.unified_indices_.push_back(d.out_cache_loc_[t]);
    d.unified_indptr_.push_back(static_cast<int32_t>(d.unified_indices_.size()));
  }

  // ---- the mask: FULL_MASK bytes and a CSR mask_indptr ----
  const TensorInfo& mask_t = r.required("custom_mask");
  r.require_rank(mask_t, 1, "[sum D_i (P_i + D_i)]");
  const std::vector<int64_t> mask_vals = r.ints(mask_t);
  budget.take("custom_mask", mask_t.numel());
  d.mask_.resize(mask_vals.size());
  for (size_t k = 0; k < mask_vals.size(); ++k) {
    if (mask_vals[k] != 0 && mask_vals[k] != 1 && mask_t.dtype != StDType::U8 &&
        mask_t.dtype != StDType::BOOL) {
      throw InvalidInput(r.field("custom_mask"), static_cast<int64_t>(k),
                         "value " + str(mask_vals[k]) + " is not 0 or 1");
    }
    d.mask_[k] = mask_vals[k] != 0 ? 1 : 0;
  }
  const TensorInfo& mi_t = r.required("mask_indptr");
  r.require_rank(mi_t, 1, "[bs + 1] (CSR) or [bs] (offsets only)");
  if (mi_t.shape[0] == d.bs_ + 1) {
    d.mask_convention_ = IndptrConvention::Csr;
  } else if (mi_t.shape[0] == d.bs_) {
    d.mask_convention_ = IndptrConvention::OffsetsOnly;
  } else {
    throw InvalidInput(r.field("mask_indptr"), -1,
                       str(mi_t.shape[0]) + " entries, expected bs + 1 = " + str(d.bs_ + 1) +
                           " (CSR) or bs = " + str(d.bs_) + " (offsets only)");
  }
  d.mask_indptr_ = r.ints(mi_t);

  // ---- outputs ----
  if (const TensorInfo* o = r.optional("o")) {
    const bool ok = o->shape.size() == 3 && o->shape[0] == d.total_q_ &&
                    o->shape[1] == d.heads_ && o->shape[2] == kLatentDim;
    if (!ok) {
      throw InvalidInput(r.field("o"), -1,
                         "shape " + shape_string(o->shape) + ", expected [T, H, 512] = [" +
                             str(d.total_q_) + ", " + str(d.heads_) + ", 512]");
    }
    d.server_o_ = r.widened(*o);
  }
  if (const TensorInfo* l = r.optional("lse")) {
    const bool ok = (l->shape.size() == 2 && l->shape[0] == d.total_q_ && l->shape[1] == d.heads_);
    if (!ok) {
      throw InvalidInput(r.field("lse"), -1,
                         "shape " + shape_string(l->shape) + ", expected [T, H] = [" +
                             str(d.total_q_) + ", " + str(d.heads_) + "]");
    }
    d.server_lse_ = r.widened(*l);
  }
  budget.take("replay buffers", d.total_q_ * d.heads_ * (kLatentDim * 2 + 4));
  d.replay_o_.assign(static_cast<size_t>(d.total_q_ * d.heads_ * kLatentDim), bf16{0});
  d.replay_lse_.assign(static_cast<size_t>(d.total_q_ * d.heads_), 0.f);

  // The whole launch through the model's own gate: a CSR mask_indptr with each request's exact
  // segment (offsets only: each segment fits), every read inside its buffer. Errors gain the file
  // name.
  try {
    model::validate_params(d.params());
  } catch (const InvalidInput& e) {
    throw InvalidInput(f.file() + ": " + e.field(), e.index(), e.detail());
  }

  // ---- tensors that only describe the batch: findings, not errors ----
  if (const TensorInfo* sl = r.optional("seq_lens")) {
    r.require_rank(*sl, 1, "[bs]");
    if (sl->shape[0] != d.bs_) {
      throw InvalidInput(r.field("seq_lens"), -1,
                         str(sl->shape[0]) + " entries for " + str(d.bs_) + " requests");
    }
    const std::vector<int64_t> v = r.ints(*sl);
    for (int32_t i = 0; i < d.raw_bs_; ++i) {
      if (v[i] != d.prefix_len(i)) {
        d.findings_.push_back({"seq_lens", i,
                               str(v[i]) + " but kv_indptr gives request " + str(i) + " " +
                                   str(d.prefix_len(i)) + " prefix tokens"});
      }
    }
  }
  const TensorInfo* rpi_t = r.optional("req_pool_indices");
  const TensorInfo* rtt_t = r.optional("req_to_token");
  d.rtt_indices_ = std::vector<int64_t>(d.kv_indices_.begin(), d.kv_indices_.begin() + kvp.back());
  if (rpi_t != nullptr && rtt_t != nullptr) {
    r.require_rank(*rpi_t, 1, "[bs]");
    r.require_rank(*rtt_t, 2, "[rows, max_len]");
    if (rpi_t->shape[0] != d.bs_) {
      throw InvalidInput(r.field("req_pool_indices"), -1,
                         str(rpi_t->shape[0]) + " entries for " + str(d.bs_) + " requests");
    }
    const std::vector<int64_t> rpi = r.ints(*rpi_t);
    const std::vector<int64_t> rtt = r.ints(*rtt_t);
    const int64_t rows = rtt_t->shape[0], width = rtt_t->shape[1];
    for (int32_t i = 0; i < d.bs_; ++i) {
      if (rpi[i] < 0 || rpi[i] >= rows) {
        throw InvalidInput(r.field("req_pool_indices"), i,
                           "row " + str(rpi[i]) + " outside req_to_token's " + str(rows));
      }
    }
    for (int32_t i = 0; i < d.raw_bs_; ++i) {
      const int64_t P = d.prefix_len(i), D = d.draft_nodes(i);
      if (P + D > width) {
        d.findings_.push_back({"req_to_token", rpi[i],
                               "row has " + str(width) + " columns, request " + str(i) +
                                   " needs P + D = " + str(P + D)});
        continue;
      }
      const int64_t* row = rtt.data() + rpi[i] * width;
      int64_t differ = 0, first = -1;
      for (int64_t j = 0; j < P; ++j) {
        const int64_t slot = row[j];
        d.rtt_indices_[kvp[i] + j] = (slot >= 0 && slot < d.pool_slots_) ? slot : 0;
        if (slot != d.kv_indices_[kvp[i] + j]) {
          if (first < 0) first = j;
          ++differ;
        }
      }
      if (differ) {
        d.findings_.push_back({"kv_indices", kvp[i] + first,
                               str(differ) + " of request " + str(i) + "'s " + str(P) +
                                   " prefix slots differ from req_to_token[" + str(rpi[i]) +
                                   ", 0:" + str(P) + "] (first at column " + str(first) + ")"});
      }
      for (int64_t t = 0; t < D; ++t) {
        if (row[P + t] != d.out_cache_loc_[qo[i] + t]) {
          d.findings_.push_back({"out_cache_loc", qo[i] + t,
                                 "slot " + str(d.out_cache_loc_[qo[i] + t]) + " but req_to_token[" +
                                     str(rpi[i]) + ", " + str(P + t) + "] is " + str(row[P + t])});
          break;
        }
      }
    }
  }
  if (meta("parents")) {
    const auto lists = parse_int_lists(f.metadata().at("parents"), meta_field("parents"),
                                       static_cast<size_t>(d.raw_bs_) + 1, model::kMaxDraft);
    if (static_cast<int32_t>(lists.size()) != d.raw_bs_) {
      throw InvalidInput(meta_field("parents"), -1,
                         str(static_cast<int64_t>(lists.size())) + " parent arrays for " +
                             str(d.raw_bs_) + " real requests");
    }
    const VerifyParams p = d.params();
    for (int32_t i = 0; i < d.raw_bs_; ++i) {
      if (static_cast<int64_t>(lists[i].size()) != d.draft_nodes(i)) {
        throw InvalidInput(meta_field("parents"), i,
                           str(static_cast<int64_t>(lists[i].size())) + " nodes, qo_indptr says " +
                               str(d.draft_nodes(i)));
      }
      // Narrowed to int32 only once in range: 4294967295 must not wrap to a root's -1.
      for (size_t t = 0; t < lists[i].size(); ++t) {
        if (lists[i][t] < -1 || lists[i][t] >= static_cast<int64_t>(lists[i].size())) {
          throw InvalidInput(meta_field("parents") + "[" + str(i) + "]", static_cast<int64_t>(t),
                             "parent " + str(lists[i][t]) + " outside [-1, " +
                                 str(static_cast<int64_t>(lists[i].size())) + ")");
        }
      }
      std::vector<int32_t> par(lists[i].begin(), lists[i].end());
      model::DraftTree tree;
      try {
        tree = model::DraftTree::from_parents(par);
      } catch (const InvalidInput& e) {
        throw InvalidInput(meta_field("parents") + "[" + str(i) + "]", e.index(), e.detail());
      }
      const model::BitRows block = model::draft_block(p, i);
      for (int32_t t = 0; t < tree.size(); ++t) {
        bool reported = false;
        for (int32_t j = 0; j < tree.size() && !reported; ++j) {
          if (block.test(t, j) != tree.visible(t, j)) {
            d.findings_.push_back(
                {"custom_mask", d.mask_indptr_[i] + t * (d.prefix_len(i) + tree.size()) +
                                    d.prefix_len(i) + j,
                 "request " + str(i) + " node " + str(t) + " column " + str(j) + ": mask says " +
                     (block.test(t, j) ? "visible" : "masked") + ", the parents say " +
                     (tree.visible(t, j) ? "visible" : "masked")});
            reported = true;
          }
        }
        if (reported) break;
      }
      d.parents_.push_back(std::move(par));
    }
  }
  if (const TensorInfo* pos_t = r.optional("positions")) {
    r.require_rank(*pos_t, 1, "[T]");
    if (pos_t->shape[0] != d.total_q_) {
      throw InvalidInput(r.field("positions"), -1,
                         str(pos_t->shape[0]) + " entries for " + str(d.total_q_) + " tokens");
    }
    const std::vector<int64_t> pos = r.ints(*pos_t);
    for (int32_t i = 0; i < static_cast<int32_t>(d.parents_.size()); ++i) {
      const model::DraftTree tree = model::DraftTree::from_parents(d.parents_[i]);
      for (int32_t t = 0; t < tree.size(); ++t) {
        const int64_t want = d.prefix_len(i) + tree.depth(t);
        if (pos[qo[i] + t] != want) {
          d.findings_.push_back({"positions", qo[i] + t,
                                 str(pos[qo[i] + t]) + " but request " + str(i) + " node " +
                                     str(t) + " sits at P + depth = " + str(want)});
          break;
        }
      }
    }
  }
  // The draft rows twice (k_extend, and the pool at out_cache_loc, where SGLang stores them
  // before the call): a difference means one of them is stale.
  if (d.has_k_extend()) {
    const size_t eb = static_cast<size_t>(dtype_bytes(d.kv_dtype_));
    const KvLayout lay = d.layout_ == LayoutKind::RopeFirst ? KvLayout::rope_first()
                                                            : KvLayout::latent_first();
    for (int32_t i = 0; i < d.raw_bs_; ++i) {
      for (int64_t t = qo[i]; t < qo[i + 1]; ++t) {
        const int64_t slot = d.out_cache_loc_[t];
        const std::byte* ext = d.k_extend_.data() + static_cast<size_t>(t) * kRowDim * eb;
        const std::byte* pool = d.pool_.data();
        const bool same =
            std::memcmp(ext, pool + lay.latent_index(slot) * eb, kLatentDim * eb) == 0 &&
            std::memcmp(ext + kLatentDim * eb, pool + lay.rope_index(slot) * eb, kRopeDim * eb) ==
                0;
        if (!same) {
          d.findings_.push_back({"k_extend", t,
                                 "row differs from kv_buffer slot out_cache_loc[" + str(t) +
                                     "] = " + str(slot) + " (request " + str(i) + ")"});
          break;
        }
      }
    }
  }
  return d;
}

VerifyParams ServerDump::params() {
  VerifyParams p;
  p.batch_size = bs_;
  p.num_heads = heads_;
  p.max_draft = max_draft_;
  p.max_total_q = total_q_;
  p.num_splits = 1;
  p.sm_scale = sm_scale_;
  p.q = q_.data();
  p.q_dtype = q_dtype_;
  p.q_token_stride = static_cast<int64_t>(heads_) * kRowDim;
  p.q_head_stride = kRowDim;
  p.q_latent_offset = 0;
  p.q_rope_offset = kLatentDim;
  p.kv_pool = pool_.data();
  p.kv_dtype = kv_dtype_;
  p.kv_layout = layout_ == LayoutKind::RopeFirst ? KvLayout::rope_first()
                                                 : KvLayout::latent_first();
  p.pool_slots = pool_slots_;
  p.qo_indptr = qo_indptr_.data();
  p.draft_source = draft_source_;
  if (draft_source_ == DraftKvSource::ExtendRows) {
    p.kv_indptr = kv_indptr_.data();
    p.kv_indices = kv_indices_.data();
    p.kv_indices_len = static_cast<int64_t>(kv_indices_.size());
    p.k_extend = k_extend_.data();
    p.k_extend_stride = kRowDim;
  } else {
    p.kv_indptr = unified_indptr_.data();
    p.kv_indices = unified_indices_.data();
    p.kv_indices_len = static_cast<int64_t>(unified_indices_.size());
  }
  p.mask_format = MaskFormat::FullMask;
  p.mask = mask_.data();
  p.mask_len = static_cast<int64_t>(mask_.size());
  p.mask_indptr = mask_indptr_.data();
  p.mask_indptr_convention = mask_convention_;
  p.o_lat = replay_o_.data();
  p.o_dtype = DType::BF16;
  p.o_token_stride = static_cast<int64_t>(heads_) * kLatentDim;
  p.o_head_stride = kLatentDim;
  p.lse = replay_lse_.data();
  return p;
}

}  // namespace mlaverify::dump
