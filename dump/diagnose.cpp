// The readings of diagnose: each rewrites what a buggy kernel would have read from the dump's
// own buffers (a swapped row, a shifted indptr, a wrong scale, a mask decoded wrongly), runs the
// model on that, and measures how well the result explains the server's outputs.
#include "dump/diagnose.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>

#include "mlaverify/error.h"
#include "model/attention.h"
#include "model/config.h"
#include "model/mask.h"
#include "model/tree.h"
#include "model/validate.h"

namespace mlaverify::dump {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kLn2 = 0.69314718055994530942;

// A reading made concrete: params pointing at the dump's buffers or at rewritten copies.
struct Prepared {
  VerifyParams p;
  ValueReading value;
  bool lse_base2 = false;
  std::string why_not;  // non-empty: the reading does not apply to this dump
  std::vector<std::byte> k_extend;
  std::vector<uint8_t> mask;
  std::vector<int64_t> mask_indptr;
  std::vector<int32_t> kv_indptr;
  std::vector<int64_t> kv_indices;
};

using Visibility = std::function<bool(int32_t request, int32_t t, int32_t j)>;

// Replaces p's mask by a FULL_MASK (CSR) whose draft block is vis(i, t, j) for real requests and
// the dump's own block for padded ones; prefix columns ones. prefix_len(i) is the P each request
// has in the rewritten params (the row stride of its segment).
void rebuild_mask(Prepared& r, const ServerDump& d, const VerifyParams& given, const Visibility& vis) {
  r.mask.clear();
  r.mask_indptr.assign(1, 0);
  for (int32_t i = 0; i < d.batch_size(); ++i) {
    const RequestExtent e = request_extent(r.p, i);
    const int32_t D = e.draft_nodes;
    const model::BitRows own = d.padded(i) ? model::draft_block(given, i) : model::BitRows();
    for (int32_t t = 0; t < D; ++t) {
      r.mask.insert(r.mask.end(), static_cast<size_t>(e.prefix_len), uint8_t{1});
      for (int32_t j = 0; j < D; ++j) {
        const bool v = d.padded(i) ? own.test(t, j) : vis(i, t, j);
        r.mask.push_back(v ? 1 : 0);
      }
    }
    r.mask_indptr.push_back(static_cast<int64_t>(r.mask.size()));
  }
  r.p.mask = r.mask.data();
  r.p.mask_len = static_cast<int64_t>(r.mask.size());
  r.p.mask_indptr = r.mask_indptr.data();
  r.p.mask_indptr_convention = IndptrConvention::Csr;
}

// The dump's FULL_MASK byte at (request's segment start `base`, row t, draft column j), or 0
// past the buffer's end (what a zero-filled allocation behind it would give).
bool raw_mask(const ServerDump& d, int64_t base, int64_t row_stride, int64_t col0, int32_t t,
              int32_t j) {
  const int64_t at = base + t * row_stride + col0 + j;
  if (at < 0 || at >= static_cast<int64_t>(d.mask().size())) return false;
  return d.mask()[static_cast<size_t>(at)] != 0;
}

// The trees of the real requests: the metadata's parents, or the as-given mask decoded.
std::vector<model::DraftTree> real_trees(const ServerDump& d, const VerifyParams& given,
                                         std::string& why_not) {
  std::vector<model::DraftTree> trees;
  for (int32_t i = 0; i < d.real_batch_size(); ++i) {
    if (!d.parents().empty()) {
      trees.push_back(model::DraftTree::from_parents(d.parents()[i]));
      continue;
    }
    try {
      trees.push_back(model::DraftTree::from_ancestor_bits(model::draft_block(given, i)));
    } catch (const InvalidInput& e) {
      why_not = "request " + std::to_string(i) + "'s mask is not a tree (" + e.what() +
                ") and the metadata gives no parents";
      return {};
    }
  }
  return trees;
}

Prepared prepare(const std::string& name, ServerDump& d) {
  Prepared r;
  r.p = d.params();
  const VerifyParams given = r.p;
  const bool latent_first = d.layout() == LayoutKind::LatentFirst;
  if (name == "as_given") return r;
  if (name == "rope_first_cache") {
    // The other order of the 576-wide row, for the pool and the k_extend rows alike.
    r.p.kv_layout = latent_first ? KvLayout::rope_first() : KvLayout::latent_first();
    if (d.has_k_extend()) {
      // Read as [k_pe | c]: the reading's c is the row's last 512, its k_pe the first 64.
      r.k_extend = d.k_extend_bytes();
      rotate_rope_to_back(r.k_extend, d.total_tokens(), dtype_bytes(d.kv_dtype()));
      r.p.k_extend = r.k_extend.data();
    }
    return r;
  }
  if (name == "rope_first_query") {
    r.p.q_latent_offset = kRopeDim;
    r.p.q_rope_offset = 0;
    return r;
  }
  if (name == "v_wrong_columns") {
    if (!latent_first) r.why_not = "defined for latent-first rows";
    r.value.v_offset = kRopeDim;  // V = row[64:576] instead of row[0:512]
    return r;
  }
  if (name == "v_stride_512") {
    if (!latent_first) r.why_not = "defined for latent-first rows";
    r.value.v_stride = kLatentDim;
    return r;
  }
  if (name == "latent_stride_512") {
    if (!latent_first) r.why_not = "defined for latent-first rows";
    r.p.kv_layout.latent_stride = kLatentDim;
    return r;
  }
  if (name == "sm_scale_576") {
    r.p.sm_scale = static_cast<float>(1.0 / std::sqrt(576.0));
    return r;
  }
  if (name == "no_mscale") {
    r.p.sm_scale = static_cast<float>(1.0 / std::sqrt(192.0));
    return r;
  }
  if (name == "mscale_once") {
    if (d.preset().empty()) {
      r.why_not = "needs the metadata's preset to know mscale";
      return r;
    }
    const double full = model::preset(d.preset()).sm_scale();  // 192^-0.5 mscale^2
    const double base = 1.0 / std::sqrt(192.0);
    r.p.sm_scale = static_cast<float>(base * std::sqrt(full / base));
    return r;
  }
  if (name == "mask_indptr_shifted") {
    if (d.mask_indptr_convention() != IndptrConvention::Csr) {
      r.why_not = "the dump's mask_indptr is offsets-only: no next entry to read";
      return r;
    }
    rebuild_mask(r, d, given, [&](int32_t i, int32_t t, int32_t j) {
      const int64_t P = d.prefix_len(i), D = d.draft_nodes(i);
      return raw_mask(d, d.mask_indptr()[i + 1], P + D, P, t, j);
    });
    return r;
  }
  if (name == "mask_row_stride_d") {
    rebuild_mask(r, d, given, [&](int32_t i, int32_t t, int32_t j) {
      const int64_t P = d.prefix_len(i), D = d.draft_nodes(i);
      return raw_mask(d, d.mask_indptr()[i], D, P, t, j);
    });
    return r;
  }
  if (name == "mask_prefix_offset_skipped") {
    rebuild_mask(r, d, given, [&](int32_t i, int32_t t, int32_t j) {
      const int64_t P = d.prefix_len(i), D = d.draft_nodes(i);
      return raw_mask(d, d.mask_indptr()[i], P + D, 0, t, j);
    });
    return r;
  }
  if (name == "prefix_masked") {
    // No prefix key attended: every request's kv range holds its draft only.
    r.kv_indptr.assign(1, 0);
    r.kv_indices.clear();
    for (int32_t i = 0; i < d.batch_size(); ++i) {
      const RequestExtent e = request_extent(given, i);
      const int64_t keep_from = d.padded(i) ? 0 : e.prefix_len;
      const int64_t len = given.kv_indptr[i + 1] - given.kv_indptr[i];
      for (int64_t k = keep_from; k < len; ++k) r.kv_indices.push_back(given.kv_indices[e.kv_begin + k]);
      r.kv_indptr.push_back(static_cast<int32_t>(r.kv_indices.size()));
    }
    r.p.kv_indptr = r.kv_indptr.data();
    r.p.kv_indices = r.kv_indices.data();
    r.p.kv_indices_len = static_cast<int64_t>(r.kv_indices.size());
    std::vector<model::BitRows> blocks;
    for (int32_t i = 0; i < d.batch_size(); ++i) blocks.push_back(model::draft_block(given, i));
    rebuild_mask(r, d, given,
                 [&](int32_t i, int32_t t, int32_t j) { return blocks[i].test(t, j); });
    return r;
  }
  if (name == "parent_only" || name == "no_diagonal") {
    std::vector<model::DraftTree> trees = real_trees(d, given, r.why_not);
    if (!r.why_not.empty()) return r;
    const bool parent_only = name == "parent_only";
    rebuild_mask(r, d, given, [&, trees](int32_t i, int32_t t, int32_t j) {
      if (parent_only) return j == t || (t > 0 && j == trees[i].parent(t));
      return j != t && trees[i].visible(t, j);
    });
    return r;
  }
  if (name == "draft_kv_from_pool") {
    if (!d.has_k_extend()) {
      r.why_not = "the dump has no k_extend: the draft rows already come from the pool";
      return r;
    }
    // The unified path: prefix slots then each draft token's out_cache_loc.
    r.kv_indptr.assign(1, 0);
    for (int32_t i = 0; i < d.batch_size(); ++i) {
      for (int64_t k = d.kv_indptr()[i]; k < d.kv_indptr()[i + 1]; ++k) {
        r.kv_indices.push_back(d.kv_indices()[k]);
      }
      for (int64_t t = d.q_begin(i); t < d.q_begin(i) + d.draft_nodes(i); ++t) {
        r.kv_indices.push_back(d.out_cache_loc()[t]);
      }
      r.kv_indptr.push_back(static_cast<int32_t>(r.kv_indices.size()));
    }
    r.p.draft_source = DraftKvSource::CacheSlots;
    r.p.k_extend = nullptr;
    r.p.kv_indptr = r.kv_indptr.data();
    r.p.kv_indices = r.kv_indices.data();
    r.p.kv_indices_len = static_cast<int64_t>(r.kv_indices.size());
    return r;
  }
  if (name == "prefix_slots_from_req_to_token") {
    if (d.draft_source() != DraftKvSource::ExtendRows) {
      r.why_not = "defined for dumps with k_extend";
      return r;
    }
    r.kv_indices = d.kv_indices_from_req_to_token();
    r.p.kv_indices = r.kv_indices.data();
    r.p.kv_indices_len = static_cast<int64_t>(r.kv_indices.size());
    return r;
  }
  if (name == "page_ids_as_slots") {
    if (d.page_size() <= 1) {
      r.why_not = "page_size is 1: page ids are slot ids";
      return r;
    }
    r.kv_indices = d.kv_indices();
    for (int64_t& s : r.kv_indices) s /= d.page_size();
    r.p.kv_indices = r.kv_indices.data();
    if (d.draft_source() == DraftKvSource::CacheSlots) r.why_not = "defined for dumps with k_extend";
    return r;
  }
  if (name == "lse_base2") {
    if (!d.has_lse()) r.why_not = "the dump holds no server lse";
    r.lse_base2 = true;
    return r;
  }
  if (name == "bit_order") {
    r.why_not = "the dump's mask is FULL_MASK bytes: there is no bit order to misread";
    return r;
  }
  if (name == "padded_rows_leak") {
    r.why_not = d.real_batch_size() == d.batch_size()
                    ? "the dump has no CUDA-graph padded rows"
                    : "padded rows are compared apart and cannot fail a real row; a leak into "
                      "real rows shows as a real-row mismatch under the as-given reading";
    return r;
  }
  throw InvalidInput("reading", -1, "unknown reading '" + name + "'");
}

struct Evaluated {
  ReadingResult result;
  std::vector<double> o;
  std::vector<double> lse;
  BoundTerms bound;
};

Evaluated evaluate(const ReadingInfo& info, ServerDump& d, const KernelAssumptions& assume) {
  Evaluated ev;
  ev.result.info = info;
  Prepared r = prepare(info.name, d);
  if (!r.why_not.empty()) {
    ev.result.applicable = false;
    ev.result.why_not = r.why_not;
    return ev;
  }
  try {
    model::validate_params(r.p);
  } catch (const InvalidInput& e) {
    ev.result.applicable = false;
    ev.result.why_not = std::string("the reading leaves the launch invalid: ") + e.what();
    return ev;
  }
  std::vector<double> o_value;
  ev.bound = bound_terms(r.p, assume, r.value, r.value.same_as_c() ? nullptr : &o_value);
  const model::RefResult ref = model::reference_verify(r.p);
  ev.o = r.value.same_as_c() ? ref.o_lat : std::move(o_value);
  ev.lse = ref.lse;
  if (r.lse_base2) {
    for (double& x : ev.lse) x /= kLn2;
    for (double& x : ev.bound.lse_abs) x /= kLn2;
  }
  ev.result.vs_server =
      compare(r.p, d.real_batch_size(), d.server_o(), d.server_lse(), ev.o, ev.lse, ev.bound);
  for (const RequestResult& rr : ev.result.vs_server.requests) {
    if (!rr.padded && rr.pass()) ++ev.result.requests_within;
  }
  return ev;
}

std::string fmt(double v) {
  std::ostringstream s;
  s.precision(2);
  if (v == kInf) return "inf";
  s << v;
  return s.str();
}

std::string summary(const ReadingResult& r) {
  std::ostringstream s;
  const Comparison& c = r.vs_server;
  s << "rel. error " << fmt(c.rel_frobenius()) << ", worst element " << fmt(c.worst_ratio())
    << "x its bound" << (c.pass() ? ", within bound" : "");
  return s.str();
}

}  // namespace

const std::vector<ReadingInfo>& all_readings() {
  static const std::vector<ReadingInfo> list = {
      {"as_given", 0, "the inputs read as the dump gives them"},
      {"rope_first_cache", 2, "the cache row read rope-first ([k_pe | c] instead of [c | k_pe])"},
      {"rope_first_query", 2, "the query row read rope-first"},
      {"v_wrong_columns", 3, "V taken from columns 64..575 of the cache row instead of 0..511"},
      {"v_stride_512", 3, "V read with a slot stride of 512 instead of 576"},
      {"latent_stride_512", 3, "the latent c (scores and V) read with a slot stride of 512"},
      {"sm_scale_576", 4, "sm_scale = 576^-0.5"},
      {"no_mscale", 4, "sm_scale = 192^-0.5 (YaRN mscale^2 missing)"},
      {"mscale_once", 4, "sm_scale = 192^-0.5 * mscale (mscale applied once, not squared)"},
      {"mask_indptr_shifted", 1,
       "mask_indptr read one entry ahead (request i's mask at mask_indptr[i+1]: a [1:bs+1] "
       "slice where offsets were expected)"},
      {"mask_row_stride_d", 5, "mask rows read with stride D instead of P + D"},
      {"mask_prefix_offset_skipped", 5,
       "the draft block read at column 0 of each mask row instead of column P"},
      {"prefix_masked", 5, "no prefix column attended (prefix masked out)"},
      {"parent_only", 6, "only the direct parent visible, not every ancestor"},
      {"no_diagonal", 6, "a draft node does not see itself"},
      {"draft_kv_from_pool", 11, "draft KV read from the pool at out_cache_loc, not from k_extend"},
      {"prefix_slots_from_req_to_token", 11,
       "prefix slots taken from req_to_token instead of kv_indices"},
      {"page_ids_as_slots", 12, "page ids (slot / page_size) used as slot ids"},
      {"bit_order", 13, "packed mask bits read in the other order"},
      {"lse_base2", 0, "lse reported in base 2 (lse / ln 2, FlashInfer's convention)"},
      {"padded_rows_leak", 10, "CUDA-graph padded rows leaking into real ones"},
  };
  return list;
}

Reference reference(ServerDump& dump, const KernelAssumptions& assume) {
  const VerifyParams p = dump.params();
  Reference r;
  r.bound = bound_terms(p, assume);
  const model::RefResult ref = model::reference_verify(p);
  r.o = ref.o_lat;
  r.lse = ref.lse;
  return r;
}

std::vector<double> reading_output(ServerDump& dump, const std::string& reading) {
  const auto& all = all_readings();
  const auto it = std::find_if(all.begin(), all.end(),
                               [&](const ReadingInfo& i) { return i.name == reading; });
  if (it == all.end()) throw InvalidInput("reading", -1, "unknown reading '" + reading + "'");
  Prepared r = prepare(reading, dump);
  if (!r.why_not.empty()) throw InvalidInput("reading", -1, reading + ": " + r.why_not);
  model::validate_params(r.p);
  if (!r.value.same_as_c()) {
    std::vector<double> o;
    bound_terms(r.p, KernelAssumptions{}, r.value, &o);
    return o;
  }
  return model::reference_verify(r.p).o_lat;
}

Diagnosis diagnose(ServerDump& dump, const KernelAssumptions& assume,
                   const std::vector<std::string>& only) {
  if (!dump.has_o()) {
    throw InvalidInput(dump.file() + ": o", -1, "the dump holds no server output to diagnose");
  }
  for (const std::string& name : only) {
    const auto& all = all_readings();
    if (std::none_of(all.begin(), all.end(), [&](const ReadingInfo& i) { return i.name == name; })) {
      std::string known;
      for (const ReadingInfo& i : all) known += (known.empty() ? "" : ", ") + i.name;
      throw InvalidInput("reading", -1, "unknown reading '" + name + "'; known: " + known);
    }
  }
  Diagnosis dg;
  dg.real_requests = dump.real_batch_size();
  dg.lse_compared = dump.has_lse();
  const Evaluated given = evaluate(all_readings()[0], dump, assume);
  dg.as_given = given.result;
  const VerifyParams p = dump.params();
  for (size_t k = 1; k < all_readings().size(); ++k) {
    const ReadingInfo& info = all_readings()[k];
    if (!only.empty() && std::find(only.begin(), only.end(), info.name) == only.end()) continue;
    Evaluated ev = evaluate(info, dump, assume);
    if (!ev.result.applicable) {
      dg.not_applicable.push_back(ev.result);
      continue;
    }
    // How far this reading's model output lies from the as-given one, in as-given bounds: a
    // reading this dump cannot tell apart from the truth says so instead of "explaining" it.
    double dist = 0;
    if (!ev.o.empty()) {
      for (int32_t i = 0; i < dump.real_batch_size(); ++i) {
        const RequestExtent e = request_extent(p, i);
        for (int64_t t = e.q_begin; t < e.q_begin + e.draft_nodes; ++t) {
          for (int32_t h = 0; h < dump.num_heads(); ++h) {
            const size_t row = static_cast<size_t>(t * dump.num_heads() + h);
            for (int c = 0; c < kLatentDim; ++c) {
              const size_t at = row * kLatentDim + c;
              const double bnd = given.bound.o_coeff[row] * given.bound.a_abs[at] +
                                 0x1.0p-8 * std::fabs(given.o[at]);
              const double err = std::fabs(ev.o[at] - given.o[at]);
              dist = std::max(dist, err == 0 ? 0.0 : (bnd > 0 ? err / bnd : kInf));
            }
            if (dump.has_lse()) {
              const double err = std::fabs(ev.lse[row] - given.lse[row]);
              if (err > 0) dist = std::max(dist, err / given.bound.lse_abs[row]);
            }
          }
        }
      }
    }
    ev.result.distance_from_given = dist;
    dg.ranked.push_back(ev.result);
  }
  std::stable_sort(dg.ranked.begin(), dg.ranked.end(),
                   [](const ReadingResult& a, const ReadingResult& b) {
                     if (a.requests_within != b.requests_within) {
                       return a.requests_within > b.requests_within;
                     }
                     return a.vs_server.worst_ratio() < b.vs_server.worst_ratio();
                   });

  std::ostringstream v;
  const std::string given_summary = summary(dg.as_given);
  if (dg.as_given.explains()) {
    v << "the server's o matches the model as given (" << given_summary << ")";
    std::vector<std::string> alike;
    for (const ReadingResult& r : dg.ranked) {
      if (r.distance_from_given <= 1) alike.push_back(r.info.name);
    }
    if (!alike.empty()) {
      v << "; this dump cannot tell these readings from the correct one:";
      for (const std::string& n : alike) v << " " << n;
    }
  } else {
    std::vector<const ReadingResult*> explaining;
    for (const ReadingResult& r : dg.ranked) {
      if (r.explains() && r.distance_from_given > 1) explaining.push_back(&r);
    }
    if (!explaining.empty()) {
      v << "the server's o matches the model when " << explaining[0]->info.description << " ("
        << summary(*explaining[0]) << "; as given: " << given_summary << ")";
      for (size_t k = 1; k < explaining.size(); ++k) {
        v << "; it also matches when " << explaining[k]->info.description << " ("
          << summary(*explaining[k]) << ")";
      }
    } else {
      v << "no single reading explains the server's o (as given: " << given_summary << ", "
        << dg.as_given.requests_within << " of " << dg.real_requests
        << " requests within bound)";
      // The closest two readings this dump can tell from the as-given one (a reading it cannot
      // is the as-given reading again, not an alternative).
      size_t shown = 0;
      for (const ReadingResult& r : dg.ranked) {
        if (shown == 2) break;
        if (r.distance_from_given <= 1) continue;
        v << (shown == 0 ? "; closest: " : "; next: ") << r.info.description << " ("
          << summary(r) << ", " << r.requests_within << " of " << dg.real_requests
          << " requests within bound)";
        ++shown;
      }
    }
  }
  dg.verdict = v.str();
  return dg;
}

}  // namespace mlaverify::dump
