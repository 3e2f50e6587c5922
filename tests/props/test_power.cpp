// The power of vs_model's probable bound (props/compare.h): no false alarm on correct backends
// (the margin printed), and the numerical mutants a worst-case bound misses (a dropped key, a 1%
// scale, one wrong element) caught in nearly every campaign of 100 cases. CI runs a small version;
// MLAV_POWER_SWEEP=1 (scripts/power_sweep.sh) the full measurement.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "dump/dump.h"
#include "model/model_backend.h"
#include "props/campaign.h"
#include "props/generators.h"
#include "props/mutants.h"

namespace mlaverify::props {
namespace {

// A backend that declares a foreign kernel's default arithmetic (Capabilities{}: tensor-core
// accumulation 2^-23, up to 64 partials, num_splits not honoured) whatever inner declares: the
// looser bound a kernel brought from outside is held to.
// With writes_lse false the lse is not compared: o alone must show the fault.
class DeclaresDefaults final : public Backend {
 public:
  explicit DeclaresDefaults(BackendPtr inner, bool writes_lse = true)
      : inner_(std::move(inner)), writes_lse_(writes_lse) {}
  std::string name() const override {
    return inner_->name() + (writes_lse_ ? "[default numerics]" : "[default numerics, no lse]");
  }
  Capabilities capabilities() const override {
    Capabilities c;
    c.writes_lse = writes_lse_;
    return c;
  }
  Support can_implement(const VerifyParams& p) const override { return inner_->can_implement(p); }
  size_t workspace_bytes(const VerifyParams& p) const override {
    return inner_->workspace_bytes(p);
  }
  void run(const VerifyParams& p) override { inner_->run(p); }

 private:
  BackendPtr inner_;
  bool writes_lse_;
};

int32_t env_int(const char* name, int32_t fallback) {
  const char* s = std::getenv(name);
  return s && *s ? std::atoi(s) : fallback;
}

// Case n of the campaign with `seed`, exactly as run_campaign draws it.
std::vector<Case> campaign_cases(uint64_t seed, int32_t cases) {
  rc::Gen<Case> gen = gen_case(GenOptions{});
  rc::Random random(seed);
  std::vector<Case> out;
  for (int32_t n = 0; n < cases; ++n) {
    rc::Random stream = random.split();
    out.push_back(gen(stream, rc::kNominalSize).value());
  }
  return out;
}

struct Margin {
  int32_t cases = 0, compared = 0, failed = 0;
  double worst_o = 0, worst_lse = 0, worst_hard = 0;
  std::string worst_case;
};

// vs_model and chain_causal (the two properties compare_to_model serves) over `cases` cases.
Margin margin(Backend& b, uint64_t seed, int32_t cases) {
  Margin m;
  for (const Case& c : campaign_cases(seed, cases)) {
    ++m.cases;
    for (auto fn : {&check_vs_model, &check_chain_causal}) {
      PropertyResult r = fn(b, c);
      if (r.skipped) continue;
      if (!r.ok) {
        ++m.failed;
        ADD_FAILURE() << b.name() << " seed " << seed << ": " << scenarios::summary(c) << "\n  "
                      << r.property << ": " << r.detail;
      }
      if (!r.comparison) continue;
      ++m.compared;
      const Comparison& k = *r.comparison;
      if (k.worst_probable_ratio > m.worst_o) {
        m.worst_o = k.worst_probable_ratio;
        m.worst_case = scenarios::summary(c);
      }
      m.worst_lse = std::max(m.worst_lse, k.worst_lse_probable_ratio);
      m.worst_hard = std::max(m.worst_hard, k.worst_hard_ratio);
    }
  }
  return m;
}

void print_margin(const std::string& name, uint64_t seed, const Margin& m) {
  std::printf(
      "%-28s seed %-10llu %3d cases, %3d comparisons, %d failed; worst err/probable o %.3f, "
      "lse %.3f; worst err/worst-case %.4f\n    (worst o at %s)\n",
      name.c_str(), static_cast<unsigned long long>(seed), m.cases, m.compared, m.failed,
      m.worst_o, m.worst_lse, m.worst_hard, m.worst_case.c_str());
}

std::vector<std::pair<std::string, BackendPtr>> correct_backends() {
  return {{"model", std::make_shared<model::ModelBackend>()},
          {"cpu", cpu::make_cpu_backend()},
          {"cpu_folded", cpu::make_cpu_backend({.folded = true})},
          {"cpu[default numerics]", std::make_shared<DeclaresDefaults>(cpu::make_cpu_backend())}};
}

// How one mutant fares in campaigns of `cases` cases: caught (the first failing case, and whether
// the worst-case bound alone saw it) or not.
struct Catch {
  int32_t campaigns = 0, caught = 0, by_hard = 0;
  std::vector<int32_t> first;  // 1-based case of the first catch, per campaign (0: none)
  // Per case, over every case of every campaign (every_case): the cases the mutant touches at
  // all (dropped_key_p256: a request with P >= 256; the others: every case), and those where it
  // is visible: it moves some output by at least twice the correct backend's own largest error
  // on that case (o, or the lse when declared). Each with how many were caught, and how many of
  // those the worst-case bound alone caught.
  int32_t touched = 0, touched_caught = 0, touched_hard = 0;
  int32_t visible = 0, visible_caught = 0, visible_hard = 0;
};

bool touches(Mutant m, const Case& c) {
  if (m != Mutant::DroppedKeyP256) return true;
  for (const auto& r : c.requests) {
    if (r.prefix_len >= 256) return true;
  }
  return false;
}

// How a mutant declares itself: the CPU's numerics (forwarded), a foreign kernel's defaults, or
// the defaults without lse (o alone compared).
enum class Decl { Cpu, Defaults, DefaultsNoLse };
const char* decl_name(Decl d) {
  return d == Decl::Cpu ? "cpu numerics" : d == Decl::Defaults ? "default numerics" : "default, no lse";
}

// max |x - y| over the real requests' o (and lse when `lse`), x and y backend outputs or the model.
template <class X, class Y>
double max_diff(model::VerifyBatch& batch, const X& x, const Y& y, bool lse) {
  double worst = 0;
  for (int32_t i = 0; i < batch.real_batch_size(); ++i) {
    RequestView rv = request_view(batch, i);
    for (int64_t t = rv.q_begin; t < rv.q_begin + rv.draft_nodes; ++t) {
      for (int32_t h = 0; h < batch.params().num_heads; ++h) {
        if (lse) {
          const double d = std::fabs(x(t, h, -1) - y(t, h, -1));
          if (std::isfinite(d)) worst = std::max(worst, d);
          continue;
        }
        for (int32_t k = 0; k < kLatentDim; ++k) worst = std::max(worst, std::fabs(x(t, h, k) - y(t, h, k)));
      }
    }
  }
  return worst;
}

Catch catch_rate(Mutant m, Decl decl, uint64_t seed0, int32_t seeds, int32_t cases,
                 bool every_case) {
  BackendPtr correct = cpu::make_cpu_backend();
  BackendPtr b = make_mutant(m, cpu::make_cpu_backend());
  if (decl != Decl::Cpu) b = std::make_shared<DeclaresDefaults>(b, decl == Decl::Defaults);
  const Capabilities declared = b->capabilities();
  Catch k;
  for (int32_t s = 0; s < seeds; ++s) {
    const uint64_t seed = seed0 + static_cast<uint64_t>(s);
    ++k.campaigns;
    int32_t first = 0;
    bool hard = false;
    int32_t n = 0;
    for (const Case& c : campaign_cases(seed, cases)) {
      ++n;
      if (first && !every_case) break;
      model::VerifyBatch batch = build_batch(c);
      if (!b->can_implement(batch.params())) continue;
      const model::RefResult ref = model::reference_verify(batch.params());
      RunOutput out;
      try {
        out = run_backend(*b, batch);
      } catch (const std::exception& e) {  // a crash on a valid case: vs_model would fail it
        ADD_FAILURE() << "mutant threw on a valid case: " << e.what();
        continue;
      }
      const Comparison cmp = compare_to_model(batch, out, ref, declared);
      const bool caught = !cmp.pass;
      const bool by_hard = cmp.violations > 0;
      if (caught && !first) {
        first = n;
        hard = by_hard;
      }
      if (!every_case) continue;
      const RunOutput good = run_backend(*correct, batch);
      auto at = [](const RunOutput& o) {
        return [&o](int64_t t, int32_t h, int32_t k) -> double {
          return k < 0 ? o.lse_at(t, h) : o.o_at(t, h, k);
        };
      };
      auto model_at = [&ref](int64_t t, int32_t h, int32_t k) -> double {
        return k < 0 ? ref.lse_at(t, h) : ref.o(t, h, k);
      };
      bool vis = false;
      for (bool lse : {false, true}) {
        if (lse && !declared.writes_lse) continue;
        const double own = max_diff(batch, at(good), model_at, lse);
        const double moved = max_diff(batch, at(out), at(good), lse);
        vis = vis || moved >= 2.0 * own;
      }
      const bool touched = touches(m, c);
      if (touched) {
        ++k.touched;
        k.touched_caught += caught ? 1 : 0;
        k.touched_hard += by_hard ? 1 : 0;
      }
      if (touched && vis) {
        ++k.visible;
        k.visible_caught += caught ? 1 : 0;
        k.visible_hard += by_hard ? 1 : 0;
        if (!caught && std::getenv("MLAV_POWER_VERBOSE")) {
          std::printf("  missed a visible fault (seed %llu case %d): %s\n    %s\n",
                      static_cast<unsigned long long>(seed), n, scenarios::summary(c).c_str(),
                      cmp.to_string().c_str());
        }
      }
    }
    k.first.push_back(first);
    if (first) {
      ++k.caught;
      k.by_hard += hard ? 1 : 0;
    }
  }
  return k;
}

void print_catch(Mutant m, Decl decl, const Catch& k, bool every_case) {
  std::printf("%-18s %-17s caught in %2d of %2d campaigns (%d by the worst-case bound alone)",
              std::string(mutant_info(m).name).c_str(),
              decl_name(decl), k.caught, k.campaigns, k.by_hard);
  if (every_case) {
    std::printf(
        "\n    per case: touched %d, caught %d (worst-case bound alone %d); visible %d, caught %d "
        "(worst-case bound alone %d)",
        k.touched, k.touched_caught, k.touched_hard, k.visible, k.visible_caught, k.visible_hard);
  }
  std::printf("; first catch at case:");
  for (int32_t f : k.first) std::printf(" %d", f);
  std::printf("\n");
}

const Mutant kNumerical[] = {Mutant::DroppedKeyP256, Mutant::OScale1Percent,
                             Mutant::OneWrongElement};

// No false alarm, and the margin: the worst error / probable bound over the cases of one seed.
TEST(Power, CorrectBackendsInsideProbableBound) {
  const uint64_t seed = seed_from_env(20261129);
  const int32_t cases = env_int("MLAV_POWER_CASES", 12);
  for (auto& [name, b] : correct_backends()) {
    Margin m = margin(*b, seed, cases);
    print_margin(name, seed, m);
    EXPECT_EQ(m.failed, 0);
    EXPECT_GT(m.compared, 0);
  }
}

// Each numerical mutant caught in a campaign of 100 cases for a few seeds (campaigns stop at the
// first catch, so this is cheap); the full measurement is Power.Sweep.
TEST(Power, NumericalMutantsCaught) {
  const uint64_t seed = seed_from_env(20261129);
  for (Mutant m : kNumerical) {
    for (Decl decl : {Decl::Cpu, Decl::Defaults, Decl::DefaultsNoLse}) {
      Catch k = catch_rate(m, decl, seed, 3, 100, false);
      print_catch(m, decl, k, false);
      EXPECT_EQ(k.caught, k.campaigns) << mutant_info(m).name;
    }
  }
}

// The measurement (scripts/power_sweep.sh): MLAV_POWER_SEEDS campaigns of 100 cases per mutant
// and declaration, every case checked (per-case catch rate over relevant cases), and the
// correct backends' margins over the same seeds.
TEST(Power, Sweep) {
  if (!std::getenv("MLAV_POWER_SWEEP")) GTEST_SKIP() << "set MLAV_POWER_SWEEP=1";
  const uint64_t seed = seed_from_env(20261129);
  const int32_t seeds = env_int("MLAV_POWER_SEEDS", 20);
  const int32_t cases = env_int("MLAV_POWER_CASES", 100);
  const bool every = env_int("MLAV_POWER_EVERY_CASE", 1) != 0;
  const char* only = std::getenv("MLAV_POWER_ONLY");  // one mutant's name
  if (env_int("MLAV_POWER_MUTANTS", 1)) {
    for (Mutant m : kNumerical) {
      if (only && *only && mutant_info(m).name != only) continue;
      for (Decl decl : {Decl::Cpu, Decl::Defaults, Decl::DefaultsNoLse}) {
        Catch k = catch_rate(m, decl, seed, seeds, cases, every);
        print_catch(m, decl, k, every);
        std::fflush(stdout);
      }
    }
  }
  if (env_int("MLAV_POWER_CORRECT", 1)) {
    for (auto& [name, b] : correct_backends()) {
      for (int32_t s = 0; s < seeds; ++s) {
        Margin m = margin(*b, seed + static_cast<uint64_t>(s), cases);
        print_margin(name, seed + static_cast<uint64_t>(s), m);
        std::fflush(stdout);
        EXPECT_EQ(m.failed, 0);
      }
    }
  }
}

// The statistical part alone: the CPU backend writing o in fp32 (the output rounding drops to
// 2^-24, so what remains of each element's error is the arithmetic the probable bound models),
// element by element against probable_bound over a campaign's cases. Prints the margin.
TEST(Power, F32OutputInsideProbableBound) {
  const uint64_t seed = seed_from_env(20261129);
  const int32_t cases = env_int("MLAV_POWER_CASES", 12);
  for (bool defaults : {false, true}) {
    auto cpu = cpu::make_cpu_backend();
    const Capabilities declared = defaults ? Capabilities{} : cpu->capabilities();
    double worst = 0, worst_lse = 0;
    int64_t over = 0, compared = 0;
    std::string worst_case;
    for (const Case& c : campaign_cases(seed, cases)) {
      model::VerifyBatch batch = build_batch(c);
      VerifyParams p = batch.params();
      if (!cpu->can_implement(p)) continue;
      const int32_t H = p.num_heads;
      std::vector<float> o(static_cast<size_t>(p.max_total_q) * H * kLatentDim);  // [T, H, 512]
      p.o_lat = o.data();
      p.o_dtype = DType::F32;
      p.o_token_stride = int64_t{H} * kLatentDim;  // this buffer is dense, whatever the case's
      p.o_head_stride = kLatentDim;
      batch.poison_outputs();
      cpu->run(p);
      const model::RefResult ref = model::reference_verify(p);
      const int32_t partials = declared_partials(declared, p);
      for (int32_t i = 0; i < batch.real_batch_size(); ++i) {
        const ProbableBound pb = probable_bound(p, i, declared.numerics, partials);
        for (int32_t q = 0; q < pb.draft_nodes; ++q) {
          const int64_t t = pb.q_begin + q;
          for (int32_t h = 0; h < H; ++h) {
            for (int32_t k = 0; k < kLatentDim; ++k) {
              const double r = ref.o(t, h, k);
              const double got = o[(static_cast<size_t>(t) * H + h) * kLatentDim + k];
              const double bound = pb.at(q, h, k) + kF32Unit * std::fabs(r);
              const double ratio = std::fabs(got - r) / bound;
              if (ratio > worst) {
                worst = ratio;
                worst_case = scenarios::summary(c);
              }
              over += ratio > 1 ? 1 : 0;
              ++compared;
            }
            const double e = std::fabs(batch.lse()[static_cast<size_t>(t) * H + h] - ref.lse_at(t, h));
            if (std::isfinite(pb.lse_at(q, h))) worst_lse = std::max(worst_lse, e / pb.lse_at(q, h));
          }
        }
      }
    }
    std::printf("cpu, f32 o, %s: %lld elements, %lld over; worst err/probable o %.3f, lse %.3f\n"
                "    (worst o at %s)\n",
                defaults ? "default numerics" : "cpu numerics", static_cast<long long>(compared),
                static_cast<long long>(over), worst, worst_lse, worst_case.c_str());
    EXPECT_EQ(over, 0);
    EXPECT_LT(worst_lse, 1.0);
  }
}

// The two shipped SGLang dumps (its Triton kernel's o and lse) against the probable bound of a
// foreign kernel's default declaration: inside, and the margin printed.
TEST(Power, ShippedDumpsInsideProbableBound) {
  for (const char* file : {"k2_eagle16.safetensors", "k2_padded.safetensors"}) {
    dump::ServerDump d = dump::ServerDump::load(std::string(MLAV_DUMPS_DIR) + "/" + file);
    const VerifyParams p = d.params();
    const model::RefResult ref = model::reference_verify(p);
    const Capabilities declared;  // a foreign kernel's defaults
    double worst = 0, worst_lse = 0;
    int64_t over = 0, compared = 0;
    for (int32_t i = 0; i < d.real_batch_size(); ++i) {
      const ProbableBound pb = probable_bound(p, i, declared.numerics, 64);
      for (int32_t q = 0; q < pb.draft_nodes; ++q) {
        const int64_t t = pb.q_begin + q;
        for (int32_t h = 0; h < pb.heads; ++h) {
          for (int32_t k = 0; k < kLatentDim; ++k) {
            const double r = ref.o(t, h, k);
            const double got = d.server_o()[(static_cast<size_t>(t) * pb.heads + h) * kLatentDim + k];
            const double bound = pb.at(q, h, k) + kBf16Unit * std::fabs(r);
            const double ratio = std::fabs(got - r) / bound;
            worst = std::max(worst, ratio);
            over += ratio > 1 ? 1 : 0;
            ++compared;
          }
          if (d.has_lse()) {
            const double e = std::fabs(d.server_lse()[static_cast<size_t>(t) * pb.heads + h] -
                                       ref.lse_at(t, h));
            worst_lse = std::max(worst_lse, e / pb.lse_at(q, h));
          }
        }
      }
    }
    std::printf("%s: %lld elements, worst err/probable o %.3f, lse %s (%lld over)\n", file,
                static_cast<long long>(compared), worst,
                d.has_lse() ? std::to_string(worst_lse).c_str() : "not in the dump",
                static_cast<long long>(over));
    EXPECT_EQ(over, 0) << file;
    EXPECT_LT(worst_lse, 1.0) << file;
  }
}

}  // namespace
}  // namespace mlaverify::props
