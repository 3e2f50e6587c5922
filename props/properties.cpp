// The property catalog: each builds the case's batch (or a variant), runs the backend through the
// Backend interface only, and compares against the model, an independent reference or itself.
#include "props/properties.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <sstream>

#include "mlaverify/error.h"
#include "model/attention.h"
#include "model/mask.h"
#include "model/tree.h"
#include "model/validate.h"

namespace mlaverify::props {

// Unsupported is a skip (the backend said it cannot run this case); any other exception is a
// failure naming it: a backend that rejects a valid case, or crashes on it, is wrong.
PropertyResult guarded_property(std::string_view name,
                                const std::function<PropertyResult()>& body) {
  try {
    PropertyResult r = body();
    r.property = std::string(name);
    return r;
  } catch (const Unsupported& e) {
    return {true, true, std::string(name), std::string("unsupported: ") + e.what(), {}};
  } catch (const InvalidInput& e) {
    return {false,
            false,
            std::string(name),
            std::string("InvalidInput on a valid case: ") + e.what(),
            {}};
  } catch (const BackendLost& e) {
    return {false, false, std::string(name), std::string("backend lost: ") + e.what(), {}, true};
  } catch (const std::exception& e) {
    return {false, false, std::string(name), std::string("exception: ") + e.what(), {}};
  }
}

// model::Presenter leaves a guard pattern where no backend may write; run_presented counts what
// changed.
std::optional<PropertyResult> stray_write_failure(const RunOutput& out) {
  if (out.stray_writes == 0) return std::nullopt;
  PropertyResult r;
  r.ok = false;
  r.detail = "wrote " + std::to_string(out.stray_writes) +
             " output elements no backend may write (first: " + out.first_stray + ")";
  return r;
}

namespace {

PropertyResult guarded(std::string_view name, const std::function<PropertyResult()>& body) {
  return guarded_property(name, body);
}

// Skips when the backend says it cannot implement this batch.
std::optional<PropertyResult> unsupported(Backend& backend, model::VerifyBatch& batch) {
  Support s = backend.can_implement(batch.params());
  if (s) return std::nullopt;
  return PropertyResult{true, true, "", "unsupported: " + s.reason, {}};
}

PropertyResult from_comparison(const Comparison& c, const std::string& what) {
  PropertyResult r;
  r.ok = c.pass;
  r.comparison = c;
  r.detail = what + ": " + c.to_string();
  return r;
}

// The "must be identical" laws: bit for bit for a backend that declares itself deterministic,
// within the derived bound of each other (compare_runs_within) for one that does not, so an
// atomic merge's last-ulp differences are not reported as a broken law. `requests` limits the
// comparison (all real requests when empty).
Comparison same_outputs(Backend& backend, model::VerifyBatch& batch, const RunOutput& a,
                        const RunOutput& b, const std::vector<int32_t>& requests = {}) {
  const Capabilities declared = backend.capabilities();
  if (declared.deterministic) return compare_bits(batch, a, b, declared, requests);
  return compare_runs_within(batch, a, b, declared, requests);
}

std::string law(Backend& backend, const std::string& what) {
  return what + (backend.capabilities().deterministic
                     ? " (bits)"
                     : " (within the derived bound: the backend declares it is not deterministic)");
}

// Fresh finite values for rows a property overwrites on purpose (uniform, bf16-exact).
struct Scrambler {
  uint64_t x;
  double scale;
  float next() {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    double u = static_cast<double>(z >> 11) * 0x1.0p-53;  // [0, 1)
    return round_bf16(static_cast<float>((4.0 * u - 2.0) * scale));
  }
};

// Runs `backend` on `batch`, applies `rewrite` (a physical change that keeps the logical batch),
// runs again: every output bit must be unchanged.
template <class Rewrite>
PropertyResult unchanged_by(Backend& backend, model::VerifyBatch& batch, const char* what,
                            Rewrite&& rewrite) {
  if (auto skip = unsupported(backend, batch)) return *skip;
  RunOutput before = run_backend(backend, batch);
  rewrite();
  RunOutput after = run_backend(backend, batch);
  if (auto s = stray_write_failure(before)) return *s;
  return from_comparison(same_outputs(backend, batch, before, after), law(backend, what));
}

}  // namespace

PropertyResult check_vs_model(Backend& backend, const Case& c) {
  return guarded("vs_model", [&] {
    model::VerifyBatch batch = build_batch(c);
    if (auto skip = unsupported(backend, batch)) return *skip;
    model::RefResult ref = model::reference_verify(batch.params());
    RunOutput out = run_backend(backend, batch);
    if (auto s = stray_write_failure(out)) return *s;
    return from_comparison(compare_to_model(batch, out, ref, backend.capabilities()),
                           backend.name() + " vs model");
  });
}

PropertyResult check_split_invariance(Backend& backend, const Case& c) {
  return guarded("split_invariance", [&] {
    Case one = c;
    one.num_splits = 1;
    Case many = c;
    many.num_splits = c.num_splits > 1 ? c.num_splits : 3;
    model::VerifyBatch a = build_batch(one);
    model::VerifyBatch b = build_batch(many);
    if (auto skip = unsupported(backend, a)) return *skip;
    if (auto skip = unsupported(backend, b)) return *skip;
    RunOutput oa = run_backend(backend, a);
    RunOutput ob = run_backend(backend, b);
    if (auto s = stray_write_failure(oa)) return *s;
    if (auto s = stray_write_failure(ob)) return *s;
    // Each run within its own launch's derived bound (tol(k) counts k + 1 partials, tol(1) two),
    // so the two within the sum. Under the balanced plan both runs keep the case's plan_blocks:
    // num_splits 1 gives every request one split, k caps each request's own count (at most
    // k + 1 partials, as its bound assumes).
    return from_comparison(compare_runs_within(b, ob, a, oa, backend.capabilities()),
                           "num_splits " + std::to_string(many.num_splits) + " vs 1" +
                               (c.plan_blocks > 0 ? " (balanced plan over " +
                                                        std::to_string(c.plan_blocks) +
                                                        " blocks: k is the cap)"
                                                  : ""));
  });
}

PropertyResult check_chain_causal(Backend& backend, const Case& c) {
  return guarded("chain_causal", [&] {
    Case chain = c;
    for (auto& r : chain.requests) {
      for (size_t t = 0; t < r.parents.size(); ++t) r.parents[t] = static_cast<int32_t>(t) - 1;
    }
    model::VerifyBatch batch = build_batch(chain);
    if (auto skip = unsupported(backend, batch)) return *skip;
    VerifyParams p = batch.params();
    // Independent causal attention in double: keys are the request's P + D rows in order; query i
    // (draft node i, position P + i) sees key j iff j <= P + i. No tree mask is read.
    model::RefResult ref;
    ref.tokens = batch.total_tokens();
    ref.heads = p.num_heads;
    ref.o_lat.assign(static_cast<size_t>(ref.tokens) * ref.heads * kLatentDim, 0.0);
    ref.lse.assign(static_cast<size_t>(ref.tokens) * ref.heads,
                   -std::numeric_limits<double>::infinity());
    const double scale = static_cast<double>(p.sm_scale);
    for (int32_t i = 0; i < batch.real_batch_size(); ++i) {
      RequestView rv = request_view(batch, i);
      const int64_t n = rv.prefix_len + rv.draft_nodes;
      std::vector<double> keys(static_cast<size_t>(n) * kRowDim);  // [P + D, 576]
      for (int64_t j = 0; j < n; ++j) read_key(p, i, j, &keys[static_cast<size_t>(j) * kRowDim]);
      std::vector<double> q(kRowDim), s(static_cast<size_t>(n));  // [576], [P + D]
      for (int64_t qi = 0; qi < rv.draft_nodes; ++qi) {
        const int64_t t = rv.q_begin + qi;
        const int64_t visible = rv.prefix_len + qi + 1;  // keys 0 .. P + qi
        for (int32_t h = 0; h < p.num_heads; ++h) {
          read_query(p, t, h, q.data());
          double m = -std::numeric_limits<double>::infinity();
          for (int64_t j = 0; j < visible; ++j) {
            const double* k = &keys[static_cast<size_t>(j) * kRowDim];
            double dot = 0;
            for (int e = 0; e < kRowDim; ++e) dot += q[static_cast<size_t>(e)] * k[e];
            s[static_cast<size_t>(j)] = scale * dot;
            m = std::max(m, s[static_cast<size_t>(j)]);
          }
          double l = 0;
          double* o = &ref.o_lat[(static_cast<size_t>(t) * ref.heads + h) * kLatentDim];
          for (int64_t j = 0; j < visible; ++j) {
            double w = std::exp(s[static_cast<size_t>(j)] - m);
            l += w;
            const double* k = &keys[static_cast<size_t>(j) * kRowDim];
            for (int e = 0; e < kLatentDim; ++e) o[e] += w * k[e];
          }
          for (int e = 0; e < kLatentDim; ++e) o[e] /= l;
          ref.lse[static_cast<size_t>(t) * ref.heads + h] = m + std::log(l);
        }
      }
    }
    RunOutput out = run_backend(backend, batch);
    if (auto s = stray_write_failure(out)) return *s;
    return from_comparison(compare_to_model(batch, out, ref, backend.capabilities()),
                           "chain vs causal reference");
  });
}

PropertyResult check_draft_source(Backend& backend, const Case& c) {
  return guarded("draft_source", [&] {
    const Capabilities caps = backend.capabilities();
    const bool takes_ext = has(caps.draft_sources, DraftKvSource::ExtendRows);
    const bool takes_cache = has(caps.draft_sources, DraftKvSource::CacheSlots);
    if (takes_ext && takes_cache) {
      Case ext = c;
      ext.draft_source = DraftKvSource::ExtendRows;
      Case cache = c;
      cache.draft_source = DraftKvSource::CacheSlots;
      model::VerifyBatch a = build_batch(ext);
      model::VerifyBatch b = build_batch(cache);
      if (auto skip = unsupported(backend, a)) return *skip;
      if (auto skip = unsupported(backend, b)) return *skip;
      RunOutput oa = run_backend(backend, a);
      RunOutput ob = run_backend(backend, b);
      if (auto s = stray_write_failure(oa)) return *s;
      if (auto s = stray_write_failure(ob)) return *s;
      return from_comparison(same_outputs(backend, a, oa, ob),
                             law(backend, "extend rows vs cache slots"));
    }
    // One source only: the draft keys must come from that source and nowhere else.
    Case one = c;
    one.draft_source = takes_ext ? DraftKvSource::ExtendRows : DraftKvSource::CacheSlots;
    model::VerifyBatch batch = build_batch(one);
    if (takes_ext) {
      // The draft tokens' cache slots hold the same values as k_extend: NaN there must not show.
      return unchanged_by(backend, batch, "before vs after NaN in the draft cache slots", [&] {
        const std::vector<float> nan(kRowDim, std::numeric_limits<float>::quiet_NaN());
        for (int32_t i = 0; i < batch.real_batch_size(); ++i) {
          for (int64_t s : batch.draft_slots(i)) batch.pool().write_row(s, nan.data());
        }
      });
    }
    // Cache slots: every draft slot moves to a free slot (prefix slots stay), so a kernel that
    // finds draft KV anywhere but the last D_i kv entries (right after the prefix's slots, in
    // k_extend, ...) reads the NaN left behind. Page tables move whole pages instead.
    return unchanged_by(backend, batch, "before vs after moving the draft slots", [&] {
      if (batch.spec().kv_indexing == KvIndexing::PageTable && batch.spec().page_size > 1) {
        apply_slot_permutation(batch, random_slot_permutation(batch, c.seed ^ 0xd4a5ull));
        return;
      }
      const int64_t n = batch.pool().num_slots();
      std::vector<bool> owned(static_cast<size_t>(n), false);
      owned[0] = true;
      for (int32_t i = 0; i < batch.real_batch_size(); ++i) {
        for (int64_t s : batch.prefix_slots(i)) owned[static_cast<size_t>(s)] = true;
        for (int64_t s : batch.draft_slots(i)) owned[static_cast<size_t>(s)] = true;
      }
      std::vector<int64_t> perm(static_cast<size_t>(n));
      for (int64_t s = 0; s < n; ++s) perm[static_cast<size_t>(s)] = s;
      // As many draft slots as there are free ones move (the pool keeps a few spare pages);
      // the rest stay where they are.
      int64_t free_slot = n - 1;
      for (int32_t i = 0; i < batch.real_batch_size() && free_slot > 0; ++i) {
        for (int64_t s : batch.draft_slots(i)) {
          while (free_slot > 0 && owned[static_cast<size_t>(free_slot)]) --free_slot;
          if (free_slot <= 0) break;
          std::swap(perm[static_cast<size_t>(s)], perm[static_cast<size_t>(free_slot)]);
          owned[static_cast<size_t>(free_slot)] = true;
        }
      }
      apply_slot_permutation(batch, perm);
    });
  });
}

PropertyResult check_slot_permutation(Backend& backend, const Case& c) {
  return guarded("slot_permutation", [&] {
    model::VerifyBatch batch = build_batch(c);
    return unchanged_by(backend, batch, "before vs after permuting slots", [&] {
      apply_slot_permutation(batch, random_slot_permutation(batch, c.seed ^ 0x5107ull));
    });
  });
}

PropertyResult check_defrag(Backend& backend, const Case& c) {
  return guarded("defrag", [&] {
    Case scattered = c;
    if (scattered.slot_order == scenarios::SlotOrder::Defragmented) {
      scattered.slot_order = scenarios::SlotOrder::Scattered;
    }
    model::VerifyBatch batch = build_batch(scattered);
    return unchanged_by(backend, batch, "before vs after compaction",
                        [&] { compact_slots(batch); });
  });
}

PropertyResult check_batch_independence(Backend& backend, const Case& c) {
  return guarded("batch_independence", [&] {
    model::VerifyBatch base = build_batch(c);
    if (auto skip = unsupported(backend, base)) return *skip;
    RunOutput base_out = run_backend(backend, base);
    if (auto s = stray_write_failure(base_out)) return *s;
    const int32_t bs = base.batch_size();
    // Targets: every row when few, else the first, the last real, one padded row and a middle
    // one, so the cost stays a few runs per case.
    std::set<int32_t> targets;
    if (bs <= 4) {
      for (int32_t i = 0; i < bs; ++i) targets.insert(i);
    } else {
      targets = {0, base.real_batch_size() - 1, bs - 1, bs / 2};
    }
    const bool deterministic = backend.capabilities().deterministic;
    for (int32_t target : targets) {
      // A padded row may hold anything (backend.h); only a deterministic backend's is pinned.
      if (!deterministic && target >= base.real_batch_size()) continue;
      model::VerifyBatch b = build_batch(c);
      VerifyParams p = b.params();
      // Slots the target reads stay as they are (padded rows share slot 0 legitimately).
      std::set<int64_t> keep;
      RequestExtent te = request_extent(p, target);
      for (int64_t j = 0;
           j < te.prefix_len + (p.draft_source == DraftKvSource::CacheSlots ? te.draft_nodes : 0);
           ++j) {
        keep.insert(kv_slot(p, te, j));
      }
      Scrambler rng{c.seed ^ (0xabcdull + static_cast<uint64_t>(target)), c.value_scale};
      std::vector<float> row(kRowDim);  // [576] latent-first
      auto scramble_slot = [&](int64_t slot) {
        if (keep.count(slot)) return;
        for (float& x : row) x = rng.next();
        b.pool().write_row(slot, row.data());
      };
      const size_t eb = static_cast<size_t>(dtype_bytes(c.kv_dtype));
      for (int32_t j = 0; j < bs; ++j) {
        if (j == target) continue;
        RequestExtent e = request_extent(p, j);
        const int64_t kv_len = p.kv_indptr[j + 1] - p.kv_indptr[j];
        for (int64_t k = 0; k < kv_len; ++k) scramble_slot(kv_slot(p, e, k));
        if (j < b.real_batch_size()) {
          for (int64_t s : b.draft_slots(j)) scramble_slot(s);
        }
        for (int64_t t = e.q_begin; t < e.q_begin + e.draft_nodes; ++t) {
          for (size_t k = 0; k < static_cast<size_t>(p.num_heads) * kRowDim; ++k) {
            b.q()[static_cast<size_t>(t) * p.num_heads * kRowDim + k] = float_to_bf16(rng.next());
          }
          std::byte* ext = b.k_extend().data() + static_cast<size_t>(t) * kRowDim * eb;
          for (size_t k = 0; k < kRowDim; ++k) {
            float v = rng.next();
            if (c.kv_dtype == DType::BF16) {
              bf16 x = float_to_bf16(v);
              std::memcpy(ext + k * eb, &x, eb);
            } else {
              std::memcpy(ext + k * eb, &v, eb);
            }
          }
        }
      }
      RunOutput out = run_backend(backend, b);
      if (auto s = stray_write_failure(out)) return *s;
      Comparison cmp = same_outputs(backend, b, base_out, out, {target});
      if (!cmp.pass) {
        return from_comparison(
            cmp, law(backend, "request " + std::to_string(target) +
                                  (target >= b.real_batch_size() ? " (padded row)" : "") +
                                  " changed when only other requests' data changed"));
      }
    }
    return PropertyResult::pass("");
  });
}

PropertyResult check_representation(Backend& backend, const Case& c) {
  return guarded("representation", [&] {
    Case alt = c;
    // Every representation choice moves to another value; the logical batch stays the same.
    alt.layout = c.layout == LayoutKind::LatentFirst ? LayoutKind::Split
                 : c.layout == LayoutKind::Split     ? LayoutKind::RopeFirst
                                                     : LayoutKind::LatentFirst;
    alt.row_stride = c.row_stride == kRowDim ? 640 : kRowDim;
    alt.kv_dtype = c.kv_dtype == DType::BF16 ? DType::F32 : DType::BF16;
    alt.mask_indptr_convention = c.mask_indptr_convention == IndptrConvention::Csr
                                     ? IndptrConvention::OffsetsOnly
                                     : IndptrConvention::Csr;
    switch (c.mask_format) {
      case MaskFormat::FullMask:
        alt.mask_format = MaskFormat::FlashInferPacked;
        break;
      case MaskFormat::FlashInferPacked:
        alt.mask_format = MaskFormat::DraftBits;
        break;
      case MaskFormat::DraftBits:
        alt.mask_format = MaskFormat::QlenOnly;
        break;
      case MaskFormat::QlenOnly:
      case MaskFormat::QlenOnlyBitpacking:
        alt.mask_format = MaskFormat::FullMask;
        break;
    }
    if (c.mask_format == MaskFormat::QlenOnly && c.max_draft() <= 32) {
      alt.mask_format = MaskFormat::QlenOnlyBitpacking;
      alt.mask_word_bytes = c.max_draft() <= 8 ? 1 : c.max_draft() <= 16 ? 2 : 4;
    }
    alt.page_size = c.page_size == 1 ? 16 : 1;
    alt.slot_order = c.slot_order == scenarios::SlotOrder::Scattered
                         ? scenarios::SlotOrder::Contiguous
                         : scenarios::SlotOrder::Scattered;
    // The presentation: exact widenings and strides (o_dtype changes the rounding, so it stays).
    alt.q_dtype = c.q_dtype == DType::BF16 ? DType::F32 : DType::BF16;
    alt.q_rope_first = !c.q_rope_first;
    alt.q_head_stride = c.q_head_stride == kRowDim ? 640 : kRowDim;
    alt.o_head_stride = c.o_head_stride == kLatentDim ? 576 : kLatentDim;
    alt.k_extend_stride = c.k_extend_stride == kRowDim ? 640 : kRowDim;
    alt.kv_indexing = static_cast<KvIndexing>((static_cast<int32_t>(c.kv_indexing) + 1) % 3);
    alt.tail_rows = c.tail_rows == 0 ? 3 : 0;
    model::VerifyBatch a = build_batch(c);
    if (auto skip = unsupported(backend, a)) return *skip;
    // When the backend does not take the whole alternative, each choice is tried alone on the
    // case and kept if the backend takes it, so every change it can take is still checked.
    using Field = std::function<void(Case&, const Case&)>;
    const std::vector<Field> fields = {
        [](Case& x, const Case& y) { x.kv_dtype = y.kv_dtype; },
        [](Case& x, const Case& y) { x.row_stride = y.row_stride; },
        [](Case& x, const Case& y) { x.layout = y.layout; },
        [](Case& x, const Case& y) { x.q_dtype = y.q_dtype; },
        [](Case& x, const Case& y) {
          x.q_rope_first = y.q_rope_first;
          x.q_head_stride = y.q_head_stride;
        },
        [](Case& x, const Case& y) { x.o_head_stride = y.o_head_stride; },
        [](Case& x, const Case& y) { x.k_extend_stride = y.k_extend_stride; },
        [](Case& x, const Case& y) {
          x.kv_indexing = y.kv_indexing;
          x.page_size = y.page_size;
        },
        [](Case& x, const Case& y) {
          x.mask_format = y.mask_format;
          x.mask_word_bytes = y.mask_word_bytes;
        },
        [](Case& x, const Case& y) { x.mask_indptr_convention = y.mask_indptr_convention; },
        [](Case& x, const Case& y) { x.page_size = y.page_size; },
        [](Case& x, const Case& y) { x.slot_order = y.slot_order; },
        [](Case& x, const Case& y) { x.tail_rows = y.tail_rows; },
    };
    model::VerifyBatch b = build_batch(alt);
    if (!backend.can_implement(b.params())) {
      Case kept = c;
      for (const Field& f : fields) {
        Case probe = kept;
        f(probe, alt);
        if (probe == kept) continue;
        model::VerifyBatch pb = build_batch(probe);
        if (backend.can_implement(pb.params())) kept = probe;
      }
      alt = kept;
      b = build_batch(alt);
    }
    if (auto skip = unsupported(backend, b)) return *skip;
    RunOutput oa = run_backend(backend, a);
    RunOutput ob = run_backend(backend, b);
    if (auto s = stray_write_failure(oa)) return *s;
    if (auto s = stray_write_failure(ob)) return *s;
    return from_comparison(same_outputs(backend, a, oa, ob),
                           law(backend, "representation " + scenarios::summary(alt) + " vs the case's"));
  });
}

PropertyResult check_metadata(Backend&, const Case& c) {
  return guarded("metadata", [&]() -> PropertyResult {
    model::VerifyBatch b = build_batch(c);
    VerifyParams p = b.params();
    model::validate_params(p);
    std::ostringstream err;
    auto fail = [&](const std::string& what) {
      PropertyResult r;
      r.ok = false;
      r.detail = what;
      return r;
    };
    const int32_t bs = p.batch_size;
    const int32_t real = b.real_batch_size();
    if (bs != (c.graph_padded_bs ? c.graph_padded_bs : c.batch_size()) || real != c.batch_size()) {
      return fail("batch size " + std::to_string(bs) + " / real " + std::to_string(real));
    }
    if (p.qo_indptr[0] != 0 || p.kv_indptr[0] != 0) return fail("indptr does not start at 0");
    std::set<int64_t> owned;
    for (int32_t i = 0; i < bs; ++i) {
      const bool padded = i >= real;
      const int32_t d = p.qo_indptr[i + 1] - p.qo_indptr[i];
      const int32_t want_d =
          padded ? c.max_draft()
                 : static_cast<int32_t>(c.requests[static_cast<size_t>(i)].parents.size());
      if (d != want_d)
        return fail("qo_indptr: request " + std::to_string(i) + " D " + std::to_string(d));
      const int64_t want_p = padded ? 1 : c.requests[static_cast<size_t>(i)].prefix_len;
      const int64_t kv_len = p.kv_indptr[i + 1] - p.kv_indptr[i];
      const int64_t want_len = want_p + (p.draft_source == DraftKvSource::CacheSlots ? d : 0);
      if (kv_len != want_len) {
        return fail("kv_indptr: request " + std::to_string(i) + " length " +
                    std::to_string(kv_len) + " != " + std::to_string(want_len));
      }
      const int32_t row = b.req_pool_index(i);
      if (padded != (row == 0))
        return fail("request " + std::to_string(i) + " at req_to_token row 0");
      for (int64_t j = 0; j < kv_len; ++j) {
        const int64_t slot = b.metadata().kv_indices[static_cast<size_t>(p.kv_indptr[i] + j)];
        if (slot != b.req_to_token().at(row, j)) {
          return fail("kv_indices[" + std::to_string(p.kv_indptr[i] + j) + "] != req_to_token[" +
                      std::to_string(row) + ", " + std::to_string(j) + "]");
        }
        if (padded) {
          if (slot != 0)
            return fail("padded request " + std::to_string(i) + " reads slot " +
                        std::to_string(slot));
        } else if (slot <= 0 || slot >= p.pool_slots || !owned.insert(slot).second) {
          return fail("slot " + std::to_string(slot) + " of request " + std::to_string(i) +
                      " is 0, outside the pool or owned twice");
        }
      }
      if (!padded) {
        for (int64_t s : b.draft_slots(i)) {
          if (s <= 0 || s >= p.pool_slots) return fail("draft slot " + std::to_string(s));
          if (p.draft_source == DraftKvSource::ExtendRows && !owned.insert(s).second) {
            return fail("draft slot " + std::to_string(s) + " owned twice");
          }
        }
      }
    }
    if (p.mask_format == MaskFormat::FullMask || p.mask_format == MaskFormat::FlashInferPacked) {
      const auto& ind = b.mask().indptr;
      const size_t want = static_cast<size_t>(indptr_length(p.mask_indptr_convention, bs));
      if (ind.size() != want || ind[0] != 0) return fail("mask_indptr length or start");
      for (int32_t i = 0; i + 1 < static_cast<int32_t>(ind.size()); ++i) {
        const int64_t d = p.qo_indptr[i + 1] - p.qo_indptr[i];
        const int64_t kv = b.prefix_len(i) + d;
        const int64_t seg = p.mask_format == MaskFormat::FullMask ? d * kv : (d * kv + 7) / 8;
        if (ind[static_cast<size_t>(i) + 1] - ind[static_cast<size_t>(i)] != seg) {
          return fail("mask_indptr[" + std::to_string(i + 1) + "]: segment is not D*(P+D)");
        }
      }
    }
    // Every real request's mask decodes to its tree (padded rows hold garbage on purpose).
    for (int32_t i = 0; i < real; ++i) {
      model::DraftTree got = model::DraftTree::from_ancestor_bits(model::draft_block(p, i));
      if (got.parents() != c.requests[static_cast<size_t>(i)].parents) {
        return fail("mask of request " + std::to_string(i) + " decodes to " + got.to_string());
      }
      model::DraftTree tree =
          model::DraftTree::from_parents(c.requests[static_cast<size_t>(i)].parents);
      auto pos = tree.positions(c.requests[static_cast<size_t>(i)].prefix_len);
      for (int32_t t = 0; t < tree.size(); ++t) {
        if (b.metadata().positions[static_cast<size_t>(p.qo_indptr[i] + t)] !=
            pos[static_cast<size_t>(t)]) {
          return fail("positions of request " + std::to_string(i) + " node " + std::to_string(t));
        }
      }
    }
    return PropertyResult::pass("");
  });
}

const std::vector<PropertyInfo>& all_properties() {
  static const std::vector<PropertyInfo> list = {
      {"vs_model", &check_vs_model, "backend vs the double-precision model, derived bounds"},
      {"split_invariance", &check_split_invariance, "num_splits 1 vs k within derived bounds"},
      {"chain_causal", &check_chain_causal, "chains equal causal attention (bottom-right rule)"},
      {"draft_source", &check_draft_source,
       "draft KV from k_extend == from cache slots; one source only: from it alone (bits)"},
      {"slot_permutation", &check_slot_permutation, "permuting physical slots changes no bit"},
      {"defrag", &check_defrag, "tier-1 compaction changes no bit"},
      {"serving_defrag", &check_serving_defrag,
       "through ServingState (churn, accept): model::compact changes no bit"},
      {"batch_independence", &check_batch_independence,
       "a request's output ignores every other request's data (padded rows too)"},
      {"representation", &check_representation,
       "layout, stride, dtype, mask format, indptr convention, page size, slot order: same bits"},
      {"metadata", &check_metadata, "docs/spec.md §3 metadata invariants of the built batch"},
  };
  return list;
}

const PropertyInfo& property_by_name(std::string_view name) {
  std::string known;
  for (const auto& p : all_properties()) {
    if (p.name == name) return p;
    known += (known.empty() ? "" : ", ") + std::string(p.name);
  }
  throw InvalidInput("property", -1,
                     "unknown property \"" + std::string(name) + "\" (known: " + known + ")");
}

}  // namespace mlaverify::props
