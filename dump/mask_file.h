// Mask files (docs/spec.md §11): one batch's tree mask in any format of §3.4 as a safetensors file,
// with the metadata it needs to be read; a server dump (§10) is one in the full_mask format.
// Reading checks everything a decoder needs (model::validate_mask); writing is its inverse.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dump/safetensors.h"
#include "mlaverify/types.h"
#include "mlaverify/verify_params.h"
#include "model/mask.h"

namespace mlaverify::dump {

// The §3.4 scenario names: full_mask, qlen_only, qlen_only_bitpacking, flashinfer_packed,
// draft_bits. parse_mask_format also takes "full"; InvalidInput(field, -1, ...) otherwise.
std::string_view mask_format_name(MaskFormat f);
MaskFormat parse_mask_format(std::string_view name, const std::string& field);
std::string_view indptr_convention_name(IndptrConvention c);  // "csr" | "offsets"

// The tensors and metadata keys a mask file owns; everything else in the file rides along.
inline constexpr const char* kMaskTensors[] = {"qo_indptr", "kv_indptr", "custom_mask",
                                               "mask_indptr"};
inline constexpr const char* kMaskKeys[] = {"mask_format", "mask_indptr_convention",
                                            "mask_draft_stride", "mask_word_bytes"};

struct MaskFile {
  std::string file;                 // names the source in errors ("" when built in memory)
  std::vector<int32_t> qo_indptr;   // [bs + 1] CSR: D_i per request
  std::vector<int32_t> kv_indptr;   // [bs + 1] CSR: prefix lengths P_i
  StDType qo_dtype = StDType::I32;  // as stored; written back in the same dtype
  StDType kv_dtype = StDType::I32;
  model::EncodedMask mask;          // format, bytes, capacity, mask_indptr, stride, word size
  // Every other tensor of the file, in file order, byte for byte (a dump's q, kv_buffer, ...).
  std::vector<TensorOut> others;
  // Every metadata key of the file; write_mask_file replaces the four mask keys.
  std::map<std::string, std::string> metadata;

  int32_t batch_size() const { return static_cast<int32_t>(qo_indptr.size()) - 1; }
  int32_t draft_nodes(int32_t i) const { return qo_indptr[i + 1] - qo_indptr[i]; }
  int64_t prefix_len(int32_t i) const { return kv_indptr[i + 1] - kv_indptr[i]; }
  // A VerifyParams with the batch's qo/kv indptrs (extend-rows convention: kv_indptr is the
  // prefix) and every mask field pointing into this file: enough for model::validate_mask,
  // draft_block, prefix_block and decode_trees. Only valid while *this lives unchanged.
  VerifyParams params() const;
};

// Reads and checks a mask file. InvalidInput names "<file>: <tensor>" or
// "<file>: __metadata__.<key>" and the index at fault: a missing or mis-shaped tensor, a dtype
// the format cannot be stored in, a metadata value that disagrees with a shape, a mask_indptr
// that is absent, has the wrong length or convention, or whose segments disagree with D_i and P_i
// (model::validate_mask). The file is refused before it is read when larger than max_bytes.
MaskFile read_mask_file(const std::filesystem::path& path,
                        int64_t max_bytes = int64_t{8} << 30);

// Writes m: the other tensors unchanged, qo_indptr / kv_indptr in their dtypes, custom_mask
// (full_mask, qlen_only: BOOL bytes; qlen_only_bitpacking: [bs, S] words as U8/U16/U32;
// flashinfer_packed: U8 bytes; draft_bits: U32 [T, S]), mask_indptr (I64) where the format has
// one, and the mask keys of the metadata set for m's format (stale ones removed). Throws
// std::runtime_error naming the path on an I/O failure.
void write_mask_file(const std::filesystem::path& path, const MaskFile& m);

// What a conversion changes beyond the bits (one line each, for the user).
struct ConvertReport {
  std::vector<std::string> notes;
};

// `in` re-encoded as `to`: every request's draft block decoded through model::draft_block (the
// one decoder; a block that is no tree, e.g. a CUDA-graph padded row's garbage, is carried bit
// for bit) and written with model::encode_mask_blocks; the prefix columns carried when both
// formats store them (model::prefix_block), else ones. conv: the mask_indptr convention of a
// full_mask / flashinfer_packed result (nullopt: the source's, csr when it has none). word_bytes:
// the qlen_only_bitpacking word (0: the smallest that holds max D_i, SGLang's choice). Everything
// else of `in` (other tensors, metadata, qo/kv indptrs) is kept. InvalidInput when `to` cannot
// express the batch: qlen_only_bitpacking with D_i > 32 names "<file>: qo_indptr" and the request,
// a word too small names "word_bytes".
MaskFile convert_mask_file(const MaskFile& in, MaskFormat to,
                           std::optional<IndptrConvention> conv = std::nullopt,
                           int32_t word_bytes = 0, ConvertReport* report = nullptr);

}  // namespace mlaverify::dump
