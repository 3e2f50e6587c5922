// Shared by the plugin tests: a Backend wrapper that digests every output a run writes, the
// comparison of two campaigns (same verdicts per property, same digest of every run's outputs),
// and the campaign pair itself (in-process backend, then the one through the ABI).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>

#include "mlaverify/backend.h"
#include "props/campaign.h"

namespace mlaverify::plugin::testing {

// Forwards to `inner` and folds the bytes of every element the Outputs rule makes a backend
// write (o_lat[t, h, 0:512] and lse[t, h] for t < T) into a running FNV-1a digest: two backends
// with equal digests after the same campaign gave bit-identical outputs on every run.
class Recorder final : public Backend {
 public:
  explicit Recorder(Backend& inner) : inner_(inner) {}
  std::string name() const override { return inner_.name(); }
  Capabilities capabilities() const override { return inner_.capabilities(); }
  Support can_implement(const VerifyParams& p) const override { return inner_.can_implement(p); }
  size_t workspace_bytes(const VerifyParams& p) const override { return inner_.workspace_bytes(p); }
  void run(const VerifyParams& p) override {
    inner_.run(p);
    ++runs;
    const int64_t T = p.qo_indptr[p.batch_size];
    const int eb = dtype_bytes(p.o_dtype);
    for (int64_t t = 0; t < T; ++t) {
      for (int32_t h = 0; h < p.num_heads; ++h) {
        fold(static_cast<const unsigned char*>(p.o_lat) +
                 (t * p.o_token_stride + h * p.o_head_stride) * eb,
             static_cast<size_t>(kLatentDim) * eb);
        if (p.lse != nullptr) fold(p.lse + t * p.num_heads + h, sizeof(float));
      }
    }
  }
  uint64_t digest = 14695981039346656037ull;
  int64_t runs = 0;

 private:
  void fold(const void* data, size_t n) {
    const auto* b = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) {
      digest ^= b[i];
      digest *= 1099511628211ull;
    }
  }
  Backend& inner_;
};

// Same seed, same properties: equal counts per property, equal failures, equal output digests.
inline void expect_same_campaign(const props::FuzzReport& a, const Recorder& ra,
                                 const props::FuzzReport& b, const Recorder& rb) {
  ASSERT_EQ(a.stats.size(), b.stats.size());
  for (size_t i = 0; i < a.stats.size(); ++i) {
    SCOPED_TRACE(a.stats[i].property);
    EXPECT_EQ(a.stats[i].property, b.stats[i].property);
    EXPECT_EQ(a.stats[i].passed, b.stats[i].passed);
    EXPECT_EQ(a.stats[i].failed, b.stats[i].failed);
    EXPECT_EQ(a.stats[i].skipped, b.stats[i].skipped);
  }
  ASSERT_EQ(a.failures.size(), b.failures.size());
  for (size_t i = 0; i < a.failures.size(); ++i) {
    EXPECT_EQ(a.failures[i].property, b.failures[i].property);
    EXPECT_EQ(a.failures[i].case_index, b.failures[i].case_index);
  }
  EXPECT_EQ(a.case_digest, b.case_digest);
  EXPECT_EQ(ra.runs, rb.runs);
  EXPECT_EQ(ra.digest, rb.digest) << "outputs differ on some run";
}

// The two reports of run_same_campaign, what the plugin side's Recorder saw, and the wall time of
// each campaign (the tests print the cost of going through the ABI).
struct CampaignPair {
  props::FuzzReport in_process;
  props::FuzzReport plugin;
  int64_t plugin_runs = 0;
  uint64_t plugin_digest = 0;
  double in_process_s = 0;
  double plugin_s = 0;
};

// Runs the campaign `o` on `in_process`, then on `plugin`, each through a Recorder, and checks
// they are the same campaign (expect_same_campaign). What else a test holds the plugin's report
// to (no failure, every property ran) it checks on the result.
inline CampaignPair run_same_campaign(Backend& in_process, Backend& plugin,
                                      const props::CampaignOptions& o) {
  Recorder a(in_process), b(plugin);
  CampaignPair r;
  const auto t0 = std::chrono::steady_clock::now();
  r.in_process = props::run_campaign(a, o);
  const auto t1 = std::chrono::steady_clock::now();
  r.plugin = props::run_campaign(b, o);
  const auto t2 = std::chrono::steady_clock::now();
  expect_same_campaign(r.in_process, a, r.plugin, b);
  r.plugin_runs = b.runs;
  r.plugin_digest = b.digest;
  r.in_process_s = std::chrono::duration<double>(t1 - t0).count();
  r.plugin_s = std::chrono::duration<double>(t2 - t1).count();
  return r;
}

}  // namespace mlaverify::plugin::testing
