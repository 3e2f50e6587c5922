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
  } catch (const std::exception& e) {
    return {false, false, std::string(name), std::string("exception: ") + e.what(), {}};
  }
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
  return from_comparison(compare_bits(batch, before, after), what);
}

}  // namespace

PropertyResult check_vs_model(Backend& backend, const Case& c) {
  return guarded("vs_model", [&] {
    model::VerifyBatch batch = build_batch(c);
    if (auto skip = unsupported(backend, batch)) return *skip;
    model::RefResult ref = model::reference_verify(batch.params());
    RunOutput out = run_backend(backend, batch);
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
    return from_comparison(compare_runs_within(a, ob, oa, backend.capabilities()),
                           "num_splits " + std::to_string(many.num_splits) + " vs 1");
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
    return from_comparison(compare_to_model(batch, out, ref, backend.capabilities()),
                           "chain vs causal reference");
  });
}

PropertyResult check_draft_source(Backend& backend, const Case& c) {
  return guarded("draft_source", [&] {
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
    return from_comparison(compare_bits(a, oa, ob), "extend rows vs cache slots (bits)");
  });
}

PropertyResult check_slot_permutation(Backend& backend, const Case& c) {
  return guarded("slot_permutation", [&] {
    model::VerifyBatch batch = build_batch(c);
    return unchanged_by(backend, batch, "before vs after permuting slots", [&] {
      apply_slot_permutation(batch,
                             random_slot_permutation(batch.pool().num_slots(), c.seed ^ 0x5107ull));
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
    const int32_t bs = base.batch_size();
    // Targets: every row when few, else the first, the last real, one padded row and a middle
    // one, so the cost stays a few runs per case.
    std::set<int32_t> targets;
    if (bs <= 4) {
      for (int32_t i = 0; i < bs; ++i) targets.insert(i);
    } else {
      targets = {0, base.real_batch_size() - 1, bs - 1, bs / 2};
    }
    for (int32_t target : targets) {
      model::VerifyBatch b = build_batch(c);
      VerifyParams p = b.params();
      // Slots the target reads stay as they are (padded rows share slot 0 legitimately).
      std::set<int64_t> keep;
      RequestExtent te = request_extent(p, target);
      for (int64_t j = 0;
           j < te.prefix_len + (p.draft_source == DraftKvSource::CacheSlots ? te.draft_nodes : 0);
           ++j) {
        keep.insert(p.kv_indices[te.kv_begin + j]);
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
        for (int64_t k = 0; k < kv_len; ++k) scramble_slot(p.kv_indices[e.kv_begin + k]);
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
      Comparison cmp = compare_bits(b, base_out, out, {target});
      if (!cmp.pass) {
        return from_comparison(cmp, "request " + std::to_string(target) +
                                        (target >= b.real_batch_size() ? " (padded row)" : "") +
                                        " changed when only other requests' data changed");
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
    model::VerifyBatch a = build_batch(c);
    if (auto skip = unsupported(backend, a)) return *skip;
    model::VerifyBatch b = build_batch(alt);
    if (!backend.can_implement(b.params())) {
      // A backend without fp32 pools or padded strides still gets the other changes checked.
      alt.kv_dtype = c.kv_dtype;
      alt.row_stride = c.row_stride;
      b = build_batch(alt);
      if (auto skip = unsupported(backend, b)) return *skip;
    }
    RunOutput oa = run_backend(backend, a);
    RunOutput ob = run_backend(backend, b);
    return from_comparison(compare_bits(a, oa, ob),
                           "representation " + scenarios::summary(alt) + " vs the case's");
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
        const int64_t slot = p.kv_indices[p.kv_indptr[i] + j];
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
      {"draft_source", &check_draft_source, "draft KV from k_extend == from cache slots (bits)"},
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
