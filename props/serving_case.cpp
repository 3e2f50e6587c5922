// The serving_defrag property: a case realized through model::ServingState (admissions among
// churn, an accepted verify round, then the draft), run, compacted with model::compact, run again.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "mlaverify/error.h"
#include "model/defrag.h"
#include "model/mask.h"
#include "model/metadata.h"
#include "model/serving.h"
#include "model/tree.h"
#include "props/properties.h"

namespace mlaverify::props {

namespace {

uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A bf16-exact value in [-2, 2) * scale, a pure function of its coordinates.
float value_at(uint64_t seed, uint64_t a, uint64_t b, uint64_t c, double scale) {
  const uint64_t z = mix(seed ^ mix(a ^ mix(b ^ mix(c))));
  const double u = static_cast<double>(z >> 11) * 0x1.0p-53;
  return round_bf16(static_cast<float>((4.0 * u - 2.0) * scale));
}

// One launch's host buffers around a ServingState's pool (layer 0).
struct ServingLaunch {
  std::vector<model::DraftTree> trees;
  std::vector<int64_t> ids;          // [bs] ServingState request ids
  std::vector<int64_t> prefix_lens;  // [bs]
  std::vector<bf16> q;               // [T, H, 576]
  std::vector<std::byte> k_extend;   // [T, 576] of kv_dtype, latent-first
  model::VerifyMetadata metadata;
  model::EncodedMask mask;
  std::vector<bf16> o;     // [T, H, 512]
  std::vector<float> lse;  // [T, H]
};

VerifyParams params_for(const Case& c, model::ServingState& st, ServingLaunch& L) {
  std::vector<int32_t> rows;  // [bs]
  for (int64_t id : L.ids) rows.push_back(static_cast<int32_t>(st.row(id)));
  L.metadata =
      model::build_metadata(st.req_to_token(), rows, L.prefix_lens, L.trees, c.draft_source);
  const int64_t t_total = L.metadata.total_q();
  VerifyParams p;
  p.batch_size = c.batch_size();
  p.num_heads = c.num_heads;
  p.max_draft = c.max_draft();
  p.max_total_q = t_total;
  p.num_splits = c.num_splits;
  p.sm_scale = static_cast<float>(c.sm_scale);
  p.q = L.q.data();
  p.q_dtype = DType::BF16;
  p.q_token_stride = int64_t{c.num_heads} * kRowDim;
  p.q_head_stride = kRowDim;
  const model::KvPool& pool = st.layer(0);
  p.kv_pool = pool.data();
  p.kv_dtype = pool.dtype();
  p.kv_layout = pool.layout();
  p.pool_slots = pool.num_slots();
  p.qo_indptr = L.metadata.qo_indptr.data();
  p.kv_indptr = L.metadata.kv_indptr.data();
  p.kv_indices = L.metadata.kv_indices.data();
  p.kv_indices_len = static_cast<int64_t>(L.metadata.kv_indices.size());
  p.draft_source = c.draft_source;
  p.k_extend = c.draft_source == DraftKvSource::ExtendRows ? L.k_extend.data() : nullptr;
  p.k_extend_stride = kRowDim;
  model::attach_mask(p, L.mask);
  p.o_lat = L.o.data();
  p.o_dtype = DType::BF16;
  p.o_token_stride = int64_t{c.num_heads} * kLatentDim;
  p.o_head_stride = kLatentDim;
  p.lse = L.lse.data();
  return p;
}

RunOutput run_launch(Backend& backend, const VerifyParams& p, ServingLaunch& L) {
  std::fill(L.o.begin(), L.o.end(), bf16{0x7fc0});
  std::fill(L.lse.begin(), L.lse.end(), std::nanf(""));
  backend.run(p);
  RunOutput out;
  out.tokens = p.max_total_q;
  out.heads = p.num_heads;
  for (bf16 x : L.o) out.o.push_back(bf16_to_float(x));
  out.lse = L.lse;
  return out;
}

}  // namespace

PropertyResult check_serving_defrag(Backend& backend, const Case& c) {
  return guarded_property("serving_defrag", [&]() -> PropertyResult {
    const int32_t bs = c.batch_size();
    const int64_t ps = c.page_size;
    int64_t tokens = 0, max_ctx = 1;
    for (const auto& r : c.requests) {
      tokens += r.prefix_len + static_cast<int64_t>(r.parents.size());
      max_ctx = std::max<int64_t>(max_ctx, r.prefix_len + static_cast<int64_t>(r.parents.size()));
    }
    // Room for every request's tokens, one verify round of up to 4 extra draft slots each, fillers
    // of up to 8 tokens, and when paged up to three partly used pages per request (filler, prefix
    // tail, draft tail) plus slack.
    const int64_t need = tokens + 4 * bs + 8 * (bs + 1) + (3 * bs + 4) * ps;
    model::ServingConfig cfg;
    cfg.page_size = ps;
    cfg.pool_size = (need + ps - 1) / ps * ps;
    cfg.allocator = ps > 1 ? model::AllocatorKind::Paged : model::AllocatorKind::Token;
    cfg.num_layers = 1;
    cfg.max_reqs = 2 * bs + 2;
    cfg.max_context_len = max_ctx + 8;
    cfg.dtype = c.kv_dtype;
    switch (c.layout) {
      case LayoutKind::LatentFirst:
        cfg.layout = KvLayout::latent_first(c.row_stride);
        break;
      case LayoutKind::RopeFirst:
        cfg.layout = KvLayout::rope_first(c.row_stride);
        break;
      case LayoutKind::Split:
        cfg.layout = model::KvPool::split_regions(cfg.pool_size + ps);
        break;
    }
    model::ServingState st(cfg);
    // Row contents are a function of (request index, column, verify round): the same logical
    // token holds the same bytes wherever it lives.
    auto gen_for = [&](int64_t req_index, int32_t round) {
      return [&c, req_index, round](int32_t, int64_t, int64_t column, float* row) {
        for (int k = 0; k < kRowDim; ++k) {
          row[k] = value_at(c.seed, static_cast<uint64_t>(req_index),
                            static_cast<uint64_t>(column) * 8 + static_cast<uint64_t>(round),
                            static_cast<uint64_t>(k), c.value_scale);
        }
      };
    };
    ServingLaunch L;
    std::vector<int64_t> fillers;
    for (int32_t i = 0; i < bs; ++i) {
      const auto& r = c.requests[static_cast<size_t>(i)];
      // A filler admitted before each request and finished later leaves holes between requests.
      const int64_t filler_len =
          1 + static_cast<int64_t>(mix(c.seed + static_cast<uint64_t>(i)) % 8);
      if (auto f = st.admit(filler_len, gen_for(1000 + i, 0))) fillers.push_back(*f);
      // Odd requests reach their prefix through an accepted verify round: admitted short, then a
      // chain of 4 drafted, the first `a` accepted (so accept's slot handling is exercised).
      const int64_t a = (i % 2 == 1) ? std::min<int64_t>(r.prefix_len, 3) : 0;
      auto id = st.admit(r.prefix_len - a, gen_for(i, 0));
      if (!id) throw InvalidInput("pool", -1, "serving_defrag sized its pool too small");
      if (a > 0) {
        // The accepted rows must hold what the prefix columns hold in round 0, so the draft
        // rows are generated as columns of round 0 too.
        if (!st.begin_verify(*id, 4, gen_for(i, 0))) {
          throw InvalidInput("pool", -1, "serving_defrag sized its pool too small");
        }
        std::vector<int32_t> path, parents = {-1, 0, 1, 2};
        for (int32_t t = 0; t < a; ++t) path.push_back(t);
        st.accept(*id, path, parents);
      }
      L.ids.push_back(*id);
      L.prefix_lens.push_back(r.prefix_len);
      L.trees.push_back(model::DraftTree::from_parents(r.parents));
    }
    for (int64_t f : fillers) st.finish(f);
    for (int32_t i = 0; i < bs; ++i) {
      const auto d = static_cast<int32_t>(c.requests[static_cast<size_t>(i)].parents.size());
      if (!st.begin_verify(L.ids[static_cast<size_t>(i)], d, gen_for(i, 1))) {
        throw InvalidInput("pool", -1, "serving_defrag sized its pool too small");
      }
    }
    st.check_invariants();
    L.mask = model::encode_mask(c.mask_format, L.trees, L.prefix_lens, c.mask_indptr_convention,
                                c.mask_word_bytes);
    VerifyParams p = params_for(c, st, L);
    const int64_t t_total = p.max_total_q;
    L.q.resize(static_cast<size_t>(t_total) * c.num_heads * kRowDim);
    for (size_t k = 0; k < L.q.size(); ++k) {
      L.q[k] = float_to_bf16(value_at(c.seed, 77, k, 0, c.value_scale));
    }
    // k_extend rows hold exactly the draft slots' contents (the two draft sources agree).
    const size_t eb = static_cast<size_t>(dtype_bytes(c.kv_dtype));
    L.k_extend.assign(static_cast<size_t>(t_total) * kRowDim * eb, std::byte{0});
    for (int32_t i = 0; i < bs; ++i) {
      const auto draft = st.draft_slots(L.ids[static_cast<size_t>(i)]);
      for (size_t t = 0; t < draft.size(); ++t) {
        auto row = st.layer(0).read_row(draft[t]);
        std::byte* dst =
            L.k_extend.data() + static_cast<size_t>(L.metadata.qo_indptr[static_cast<size_t>(i)] +
                                                    static_cast<int64_t>(t)) *
                                    kRowDim * eb;
        for (int k = 0; k < kRowDim; ++k) {
          if (c.kv_dtype == DType::BF16) {
            bf16 x = float_to_bf16(row[static_cast<size_t>(k)]);
            std::memcpy(dst + static_cast<size_t>(k) * eb, &x, eb);
          } else {
            std::memcpy(dst + static_cast<size_t>(k) * eb, &row[static_cast<size_t>(k)], eb);
          }
        }
      }
    }
    L.o.resize(static_cast<size_t>(t_total) * c.num_heads * kLatentDim);
    L.lse.resize(static_cast<size_t>(t_total) * c.num_heads);
    p = params_for(c, st, L);
    if (Support s = backend.can_implement(p); !s) {
      return PropertyResult{true, true, "", "unsupported: " + s.reason, {}};
    }
    RunOutput before = run_launch(backend, p, L);
    model::compact(st);
    st.check_invariants();
    p = params_for(c, st, L);  // req_to_token was rewritten: fresh kv_indices
    RunOutput after = run_launch(backend, p, L);
    std::vector<std::pair<int32_t, RequestView>> views;
    for (int32_t i = 0; i < bs; ++i) {
      views.emplace_back(i, RequestView{L.metadata.qo_indptr[static_cast<size_t>(i)],
                                        L.trees[static_cast<size_t>(i)].size(),
                                        L.prefix_lens[static_cast<size_t>(i)]});
    }
    // Bit for bit for a deterministic backend; else within the derived bound of two runs.
    const Capabilities caps = backend.capabilities();
    Comparison cmp = caps.deterministic ? compare_bits(views, before, after, caps)
                                        : compare_runs_within(p, views, before, after, caps);
    PropertyResult r;
    r.ok = cmp.pass;
    r.comparison = cmp;
    r.detail = std::string("serving state before vs after model::compact") +
               (caps.deterministic ? " (bits): " : " (within the derived bound): ") +
               cmp.to_string();
    return r;
  });
}

}  // namespace mlaverify::props
