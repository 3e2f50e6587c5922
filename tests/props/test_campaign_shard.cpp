// Sharding laws of run_campaign: for every N, the N shards of a campaign run pairwise disjoint sets
// of cases whose union is exactly the unsharded campaign's cases (same index, same case), and the
// shards' digests and per-property counts add up to the unsharded run's.
#include <gtest/gtest.h>

#include <map>

#include "cpu/cpu_backend.h"
#include "mlaverify/error.h"
#include "props/campaign.h"
#include "scenarios/scenario.h"

namespace mlaverify::props {
namespace {

// Campaign index -> the case's full JSON, as run.
using CaseLog = std::map<int32_t, std::string>;

FuzzReport run_logged(Backend& backend, CampaignOptions o, CaseLog& log) {
  o.on_generated = [&](int32_t index, const Case& c) {
    scenarios::Scenario s;
    s.spec = c;
    EXPECT_TRUE(log.emplace(index, scenarios::to_json(s)).second) << "case " << index << " twice";
  };
  return run_campaign(backend, o);
}

TEST(CampaignShard, ShardsPartitionTheCampaign) {
  BackendPtr cpu = cpu::make_cpu_backend();
  CampaignOptions o;
  o.cases = 11;
  o.seed = 424242;
  o.properties = {"metadata", "vs_model"};
  CaseLog whole;
  const FuzzReport all = run_logged(*cpu, o, whole);
  ASSERT_EQ(whole.size(), 11u);
  ASSERT_TRUE(all.ok()) << all.to_string();
  for (int32_t n : {1, 2, 3, 4, 11}) {
    CaseLog together;
    uint64_t digest = 0;
    std::vector<PropertyStats> stats(all.stats.size());
    for (int32_t k = 0; k < n; ++k) {
      CaseLog mine;
      o.shard_index = k;
      o.shard_count = n;
      const FuzzReport r = run_logged(*cpu, o, mine);
      EXPECT_EQ(r.cases_run, shard_cases(o.cases, k, n)) << k << "/" << n;
      EXPECT_EQ(static_cast<int32_t>(mine.size()), r.cases_run);
      for (const auto& [index, json] : mine) {
        EXPECT_EQ(index % n, k) << "case " << index << " in shard " << k << "/" << n;
        EXPECT_TRUE(together.emplace(index, json).second) << "case " << index << " in two shards";
      }
      digest += r.case_digest;
      for (size_t p = 0; p < stats.size(); ++p) {
        stats[p].passed += r.stats[p].passed;
        stats[p].skipped += r.stats[p].skipped;
      }
    }
    EXPECT_EQ(together, whole) << n << " shards";
    EXPECT_EQ(digest, all.case_digest) << n << " shards";
    for (size_t p = 0; p < stats.size(); ++p) {
      EXPECT_EQ(stats[p].passed, all.stats[p].passed) << all.stats[p].property << ", N = " << n;
      EXPECT_EQ(stats[p].skipped, all.stats[p].skipped) << all.stats[p].property << ", N = " << n;
    }
  }
}

TEST(CampaignShard, ShardCountsAndBadShards) {
  EXPECT_EQ(shard_cases(10, 0, 3), 4);
  EXPECT_EQ(shard_cases(10, 1, 3), 3);
  EXPECT_EQ(shard_cases(10, 2, 3), 3);
  EXPECT_EQ(shard_cases(2, 2, 3), 0);
  EXPECT_EQ(shard_cases(5, 0, 1), 5);
  BackendPtr cpu = cpu::make_cpu_backend();
  CampaignOptions o;
  o.cases = 2;
  o.shard_index = 3;
  o.shard_count = 3;
  EXPECT_THROW(run_campaign(*cpu, o), InvalidInput);
  o.shard_index = 0;
  o.shard_count = 0;
  EXPECT_THROW(run_campaign(*cpu, o), InvalidInput);
}

// The identity sees every field: two different cases never share it in practice, and the index
// is part of it (the same case at two indices is two cases of the campaign).
TEST(CampaignShard, CaseIdentityNamesIndexAndCase) {
  Case c;
  c.requests = {{{-1, 0}, 5}};
  Case d = c;
  d.seed = 1;
  EXPECT_NE(case_identity(0, c), case_identity(0, d));
  EXPECT_NE(case_identity(0, c), case_identity(1, c));
  EXPECT_EQ(case_identity(3, c), case_identity(3, Case(c)));
}

}  // namespace
}  // namespace mlaverify::props
