// The suite on kernels that are not ours: adapters shaped like the kernels users bring (SGLang's
// Triton verify kernel: FullMask only, latent-first bf16, no lse, draft KV in cache slots; a
// kernel with an atomic split merge), each over the CPU backend's arithmetic. What the contract
// promises: every property runs on every case a backend declares it takes, lse is optional,
// determinism is declared, and a write where no backend may write is caught.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/cpu_backend.h"
#include "mlaverify/bf16.h"
#include "mlaverify/error.h"
#include "model/validate.h"
#include "props/campaign.h"

namespace mlaverify::props {
namespace {

// An adapter around the CPU backend that declares `caps` and enforces it as a foreign kernel's
// own checks would, writing lse only if it declares it.
class Adapter : public Backend {
 public:
  explicit Adapter(Capabilities caps) : caps_(caps), inner_(cpu::make_cpu_backend()) {}
  std::string name() const override { return "adapter"; }
  Capabilities capabilities() const override { return caps_; }
  Support can_implement(const VerifyParams& p) const override {
    if (Support s = caps_.admits(p); !s) return s;
    return inner_->can_implement(p);
  }
  size_t workspace_bytes(const VerifyParams& p) const override {
    return inner_->workspace_bytes(p);
  }
  void run(const VerifyParams& given) override {
    if (Support s = can_implement(given); !s) throw Unsupported(s.reason);
    compute(given);
    after(given);
  }

 protected:
  // The kernel proper: the CPU backend's arithmetic, lse withheld unless declared.
  virtual void compute(const VerifyParams& given) {
    VerifyParams p = given;
    if (!caps_.writes_lse) {
      // The kernel has no lse output: the caller's buffer stays as it was.
      scratch_lse_.assign(static_cast<size_t>(p.max_total_q) * p.num_heads, 0.f);
      p.lse = scratch_lse_.data();
    }
    inner_->run(p);
  }
  virtual void after(const VerifyParams&) {}
  Capabilities caps_;

 private:
  BackendPtr inner_;
  std::vector<float> scratch_lse_;
};

Capabilities sglang_caps() {
  Capabilities k;
  k.mask_formats = bit(MaskFormat::FullMask);
  k.mask_indptr_conventions = bit(IndptrConvention::Csr);
  k.kv_dtypes = k.q_dtypes = k.o_dtypes = bit(DType::BF16);
  k.kv_layouts = bit(LayoutKind::LatentFirst);
  k.draft_sources = bit(DraftKvSource::CacheSlots);
  k.kv_indexings = bit(KvIndexing::TokenI64);
  k.padded_kv_rows = k.strided_q = k.strided_o = k.padded_extend_rows = false;
  k.writes_lse = false;
  return k;
}

// The SGLang-shaped adapter: before capabilities, 5 of 60 cases ran and two properties
// never ran. Now every property runs on every case, and none is skipped.
TEST(Foreign, SglangShapedAdapterGetsEveryPropertyOnEveryCase) {
  Adapter sglang(sglang_caps());
  CampaignOptions o;
  o.seed = seed_from_env(20261201);
  o.cases = cases_from_env(40);
  const FuzzReport r = run_campaign(sglang, o);
  EXPECT_TRUE(r.ok()) << r.to_string();
  EXPECT_EQ(r.cases_run, o.cases);
  for (const PropertyStats& s : r.stats) {
    EXPECT_EQ(s.passed, r.cases_run) << s.property << ": " << s.skipped << " skipped ("
                                     << s.skip_reason << ")";
  }
  // Every value of every field it takes is drawn by this campaign's generator (the rarer edges are
  // the generator tests' job: Generators.CoverageHasNoMissingValue). The claim is made over 400
  // draws of the same generator, not over the 40 cases run: the least likely field value, a page
  // size of 16 among {1 x3, 16, 32, 64}, has probability 1/6, and 40 cases miss one of the ~5
  // values that rare with probability ~5 (5/6)^40 = 3e-3 (fresh seed 3695714861 drew no
  // defragmented slot order, p = 1/5, in 40). Over 400 draws, 5 (5/6)^400 < 1e-31. The dry draw
  // is the campaign's own: its first 40 cases give the run's coverage table exactly.
  CampaignOptions dry = o;
  EXPECT_EQ(campaign_coverage(sglang, dry).to_string(), r.coverage.to_string());
  dry.cases = 400;
  const Coverage wide = campaign_coverage(sglang, dry);
  for (const std::string& m : wide.missing()) {
    EXPECT_EQ(m.rfind("edge=", 0), 0u) << m << " never generated\n" << wide.to_string();
  }
}

// lse is optional: the adapter writing no lse is not failed for it, and a backend that claims to
// write lse but does not is caught (its lse stays NaN-poisoned).
TEST(Foreign, LseIsCheckedOnlyWhenDeclared) {
  Capabilities lies = sglang_caps();
  lies.writes_lse = true;  // declared, but run() still redirects nothing: see below
  class ClaimsLse final : public Adapter {
   public:
    explicit ClaimsLse(Capabilities k) : Adapter(k) {}
    void compute(const VerifyParams& given) override {
      VerifyParams p = given;
      std::vector<float> sink(static_cast<size_t>(p.max_total_q) * p.num_heads);
      p.lse = sink.data();  // the bug: lse never reaches the caller
      Adapter::compute(p);
    }
  } liar(lies);
  CampaignOptions o;
  o.seed = seed_from_env(20261201);
  o.cases = 5;
  o.properties = {"vs_model"};
  const FuzzReport r = run_campaign(liar, o);
  ASSERT_EQ(r.failures.size(), 1u) << r.to_string();
  EXPECT_NE(r.failures[0].detail.find("non-finite"), std::string::npos) << r.failures[0].detail;
}

// A kernel whose split merge is atomic: the last bits of o change from run to run. It rounds a
// fp32 result perturbed by 2^-20 relative (the size of a reordered fp32 merge) to bf16, so
// different runs differ in the last bf16 ulp near rounding boundaries.
class AtomicMerge final : public Adapter {
 public:
  explicit AtomicMerge(Capabilities k) : Adapter(k) {}
  void compute(const VerifyParams& given) override {
    VerifyParams p = given;
    const int64_t n = p.max_total_q * p.num_heads * kLatentDim;
    wide_.assign(static_cast<size_t>(n), 0.f);
    p.o_lat = wide_.data();
    p.o_dtype = DType::F32;
    p.o_token_stride = int64_t{p.num_heads} * kLatentDim;
    p.o_head_stride = kLatentDim;
    Adapter::compute(p);
    ++runs_;
    auto* out = static_cast<bf16*>(given.o_lat);
    const int64_t t_end = given.qo_indptr[given.batch_size];
    for (int64_t k = 0; k < t_end * p.num_heads * kLatentDim; ++k) {
      uint64_t z = (static_cast<uint64_t>(k) + 1) * 0x9e3779b97f4a7c15ull ^ (runs_ * 0xbf58476dull);
      z ^= z >> 29;
      const float jitter = 1.f + static_cast<float>((z & 3) - 1.5) * 0x1.0p-20f;
      out[k] = float_to_bf16(wide_[static_cast<size_t>(k)] * jitter);
    }
  }

 private:
  std::vector<float> wide_;
  uint64_t runs_ = 0;
};

Capabilities atomic_caps(bool deterministic) {
  Capabilities k;
  k.o_dtypes = bit(DType::BF16);
  k.strided_o = false;
  k.deterministic = deterministic;
  return k;
}

// Declared non-deterministic: every law holds within its derived bound, the campaign is green.
// The same kernel declared deterministic fails the bit laws: the declaration is what decides.
TEST(Foreign, DeterminismIsDeclared) {
  CampaignOptions o;
  o.seed = seed_from_env(20261201);
  o.cases = cases_from_env(40) / 2;
  o.properties = {"vs_model",           "draft_source",   "slot_permutation", "defrag",
                  "batch_independence", "representation", "serving_defrag"};
  AtomicMerge honest(atomic_caps(false));
  const FuzzReport green = run_campaign(honest, o);
  EXPECT_TRUE(green.ok()) << green.to_string();

  AtomicMerge claims(atomic_caps(true));
  const FuzzReport red = run_campaign(claims, o);
  EXPECT_FALSE(red.failures.empty()) << red.to_string();
  for (const Failure& f : red.failures) {
    EXPECT_NE(f.property, "vs_model") << "the values are right; only the bits differ";
    EXPECT_NE(f.detail.find("(bits)"), std::string::npos) << f.detail;
  }
}

// A kernel that writes where no backend may (backend.h): it zeroes the head-stride gap after
// the last real token's last head (a 576-wide store of a 512-wide row) and, when the buffer has
// room, the first element of the row past T.
class Overrun final : public Adapter {
 public:
  Overrun() : Adapter(Capabilities{}) {}
  void after(const VerifyParams& p) override {
    const int64_t t_end = p.qo_indptr[p.batch_size];
    const int64_t last = (t_end - 1) * p.o_token_stride + (p.num_heads - 1) * p.o_head_stride;
    const int eb = dtype_bytes(p.o_dtype);
    std::memset(static_cast<std::byte*>(p.o_lat) + (last + kLatentDim) * eb, 0,
                static_cast<size_t>(p.o_head_stride - kLatentDim) * eb);
    if (t_end < p.max_total_q) {
      std::memset(static_cast<std::byte*>(p.o_lat) + t_end * p.o_token_stride * eb, 0, eb);
    }
  }
};

// The output rule (backend.h): nothing past T and nothing in a head-stride gap. A kernel that
// writes its last row one row too far, or zero-fills whole padded rows, is caught by every
// property that runs the backend (before f3f8479 split_invariance, chain_causal, draft_source's
// two-source form, batch_independence and representation compared their runs without looking).
TEST(Foreign, WritesPastTheOutputAreCaught) {
  for (const char* property : {"vs_model", "split_invariance", "chain_causal", "draft_source",
                               "slot_permutation", "defrag", "serving_defrag",
                               "batch_independence", "representation"}) {
    Overrun overrun;
    CampaignOptions o;
    o.seed = seed_from_env(20261201);
    o.cases = 30;
    o.properties = {property};
    const FuzzReport r = run_campaign(overrun, o);
    ASSERT_EQ(r.failures.size(), 1u) << property << "\n" << r.to_string();
    EXPECT_NE(r.failures[0].detail.find("no backend may write"), std::string::npos)
        << property << ": " << r.failures[0].detail;
    // The shrunk case keeps somewhere to overrun into, except for representation, whose second
    // run presents the case differently (the gap or tail can be in that presentation alone).
    const Case& s = r.failures[0].shrunk.spec;
    if (std::string(property) != "representation") {
      EXPECT_TRUE(s.tail_rows > 0 || s.o_head_stride > kLatentDim)
          << property << ": " << scenarios::summary(s);
    }
  }
}

// The one-source form of draft_source is proven by the bug it exists for: a cache-slots kernel
// that assumes each request's draft slots follow its last prefix slot (true of a fresh
// contiguous allocation, false once slots move) passes vs_model on contiguous batches, and
// draft_source catches it by moving the draft slots.
TEST(Foreign, OneSourceDraftCheckCatchesContiguousDraftAssumption) {
  Capabilities caps;
  caps.draft_sources = bit(DraftKvSource::CacheSlots);
  caps.kv_indexings = bit(KvIndexing::TokenI64);
  class AssumesContiguousDraft final : public Adapter {
   public:
    explicit AssumesContiguousDraft(Capabilities k) : Adapter(k) {}
    void compute(const VerifyParams& given) override {
      VerifyParams p = given;
      indices_.assign(p.kv_indices, p.kv_indices + p.kv_indices_len);
      for (int32_t i = 0; i < p.batch_size; ++i) {
        const RequestExtent e = request_extent(p, i);
        if (e.prefix_len == 0) continue;
        const int64_t last = indices_[static_cast<size_t>(e.kv_begin + e.prefix_len - 1)];
        for (int32_t t = 0; t < e.draft_nodes; ++t) {
          const int64_t guess = last + 1 + t;  // the bug
          if (guess < p.pool_slots) {
            indices_[static_cast<size_t>(e.kv_begin + e.prefix_len + t)] = guess;
          }
        }
      }
      p.kv_indices = indices_.data();
      Adapter::compute(p);
    }

   private:
    std::vector<int64_t> indices_;
  } buggy(caps);
  CampaignOptions o;
  o.seed = seed_from_env(20261201);
  o.cases = 30;
  o.properties = {"draft_source"};
  const FuzzReport r = run_campaign(buggy, o);
  ASSERT_EQ(r.failures.size(), 1u) << r.to_string();
  EXPECT_NE(r.failures[0].detail.find("moving the draft slots"), std::string::npos)
      << r.failures[0].detail;
  // The bug only touches a request with a prefix, so the shrunk case keeps one; it need not be
  // request 0 (the shrinker may keep neighbours whose slots put the guessed slot inside the pool:
  // seed 3695714861 shrinks to P=[0,289,0]).
  const auto& shrunk = r.failures[0].shrunk.spec.requests;
  EXPECT_TRUE(std::any_of(shrunk.begin(), shrunk.end(), [](const scenarios::RequestDesc& q) {
    return q.prefix_len > 0 && !q.parents.empty();
  })) << scenarios::summary(r.failures[0].shrunk.spec);
}

// serving_defrag presents its launches as the case says (q dtype and layout, o dtype and head
// stride, k_extend rows, kv indexing, rows past T), as every other property does. Before, it
// always handed over bf16 dense q and o, int64 ids and no rows past T, so a kernel declaring only
// other presentations had the property skipped on every case, and a kernel wrong under another
// presentation passed it. These three tests fail on that version (props/serving_case.cpp before
// model::Presenter): the first skips all 20 cases, the other two find nothing.
TEST(Foreign, ServingDefragRunsUnderTheDeclaredPresentation) {
  Capabilities caps;
  caps.kv_indexings = bit(KvIndexing::TokenI32);
  caps.q_dtypes = bit(DType::F32);
  caps.o_dtypes = bit(DType::F32);
  Adapter narrow(caps);
  CampaignOptions o;
  o.seed = seed_from_env(20261201);
  o.cases = 20;
  o.properties = {"serving_defrag"};
  const FuzzReport r = run_campaign(narrow, o);
  EXPECT_TRUE(r.ok()) << r.to_string();
  ASSERT_EQ(r.stats.size(), 1u);
  EXPECT_EQ(r.stats[0].passed, r.cases_run) << r.stats[0].skip_reason;
}

// A page-table kernel that assumes each request's pages are consecutive: it reads the first page
// of the row and walks on from there. True of a fresh or a compacted allocation, false among a
// server's churn, so serving_defrag sees the outputs change when model::compact makes the
// assumption true. Under int64 or int32 ids it is correct.
TEST(Foreign, ServingDefragCatchesPagesAssumedConsecutive) {
  class AssumesConsecutivePages final : public Adapter {
   public:
    AssumesConsecutivePages() : Adapter(Capabilities{}) {}
    void compute(const VerifyParams& given) override {
      if (given.kv_indexing != KvIndexing::PageTable) return Adapter::compute(given);
      VerifyParams p = model::with_token_indices(given, indptr_, indices_);
      for (int32_t i = 0; i < p.batch_size; ++i) {
        const int64_t begin = indptr_[static_cast<size_t>(i)];
        const int64_t len = indptr_[static_cast<size_t>(i) + 1] - begin;
        if (len == 0) continue;
        const int64_t first =
            int64_t{given.block_table[int64_t{i} * given.block_table_stride]} * given.page_size;
        for (int64_t k = 0; k < len; ++k) {
          const int64_t guess = first + k;  // the bug
          if (guess < p.pool_slots) indices_[static_cast<size_t>(begin + k)] = guess;
        }
      }
      Adapter::compute(p);
    }

   private:
    std::vector<int32_t> indptr_;
    std::vector<int64_t> indices_;
  } buggy;
  CampaignOptions o;
  o.seed = seed_from_env(20261201);
  o.cases = 100;
  o.properties = {"serving_defrag"};
  const FuzzReport r = run_campaign(buggy, o);
  ASSERT_EQ(r.failures.size(), 1u) << r.to_string();
  EXPECT_NE(r.failures[0].detail.find("before vs after model::compact"), std::string::npos)
      << r.failures[0].detail;
  EXPECT_EQ(r.failures[0].shrunk.spec.kv_indexing, KvIndexing::PageTable);
}

}  // namespace
}  // namespace mlaverify::props
