// Case -> VerifyBatch, output capture, and exact physical rewrites of a batch (slot permutation and
// compaction) that leave the logical batch, hence every correct backend's output, unchanged.
#include "props/case.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "mlaverify/error.h"
#include "model/storage.h"
#include "model/tree.h"

namespace mlaverify::props {

model::BatchSpec to_batch_spec(const Case& c) {
  model::BatchSpec s;
  for (const auto& r : c.requests) {
    s.requests.push_back({model::DraftTree::from_parents(r.parents), r.prefix_len});
  }
  s.num_heads = c.num_heads;
  s.sm_scale = c.sm_scale;
  s.kv_dtype = c.kv_dtype;
  switch (c.layout) {
    case LayoutKind::LatentFirst:
      s.layout = KvLayout::latent_first(c.row_stride);
      break;
    case LayoutKind::RopeFirst:
      s.layout = KvLayout::rope_first(c.row_stride);
      break;
    // The builder places the two regions itself (their offsets depend on the pool size).
    case LayoutKind::Split:
      s.layout = KvLayout::split(0, kLatentDim, 0, kRopeDim);
      break;
  }
  s.row_stride = c.row_stride;
  s.draft_source = c.draft_source;
  s.mask_format = c.mask_format;
  s.mask_indptr_convention = c.mask_indptr_convention;
  s.mask_word_bytes = c.mask_word_bytes;
  s.page_size = c.page_size;
  s.slot_order = c.slot_order == scenarios::SlotOrder::Contiguous
                     ? model::BatchSpec::SlotOrder::Contiguous
                     : model::BatchSpec::SlotOrder::Scattered;
  s.graph_padded_bs = c.graph_padded_bs;
  s.q_dtype = c.q_dtype;
  s.q_rope_first = c.q_rope_first;
  s.q_head_stride = c.q_head_stride;
  s.o_dtype = c.o_dtype;
  s.o_head_stride = c.o_head_stride;
  s.k_extend_stride = c.k_extend_stride;
  s.kv_indexing = c.kv_indexing;
  s.tail_rows = c.tail_rows;
  s.poison_unused_slots = c.poison_unused_slots;
  s.value_scale = c.value_scale;
  s.num_splits = c.num_splits;
  s.plan_blocks = c.plan_blocks;
  s.seed = c.seed;
  return s;
}

model::VerifyBatch build_batch(const Case& c) {
  model::VerifyBatch b = model::VerifyBatch::build(to_batch_spec(c));
  if (c.slot_order == scenarios::SlotOrder::Defragmented) compact_slots(b);
  return b;
}

CaseCost estimate_cost(const Case& c) {
  CaseCost cost;
  const int64_t page = std::max<int32_t>(c.page_size, 1);
  const int64_t kv_bytes = c.kv_dtype == DType::BF16 ? 2 : 4;
  const int64_t H = c.num_heads;
  int64_t pages = 0, max_context = 1, T = 0, mask = 0, max_rows = 0;
  double flops = 0;
  auto add_request = [&](int64_t P, int64_t D) {
    pages += (P + D + page - 1) / page;
    max_context = std::max(max_context, P + D);
    T += D;
    mask += D * (P + D);
    max_rows = std::max(max_rows, D * H);
    flops += 2.0 * static_cast<double>(D * H) * static_cast<double>(P + D) *
             (kRowDim + kLatentDim);
  };
  for (const auto& r : c.requests) {
    add_request(r.prefix_len, static_cast<int64_t>(r.parents.size()));
  }
  const int64_t real_bs = static_cast<int64_t>(c.requests.size());
  for (int64_t i = real_bs; i < c.graph_padded_bs; ++i) add_request(1, c.max_draft());
  const int64_t slots = (pages + std::max<int64_t>(4, pages / 8) + 1) * page;
  cost.batch_bytes = slots * std::max<int64_t>(c.row_stride, kRowDim) * kv_bytes  // the pool
                     + (real_bs + 1) * max_context * 4                  // req_to_token
                     + T * H * kRowDim * 2 + T * kRowDim * kv_bytes      // q, k_extend
                     + mask                                             // FULL_MASK bytes
                     + T * H * (kLatentDim * 2 + 4);                    // o, lse
  cost.model_bytes = T * H * (kLatentDim + 1) * 8              // the model's double o, lse
                     + max_rows * (kRowDim + 256) * 8 * 2;     // its per-request matrices
  cost.bytes = cost.batch_bytes + cost.model_bytes;
  cost.flops = 2 * flops;  // the model and one backend
  return cost;
}

RunOutput run_backend(Backend& backend, model::VerifyBatch& batch) {
  const VerifyParams p = batch.params();
  return run_presented(backend, p, batch.presenter());
}

RunOutput run_presented(Backend& backend, const VerifyParams& p, model::Presenter& outputs) {
  outputs.poison_outputs();
  backend.run(p);
  RunOutput out;
  out.tokens = outputs.tokens();
  out.heads = outputs.heads();
  out.o.resize(static_cast<size_t>(out.tokens) * out.heads * kLatentDim);  // [T, H, 512]
  size_t k = 0;
  for (int64_t t = 0; t < out.tokens; ++t) {
    for (int32_t h = 0; h < out.heads; ++h) {
      for (int32_t c = 0; c < kLatentDim; ++c) out.o[k++] = outputs.o_lat_value(t, h, c);
    }
  }
  out.lse.assign(outputs.lse().begin(),
                 outputs.lse().begin() + static_cast<std::ptrdiff_t>(out.tokens * out.heads));
  const model::StrayWrites stray = outputs.stray_writes();
  out.stray_writes = stray.count;
  out.first_stray = stray.first;
  return out;
}

void apply_slot_permutation(model::VerifyBatch& batch, const std::vector<int64_t>& perm) {
  model::KvPool& pool = batch.pool();
  const int64_t n = pool.num_slots();
  if (static_cast<int64_t>(perm.size()) != n) {
    throw InvalidInput("perm", -1, "expected " + std::to_string(n) + " entries");
  }
  if (n > 0 && perm[0] != 0) throw InvalidInput("perm", 0, "slot 0 is the sink and stays put");
  std::vector<bool> seen(static_cast<size_t>(n), false);
  for (int64_t s = 0; s < n; ++s) {
    int64_t d = perm[static_cast<size_t>(s)];
    if (d < 0 || d >= n || seen[static_cast<size_t>(d)]) {
      throw InvalidInput("perm", s, "not a permutation of the pool's slots");
    }
    seen[static_cast<size_t>(d)] = true;
  }
  // Rows are read out first (raw bytes: a move cannot round), then written to their new slots.
  std::vector<std::vector<std::byte>> rows(static_cast<size_t>(n));  // [slots][576 * bytes]
  for (int64_t s = 0; s < n; ++s) rows[static_cast<size_t>(s)] = pool.raw_row(s);
  for (int64_t s = 0; s < n; ++s) {
    pool.write_raw_row(perm[static_cast<size_t>(s)], rows[static_cast<size_t>(s)]);
  }
  model::ReqToToken& rtt = batch.req_to_token();
  int32_t* cells = rtt.data();  // [rows, cols]
  for (int64_t k = 0; k < rtt.rows() * rtt.cols(); ++k) {
    int32_t s = cells[k];
    if (s >= 0 && s < n) cells[k] = static_cast<int32_t>(perm[static_cast<size_t>(s)]);
  }
  for (int64_t& s : batch.metadata().kv_indices) {
    if (s >= 0 && s < n) s = perm[static_cast<size_t>(s)];
  }
}

std::vector<int64_t> random_slot_permutation(int64_t pool_slots, uint64_t seed) {
  std::vector<int64_t> perm(static_cast<size_t>(pool_slots));
  std::iota(perm.begin(), perm.end(), 0);
  // Fisher-Yates over [1, n) with splitmix64: slot 0 stays the sink.
  uint64_t x = seed;
  auto next = [&x] {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  for (int64_t k = pool_slots - 1; k > 1; --k) {
    int64_t j = 1 + static_cast<int64_t>(next() % static_cast<uint64_t>(k));  // [1, k]
    std::swap(perm[static_cast<size_t>(k)], perm[static_cast<size_t>(j)]);
  }
  return perm;
}

namespace {

// Whether slots must move in whole pages: a page table names pages, so a permutation that splits
// one would leave a batch no page table can express.
int64_t move_granule(const model::VerifyBatch& batch) {
  return batch.spec().kv_indexing == KvIndexing::PageTable ? batch.spec().page_size : 1;
}

// A permutation of pages (page 0 fixed) as one of slots.
std::vector<int64_t> expand_pages(const std::vector<int64_t>& page_perm, int64_t ps) {
  std::vector<int64_t> perm(page_perm.size() * static_cast<size_t>(ps));
  for (size_t g = 0; g < page_perm.size(); ++g) {
    for (int64_t k = 0; k < ps; ++k) perm[g * static_cast<size_t>(ps) + k] = page_perm[g] * ps + k;
  }
  return perm;
}

}  // namespace

std::vector<int64_t> random_slot_permutation(const model::VerifyBatch& batch, uint64_t seed) {
  const int64_t ps = move_granule(batch);
  const int64_t n = batch.pool().num_slots();
  if (ps == 1) return random_slot_permutation(n, seed);
  return expand_pages(random_slot_permutation(n / ps, seed), ps);
}

std::vector<int64_t> compaction_permutation(const model::VerifyBatch& batch) {
  const int64_t ps = move_granule(batch);
  if (ps > 1) {
    // Whole pages, each request's in order, packed from page 1.
    const int64_t pages = batch.pool().num_slots() / ps;
    std::vector<int64_t> page_perm(static_cast<size_t>(pages), -1);
    page_perm[0] = 0;
    int64_t next = 1;
    for (int32_t i = 0; i < batch.real_batch_size(); ++i) {
      auto slots = batch.prefix_slots(i);
      auto draft = batch.draft_slots(i);
      slots.insert(slots.end(), draft.begin(), draft.end());
      for (size_t j = 0; j < slots.size(); j += static_cast<size_t>(ps)) {
        const int64_t g = slots[j] / ps;
        if (g <= 0 || g >= pages || page_perm[static_cast<size_t>(g)] != -1) {
          throw InvalidInput("req_to_token", slots[j], "page owned twice or out of range");
        }
        page_perm[static_cast<size_t>(g)] = next++;
      }
    }
    for (int64_t g = 1; g < pages; ++g) {
      if (page_perm[static_cast<size_t>(g)] == -1) page_perm[static_cast<size_t>(g)] = next++;
    }
    return expand_pages(page_perm, ps);
  }
  const int64_t n = batch.pool().num_slots();
  std::vector<int64_t> perm(static_cast<size_t>(n), -1);
  perm[0] = 0;
  int64_t next = 1;
  for (int32_t i = 0; i < batch.real_batch_size(); ++i) {
    auto slots = batch.prefix_slots(i);
    auto draft = batch.draft_slots(i);
    slots.insert(slots.end(), draft.begin(), draft.end());
    for (int64_t s : slots) {
      if (s <= 0 || s >= n || perm[static_cast<size_t>(s)] != -1) {
        throw InvalidInput("req_to_token", s, "slot owned twice or out of range");
      }
      perm[static_cast<size_t>(s)] = next++;
    }
  }
  for (int64_t s = 1; s < n; ++s) {
    if (perm[static_cast<size_t>(s)] == -1) perm[static_cast<size_t>(s)] = next++;
  }
  return perm;
}

void compact_slots(model::VerifyBatch& batch) {
  apply_slot_permutation(batch, compaction_permutation(batch));
}

RequestView request_view(const model::VerifyBatch& batch, int32_t i) {
  const auto& md = batch.metadata();
  RequestView v;
  v.q_begin = md.qo_indptr.at(static_cast<size_t>(i));
  v.draft_nodes =
      md.qo_indptr.at(static_cast<size_t>(i) + 1) - md.qo_indptr[static_cast<size_t>(i)];
  v.prefix_len = batch.prefix_len(i);
  return v;
}

}  // namespace mlaverify::props
