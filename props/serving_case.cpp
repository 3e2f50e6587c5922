// The serving_defrag property: a case realized through model::ServingState (admissions among
// churn, an accepted verify round, then the draft), run, compacted with model::compact, run again.
#include <algorithm>
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

// One launch's host buffers around a ServingState's pool (layer 0), presented as the case says.
struct ServingLaunch {
  std::vector<model::DraftTree> trees;
  std::vector<int64_t> ids;          // [bs] ServingState request ids
  std::vector<int64_t> prefix_lens;  // [bs]
  std::vector<bf16> q;               // [T + tail, H, 576] latent-first
  std::vector<std::byte> k_extend;   // [T + tail, 576] of kv_dtype, latent-first
  model::VerifyMetadata metadata;
  model::EncodedMask mask;
  model::Presenter presenter;  // the case's presentation; o_lat and lse [T + tail]
};

// The metadata of the state's req_to_token as it stands (compaction rewrites it).
model::VerifyMetadata serving_metadata(const Case& c, const model::ServingState& st,
                                       const ServingLaunch& L) {
  std::vector<int32_t> rows;  // [bs]
  for (int64_t id : L.ids) rows.push_back(static_cast<int32_t>(st.row(id)));
  return model::build_metadata(st.req_to_token(), rows, L.prefix_lens, L.trees, c.draft_source);
}

// The launch over the state's current slots, presented by L.presenter exactly as VerifyBatch
// presents the other properties' launches.
VerifyParams params_for(const Case& c, const model::ServingState& st, ServingLaunch& L) {
  L.metadata = serving_metadata(c, st, L);
  VerifyParams p;
  p.batch_size = c.batch_size();
  p.num_heads = c.num_heads;
  p.max_draft = c.max_draft();
  p.num_splits = c.num_splits;
  // The balanced plan is a function of the lengths, which compaction leaves alone: both launches
  // of the property plan the same splits, so their bits must still agree.
  p.plan_blocks = c.plan_blocks;
  p.sm_scale = static_cast<float>(c.sm_scale);
  const model::KvPool& pool = st.layer(0);
  pool.attach(p);
  p.qo_indptr = L.metadata.qo_indptr.data();
  p.kv_indptr = L.metadata.kv_indptr.data();
  p.draft_source = c.draft_source;
  model::attach_mask(p, L.mask);
  // No CUDA-graph padding here: every request is real.
  L.presenter.present(p, {L.q, L.k_extend, pool.dtype(), &L.metadata, c.batch_size()});
  return p;
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
    // T and the draft rows' places (params_for rebuilds the same metadata).
    L.metadata = serving_metadata(c, st, L);
    // The case's presentation (q, outputs, k_extend rows, kv indexing, rows past T), read through
    // the same mapping build_batch uses. A page table needs every request's slots page-aligned:
    // the state's allocator runs at the case's page size (cfg.page_size above; the generator
    // gives a page-table case a page size the backend declares), and its paged invariant, which
    // check_invariants enforces before and after model::compact, is that column j lives at
    // offset j % ps of the page holding block j / ps, exactly what a page table of ps-slot pages
    // names (page size 1: the token allocator, every slot its own page). So the table always
    // describes req_to_token; Presenter::present throws InvalidInput (a failure, not a skip)
    // if it ever did not, since that would be a bug in the state, not the backend.
    L.presenter =
        model::Presenter(to_batch_spec(c).presentation(), L.metadata.total_q(), c.num_heads);
    const int64_t rows = L.presenter.rows();
    // Queries of rows past T are finite stale values, as VerifyBatch leaves them.
    L.q.resize(static_cast<size_t>(rows) * c.num_heads * kRowDim);
    for (size_t k = 0; k < L.q.size(); ++k) {
      L.q[k] = float_to_bf16(value_at(c.seed, 77, k, 0, c.value_scale));
    }
    // k_extend rows hold exactly the draft slots' contents (the two draft sources agree).
    const size_t eb = static_cast<size_t>(dtype_bytes(c.kv_dtype));
    L.k_extend.assign(static_cast<size_t>(rows) * kRowDim * eb, std::byte{0});
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
    VerifyParams p = params_for(c, st, L);
    if (Support s = backend.can_implement(p); !s) {
      return PropertyResult{true, true, "", "unsupported: " + s.reason, {}};
    }
    RunOutput before = run_presented(backend, p, L.presenter);
    if (auto s = stray_write_failure(before)) return *s;
    model::compact(st);
    st.check_invariants();
    p = params_for(c, st, L);  // req_to_token was rewritten: fresh kv_indices or page table
    RunOutput after = run_presented(backend, p, L.presenter);
    if (auto s = stray_write_failure(after)) return *s;
    // RunOutput holds rows t < T only, head-stride gaps left out: the comparison sees real rows.
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
