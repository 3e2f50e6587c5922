// A small self-contained verify case for the CPU backend tests: trees, prefix lengths, layout,
// dtypes, draft source and mask format in; every host buffer and a VerifyParams out.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "mlaverify/bf16.h"
#include "mlaverify/types.h"
#include "mlaverify/verify_params.h"
#include "model/kv_pool.h"
#include "model/mask.h"
#include "model/tree.h"
#include "model/metadata.h"
#include "model/storage.h"

namespace mlaverify::cpu::testing {

// splitmix64 plus Box-Muller: fast, seeded, identical on every machine.
class Rng {
 public:
  explicit Rng(uint64_t seed) : bits_(seed) {}
  uint64_t next() { return bits_.next(); }
  double uniform() { return (next() >> 11) * 0x1.0p-53; }  // [0, 1)
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
  double normal() {
    double u1 = std::max(uniform(), 0x1.0p-60);
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * uniform());
  }

 private:
  model::SplitMix64 bits_;  // the model's generator: the same stream everywhere
};

// The run's seed: MLAV_SEED when set (CI passes a fresh one), else a fixed default.
inline uint64_t base_seed() {
  const char* s = std::getenv("MLAV_SEED");
  return s ? std::strtoull(s, nullptr, 10) : 20261129ull;
}

inline std::vector<int32_t> random_parents(Rng& rng, int32_t n) {
  std::vector<int32_t> parent(n);
  parent[0] = -1;
  for (int32_t t = 1; t < n; ++t) parent[t] = static_cast<int32_t>(rng.below(t));
  return parent;
}

enum class PoolLayout { LatentFirst, Padded640, RopeFirstStored, SplitViews };

struct CaseSpec {
  std::vector<std::vector<int32_t>> parents;  // per request: the draft tree as a parent array
  std::vector<int64_t> prefix_lens;           // per request: P_i
  int32_t heads = 2;
  int32_t num_splits = 1;
  int32_t plan_blocks = 0;  // VerifyParams::plan_blocks: > 0 the balanced plan (num_splits its cap)
  float sm_scale = 0.1352338f;  // deepseek-v3 (docs/spec.md §1)
  DType q_dtype = DType::BF16;
  DType kv_dtype = DType::BF16;
  DType o_dtype = DType::BF16;
  // fp32 storage: store values that are exact bf16 (true) or arbitrary floats (false).
  bool f32_values_bf16_exact = true;
  PoolLayout layout = PoolLayout::LatentFirst;
  bool query_rope_first = false;  // q rows stored [q_pe | q_lat] (q_latent_offset = 64)
  int64_t q_head_stride = kRowDim;
  DraftKvSource draft_source = DraftKvSource::ExtendRows;
  MaskFormat mask_format = MaskFormat::FullMask;
  IndptrConvention mask_indptr_convention = IndptrConvention::Csr;
  int64_t extra_q_rows = 0;  // max_total_q = T + extra: rows a backend must leave untouched
  double value_scale = 1.0;  // q and kv ~ N(0, scale^2) before rounding
  uint64_t seed = 1;
};

// Owns every buffer of one case. Slots are a seeded permutation of [1, pool); slot 0 holds finite
// garbage (the CUDA-graph sink) and every slot the metadata does not name is NaN-poisoned.
class Case {
 public:
  explicit Case(const CaseSpec& spec) : spec_(spec) { build(); }
  Case(const Case&) = delete;
  Case& operator=(const Case&) = delete;

  const CaseSpec& spec() const { return spec_; }
  int32_t batch() const { return static_cast<int32_t>(spec_.parents.size()); }
  int64_t tokens() const { return qo_indptr_.back(); }
  int64_t max_total_q() const { return tokens() + spec_.extra_q_rows; }
  const model::KvPool& pool() const { return *pool_; }
  model::EncodedMask& mask() { return mask_; }  // mutable: tests rewrite mask bits
  std::vector<int64_t>& kv_indices() { return kv_indices_; }
  std::vector<int32_t>& qo_indptr() { return qo_indptr_; }
  std::vector<int32_t>& kv_indptr() { return kv_indptr_; }

  // The logical latent-first row of key `j` of request i (prefix keys, then draft nodes), as
  // stored (bf16-exact unless f32_values_bf16_exact is false).
  const std::vector<float>& key_row(int32_t i, int64_t j) const { return key_rows_[i][j]; }
  // The logical query row [q_lat | q_pe] of token t, head h, as stored.
  const float* query_row(int64_t t, int32_t h) const {
    return &q_logical_[(static_cast<size_t>(t) * spec_.heads + h) * kRowDim];
  }

  void poison_outputs() {
    std::fill(o_bytes_.begin(), o_bytes_.end(), std::byte{0xff});  // NaN in bf16 and fp32
    std::fill(lse_.begin(), lse_.end(), std::numeric_limits<float>::quiet_NaN());
  }

  VerifyParams params() {
    VerifyParams p;
    p.batch_size = batch();
    p.num_heads = spec_.heads;
    p.max_draft = 1;
    for (auto& parents : spec_.parents) {
      p.max_draft = std::max<int32_t>(p.max_draft, static_cast<int32_t>(parents.size()));
    }
    p.max_total_q = max_total_q();
    p.num_splits = spec_.num_splits;
    p.plan_blocks = spec_.plan_blocks;
    p.sm_scale = spec_.sm_scale;
    p.q = q_bytes_.data();
    p.q_dtype = spec_.q_dtype;
    p.q_head_stride = spec_.q_head_stride;
    p.q_token_stride = spec_.heads * spec_.q_head_stride;
    p.q_latent_offset = spec_.query_rope_first ? kRopeDim : 0;
    p.q_rope_offset = spec_.query_rope_first ? 0 : kLatentDim;
    p.kv_pool = pool_->data();
    p.kv_dtype = spec_.kv_dtype;
    p.kv_layout = pool_->layout();
    p.pool_slots = pool_->num_slots();
    p.qo_indptr = qo_indptr_.data();
    p.kv_indptr = kv_indptr_.data();
    p.kv_indices = kv_indices_.data();
    p.kv_indices_len = static_cast<int64_t>(kv_indices_.size());
    p.draft_source = spec_.draft_source;
    p.k_extend = k_extend_bytes_.data();
    p.k_extend_stride = kRowDim;
    model::attach_mask(p, mask_);
    p.o_lat = o_bytes_.data();
    p.o_dtype = spec_.o_dtype;
    p.o_head_stride = kLatentDim;
    p.o_token_stride = static_cast<int64_t>(spec_.heads) * kLatentDim;
    p.lse = lse_.data();
    return p;
  }

  // Output element (token, head, k) widened to float.
  float o(int64_t t, int32_t h, int32_t k) const {
    return static_cast<float>(model::load(
        spec_.o_dtype, o_bytes_.data(), (t * int64_t{spec_.heads} + h) * kLatentDim + k));
  }
  float lse(int64_t t, int32_t h) const { return lse_[static_cast<size_t>(t) * spec_.heads + h]; }
  const std::vector<std::byte>& o_bytes() const { return o_bytes_; }
  const std::vector<float>& lse_values() const { return lse_; }

 private:
  float draw(Rng& rng, DType dtype) const {
    float v = static_cast<float>(rng.normal() * spec_.value_scale);
    if (dtype == DType::BF16 || spec_.f32_values_bf16_exact) v = round_bf16(v);
    return v;
  }

  static void store(DType dtype, std::vector<std::byte>& bytes, size_t index, float v) {
    if (dtype == DType::BF16) {
      bf16 b = float_to_bf16(v);
      std::memcpy(bytes.data() + index * 2, &b, 2);
    } else {
      std::memcpy(bytes.data() + index * 4, &v, 4);
    }
  }

  void build() {
    const int32_t bs = batch();
    Rng rng(spec_.seed);
    std::vector<model::DraftTree> trees;
    for (auto& parents : spec_.parents) trees.push_back(model::DraftTree::from_parents(parents));

    qo_indptr_.assign(1, 0);
    for (auto& t : trees) qo_indptr_.push_back(qo_indptr_.back() + t.size());
    const int64_t total_q = max_total_q();

    // Slots: prefix then draft slots of every request, scattered over [1, used], plus spare slots
    // that stay NaN-poisoned.
    int64_t used = 0;
    for (int32_t i = 0; i < bs; ++i) used += spec_.prefix_lens[i] + trees[i].size();
    const int64_t spare = 7;
    std::vector<int64_t> slots(used + spare);
    std::iota(slots.begin(), slots.end(), 1);
    for (int64_t k = static_cast<int64_t>(slots.size()) - 1; k > 0; --k) {
      std::swap(slots[k], slots[rng.below(k + 1)]);
    }
    const int64_t pool_size = used + spare;  // allocatable slots; slot 0 is the sink
    KvLayout layout = KvLayout::latent_first();
    if (spec_.layout == PoolLayout::Padded640) layout = KvLayout::latent_first(640);
    if (spec_.layout == PoolLayout::RopeFirstStored) layout = KvLayout::rope_first();
    if (spec_.layout == PoolLayout::SplitViews)
      layout = model::KvPool::split_regions(pool_size + 1);
    pool_ = std::make_unique<model::KvPool>(pool_size, 1, spec_.kv_dtype, layout);
    pool_->fill_nan_all();
    {
      std::vector<float> sink(kRowDim);
      for (auto& v : sink) v = draw(rng, spec_.kv_dtype);
      pool_->write_row(0, sink.data());  // finite garbage: padded rows read it, it must not be NaN
    }

    k_extend_bytes_.assign(static_cast<size_t>(total_q) * kRowDim * dtype_bytes(spec_.kv_dtype),
                           std::byte{0xff});
    kv_indptr_.assign(1, 0);
    key_rows_.resize(bs);
    int64_t next_slot = 0;
    for (int32_t i = 0; i < bs; ++i) {
      const int64_t prefix = spec_.prefix_lens[i];
      const int32_t d = trees[i].size();
      std::vector<int64_t> request_slots;
      for (int64_t j = 0; j < prefix + d; ++j) {
        std::vector<float> row(kRowDim);
        for (auto& v : row) v = draw(rng, spec_.kv_dtype);
        const int64_t slot = slots[next_slot++];
        pool_->write_row(slot, row.data());
        request_slots.push_back(slot);
        if (j >= prefix) {
          // The same row as a k_extend row, so both draft sources read identical values.
          const int64_t q_row = qo_indptr_[i] + (j - prefix);
          for (int k = 0; k < kRowDim; ++k) {
            store(spec_.kv_dtype, k_extend_bytes_, static_cast<size_t>(q_row) * kRowDim + k,
                  row[k]);
          }
        }
        key_rows_[i].push_back(std::move(row));
      }
      const int64_t named = spec_.draft_source == DraftKvSource::CacheSlots ? prefix + d : prefix;
      kv_indices_.insert(kv_indices_.end(), request_slots.begin(), request_slots.begin() + named);
      kv_indptr_.push_back(static_cast<int32_t>(kv_indices_.size()));
    }

    // Queries: [max_total_q, H, q_head_stride]; rows beyond T and head padding hold NaN.
    const int64_t q_elems = total_q * spec_.heads * spec_.q_head_stride;
    q_bytes_.assign(static_cast<size_t>(q_elems) * dtype_bytes(spec_.q_dtype), std::byte{0xff});
    q_logical_.assign(static_cast<size_t>(tokens()) * spec_.heads * kRowDim, 0.f);
    const int64_t lat = spec_.query_rope_first ? kRopeDim : 0;
    const int64_t rope = spec_.query_rope_first ? 0 : kLatentDim;
    for (int64_t t = 0; t < tokens(); ++t) {
      for (int32_t h = 0; h < spec_.heads; ++h) {
        float* logical = &q_logical_[(static_cast<size_t>(t) * spec_.heads + h) * kRowDim];
        const int64_t base = (t * spec_.heads + h) * spec_.q_head_stride;
        for (int k = 0; k < kRowDim; ++k) {
          logical[k] = draw(rng, spec_.q_dtype);
          const int64_t at = k < kLatentDim ? base + lat + k : base + rope + (k - kLatentDim);
          store(spec_.q_dtype, q_bytes_, static_cast<size_t>(at), logical[k]);
        }
      }
    }

    mask_ = model::encode_mask(spec_.mask_format, trees, spec_.prefix_lens,
                               spec_.mask_indptr_convention);
    o_bytes_.resize(static_cast<size_t>(total_q) * spec_.heads * kLatentDim *
                    dtype_bytes(spec_.o_dtype));
    lse_.resize(static_cast<size_t>(total_q) * spec_.heads);
    poison_outputs();
  }

  CaseSpec spec_;
  std::unique_ptr<model::KvPool> pool_;
  std::vector<int32_t> qo_indptr_;                         // [bs + 1]
  std::vector<int32_t> kv_indptr_;                         // [bs + 1]
  std::vector<int64_t> kv_indices_;                        // [sum kv len]
  std::vector<std::byte> q_bytes_;                         // [max_total_q, H, q_head_stride]
  std::vector<float> q_logical_;                           // [T, H, 576] latent first
  std::vector<std::byte> k_extend_bytes_;                  // [max_total_q, 576]
  std::vector<std::vector<std::vector<float>>> key_rows_;  // [bs][P_i + D_i][576]
  model::EncodedMask mask_;
  std::vector<std::byte> o_bytes_;  // [max_total_q, H, 512] of o_dtype
  std::vector<float> lse_;          // [max_total_q, H]
};

}  // namespace mlaverify::cpu::testing
