// `mlaverify convert`: read a mask file, re-encode through the model's one decoder and encoder,
// write it back in another format (or the trees as parent arrays).
#include "cli/convert.h"

#include <algorithm>
#include <climits>
#include <fstream>
#include <optional>
#include <ostream>
#include <stdexcept>

#include "cli/json_writer.h"
#include "dump/mask_file.h"
#include "dump/safetensors.h"
#include "mlaverify/error.h"
#include "model/mask.h"
#include "model/tree.h"

namespace mlaverify::cli {
namespace {

void json_file(JsonWriter& j, const std::filesystem::path& path, const dump::MaskFile& m) {
  const model::EncodedMask& e = m.mask;
  j.begin_object().field("path", path.string());
  j.field("format", std::string(dump::mask_format_name(e.format)));
  j.field("batch_size", m.batch_size());
  j.key("draft_nodes").begin_array();
  for (int32_t i = 0; i < m.batch_size(); ++i) j.value(m.draft_nodes(i));
  j.end_array();
  if (model::mask_has_prefix_columns(e.format)) {
    j.field("mask_indptr_convention", std::string(dump::indptr_convention_name(e.indptr_convention)));
  } else {
    j.field("mask_draft_stride", e.draft_stride);
  }
  if (e.format == MaskFormat::QlenOnlyBitpacking) j.field("mask_word_bytes", e.word_bytes);
  j.field("bytes", static_cast<int64_t>(e.data.size())).end_object();
}

std::string describe(const dump::MaskFile& m) {
  const model::EncodedMask& e = m.mask;
  int32_t lo = INT32_MAX, hi = 0;
  for (int32_t i = 0; i < m.batch_size(); ++i) {
    lo = std::min(lo, m.draft_nodes(i));
    hi = std::max(hi, m.draft_nodes(i));
  }
  std::string s = std::string(dump::mask_format_name(e.format)) + " (" +
                  std::to_string(m.batch_size()) + " requests, D " + std::to_string(lo) +
                  (lo == hi ? "" : ".." + std::to_string(hi));
  switch (e.format) {
    case MaskFormat::FullMask:
    case MaskFormat::FlashInferPacked:
      s += ", mask_indptr " + std::string(dump::indptr_convention_name(e.indptr_convention));
      break;
    case MaskFormat::QlenOnlyBitpacking:
      s += ", stride " + std::to_string(e.draft_stride) + ", " + std::to_string(e.word_bytes) +
           "-byte words";
      break;
    default: s += ", stride " + std::to_string(e.draft_stride); break;
  }
  return s + ", " + std::to_string(e.data.size()) + " bytes)";
}

// The real requests' trees (rows >= raw_bs are CUDA-graph padding and hold no tree).
std::string parents_json(const dump::MaskFile& m) {
  int32_t real = m.batch_size();
  if (const auto it = m.metadata.find("raw_bs"); it != m.metadata.end()) {
    try {
      real = std::min(real, std::max(1, std::stoi(it->second)));
    } catch (const std::exception&) {
      throw InvalidInput(m.file + ": __metadata__.raw_bs", -1, "\"" + it->second + "\" is not an integer");
    }
  }
  const VerifyParams p = m.params();
  std::vector<std::vector<int64_t>> lists;
  for (int32_t i = 0; i < real; ++i) {
    model::DraftTree tree;
    try {
      tree = model::DraftTree::from_ancestor_bits(model::draft_block(p, i));
    } catch (const InvalidInput& e) {
      throw InvalidInput(m.file + ": custom_mask", i,
                         "request " + std::to_string(i) + " is not a tree: " + e.what());
    }
    lists.emplace_back(tree.parents().begin(), tree.parents().end());
  }
  return dump::int_lists_to_json(lists);
}

// One line ("bad input: " where a field is at fault), or with json the error document every
// command writes (main.cpp's write_error_json shape).
void fail(const ConvertOptions& o, const std::string& field, int64_t index,
          const std::string& message, std::ostream& out) {
  if (!o.json) {
    out << "mlaverify: " << (field.empty() ? "" : "bad input: ") << message << "\n";
    return;
  }
  JsonWriter j(out);
  j.begin_object().field("command", "convert").field("exit_code", 2);
  j.key("error").begin_object().field("field", field).field("index", index);
  j.field("message", message).end_object().end_object();
  out << "\n";
}

}  // namespace

int convert(const ConvertOptions& o, std::ostream& out) {
  try {
    std::optional<IndptrConvention> conv;
    if (o.indptr == "csr") {
      conv = IndptrConvention::Csr;
    } else if (o.indptr == "offsets") {
      conv = IndptrConvention::OffsetsOnly;
    } else if (!o.indptr.empty()) {
      throw InvalidInput("--indptr", -1, "\"" + o.indptr + "\": expected csr or offsets");
    }
    if (o.word_bytes != 0 && o.word_bytes != 1 && o.word_bytes != 2 && o.word_bytes != 4) {
      throw InvalidInput("--word-bytes", -1, "must be 1, 2 or 4, got " + std::to_string(o.word_bytes));
    }
    const bool parents = o.to == "parents";
    const MaskFormat to = parents ? MaskFormat::FullMask : dump::parse_mask_format(o.to, "--to");
    if (o.word_bytes != 0 && to != MaskFormat::QlenOnlyBitpacking) {
      throw InvalidInput("--word-bytes", -1, "only qlen_only_bitpacking has words");
    }
    if (conv && !model::mask_has_prefix_columns(to)) {
      throw InvalidInput("--indptr", -1,
                         std::string(dump::mask_format_name(to)) + " has no mask_indptr");
    }

    const dump::MaskFile in = dump::read_mask_file(o.in, o.max_memory);
    if (parents) {
      const std::string json = parents_json(in);
      std::ofstream f(o.out, std::ios::trunc);
      f << json << "\n";
      if (!f) throw std::runtime_error(o.out.string() + ": cannot write");
      if (o.json) {
        JsonWriter j(out);
        j.begin_object().field("command", "convert").field("exit_code", 0);
        j.key("in");
        json_file(j, o.in, in);
        j.key("out").begin_object().field("path", o.out.string()).field("format", "parents");
        j.end_object().end_object();
        out << "\n";
      } else {
        out << o.in.string() << ": " << describe(in) << " -> " << o.out.string()
            << ": parent arrays\n";
      }
      return 0;
    }
    dump::ConvertReport report;
    const dump::MaskFile res = dump::convert_mask_file(in, to, conv, o.word_bytes, &report);
    dump::write_mask_file(o.out, res);
    if (o.json) {
      JsonWriter j(out);
      j.begin_object().field("command", "convert").field("exit_code", 0);
      j.key("in");
      json_file(j, o.in, in);
      j.key("out");
      json_file(j, o.out, res);
      j.key("notes").begin_array();
      for (const std::string& n : report.notes) j.value(n);
      j.end_array().end_object();
      out << "\n";
    } else {
      out << o.in.string() << ": " << describe(in) << " -> " << o.out.string() << ": "
          << describe(res) << "\n";
      for (const std::string& n : report.notes) out << "  note: " << n << "\n";
    }
    return 0;
  } catch (const InvalidInput& e) {
    fail(o, e.field(), e.index(), e.what(), out);
    return 2;
  } catch (const std::runtime_error& e) {
    fail(o, "", -1, e.what(), out);
    return 2;
  }
}

}  // namespace mlaverify::cli
