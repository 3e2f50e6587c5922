// Mask files: the safetensors form of one batch's mask in any §3.4 format, read strictly (every
// shape, dtype and metadata value against the others, then model::validate_mask) and written back.
#include "dump/mask_file.h"

#include <algorithm>
#include <cstring>
#include <system_error>
#include <limits>

#include "mlaverify/error.h"
#include "model/tree.h"
#include "model/validate.h"

namespace mlaverify::dump {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

bool is_int(StDType d) {
  switch (d) {
    case StDType::BOOL:
    case StDType::U8:
    case StDType::I8:
    case StDType::I16:
    case StDType::U16:
    case StDType::I32:
    case StDType::U32:
    case StDType::I64:
    case StDType::U64: return true;
    default: return false;
  }
}

// Integer tensor values widened to int64 (bool and every integer dtype).
std::vector<int64_t> ints(const SafetensorsFile& f, const TensorInfo& t, const std::string& field) {
  if (!is_int(t.dtype)) {
    throw InvalidInput(field, -1,
                       "dtype " + std::string(to_string(t.dtype)) + " is not an integer type");
  }
  const int64_t n = t.numel();
  std::vector<int64_t> out(static_cast<size_t>(n));
  const std::byte* p = f.data(t);
  const int w = st_dtype_bytes(t.dtype);
  for (int64_t k = 0; k < n; ++k) {
    const std::byte* at = p + k * w;
    auto get = [&](auto v) {
      std::memcpy(&v, at, sizeof v);
      return v;
    };
    switch (t.dtype) {
      case StDType::BOOL:
      case StDType::U8: out[k] = get(uint8_t{}); break;
      case StDType::I8: out[k] = get(int8_t{}); break;
      case StDType::I16: out[k] = get(int16_t{}); break;
      case StDType::U16: out[k] = get(uint16_t{}); break;
      case StDType::I32: out[k] = get(int32_t{}); break;
      case StDType::U32: out[k] = get(uint32_t{}); break;
      case StDType::I64: out[k] = get(int64_t{}); break;
      default: {
        const uint64_t u = get(uint64_t{});
        if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          throw InvalidInput(field, k, "value " + std::to_string(u) + " out of range");
        }
        out[k] = static_cast<int64_t>(u);
      }
    }
  }
  return out;
}

// Values as little-endian bytes of an integer dtype (the inverse of ints for values in range).
std::vector<std::byte> int_bytes(const std::vector<int64_t>& v, StDType d, const std::string& what) {
  const int w = st_dtype_bytes(d);
  std::vector<std::byte> out(v.size() * static_cast<size_t>(w));
  for (size_t k = 0; k < v.size(); ++k) {
    const int64_t x = v[k];
    bool ok = true;
    switch (d) {
      case StDType::BOOL: ok = x == 0 || x == 1; break;
      case StDType::U8: ok = x >= 0 && x <= 0xff; break;
      case StDType::I8: ok = x >= -128 && x <= 127; break;
      case StDType::I16: ok = x >= -32768 && x <= 32767; break;
      case StDType::U16: ok = x >= 0 && x <= 0xffff; break;
      case StDType::I32: ok = x >= INT32_MIN && x <= INT32_MAX; break;
      case StDType::U32: ok = x >= 0 && x <= UINT32_MAX; break;
      case StDType::I64:
      case StDType::U64: ok = d == StDType::I64 || x >= 0; break;
      default:
        throw InvalidInput(what, -1, "dtype " + std::string(to_string(d)) + " is not an integer type");
    }
    if (!ok) {
      throw InvalidInput(what, static_cast<int64_t>(k),
                         "value " + str(x) + " does not fit " + std::string(to_string(d)));
    }
    const uint64_t u = static_cast<uint64_t>(x);  // two's complement, little-endian below
    for (int b = 0; b < w; ++b) out[k * w + b] = static_cast<std::byte>((u >> (8 * b)) & 0xffu);
  }
  return out;
}

// A CSR indptr [bs + 1] from 0, non-decreasing, each size in [lo, hi], the total an int32.
std::vector<int32_t> csr(const std::vector<int64_t>& v, const std::string& field, int64_t lo,
                         int64_t hi, const char* what) {
  if (v.empty() || v[0] != 0) throw InvalidInput(field, 0, "a CSR indptr starts at 0");
  for (size_t i = 1; i < v.size(); ++i) {
    const int64_t n = v[i] - v[i - 1];
    if (n < lo || n > hi) {
      throw InvalidInput(field, static_cast<int64_t>(i),
                         "request " + str(static_cast<int64_t>(i) - 1) + " has " + str(n) + " " +
                             what + " (" + str(lo) + ".." + str(hi) + ")");
    }
    if (v[i] > INT32_MAX) throw InvalidInput(field, static_cast<int64_t>(i), "exceeds int32");
  }
  return std::vector<int32_t>(v.begin(), v.end());
}

int64_t meta_int(const SafetensorsFile& f, const std::string& key, int64_t lo, int64_t hi) {
  return metadata_int(f, key, lo, hi, "the mask format needs it");
}

bool has_stride(MaskFormat f) {
  return f == MaskFormat::QlenOnly || f == MaskFormat::QlenOnlyBitpacking ||
         f == MaskFormat::DraftBits;
}

}  // namespace

std::string_view mask_format_name(MaskFormat f) {
  switch (f) {
    case MaskFormat::FullMask: return "full_mask";
    case MaskFormat::QlenOnly: return "qlen_only";
    case MaskFormat::QlenOnlyBitpacking: return "qlen_only_bitpacking";
    case MaskFormat::FlashInferPacked: return "flashinfer_packed";
    case MaskFormat::DraftBits: return "draft_bits";
  }
  return "unknown";
}

MaskFormat parse_mask_format(std::string_view name, const std::string& field) {
  if (name == "full") return MaskFormat::FullMask;
  for (MaskFormat f : {MaskFormat::FullMask, MaskFormat::QlenOnly, MaskFormat::QlenOnlyBitpacking,
                       MaskFormat::FlashInferPacked, MaskFormat::DraftBits}) {
    if (name == mask_format_name(f)) return f;
  }
  throw InvalidInput(field, -1,
                     "\"" + std::string(name) +
                         "\": expected full_mask (or full), qlen_only, qlen_only_bitpacking, "
                         "flashinfer_packed or draft_bits");
}

std::string_view indptr_convention_name(IndptrConvention c) {
  return c == IndptrConvention::Csr ? "csr" : "offsets";
}

VerifyParams MaskFile::params() const {
  VerifyParams p;
  p.batch_size = batch_size();
  p.qo_indptr = qo_indptr.data();
  p.kv_indptr = kv_indptr.data();
  p.draft_source = DraftKvSource::ExtendRows;  // kv_indptr holds the prefix lengths
  int32_t max_d = 0;
  for (int32_t i = 0; i < batch_size(); ++i) max_d = std::max(max_d, draft_nodes(i));
  p.max_draft = max_d;
  p.max_total_q = qo_indptr.back();
  model::attach_mask(p, mask);
  return p;
}

MaskFile read_mask_file(const std::filesystem::path& path, int64_t max_bytes) {
  const SafetensorsFile f = SafetensorsFile::read(path, max_bytes);
  const std::string& file = f.file();
  auto field = [&](const std::string& name) { return file + ": " + name; };
  auto meta_field = [&](const std::string& key) { return file + ": __metadata__." + key; };
  auto required = [&](const std::string& name) -> const TensorInfo& {
    const TensorInfo* t = f.find(name);
    if (t == nullptr) throw InvalidInput(field(name), -1, "missing (a mask file needs it)");
    return *t;
  };
  auto rank1 = [&](const TensorInfo& t, const std::string& expect) {
    if (t.shape.size() != 1) {
      throw InvalidInput(field(t.name), -1,
                         "shape " + shape_string(t.shape) + ", expected " + expect);
    }
  };

  MaskFile m;
  m.file = file;
  m.metadata = f.metadata();
  for (const TensorInfo& t : f.tensors()) {
    if (std::find_if(std::begin(kMaskTensors), std::end(kMaskTensors),
                     [&](const char* n) { return t.name == n; }) != std::end(kMaskTensors)) {
      continue;
    }
    TensorOut o{t.name, t.dtype, t.shape, {}};
    o.bytes.assign(f.data(t), f.data(t) + (t.end - t.begin));
    m.others.push_back(std::move(o));
  }

  MaskFormat format = MaskFormat::FullMask;  // a server dump names none
  if (const auto it = f.metadata().find("mask_format"); it != f.metadata().end()) {
    format = parse_mask_format(it->second, meta_field("mask_format"));
  }

  // ---- the batch: qo_indptr (D_i) and kv_indptr (P_i) ----
  const TensorInfo& qo_t = required("qo_indptr");
  rank1(qo_t, "[bs + 1]");
  if (qo_t.shape[0] < 2) throw InvalidInput(field("qo_indptr"), -1, "needs bs + 1 >= 2 entries");
  m.qo_dtype = qo_t.dtype;
  m.qo_indptr = csr(ints(f, qo_t, field("qo_indptr")), field("qo_indptr"), 1, model::kMaxDraft,
                    "draft tokens");
  const int64_t bs = qo_t.shape[0] - 1;
  const TensorInfo& kv_t = required("kv_indptr");
  rank1(kv_t, "[bs + 1]");
  if (kv_t.shape[0] != bs + 1) {
    throw InvalidInput(field("kv_indptr"), -1,
                       str(kv_t.shape[0]) + " entries, qo_indptr says bs + 1 = " + str(bs + 1));
  }
  m.kv_dtype = kv_t.dtype;
  m.kv_indptr = csr(ints(f, kv_t, field("kv_indptr")), field("kv_indptr"), 0, INT32_MAX,
                    "prefix tokens");
  const int64_t total_q = m.qo_indptr.back();

  // ---- the mask bytes, in the format's storage ----
  model::EncodedMask& e = m.mask;
  e.format = format;
  const TensorInfo& mt = required("custom_mask");
  const std::string mfield = field("custom_mask");
  const int elt = is_int(mt.dtype) ? st_dtype_bytes(mt.dtype) : 0;
  if (elt == 0) {
    throw InvalidInput(mfield, -1,
                       "dtype " + std::string(to_string(mt.dtype)) + " is not an integer type");
  }
  int64_t stride = 0;
  if (has_stride(format)) {
    stride = meta_int(f, "mask_draft_stride", 1, model::kMaxDraft);
    e.draft_stride = static_cast<int32_t>(stride);
  }
  auto shape_is = [&](std::initializer_list<int64_t> want) {
    return mt.shape == std::vector<int64_t>(want);
  };
  auto bad_shape = [&](const std::string& expect) {
    throw InvalidInput(mfield, -1, "shape " + shape_string(mt.shape) + ", expected " + expect);
  };
  auto bad_dtype = [&](const std::string& expect) {
    throw InvalidInput(mfield, -1,
                       "dtype " + std::string(to_string(mt.dtype)) + ", " +
                           std::string(mask_format_name(format)) + " is stored as " + expect);
  };
  switch (format) {
    case MaskFormat::FullMask:
    case MaskFormat::QlenOnly: {
      // One element per mask element; nonzero is visible (bool or uint8 as SGLang writes them,
      // any other integer type holding only 0 and 1).
      if (format == MaskFormat::FullMask) {
        if (mt.shape.size() != 1) bad_shape("[sum D_i (P_i + D_i)]");
      } else if (mt.shape.size() != 1 && !shape_is({bs, stride, stride})) {
        bad_shape("[bs, S, S] = " + shape_string({bs, stride, stride}) +
                  " (S = mask_draft_stride) or flat");
      }
      const std::vector<int64_t> v = ints(f, mt, mfield);
      const bool bytes = mt.dtype == StDType::U8 || mt.dtype == StDType::BOOL;
      e.data.resize(v.size());
      for (size_t k = 0; k < v.size(); ++k) {
        if (!bytes && v[k] != 0 && v[k] != 1) {
          throw InvalidInput(mfield, static_cast<int64_t>(k), "value " + str(v[k]) + " is not 0 or 1");
        }
        e.data[k] = v[k] != 0 ? 1 : 0;
      }
      e.len = static_cast<int64_t>(e.data.size());
      break;
    }
    case MaskFormat::QlenOnlyBitpacking: {
      const int64_t wb = meta_int(f, "mask_word_bytes", 1, 4);
      if (wb == 3) throw InvalidInput(meta_field("mask_word_bytes"), -1, "must be 1, 2 or 4, got 3");
      e.word_bytes = static_cast<int32_t>(wb);
      if (mt.shape.size() == 2) {
        if (!shape_is({bs, stride})) {
          bad_shape("[bs, S] = " + shape_string({bs, stride}) + " (S = mask_draft_stride)");
        }
        if (elt != wb) {
          bad_dtype(str(wb) + "-byte words (mask_word_bytes = " + str(wb) + ")");
        }
      } else if (mt.shape.size() != 1) {
        bad_shape("[bs, S] words or flat");
      }
      break;
    }
    case MaskFormat::FlashInferPacked:
      if (mt.shape.size() != 1) bad_shape("[sum ceil(D_i (P_i + D_i) / 8)] bytes");
      if (elt != 1 || mt.dtype == StDType::BOOL) bad_dtype("U8 bytes");
      break;
    case MaskFormat::DraftBits:
      if (elt != 4) bad_dtype("uint32 words (U32)");
      if (mt.shape.size() != 1 && !shape_is({total_q, stride})) {
        bad_shape("[T, S] = " + shape_string({total_q, stride}) + " (S = mask_draft_stride) or flat");
      }
      break;
  }
  if (format != MaskFormat::FullMask && format != MaskFormat::QlenOnly) {
    // Packed formats: the bytes as stored, little-endian.
    const auto* p = reinterpret_cast<const uint8_t*>(f.data(mt));
    e.data.assign(p, p + (mt.end - mt.begin));
    e.len = format == MaskFormat::DraftBits ? mt.numel() : static_cast<int64_t>(e.data.size());
  }

  // ---- mask_indptr: where the format has one ----
  const TensorInfo* mi = f.find("mask_indptr");
  const auto conv_it = f.metadata().find("mask_indptr_convention");
  if (format == MaskFormat::FullMask || format == MaskFormat::FlashInferPacked) {
    if (mi == nullptr) throw InvalidInput(field("mask_indptr"), -1, "missing (the format needs it)");
    rank1(*mi, "[bs + 1] (csr) or [bs] (offsets)");
    IndptrConvention by_len;
    if (mi->shape[0] == bs + 1) {
      by_len = IndptrConvention::Csr;
    } else if (mi->shape[0] == bs) {
      by_len = IndptrConvention::OffsetsOnly;
    } else {
      throw InvalidInput(field("mask_indptr"), -1,
                         str(mi->shape[0]) + " entries, expected bs + 1 = " + str(bs + 1) +
                             " (csr) or bs = " + str(bs) + " (offsets)");
    }
    e.indptr_convention = by_len;
    if (conv_it != f.metadata().end()) {
      const std::string& c = conv_it->second;
      if (c != "csr" && c != "offsets") {
        throw InvalidInput(meta_field("mask_indptr_convention"), -1,
                           "\"" + c + "\": expected \"csr\" or \"offsets\"");
      }
      if (c != indptr_convention_name(by_len)) {
        throw InvalidInput(field("mask_indptr"), -1,
                           str(mi->shape[0]) + " entries for bs = " + str(bs) +
                               ", but mask_indptr_convention says " + c +
                               (c == "csr" ? " (a [:bs] slice?)" : " (a [:bs+1] slice?)"));
      }
    }
    e.indptr = ints(f, *mi, field("mask_indptr"));
  } else if (mi != nullptr) {
    throw InvalidInput(field("mask_indptr"), -1,
                       std::string(mask_format_name(format)) + " has no mask_indptr");
  }

  // ---- everything a decoder reads lies inside the buffer, segments match D_i and P_i ----
  try {
    model::validate_mask(m.params());
  } catch (const InvalidInput& err) {
    std::string fld = err.field();
    if (fld == "mask" || fld == "mask_len") fld = "custom_mask";
    if (fld == "mask_draft_stride" || fld == "mask_word_bytes") fld = "__metadata__." + fld;
    throw InvalidInput(file + ": " + fld, err.index(), err.detail());
  }
  return m;
}

void write_mask_file(const std::filesystem::path& path, const MaskFile& m) {
  const model::EncodedMask& e = m.mask;
  const int64_t bs = m.batch_size();
  std::vector<TensorOut> out = m.others;
  const std::vector<int64_t> qo(m.qo_indptr.begin(), m.qo_indptr.end());
  const std::vector<int64_t> kv(m.kv_indptr.begin(), m.kv_indptr.end());
  out.push_back({"qo_indptr", m.qo_dtype, {bs + 1}, int_bytes(qo, m.qo_dtype, "qo_indptr")});
  out.push_back({"kv_indptr", m.kv_dtype, {bs + 1}, int_bytes(kv, m.kv_dtype, "kv_indptr")});

  TensorOut mask{"custom_mask", StDType::U8, {e.len}, {}};
  const auto* d = reinterpret_cast<const std::byte*>(e.data.data());
  mask.bytes.assign(d, d + e.data.size());
  const int64_t s = e.draft_stride;
  switch (e.format) {
    case MaskFormat::FullMask: mask.dtype = StDType::BOOL; break;
    case MaskFormat::QlenOnly:
      mask.dtype = StDType::BOOL;
      if (s > 0 && e.len == bs * s * s) mask.shape = {bs, s, s};
      break;
    case MaskFormat::QlenOnlyBitpacking:
      mask.dtype = e.word_bytes == 1 ? StDType::U8 : e.word_bytes == 2 ? StDType::U16 : StDType::U32;
      if (s > 0 && e.len == bs * s * e.word_bytes) {
        mask.shape = {bs, s};
      } else {
        mask.dtype = StDType::U8;  // a buffer that is not whole [bs, S] words: flat bytes
      }
      break;
    case MaskFormat::FlashInferPacked: break;
    case MaskFormat::DraftBits:
      mask.dtype = StDType::U32;
      if (s > 0 && e.len == static_cast<int64_t>(m.qo_indptr.back()) * s) {
        mask.shape = {m.qo_indptr.back(), s};
      }
      break;
  }
  out.push_back(std::move(mask));

  std::map<std::string, std::string> meta = m.metadata;
  for (const char* k : kMaskKeys) meta.erase(k);
  meta["mask_format"] = std::string(mask_format_name(e.format));
  if (e.format == MaskFormat::FullMask || e.format == MaskFormat::FlashInferPacked) {
    out.push_back({"mask_indptr", StDType::I64, {static_cast<int64_t>(e.indptr.size())},
                   int_bytes(e.indptr, StDType::I64, "mask_indptr")});
    meta["mask_indptr_convention"] = std::string(indptr_convention_name(e.indptr_convention));
  }
  if (has_stride(e.format)) meta["mask_draft_stride"] = str(e.draft_stride);
  if (e.format == MaskFormat::QlenOnlyBitpacking) meta["mask_word_bytes"] = str(e.word_bytes);
  // Through a temporary file and a rename, so converting a file onto itself never leaves half.
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  write_safetensors(tmp, out, meta);
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw std::runtime_error(path.string() + ": cannot write (rename failed)");
  }
}

MaskFile convert_mask_file(const MaskFile& in, MaskFormat to, std::optional<IndptrConvention> conv,
                           int32_t word_bytes, ConvertReport* report) {
  const std::string where = in.file.empty() ? std::string("mask") : in.file;
  const VerifyParams p = in.params();
  model::validate_mask(p);
  const int32_t bs = in.batch_size();
  int32_t max_d = 0, widest = 0;
  for (int32_t i = 0; i < bs; ++i) {
    if (in.draft_nodes(i) > max_d) {
      max_d = in.draft_nodes(i);
      widest = i;
    }
  }
  if (to == MaskFormat::QlenOnlyBitpacking) {
    if (max_d > 32) {
      throw InvalidInput(where + ": qo_indptr", widest + 1,
                         "request " + str(widest) + " has D_i = " + str(max_d) +
                             " draft tokens; qlen_only_bitpacking holds at most 32 (one bit per "
                             "column in a word of at most 4 bytes)");
    }
    if (word_bytes == 0) word_bytes = max_d <= 8 ? 1 : max_d <= 16 ? 2 : 4;
    if (word_bytes != 1 && word_bytes != 2 && word_bytes != 4) {
      throw InvalidInput("word_bytes", -1, "must be 1, 2 or 4, got " + str(word_bytes));
    }
    if (max_d > 8 * word_bytes) {
      throw InvalidInput("word_bytes", -1,
                         "a " + str(word_bytes) + "-byte word holds " + str(8 * word_bytes) +
                             " columns; request " + str(widest) + " has D_i = " + str(max_d));
    }
  } else if (word_bytes == 0) {
    word_bytes = 4;
  }
  const bool from_prefix = model::mask_has_prefix_columns(in.mask.format);
  const bool to_prefix = model::mask_has_prefix_columns(to);
  const IndptrConvention c =
      conv.value_or(from_prefix ? in.mask.indptr_convention : IndptrConvention::Csr);

  std::vector<model::BitRows> blocks, prefixes;
  std::vector<int64_t> prefix_lens;
  std::vector<int32_t> not_trees, lost_prefix;
  for (int32_t i = 0; i < bs; ++i) {
    blocks.push_back(model::draft_block(p, i));  // [D_i, D_i], every bit
    prefix_lens.push_back(in.prefix_len(i));
    try {
      (void)model::DraftTree::from_ancestor_bits(blocks.back());
    } catch (const InvalidInput&) {
      not_trees.push_back(i);
    }
    if (from_prefix) {
      model::BitRows pre = model::prefix_block(p, i);  // [D_i, P_i]
      if (!to_prefix) {
        for (int32_t t = 0; t < pre.rows(); ++t) {
          if (pre.count_row(t) != pre.cols()) {
            lost_prefix.push_back(i);
            break;
          }
        }
      } else {
        prefixes.push_back(std::move(pre));
      }
    }
  }

  MaskFile out;
  out.qo_indptr = in.qo_indptr;
  out.kv_indptr = in.kv_indptr;
  out.qo_dtype = in.qo_dtype;
  out.kv_dtype = in.kv_dtype;
  out.others = in.others;
  out.metadata = in.metadata;
  out.mask = model::encode_mask_blocks(to, blocks, prefix_lens, c, word_bytes, prefixes);

  if (report != nullptr) {
    auto list = [](const std::vector<int32_t>& v) {
      std::string s;
      for (size_t k = 0; k < v.size(); ++k) s += (k ? ", " : "") + str(v[k]);
      return s;
    };
    if (!not_trees.empty()) {
      report->notes.push_back("request(s) " + list(not_trees) +
                              ": the draft block is no tree (CUDA-graph padding?); converted bit "
                              "for bit");
    }
    if (!lost_prefix.empty()) {
      report->notes.push_back("request(s) " + list(lost_prefix) +
                              ": prefix columns not all ones; " +
                              std::string(mask_format_name(to)) +
                              " stores none, so they read as ones (no kernel reads them, §3.4)");
    }
  }
  return out;
}

}  // namespace mlaverify::dump
