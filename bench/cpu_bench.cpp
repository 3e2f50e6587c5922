// Google Benchmark of the CPU backend: the docs/spec.md §8 workloads (prefix scaled down, see
// prefix_div) in KV GB/s and GFLOP/s, and the throughput of property-suite-sized cases per minute.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "cpu/cpu_backend.h"
#include "mlaverify/bf16.h"
#include "mlaverify/types.h"
#include "mlaverify/verify_params.h"
#include "model/attention.h"
#include "model/mask.h"
#include "model/tree.h"

namespace mlaverify::cpu::bench {
namespace {

// splitmix64: fast enough to fill a 150 MB pool in well under a second.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
};

// Four bf16 values per draw, each uniform in [-1, 1) scaled by `scale` (the exact distribution
// does not matter for timing; bounded values keep the softmax ordinary).
void fill_bf16(Rng& rng, std::vector<bf16>& v, float scale) {
  for (size_t k = 0; k < v.size(); k += 4) {
    uint64_t bits = rng.next();
    for (size_t u = 0; u < 4 && k + u < v.size(); ++u) {
      float x = (static_cast<float>((bits >> (16 * u)) & 0xffff) / 32768.f - 1.f) * scale;
      v[k + u] = float_to_bf16(x);
    }
  }
}

struct Workload {
  std::string name;
  int32_t bs;
  int32_t heads;
  int32_t draft;
  int64_t prefix;
  bool chain;
};

// One layer's verify launch with every buffer owned here: bf16 pool [slots, 576] latent-first with
// prefix slots scattered by a random permutation, k_extend draft rows, FullMask tree mask.
class Launch {
 public:
  Launch(const std::vector<std::vector<int32_t>>& parents, const std::vector<int64_t>& prefix,
         int32_t heads, int32_t num_splits, uint64_t seed) {
    const int32_t bs = static_cast<int32_t>(parents.size());
    Rng rng{seed};
    std::vector<model::DraftTree> trees;
    qo_indptr_.assign(1, 0);
    kv_indptr_.assign(1, 0);
    int64_t total_prefix = 0;
    int32_t max_draft = 1;
    for (int32_t i = 0; i < bs; ++i) {
      trees.push_back(model::DraftTree::from_parents(parents[i]));
      qo_indptr_.push_back(qo_indptr_.back() + static_cast<int32_t>(parents[i].size()));
      total_prefix += prefix[i];
      kv_indptr_.push_back(static_cast<int32_t>(total_prefix));
      max_draft = std::max<int32_t>(max_draft, static_cast<int32_t>(parents[i].size()));
    }
    const int64_t tokens = qo_indptr_.back();
    const int64_t slots = total_prefix + 1;  // slot 0 is the sink, never named
    kv_indices_.resize(total_prefix);
    std::iota(kv_indices_.begin(), kv_indices_.end(), 1);
    for (int64_t k = total_prefix - 1; k > 0; --k)
      std::swap(kv_indices_[k], kv_indices_[rng.below(k + 1)]);
    pool_.resize(static_cast<size_t>(slots) * kRowDim);        // [slots, 576]
    q_.resize(static_cast<size_t>(tokens) * heads * kRowDim);  // [T, H, 576]
    k_extend_.resize(static_cast<size_t>(tokens) * kRowDim);   // [T, 576]
    fill_bf16(rng, pool_, 2.f);
    fill_bf16(rng, q_, 0.5f);
    fill_bf16(rng, k_extend_, 2.f);
    mask_ = model::encode_mask(MaskFormat::FullMask, trees, prefix);
    o_.resize(static_cast<size_t>(tokens) * heads * kLatentDim);  // [T, H, 512]
    lse_.resize(static_cast<size_t>(tokens) * heads);             // [T, H]

    p_.batch_size = bs;
    p_.num_heads = heads;
    p_.max_draft = max_draft;
    p_.max_total_q = tokens;
    p_.num_splits = num_splits;
    p_.sm_scale = 0.1352338f;
    p_.q = q_.data();
    p_.q_head_stride = kRowDim;
    p_.q_token_stride = static_cast<int64_t>(heads) * kRowDim;
    p_.kv_pool = pool_.data();
    p_.kv_layout = KvLayout::latent_first();
    p_.pool_slots = slots;
    p_.qo_indptr = qo_indptr_.data();
    p_.kv_indptr = kv_indptr_.data();
    p_.kv_indices = kv_indices_.data();
    p_.kv_indices_len = total_prefix;
    p_.draft_source = DraftKvSource::ExtendRows;
    p_.k_extend = k_extend_.data();
    model::attach_mask(p_, mask_);
    p_.o_lat = o_.data();
    p_.o_head_stride = kLatentDim;
    p_.o_token_stride = static_cast<int64_t>(heads) * kLatentDim;
    p_.lse = lse_.data();

    for (int32_t i = 0; i < bs; ++i) {
      const int64_t d = static_cast<int64_t>(parents[i].size());
      kv_bytes_ += static_cast<double>(prefix[i]) * kRowDim * 2;  // docs/spec.md §8: sum P_i * 1152
      flops_ += 2.0 * (kRowDim + kLatentDim) * heads * d * static_cast<double>(prefix[i] + d);
    }
  }

  const VerifyParams& params() const { return p_; }
  double kv_bytes() const { return kv_bytes_; }
  double flops() const { return flops_; }

 private:
  VerifyParams p_;
  std::vector<int32_t> qo_indptr_, kv_indptr_;  // [bs + 1]
  std::vector<int64_t> kv_indices_;             // [sum P_i]
  std::vector<bf16> pool_, q_, k_extend_, o_;
  std::vector<float> lse_;
  model::EncodedMask mask_;
  double kv_bytes_ = 0, flops_ = 0;
};

std::vector<int32_t> tree_parents(Rng& rng, int32_t d, bool chain) {
  std::vector<int32_t> parent(d);
  parent[0] = -1;
  for (int32_t t = 1; t < d; ++t) parent[t] = chain ? t - 1 : static_cast<int32_t>(rng.below(t));
  return parent;
}

// The full docs/spec.md §8 workloads take 18-146 GFLOP (2 (576 + 512) H D sum(P + D)) each; at the
// ~10-20 GFLOP/s two shared cores give, that is 1-15 s per iteration, so the prefix is divided by
// 16 (MLAV_BENCH_PREFIX_DIV overrides; 1 runs the full size). Sizes and trees are otherwise as
// listed. Threads of the backend: MLAV_BENCH_THREADS, else every hardware thread.
int bench_threads() {
  const char* s = std::getenv("MLAV_BENCH_THREADS");
  return s ? std::atoi(s) : 0;
}

int64_t prefix_div() {
  const char* s = std::getenv("MLAV_BENCH_PREFIX_DIV");
  return s ? std::max<int64_t>(1, std::atoll(s)) : 16;
}

void bm_workload(benchmark::State& state, Workload w) {
  const int64_t prefix = std::max<int64_t>(1, w.prefix / prefix_div());
  Rng rng{0x5eed0000ull + static_cast<uint64_t>(w.bs * 131 + w.draft)};
  std::vector<std::vector<int32_t>> parents;
  for (int32_t i = 0; i < w.bs; ++i) parents.push_back(tree_parents(rng, w.draft, w.chain));
  Launch launch(parents, std::vector<int64_t>(w.bs, prefix), w.heads, /*num_splits=*/1, rng.next());
  CpuBackend backend({.threads = bench_threads()});
  for (auto _ : state) {
    backend.run(launch.params());
    benchmark::ClobberMemory();
  }
  // Rates over real time (Google Benchmark appends "/s"): KV_GB is docs/spec.md §8's sum P_i * 1152
  // bytes, GFLOP its 2 (576 + 512) H D sum (P_i + D).
  state.counters["KV_GB"] =
      benchmark::Counter(launch.kv_bytes() / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP"] =
      benchmark::Counter(launch.flops() / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["prefix"] = static_cast<double>(prefix);
  state.counters["threads"] = backend.threads();
}

// Property-suite-sized cases, H = 8 (Kimi K2 at TP8), NSPLIT in 1..4, random trees:
//   "default": bs uniform in 1..8, D in 1..64, P in 0..4096 (the size the brief suggests);
//   "small":   bs in 1..4, D in 1..16, P in 0..512.
// Reports cases per minute (real time) for the CPU backend alone and for the CPU backend plus the
// model reference, which a property runs on every case. Case generation is not timed.
struct CaseSize {
  int32_t max_bs;
  int32_t max_draft;
  int64_t max_prefix;
};

void bm_property_cases(benchmark::State& state, CaseSize size, bool with_model) {
  constexpr int kCases = 16;
  Rng rng{0xca5e5ull};
  std::vector<std::unique_ptr<Launch>> cases;
  for (int c = 0; c < kCases; ++c) {
    const int32_t bs = 1 + static_cast<int32_t>(rng.below(size.max_bs));
    std::vector<std::vector<int32_t>> parents;
    std::vector<int64_t> prefix;
    for (int32_t i = 0; i < bs; ++i) {
      parents.push_back(
          tree_parents(rng, 1 + static_cast<int32_t>(rng.below(size.max_draft)), false));
      prefix.push_back(rng.below(size.max_prefix + 1));
    }
    cases.push_back(std::make_unique<Launch>(parents, prefix, 8,
                                             1 + static_cast<int32_t>(rng.below(4)), rng.next()));
  }
  CpuBackend backend({.threads = bench_threads()});
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    for (auto& c : cases) {
      backend.run(c->params());
      if (with_model) benchmark::DoNotOptimize(model::reference_verify(c->params()));
    }
    benchmark::ClobberMemory();
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  state.counters["cases_per_min"] =
      kCases * 60.0 * static_cast<double>(state.iterations()) / seconds;
}

}  // namespace
}  // namespace mlaverify::cpu::bench

int main(int argc, char** argv) {
  using namespace mlaverify::cpu::bench;
  const std::vector<Workload> workloads = {
      {"k2-tp8-tree16", 16, 8, 16, 8192, false}, {"v3-tp8-tree32", 8, 16, 32, 16384, false},
      {"v3-tp8-chain4", 32, 16, 4, 4096, true},  {"k2-tp8-ddtree128", 4, 8, 128, 8192, false},
      {"v3-tp1-tree8", 4, 128, 8, 4096, false},  {"long-ctx", 2, 16, 16, 65536, false},
  };
  for (const Workload& w : workloads) {
    benchmark::RegisterBenchmark(("spec8/" + w.name).c_str(), bm_workload, w)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  for (auto [label, size] : {std::pair<std::string, CaseSize>{"default", {8, 64, 4096}},
                             std::pair<std::string, CaseSize>{"small", {4, 16, 512}}}) {
    for (bool with_model : {false, true}) {
      const std::string name = "property_cases/" + label + (with_model ? "/cpu+model" : "/cpu");
      benchmark::RegisterBenchmark(name.c_str(), bm_property_cases, size, with_model)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
