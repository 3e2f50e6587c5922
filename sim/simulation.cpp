// The serving simulation's step loop: workload, draft trees, acceptance, the verify launch over
// the ServingState's pool, defragmentation policies, checks and per-step metrics.
#include "sim/simulation.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <queue>
#include <sstream>

#include "mlaverify/bf16.h"
#include "mlaverify/error.h"
#include "model/attention.h"
#include "model/config.h"
#include "model/defrag.h"
#include "model/mask.h"
#include "model/metadata.h"
#include "model/tree.h"
#include "props/compare.h"
#include "sim/faults.h"

namespace mlaverify::sim {

namespace {

using model::SplitMix64;

uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The content key of a logical token: request, the column it was written at, the verify round
// (0 for prompt tokens). Accepted draft tokens keep the key they were drafted with.
uint64_t token_key(uint64_t seed, int64_t req, int64_t column, int64_t round) {
  return mix(seed ^ mix(static_cast<uint64_t>(req) ^
                        mix(static_cast<uint64_t>(column) ^ mix(static_cast<uint64_t>(round)))));
}

// A KV row from its key: int8 / 64, in [-2, 2), exact in bf16 (at most 8 significant bits), so
// the pool stores it without rounding and a content check compares exactly. 72 draws per row:
// generation is most of a step's cost.
void fill_row(uint64_t key, int32_t layer, float* row) {
  SplitMix64 g(key ^ mix(static_cast<uint64_t>(layer) + 17));
  for (int k = 0; k < kRowDim; k += 8) {
    uint64_t z = g.next();
    for (int j = 0; j < 8; ++j) {
      row[k + j] = static_cast<float>(static_cast<int8_t>(z >> (8 * j))) / 64.f;
    }
  }
}

struct Live {
  int64_t id = 0;
  int64_t output_len = 0;
  int64_t generated = 0;
  std::vector<uint64_t> keys;  // [P] content key of each committed column
};

struct Waiting {
  int64_t prompt_len;
  int64_t output_len;  // still to generate
};

// ---- draft trees -------------------------------------------------------------------------------

// DDTree best-first: candidates scored by path log-probability; the budget most probable
// nodes, each popped after its parent (so node indices are topological).
model::DraftTree ddtree(SplitMix64& rng, int32_t budget) {
  constexpr int32_t kBranch = 4, kMaxDepth = 16;
  struct Cand {
    double logp;
    int32_t parent;
    int32_t depth;
    bool operator<(const Cand& o) const { return logp < o.logp; }
  };
  std::priority_queue<Cand> heap;
  std::vector<int32_t> parent{-1};
  auto expand = [&](int32_t node, int32_t depth, double logp) {
    if (depth >= kMaxDepth) return;
    std::array<double, kBranch> w;
    double sum = 0;
    for (double& x : w) {
      x = 1e-3 + static_cast<double>(rng.next() >> 11) * 0x1.0p-53;
      sum += x;
    }
    std::sort(w.begin(), w.end(), std::greater<>());
    for (double x : w) heap.push({logp + std::log(x / sum), node, depth + 1});
  };
  expand(0, 0, 0.0);
  while (static_cast<int32_t>(parent.size()) < budget && !heap.empty()) {
    Cand c = heap.top();
    heap.pop();
    const int32_t idx = static_cast<int32_t>(parent.size());
    parent.push_back(c.parent);
    expand(idx, c.depth, c.logp);
  }
  return model::DraftTree::from_parents(std::move(parent));
}

// EAGLE top-k per depth: each level keeps the topk best of the topk^2 children of the last.
model::DraftTree eagle(SplitMix64& rng, int32_t topk, int32_t depth) {
  std::vector<int32_t> parent{-1};
  std::vector<std::pair<int32_t, double>> level{{0, 0.0}};  // (node, logp)
  for (int32_t d = 0; d < depth; ++d) {
    std::vector<std::tuple<double, int32_t>> cand;  // (logp, parent)
    for (auto [node, logp] : level) {
      for (int32_t k = 0; k < topk; ++k) {
        const double u = 1e-3 + static_cast<double>(rng.next() >> 11) * 0x1.0p-53;
        cand.emplace_back(logp + std::log(u) - k, node);
      }
    }
    std::sort(cand.begin(), cand.end(),
              [](auto& a, auto& b) { return std::get<0>(a) > std::get<0>(b); });
    level.clear();
    for (int32_t k = 0; k < topk && k < static_cast<int32_t>(cand.size()); ++k) {
      level.emplace_back(static_cast<int32_t>(parent.size()),
                         std::get<0>(cand[static_cast<size_t>(k)]));
      parent.push_back(std::get<1>(cand[static_cast<size_t>(k)]));
    }
  }
  return model::DraftTree::from_parents(std::move(parent));
}

// The accepted path, root first.
std::vector<int32_t> accept_path(const SimConfig& cfg, const model::DraftTree& tree,
                                 SplitMix64& rng, size_t& trace_pos) {
  std::vector<int32_t> path{0};
  int32_t target = -1;  // accepted length from the trace
  if (!cfg.accept_trace.empty()) {
    target = cfg.accept_trace[trace_pos++ % cfg.accept_trace.size()];
  }
  int32_t node = 0;
  while (true) {
    const std::vector<int32_t> kids = tree.children(node);
    if (kids.empty()) break;
    size_t pick = 0;
    if (target >= 0) {
      if (static_cast<int32_t>(path.size()) >= target) break;
    } else {
      const size_t d = std::min(path.size() - 1, cfg.accept_prob.size() - 1);
      const double u = static_cast<double>(rng.next() >> 11) * 0x1.0p-53;
      if (u >= cfg.accept_prob[d]) break;
      // Which child: the first (most probable) with 1/2, the next with 1/4, ...
      while (pick + 1 < kids.size() && (rng.next() & 1)) ++pick;
    }
    node = kids[pick];
    path.push_back(node);
  }
  return path;
}

// ---- the attention check -----------------------------------------------------------------------

struct Check {
  bool pass = true;
  double worst_ratio = 0;
  std::string detail;
};

// Backend output vs the model (double) on the same params, each request with the tolerance
// derived from the backend's declared arithmetic (props::derive_tolerance, probable_bound):
// compare_to_model's rules over a launch that is not held in a VerifyBatch.
Check compare_with_model(const VerifyParams& p, int32_t real_bs, const std::vector<bf16>& o,
                         const std::vector<float>& lse, const Capabilities& caps) {
  const model::RefResult ref = model::reference_verify(p);
  const int32_t partials = props::declared_partials(caps, p);
  Check c;
  int64_t violations = 0, improbable = 0;
  std::string worst;
  for (int32_t i = 0; i < real_bs; ++i) {
    const props::RequestView rv{p.qo_indptr[i], p.qo_indptr[i + 1] - p.qo_indptr[i],
                                static_cast<int64_t>(p.kv_indptr[i + 1] - p.kv_indptr[i]) -
                                    (p.qo_indptr[i + 1] - p.qo_indptr[i])};
    const props::Tolerance tol = props::derive_tolerance(p, i, rv, caps);
    const props::ProbableBound pb = props::probable_bound(p, i, caps.numerics, partials);
    for (int64_t q = 0; q < rv.draft_nodes; ++q) {
      const int64_t t = rv.q_begin + q;
      for (int32_t h = 0; h < p.num_heads; ++h) {
        for (int32_t k = 0; k < kLatentDim; ++k) {
          const double r = ref.o(t, h, k);
          const double v = bf16_to_float(
              o[(static_cast<size_t>(t) * p.num_heads + h) * kLatentDim + static_cast<size_t>(k)]);
          const double err = std::fabs(v - r);
          const double round = tol.o_unit * std::fabs(r);
          const double hard = tol.o_abs + round;
          const double prob = pb.at(q, h, k) + round;
          const double bound = std::min(hard, prob);
          const double ratio = !std::isfinite(v) ? INFINITY
                               : bound > 0       ? err / bound
                                                 : (err > 0 ? INFINITY : 0);
          if (!std::isfinite(v) || err > hard) {
            ++violations;
          } else if (err > prob) {
            ++improbable;
          }
          if (ratio > c.worst_ratio) {
            c.worst_ratio = ratio;
            worst = "request " + std::to_string(i) + " query " + std::to_string(q) + " head " +
                    std::to_string(h) + " column " + std::to_string(k) + ": |o - ref| " +
                    std::to_string(err) + " vs bound " + std::to_string(bound);
          }
        }
        if (caps.writes_lse) {
          const double r = ref.lse_at(t, h);
          const double v = lse[static_cast<size_t>(t) * p.num_heads + static_cast<size_t>(h)];
          const double err = std::fabs(v - r);
          if (!(err <= tol.lse_abs) && !(std::isinf(v) && std::isinf(r) && v < 0 && r < 0)) {
            ++violations;
            worst = "request " + std::to_string(i) + " query " + std::to_string(q) + " head " +
                    std::to_string(h) + " lse: |lse - ref| " + std::to_string(err) + " vs bound " +
                    std::to_string(tol.lse_abs);
            c.worst_ratio = std::max(c.worst_ratio, tol.lse_abs > 0 ? err / tol.lse_abs : INFINITY);
          }
        }
      }
    }
  }
  c.pass = violations == 0 && improbable == 0;
  c.detail = std::to_string(violations) + " element(s) beyond the worst-case bound, " +
             std::to_string(improbable) + " beyond the probable bound; worst " + worst;
  return c;
}

}  // namespace

// ---- names -------------------------------------------------------------------------------------

std::string to_string(TreeKind v) {
  switch (v) {
    case TreeKind::DdTree:
      return "ddtree";
    case TreeKind::Eagle:
      return "eagle";
    case TreeKind::Mtp:
      return "mtp";
  }
  return "?";
}
std::string to_string(DefragPolicy v) {
  switch (v) {
    case DefragPolicy::Off:
      return "off";
    case DefragPolicy::Tier0:
      return "tier0";
    case DefragPolicy::Tier1Threshold:
      return "tier1-threshold";
    case DefragPolicy::Tier1Every:
      return "tier1-every";
  }
  return "?";
}
std::string to_string(PlantedFault v) {
  switch (v) {
    case PlantedFault::None:
      return "none";
    case PlantedFault::StaleSlotAfterAccept:
      return "stale-slot-after-accept";
    case PlantedFault::DoubleFree:
      return "double-free";
    case PlantedFault::StrandedPartialTail:
      return "stranded-partial-tail";
  }
  return "?";
}

namespace {
template <typename E>
E parse_enum(const std::string& s, const char* field, std::initializer_list<E> values) {
  std::string known;
  for (E v : values) {
    if (to_string(v) == s) return v;
    known += (known.empty() ? "" : ", ") + to_string(v);
  }
  throw InvalidInput(field, -1, "unknown value '" + s + "' (known: " + known + ")");
}
}  // namespace

TreeKind parse_tree_kind(const std::string& s) {
  return parse_enum(s, "tree", {TreeKind::DdTree, TreeKind::Eagle, TreeKind::Mtp});
}
DefragPolicy parse_defrag_policy(const std::string& s) {
  return parse_enum(s, "defrag",
                    {DefragPolicy::Off, DefragPolicy::Tier0, DefragPolicy::Tier1Threshold,
                     DefragPolicy::Tier1Every});
}
PlantedFault parse_fault(const std::string& s) {
  return parse_enum(s, "fault",
                    {PlantedFault::None, PlantedFault::StaleSlotAfterAccept,
                     PlantedFault::DoubleFree, PlantedFault::StrandedPartialTail});
}

// ---- trace files -------------------------------------------------------------------------------

std::vector<Arrival> parse_trace(const std::string& text, const std::string& file_name) {
  std::vector<Arrival> out;
  std::istringstream in(text);
  std::string line;
  int64_t line_no = 0;
  static const char* kFields[3] = {"arrival_step", "prompt_len", "output_len"};
  while (std::getline(in, line)) {
    ++line_no;
    if (const auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::vector<std::string> cells;
    std::string cell;
    std::istringstream ls(line);
    while (std::getline(ls, cell, ',')) {
      const auto b = cell.find_first_not_of(" \t\r");
      const auto e = cell.find_last_not_of(" \t\r");
      cells.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
    }
    if (cells.empty() || (cells.size() == 1 && cells[0].empty())) continue;
    if (out.empty() && cells.size() == 3 && cells[0] == kFields[0] && cells[1] == kFields[1] &&
        cells[2] == kFields[2]) {
      continue;  // the header
    }
    if (cells.size() != 3) {
      throw InvalidInput(file_name + ": line", line_no,
                         "expected 3 fields arrival_step,prompt_len,output_len, got " +
                             std::to_string(cells.size()));
    }
    int64_t v[3];
    for (int f = 0; f < 3; ++f) {
      size_t used = 0;
      bool ok = !cells[static_cast<size_t>(f)].empty();
      try {
        if (ok) v[f] = std::stoll(cells[static_cast<size_t>(f)], &used);
      } catch (const std::exception&) {
        ok = false;
      }
      if (!ok || used != cells[static_cast<size_t>(f)].size()) {
        throw InvalidInput(file_name + ": " + kFields[f], line_no,
                           "not an integer: '" + cells[static_cast<size_t>(f)] + "'");
      }
    }
    if (v[0] < 0) throw InvalidInput(file_name + ": arrival_step", line_no, "must be >= 0");
    if (!out.empty() && v[0] < out.back().step) {
      throw InvalidInput(
          file_name + ": arrival_step", line_no,
          "steps must be non-decreasing (previous " + std::to_string(out.back().step) + ")");
    }
    if (v[1] < 1 || v[1] > (int64_t{1} << 20)) {
      throw InvalidInput(file_name + ": prompt_len", line_no, "must be in [1, 2^20]");
    }
    if (v[2] < 1 || v[2] > (int64_t{1} << 20)) {
      throw InvalidInput(file_name + ": output_len", line_no, "must be in [1, 2^20]");
    }
    out.push_back({v[0], v[1], v[2]});
  }
  if (out.empty()) throw InvalidInput(file_name + ": line", -1, "no request in the trace");
  return out;
}

std::vector<int32_t> parse_accept_trace(const std::string& text, const std::string& file_name) {
  std::string spaced = text;
  std::replace(spaced.begin(), spaced.end(), ',', ' ');
  std::istringstream in(spaced);
  std::vector<int32_t> out;
  std::string tok;
  while (in >> tok) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(tok, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != tok.size() || v < 1 || v > 1024) {
      throw InvalidInput(file_name + ": accept_length", static_cast<int64_t>(out.size()),
                         "must be an integer in [1, 1024], got '" + tok + "'");
    }
    out.push_back(static_cast<int32_t>(v));
  }
  if (out.empty()) throw InvalidInput(file_name + ": accept_length", -1, "no entry");
  return out;
}

std::vector<Arrival> load_trace(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InvalidInput(path + ": file", -1, "cannot be read");
  std::ostringstream s;
  s << f.rdbuf();
  return parse_trace(s.str(), path);
}

// ---- validation --------------------------------------------------------------------------------

void validate(const SimConfig& c) {
  auto need = [](bool ok, const char* field, const std::string& why) {
    if (!ok) throw InvalidInput(field, -1, why);
  };
  need(c.steps >= 1, "steps", "must be >= 1");
  need(c.arrival_rate >= 0 && c.arrival_rate <= 64, "arrival_rate", "must be in [0, 64]");
  need(c.prompt_min >= 1 && c.prompt_min <= c.prompt_max, "prompt_min", "1 <= min <= max");
  need(c.output_min >= 1 && c.output_min <= c.output_max, "output_min", "1 <= min <= max");
  need(c.max_running >= 1 && c.max_running <= 1024, "max_running", "must be in [1, 1024]");
  need(c.tree_budget >= 1 && c.tree_budget <= 1024, "tree_budget", "must be in [1, 1024]");
  need(c.eagle_topk >= 1 && c.eagle_topk <= 10, "eagle_topk", "must be in [1, 10]");
  need(c.eagle_depth >= 1 && c.eagle_depth <= 8, "eagle_depth", "must be in [1, 8]");
  need(c.mtp_len >= 1 && c.mtp_len <= 16, "mtp_len", "must be in [1, 16]");
  need(!c.accept_prob.empty(), "accept_prob", "needs at least one probability");
  for (double p : c.accept_prob) need(p >= 0 && p <= 1, "accept_prob", "each in [0, 1]");
  for (int32_t a : c.accept_trace) need(a >= 1, "accept_trace", "each length >= 1");
  need(c.page_size == 1 || c.page_size == 16 || c.page_size == 64 ||
           (c.page_size >= 1 && c.page_size <= 4096),
       "page_size", "must be in [1, 4096]");
  need(c.allocator == model::AllocatorKind::Paged || c.page_size == 1, "allocator",
       "the token allocator has page size 1");
  need(c.pool_size >= c.page_size, "pool_size", "must hold at least one page");
  need(c.frag_threshold >= 1, "frag_threshold", "runs per request: >= 1");
  need(c.defrag_every >= 1, "defrag_every", "must be >= 1");
  for (int32_t g : c.graph_sizes) need(g >= 1, "graph_sizes", "each >= 1");
  need(c.check_every >= 0, "check_every", "must be >= 0");
  need(c.run_every >= 0, "run_every", "must be >= 0");
  need(c.num_splits >= 1 && c.num_splits <= 64, "num_splits", "must be in [1, 64]");
  need(c.stop_after_failure >= 0, "stop_after_failure", "must be >= 0");
  (void)model::preset(c.preset).local_heads(c.tp);
}

// ---- the loop ----------------------------------------------------------------------------------

SimResult simulate(const SimConfig& cfg, Backend& backend,
                   const std::function<void(const StepMetrics&)>& on_step) {
  validate(cfg);
  const auto t0 = std::chrono::steady_clock::now();
  const model::MlaConfig mla = model::preset(cfg.preset);
  const int32_t heads = mla.local_heads(cfg.tp);
  const float sm_scale = static_cast<float>(mla.sm_scale());
  const Capabilities caps = backend.capabilities();

  int32_t max_tree = cfg.tree == TreeKind::DdTree  ? cfg.tree_budget
                     : cfg.tree == TreeKind::Eagle ? 1 + cfg.eagle_topk * cfg.eagle_depth
                                                   : cfg.mtp_len;
  int64_t max_prompt = cfg.prompt_max, max_output = cfg.output_max;
  for (const Arrival& a : cfg.trace) {
    max_prompt = std::max(max_prompt, a.prompt_len);
    max_output = std::max(max_output, a.output_len);
  }
  model::ServingConfig sc;
  sc.pool_size = cfg.pool_size;
  sc.page_size = cfg.page_size;
  sc.allocator = cfg.allocator;
  sc.num_layers = 1;
  sc.max_reqs = cfg.max_running;
  // A request never holds more than its prompt, its output and one open tree (+ the root's token).
  sc.max_context_len = max_prompt + max_output + max_tree + 1;
  model::ServingState st(sc);
  if (cfg.need_sort) st.set_need_sort(true);
  if (cfg.defrag == DefragPolicy::Tier0) model::enable_sorted_allocation(st);

  SplitMix64 rng(mix(cfg.seed));
  SimResult res;
  std::map<int64_t, Live> live;  // by ServingState id (ascending: admission order)
  std::deque<Waiting> waiting;
  size_t trace_next = 0, accept_pos = 0;
  bool fault_pending = cfg.fault != PlantedFault::None;
  int64_t current_round = 0;
  auto gen = [&](int32_t layer, int64_t req, int64_t column, float* row) {
    fill_row(token_key(cfg.seed, req, column, current_round), layer, row);
  };
  auto fail = [&](int64_t step, std::string kind, std::string detail) {
    res.failures.push_back({step, std::move(kind), std::move(detail)});
  };
  auto is_check_step = [&](int64_t step) {
    if (!cfg.check_steps.empty()) {
      return std::find(cfg.check_steps.begin(), cfg.check_steps.end(), step) !=
             cfg.check_steps.end();
    }
    return cfg.check_every > 0 && step % cfg.check_every == 0;
  };
  // Every committed column of `l` holds the bytes of its logical token (layer 0 only checked
  // beyond the first: all layers are written alike).
  auto content_ok = [&](const Live& l, int64_t begin, int64_t end, std::string* why) {
    std::array<float, kRowDim> want;
    const int64_t row = st.row(l.id);
    for (int64_t c = begin; c < end; ++c) {
      const int64_t slot = st.req_to_token().at(row, c);
      fill_row(l.keys[static_cast<size_t>(c)], 0, want.data());
      const std::array<float, kRowDim> got = st.layer(0).read_row(slot);
      if (std::memcmp(got.data(), want.data(), sizeof want) != 0) {
        *why = "request " + std::to_string(l.id) + " column " + std::to_string(c) + " (slot " +
               std::to_string(slot) + ") does not hold its token's KV row";
        return false;
      }
    }
    return true;
  };

  std::vector<bf16> q_buf, o_buf;
  std::vector<float> lse_buf;
  for (int64_t step = 0; step < cfg.steps; ++step) {
    if (cfg.stop_after_failure > 0 &&
        static_cast<int64_t>(res.failures.size()) >= cfg.stop_after_failure) {
      break;
    }
    StepMetrics m;
    m.step = step;
    current_round = 0;
    try {
      // 1. Arrivals.
      if (!cfg.trace.empty()) {
        while (trace_next < cfg.trace.size() && cfg.trace[trace_next].step <= step) {
          waiting.push_back({cfg.trace[trace_next].prompt_len, cfg.trace[trace_next].output_len});
          ++trace_next;
        }
      } else {
        // Poisson(arrival_rate) by inversion.
        double u = static_cast<double>(rng.next() >> 11) * 0x1.0p-53,
               p = std::exp(-cfg.arrival_rate);
        double cum = p;
        int32_t n = 0;
        while (u > cum && n < 1000) {
          ++n;
          p *= cfg.arrival_rate / n;
          cum += p;
        }
        for (int32_t k = 0; k < n; ++k) {
          const int64_t pl = cfg.prompt_min + static_cast<int64_t>(rng.below(static_cast<uint64_t>(
                                                  cfg.prompt_max - cfg.prompt_min + 1)));
          const int64_t ol = cfg.output_min + static_cast<int64_t>(rng.below(static_cast<uint64_t>(
                                                  cfg.output_max - cfg.output_min + 1)));
          waiting.push_back({pl, ol});
        }
      }
      // 2. Admission (FIFO), while a row is free and the pool keeps headroom for one draft tree
      // (and a page) per running request after it, as SGLang's scheduler reserves decode room;
      // without it a full pool retracts and re-admits the same request every step.
      auto available = [&] {
        return st.paged() ? st.paged_allocator()->available() : st.token_allocator()->available();
      };
      while (!waiting.empty() && static_cast<int32_t>(live.size()) < cfg.max_running) {
        const Waiting w = waiting.front();
        const int64_t headroom =
            static_cast<int64_t>(live.size() + 1) * (max_tree + cfg.page_size) + cfg.page_size;
        if (!live.empty() && available() < w.prompt_len + headroom) break;
        auto id = st.admit(w.prompt_len, gen);
        if (!id) {
          if (live.empty()) waiting.pop_front();  // can never fit: dropped
          break;
        }
        waiting.pop_front();
        Live l;
        l.id = *id;
        l.output_len = w.output_len;
        l.keys.resize(static_cast<size_t>(w.prompt_len));
        for (int64_t c = 0; c < w.prompt_len; ++c) {
          l.keys[static_cast<size_t>(c)] = token_key(cfg.seed, *id, c, 0);
        }
        live.emplace(*id, std::move(l));
        ++m.admitted;
      }
      // 3. Draft trees and their slots. A request the pool cannot extend is retracted (SGLang
      // retracts under memory pressure): finished and queued again with what it has.
      current_round = step + 1;
      std::vector<int64_t> batch;  // ids
      std::vector<model::DraftTree> trees;
      std::vector<int64_t> prefix_lens;
      std::vector<int64_t> retract;
      for (auto& [id, l] : live) {
        model::DraftTree tree = cfg.tree == TreeKind::DdTree ? ddtree(rng, cfg.tree_budget)
                                : cfg.tree == TreeKind::Eagle
                                    ? eagle(rng, cfg.eagle_topk, cfg.eagle_depth)
                                    : model::DraftTree::chain(cfg.mtp_len);
        const int64_t p = st.prefix_len(id);
        if (!st.begin_verify(id, tree.size(), gen)) {
          retract.push_back(id);
          continue;
        }
        batch.push_back(id);
        trees.push_back(std::move(tree));
        prefix_lens.push_back(p);
      }
      for (int64_t id : retract) {
        Live& l = live.at(id);
        waiting.push_front({st.prefix_len(id), std::max<int64_t>(1, l.output_len - l.generated)});
        st.finish(id);
        live.erase(id);
        ++m.retracted;
      }
      const int32_t bs = static_cast<int32_t>(batch.size());
      m.batch_size = bs;
      m.padded_bs = bs;
      for (const model::DraftTree& t : trees) m.draft_tokens += t.size();
      // 4. The verify launch, padded up to the smallest captured size (eager when none fits, as
      // SGLang runs).
      int32_t padded = bs;
      if (bs > 0 && !cfg.graph_sizes.empty() &&
          *std::max_element(cfg.graph_sizes.begin(), cfg.graph_sizes.end()) >= bs) {
        padded = model::pad_batch_size(bs, cfg.graph_sizes);
      }
      m.padded_bs = padded;
      const bool check_now = is_check_step(step);
      if (bs > 0 && (check_now || (cfg.run_every > 0 && step % cfg.run_every == 0))) {
        std::vector<int32_t> rows, sizes;
        for (size_t i = 0; i < batch.size(); ++i) {
          rows.push_back(static_cast<int32_t>(st.row(batch[i])));
          sizes.push_back(trees[i].size());
        }
        const model::RequestRows rr = model::pad_requests(rows, prefix_lens, sizes, padded);
        std::vector<model::DraftTree> all_trees = trees;
        const int32_t max_d = *std::max_element(sizes.begin(), sizes.end());
        while (static_cast<int32_t>(all_trees.size()) < padded) {
          all_trees.push_back(model::DraftTree::chain(max_d));
        }
        model::VerifyMetadata md =
            model::build_metadata(st.req_to_token(), rr.req_pool_indices, rr.prefix_lens, all_trees,
                                  DraftKvSource::CacheSlots);
        model::EncodedMask mask =
            model::encode_mask(MaskFormat::FullMask, all_trees, rr.prefix_lens);
        const int64_t real_t = md.qo_indptr[static_cast<size_t>(bs)];
        model::scribble_padded_mask(mask, bs, real_t, mix(cfg.seed ^ static_cast<uint64_t>(step)));
        const int64_t t_total = md.total_q();
        q_buf.resize(static_cast<size_t>(t_total) * heads * kRowDim);
        SplitMix64 qg(mix(cfg.seed ^ 0x51ull ^ static_cast<uint64_t>(step)));
        for (size_t k = 0; k < q_buf.size(); k += 8) {
          const uint64_t z = qg.next();
          for (size_t j = 0; j < 8; ++j) {
            q_buf[k + j] =
                float_to_bf16(static_cast<float>(static_cast<int8_t>(z >> (8 * j))) / 256.f);
          }
        }
        o_buf.assign(static_cast<size_t>(t_total) * heads * kLatentDim, bf16{0x7fc0});
        lse_buf.assign(static_cast<size_t>(t_total) * heads, std::nanf(""));
        VerifyParams p;
        p.batch_size = padded;
        p.num_heads = heads;
        p.max_draft = max_d;
        p.max_total_q = t_total;
        p.num_splits = cfg.num_splits;
        p.sm_scale = sm_scale;
        p.q = q_buf.data();
        p.q_dtype = DType::BF16;
        p.q_token_stride = int64_t{heads} * kRowDim;
        p.q_head_stride = kRowDim;
        st.layer(0).attach(p);
        p.qo_indptr = md.qo_indptr.data();
        p.kv_indptr = md.kv_indptr.data();
        p.kv_indices = md.kv_indices.data();
        p.kv_indices_len = static_cast<int64_t>(md.kv_indices.size());
        p.draft_source = DraftKvSource::CacheSlots;
        model::attach_mask(p, mask);
        p.o_lat = o_buf.data();
        p.o_dtype = DType::BF16;
        p.o_token_stride = int64_t{heads} * kLatentDim;
        p.o_head_stride = kLatentDim;
        p.lse = lse_buf.data();
        bool ran = false;
        if (Support s = backend.can_implement(p); !s) {
          fail(step, "unsupported", backend.name() + " cannot run the step's batch: " + s.reason);
        } else {
          const auto b0 = std::chrono::steady_clock::now();
          backend.run(p);
          m.backend_ms =
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - b0)
                  .count();
          m.kernel_ms = backend.last_device_ms();
          ran = true;
        }
        if (check_now && ran) {
          const Check c = compare_with_model(p, bs, o_buf, lse_buf, caps);
          m.checked = true;
          m.worst_ratio = c.worst_ratio;
          ++res.checked_steps;
          if (!c.pass) fail(step, "attention", c.detail);
          // Every committed token of every verified request holds its own bytes.
          std::string why;
          for (int64_t id : batch) {
            const Live& l = live.at(id);
            if (!content_ok(l, 0, st.prefix_len(id), &why)) {
              fail(step, "content", why);
              break;
            }
          }
        }
      }
      // 5. Acceptance.
      for (size_t i = 0; i < batch.size(); ++i) {
        const int64_t id = batch[i];
        Live& l = live.at(id);
        const model::DraftTree& tree = trees[i];
        const std::vector<int32_t> path = accept_path(cfg, tree, rng, accept_pos);
        const int64_t p0 = st.prefix_len(id);
        const std::vector<int64_t> draft = st.draft_slots(id);
        // Paged stale fault: the rows accept should move, as they were before it.
        std::vector<std::pair<int64_t, std::vector<std::byte>>> before;
        const bool try_fault = fault_pending && step >= cfg.fault_step;
        if (try_fault && cfg.fault == PlantedFault::StaleSlotAfterAccept && st.paged()) {
          for (size_t k = 1; k < path.size(); ++k) {
            if (path[k] != static_cast<int32_t>(k)) {
              before.emplace_back(draft[k], st.layer(0).raw_row(draft[k]));
            }
          }
        }
        st.accept(id, path, tree.parents());
        for (size_t k = 0; k < path.size(); ++k) {
          l.keys.push_back(token_key(cfg.seed, id, p0 + path[k], current_round));
        }
        if (try_fault) {
          bool applied = false;
          if (!before.empty()) {
            for (auto& [slot, bytes] : before) st.layer(0).write_raw_row(slot, bytes);
            applied = true;
          } else if (cfg.fault != PlantedFault::StaleSlotAfterAccept || !st.paged()) {
            applied = plant(cfg.fault, st, id, p0, draft, path);
          }
          if (applied) {
            fault_pending = false;
            res.fault_applied = true;
            res.fault_applied_step = step;
          }
        }
        m.accepted_tokens += static_cast<int64_t>(path.size());
        l.generated += static_cast<int64_t>(path.size());
        // The accepted tokens hold the drafted rows of their nodes.
        std::string why;
        if (!content_ok(l, p0, p0 + static_cast<int64_t>(path.size()), &why)) {
          fail(step, "content", why);
        }
      }
      res.tokens_accepted += m.accepted_tokens;
      // 6. Finished requests.
      for (auto it = live.begin(); it != live.end();) {
        if (it->second.generated >= it->second.output_len) {
          st.finish(it->first);
          it = live.erase(it);
          ++m.finished;
          ++res.requests_finished;
        } else {
          ++it;
        }
      }
      // 7. Defragmentation.
      bool compact_now =
          cfg.defrag == DefragPolicy::Tier1Every && (step + 1) % cfg.defrag_every == 0;
      if (cfg.defrag == DefragPolicy::Tier1Threshold) {
        compact_now = model::measure(st).runs_per_request > cfg.frag_threshold;
      }
      if (compact_now && !live.empty()) {
        // Checked first: compaction rebuilds the allocator from req_to_token and would hide
        // what acceptance broke.
        st.check_invariants();
        std::vector<std::vector<int64_t>> old;
        for (auto& [id, l] : live) old.push_back(st.prefix_slots(id));
        model::compact(st);
        size_t k = 0;
        for (auto& [id, l] : live) {
          const std::vector<int64_t> now = st.prefix_slots(id);
          for (size_t c = 0; c < now.size(); ++c) m.slots_moved += now[c] != old[k][c];
          ++k;
        }
      }
      // 8. Invariants, every step.
      st.check_invariants();
    } catch (const model::InvariantViolation& e) {
      fail(step, "invariant", e.what());
    } catch (const InvalidInput& e) {
      // The allocator refusing a free (freed twice, sink slot, ...) or metadata the model rejects.
      fail(step, "allocator", e.what());
    }
    // Metrics.
    const model::FragmentationMetrics f = model::measure(st);
    m.live_requests = static_cast<int32_t>(live.size());
    m.waiting = static_cast<int32_t>(waiting.size());
    m.runs_per_request = f.runs_per_request;
    m.mean_run_length = f.mean_run_length;
    m.free_list_runs = f.free_list_runs;
    m.partial_pages = f.partial_pages;
    for (int64_t id : st.live_requests()) m.used_slots += st.prefix_len(id) + st.draft_nodes(id);
    const int64_t held =
        st.paged() ? st.paged_allocator()->committed() : st.token_allocator()->allocated();
    m.leaked_slots = held - m.used_slots;
    if (m.leaked_slots != 0 && (res.failures.empty() || res.failures.back().step != step)) {
      fail(step, "leak",
           std::to_string(m.leaked_slots) + " slot(s) held by the allocator that " +
               "no request names (negative: named slots it holds free)");
    }
    res.max_leaked = std::max(res.max_leaked, std::abs(m.leaked_slots));
    res.steps.push_back(m);
    ++res.steps_run;
    if (on_step) on_step(m);
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  res.steps_per_second = res.seconds > 0 ? static_cast<double>(res.steps_run) / res.seconds : 0;
  return res;
}

std::string metrics_csv(const std::vector<StepMetrics>& steps) {
  std::ostringstream s;
  s << "step,live_requests,batch_size,padded_bs,draft_tokens,accepted_tokens,admitted,finished,"
       "retracted,waiting,runs_per_request,mean_run_length,free_list_runs,partial_pages,"
       "slots_moved,leaked_slots,used_slots,checked,backend_ms,worst_ratio,kernel_ms\n";
  for (const StepMetrics& m : steps) {
    s << m.step << ',' << m.live_requests << ',' << m.batch_size << ',' << m.padded_bs << ','
      << m.draft_tokens << ',' << m.accepted_tokens << ',' << m.admitted << ',' << m.finished << ','
      << m.retracted << ',' << m.waiting << ',' << m.runs_per_request << ',' << m.mean_run_length
      << ',' << m.free_list_runs << ',' << m.partial_pages << ',' << m.slots_moved << ','
      << m.leaked_slots << ',' << m.used_slots << ',' << (m.checked ? 1 : 0) << ',' << m.backend_ms
      << ',' << m.worst_ratio << ',' << m.kernel_ms << '\n';
  }
  return s.str();
}

}  // namespace mlaverify::sim
