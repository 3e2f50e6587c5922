// A server dump: one verify attention call of one layer as a serving engine saw it (tensors named
// as SGLang names them, docs/spec.md §10), loaded into host buffers a VerifyParams can point at.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "mlaverify/bf16.h"
#include "mlaverify/types.h"
#include "mlaverify/verify_params.h"

namespace mlaverify::dump {

class SafetensorsFile;

// What a load may cost: the file is refused before it is read when it is larger than
// max_bytes, and the buffers built from it are counted against the same budget.
struct LoadLimits {
  int64_t max_bytes = int64_t{8} << 30;
};

// A consistency finding: the dump's tensors disagree with each other in a way a kernel would not
// notice but a person debugging the server wants to know (seq_lens vs kv_indptr, kv_indices vs
// req_to_token, out_cache_loc vs req_to_token, positions vs the trees' depths, parents vs mask).
struct Finding {
  std::string field;  // "kv_indices", "positions", ...
  int64_t index = -1;
  std::string detail;
};

// Each of `rows` 576-element rows of elem_bytes-byte elements becomes [row[64:576] | row[0:64]]:
// a rope-first row [k_pe | c] made latent-first, or a latent-first one read as if rope-first.
void rotate_rope_to_back(std::vector<std::byte>& data, int64_t rows, int elem_bytes);

class ServerDump {
 public:
  // Reads and checks a dump. Bad input (a malformed file, a missing or mis-shaped tensor, a
  // value out of range, metadata that disagrees with itself or with the tensors) raises
  // InvalidInput whose field starts with the file name and names the tensor or metadata key.
  static ServerDump load(const std::filesystem::path& path, const LoadLimits& limits = {});
  // The same from a whole file already in memory; `name` stands for the path in errors (the
  // loader's fuzz harness, fuzz/dump_fuzzer.cpp, enters here).
  static ServerDump from_bytes(std::vector<std::byte> bytes, std::string name,
                               const LoadLimits& limits = {});

  // The launch exactly as the server's kernel was asked to run it: FULL_MASK with
  // mask_indptr in the convention its length says ([bs + 1] CSR, [bs] offsets only), the pool through the dump's layout, the draft rows from k_extend when the dump
  // holds them (else from the pool at out_cache_loc, the unified path). Outputs point at this
  // dump's own scratch buffers (replay_o / replay_lse), never at the server's o.
  VerifyParams params();

  const std::string& file() const { return file_; }
  int32_t batch_size() const { return bs_; }          // rows of the metadata, padded ones too
  int32_t real_batch_size() const { return raw_bs_; }  // requests before CUDA-graph padding
  int32_t num_heads() const { return heads_; }
  int64_t total_tokens() const { return total_q_; }
  int64_t pool_slots() const { return pool_slots_; }
  float sm_scale() const { return sm_scale_; }
  const std::string& preset() const { return preset_; }  // "" when the metadata names none
  int32_t tp() const { return tp_; }                     // 0 when the metadata names none
  int32_t page_size() const { return page_size_; }
  LayoutKind layout() const { return layout_; }
  DraftKvSource draft_source() const { return draft_source_; }
  bool has_k_extend() const { return !k_extend_.empty(); }

  // Per request (padded rows included).
  int64_t q_begin(int32_t i) const { return qo_indptr_[i]; }
  int32_t draft_nodes(int32_t i) const { return qo_indptr_[i + 1] - qo_indptr_[i]; }
  int64_t prefix_len(int32_t i) const { return kv_indptr_[i + 1] - kv_indptr_[i]; }
  bool padded(int32_t i) const { return i >= raw_bs_; }
  // The parent arrays the metadata gives for real requests (empty when it gives none).
  const std::vector<std::vector<int32_t>>& parents() const { return parents_; }

  // The server's outputs: o [T, H, 512] widened to float, lse [T, H] natural log.
  bool has_o() const { return !server_o_.empty(); }
  bool has_lse() const { return !server_lse_.empty(); }
  const std::vector<float>& server_o() const { return server_o_; }
  const std::vector<float>& server_lse() const { return server_lse_; }

  const std::vector<Finding>& findings() const { return findings_; }

  // Raw inputs, for the readings of diagnose (dump/diagnose.h), in the storage the params point
  // at: the mask bytes [sum D_i (P_i + D_i)], k_extend [T, 576] latent-first of kv_dtype.
  DType q_dtype() const { return q_dtype_; }
  DType kv_dtype() const { return kv_dtype_; }
  const std::vector<std::byte>& k_extend_bytes() const { return k_extend_; }
  const std::vector<uint8_t>& mask() const { return mask_; }
  const std::vector<int64_t>& mask_indptr() const { return mask_indptr_; }
  IndptrConvention mask_indptr_convention() const { return mask_convention_; }
  const std::vector<int32_t>& qo_indptr() const { return qo_indptr_; }
  const std::vector<int32_t>& kv_indptr() const { return kv_indptr_; }
  const std::vector<int64_t>& kv_indices() const { return kv_indices_; }
  const std::vector<int64_t>& out_cache_loc() const { return out_cache_loc_; }
  // kv_indices rebuilt from req_to_token[req_pool_indices[i], 0:P_i] (what the request's page
  // table says now): equal to kv_indices unless the server passed stale or shifted slots.
  const std::vector<int64_t>& kv_indices_from_req_to_token() const { return rtt_indices_; }

  // Bytes held by this dump's buffers (what the budget counts).
  int64_t held_bytes() const;

 private:
  static ServerDump from_file(const SafetensorsFile& f, const LoadLimits& limits);

  std::string file_;
  int32_t bs_ = 0, raw_bs_ = 0, heads_ = 0, tp_ = 0, page_size_ = 1, max_draft_ = 0;
  int64_t total_q_ = 0, pool_slots_ = 0;
  float sm_scale_ = 0.f;
  std::string preset_;
  LayoutKind layout_ = LayoutKind::LatentFirst;
  DraftKvSource draft_source_ = DraftKvSource::ExtendRows;
  DType q_dtype_ = DType::BF16, kv_dtype_ = DType::BF16;

  std::vector<std::byte> q_;         // [T, H, 576]
  std::vector<std::byte> pool_;      // [N, 576]
  std::vector<std::byte> k_extend_;  // [T, 576] latent-first, or empty
  std::vector<int32_t> qo_indptr_;   // [bs + 1]
  std::vector<int32_t> kv_indptr_;   // [bs + 1] prefix only
  std::vector<int64_t> kv_indices_;  // [sum P]
  std::vector<int32_t> unified_indptr_;   // [bs + 1] P_i + D_i (CacheSlots path)
  std::vector<int64_t> unified_indices_;  // prefix slots then out_cache_loc per request
  std::vector<int64_t> rtt_indices_;      // [sum P] from req_to_token
  std::vector<uint8_t> mask_;        // FULL_MASK bytes
  std::vector<int64_t> mask_indptr_;  // [bs + 1] or [bs]
  IndptrConvention mask_convention_ = IndptrConvention::Csr;
  std::vector<int64_t> out_cache_loc_;  // [T]
  std::vector<std::vector<int32_t>> parents_;
  std::vector<float> server_o_;    // [T, H, 512]
  std::vector<float> server_lse_;  // [T, H]
  std::vector<bf16> replay_o_;     // [T, H, 512] scratch for backends
  std::vector<float> replay_lse_;  // [T, H]
  std::vector<Finding> findings_;
};

}  // namespace mlaverify::dump
