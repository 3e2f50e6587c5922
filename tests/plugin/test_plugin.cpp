// The C ABI in process: the CPU backend loaded from its plugin .so with dlopen runs the whole
// property suite exactly as the in-process backend does (same verdicts, bit-identical outputs on
// every run), the conversions keep every field, struct_size versioning both ways, statuses become
// the right exceptions, and every bad plugin is one clear line (exit 2 from the CLI).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cpu/cpu_backend.h"
#include "mlaverify/c_api.h"
#include "mlaverify/error.h"
#include "plugin/plugin_backend.h"
#include "props/campaign.h"
#include "props/case.h"
#include "tests/plugin/plugin_testing.h"

namespace mlaverify::plugin {
namespace {

using testing::Recorder;

TEST(CpuPlugin, WholePropertySuiteEqualsInProcessBackend) {
  auto in_process = cpu::make_cpu_backend();
  auto loaded = load_plugin(MLAV_CPU_PLUGIN);
  EXPECT_EQ(loaded->name(), "plugin:cpu");
  EXPECT_EQ(loaded->memory(), MLAV_MEMORY_HOST);
  props::CampaignOptions o;
  o.cases = props::cases_from_env(24);
  o.seed = props::seed_from_env(20261201);
  // The ABI carries no plan_blocks: both campaigns draw the uniform plan only (the in-process
  // backend would otherwise get balanced-plan cases that the plugin's declaration excludes).
  o.gen.caps.balanced_plan = false;
  const testing::CampaignPair r = testing::run_same_campaign(*in_process, *loaded, o);
  const props::FuzzReport& rb = r.plugin;
  EXPECT_TRUE(rb.ok()) << rb.to_string();
  // Every property of the catalog ran through the ABI, not only skipped.
  for (const props::PropertyStats& s : rb.stats) EXPECT_TRUE(s.ran()) << s.property;
  EXPECT_EQ(rb.stats.size(), props::all_properties().size());
  std::printf(
      "[plugin] %d cases x %zu properties, %lld runs through the plugin: in-process %.1f s, "
      "plugin %.1f s, digest %016llx\n",
      rb.cases_run, rb.stats.size(), static_cast<long long>(r.plugin_runs), r.in_process_s,
      r.plugin_s, static_cast<unsigned long long>(r.plugin_digest));
}

// The mutant the equality check must kill: the same plugin on the folded split plan rounds
// differently, so some run's outputs differ and the digests part.
TEST(CpuPlugin, DigestSeesADifferentSplitPlan) {
  auto in_process = cpu::make_cpu_backend();
  auto folded = load_plugin(MLAV_CPU_PLUGIN, "folded");
  Recorder a(*in_process), b(*folded);
  props::CampaignOptions o;
  o.cases = 6;
  o.seed = 7;
  o.properties = {"split_invariance"};
  o.gen.caps.balanced_plan = false;  // the same cases on both sides (the ABI has no plan_blocks)
  props::run_campaign(a, o);
  props::run_campaign(b, o);
  EXPECT_EQ(a.runs, b.runs);
  EXPECT_NE(a.digest, b.digest);
}

VerifyParams odd_params() {
  // Every field a distinct value, so a field dropped or swapped by a conversion shows.
  static int64_t k_i64[4];
  static int32_t k_i32[9];
  static float f[3];
  VerifyParams p;
  p.batch_size = 3;
  p.num_heads = 5;
  p.max_draft = 7;
  p.max_total_q = 11;
  p.num_splits = 2;
  p.sm_scale = 0.25f;
  p.q = &k_i32[0];
  p.q_dtype = DType::F32;
  p.q_token_stride = 13 * 576;
  p.q_head_stride = 600;
  p.q_latent_offset = 64;
  p.q_rope_offset = 0;
  p.kv_pool = &k_i32[1];
  p.kv_dtype = DType::F32;
  p.kv_layout = KvLayout::split(3, 1024, 520, 1024);
  p.pool_slots = 17;
  p.qo_indptr = &k_i32[2];
  p.kv_indptr = &k_i32[3];
  p.kv_indexing = KvIndexing::PageTable;
  p.kv_indices = &k_i64[0];
  p.kv_indices_i32 = &k_i32[4];
  p.kv_indices_len = 19;
  p.block_table = &k_i32[5];
  p.block_table_stride = 23;
  p.page_size = 16;
  p.draft_source = DraftKvSource::CacheSlots;
  p.k_extend = &k_i32[6];
  p.k_extend_stride = 640;
  p.mask_format = MaskFormat::FlashInferPacked;
  p.mask = &k_i32[7];
  p.mask_len = 29;
  p.mask_indptr = &k_i64[1];
  p.mask_indptr_convention = IndptrConvention::OffsetsOnly;
  p.mask_draft_stride = 31;
  p.mask_word_bytes = 2;
  p.o_lat = &k_i32[8];
  p.o_dtype = DType::F32;
  p.o_token_stride = 5 * 520;
  p.o_head_stride = 520;
  p.lse = &f[0];
  return p;
}

TEST(Conversions, ParamsRoundTripKeepsEveryField) {
  const VerifyParams p = odd_params();
  const mlav_params c = to_c_params(p);
  EXPECT_EQ(c.struct_size, sizeof(mlav_params));
  EXPECT_EQ(c.abi_version, MLAV_ABI_VERSION);
  const mlav_params back = to_c_params(from_c_params(&c));
  EXPECT_EQ(std::memcmp(&c, &back, sizeof(c)), 0);
  // And the defaults survive too (page_size 1, q_rope_offset 512: not zero).
  const mlav_params d = to_c_params(VerifyParams{});
  const VerifyParams dp = from_c_params(&d);
  EXPECT_EQ(dp.page_size, 1);
  EXPECT_EQ(dp.q_rope_offset, kLatentDim);
}

TEST(Conversions, CapabilitiesRoundTrip) {
  Capabilities k;
  k.mask_formats = 0x5;
  k.kv_dtypes = 0x1;
  k.kv_indexings = 0x3;
  k.page_sizes = 0x10;
  k.writes_lse = false;
  k.deterministic = false;
  k.honours_num_splits = true;
  k.strided_q = false;
  k.padded_extend_rows = false;
  k.max_heads = 64;
  k.max_draft = 32;
  k.max_prefix = 4096;
  k.numerics.p_unit = 0x1.0p-24;
  k.numerics.max_partials = 9;
  k.numerics.tile_keys = 32;
  const mlav_capabilities c = to_c_capabilities(k);
  const mlav_capabilities back = to_c_capabilities(from_c_capabilities(c));
  EXPECT_EQ(std::memcmp(&c, &back, sizeof(c)), 0);
  const Capabilities r = from_c_capabilities(c);
  EXPECT_FALSE(r.writes_lse);
  EXPECT_TRUE(r.honours_num_splits);
  EXPECT_FALSE(r.strided_q);
  EXPECT_TRUE(r.strided_o);
  EXPECT_EQ(r.numerics.tile_keys, 32);
  // mlav_params has no plan_blocks, so whatever the C side says, a plugin is not handed the
  // balanced plan (the C++ default is true).
  EXPECT_TRUE(k.balanced_plan);
  EXPECT_FALSE(r.balanced_plan);
  // The C defaults are the C++ defaults.
  const mlav_capabilities dc = to_c_capabilities(Capabilities{});
  const mlav_capabilities cd = mlav_capabilities_default();
  EXPECT_EQ(std::memcmp(&dc, &cd, sizeof(dc)), 0);
}

// A reader takes what it knows of a newer writer's struct, defaults for what an older one lacks.
TEST(Versioning, OlderAndNewerStructs) {
  // A newer caller: a longer mlav_params whose extra field this reader ignores.
  struct Newer {
    mlav_params p;
    uint64_t field_of_abi_2;
  } newer;
  newer.p = to_c_params(odd_params());
  newer.p.struct_size = sizeof(Newer);
  newer.p.abi_version = 2;
  newer.field_of_abi_2 = 0xdeadbeef;
  EXPECT_EQ(from_c_params(&newer.p).block_table_stride, 23);
  // Shorter than version 1, or version 0: not ours.
  mlav_params shorter = to_c_params(odd_params());
  shorter.struct_size = 64;
  EXPECT_THROW(from_c_params(&shorter), InvalidInput);
  mlav_params v0 = to_c_params(odd_params());
  v0.abi_version = 0;
  EXPECT_THROW(from_c_params(&v0), InvalidInput);
  // An older plugin filling a shorter mlav_capabilities: the fields past it keep the defaults.
  mlav_capabilities c = mlav_capabilities_default();
  c.struct_size = offsetof(mlav_capabilities, max_heads);
  c.flags = MLAV_CAP_WRITES_LSE;
  c.max_heads = -7;  // past the writer's struct: must not be read
  const Capabilities k = from_c_capabilities(c);
  EXPECT_EQ(k.max_heads, 128);
  EXPECT_FALSE(k.deterministic);
}

// A table built in C (as ctypes builds one): statuses become the Backend's exceptions, each with
// the plugin's message; a refusal is Support::no with the reason.
struct CTable {
  mlav_status status = MLAV_OK;
  int runs = 0;
  int destroyed = 0;
};

mlav_status c_can(void* self, const mlav_params* p, char* why, size_t n) {
  // can_implement sees shapes only: every buffer pointer is NULL (c_api.h).
  if (p->q != nullptr || p->o_lat != nullptr || p->qo_indptr != nullptr) {
    write_error(why, n, "pointers were passed to can_implement");
    return MLAV_ERROR;
  }
  if (p->num_heads > 4) {
    write_error(why, n, "at most 4 heads here");
    return MLAV_UNSUPPORTED;
  }
  (void)self;
  return MLAV_OK;
}
mlav_status c_ws(void*, const mlav_params*, uint64_t* bytes, char*, size_t) {
  *bytes = 123;
  return MLAV_OK;
}
mlav_status c_run(void* self, const mlav_params* p, void* ws, uint64_t ws_bytes, void* stream,
                  char* err, size_t n) {
  CTable& t = *static_cast<CTable*>(self);
  ++t.runs;
  if (ws == nullptr || ws_bytes != 123 || stream != nullptr || p->o_lat == nullptr) {
    write_error(err, n, "bad call");
    return MLAV_ERROR;
  }
  if (t.status != MLAV_OK) write_error(err, n, "told to fail");
  return t.status;
}
void c_destroy(void* self) { ++static_cast<CTable*>(self)->destroyed; }

mlav_backend c_table(CTable* self) {
  mlav_backend b;
  std::memset(&b, 0, sizeof(b));
  b.struct_size = sizeof(b);
  b.abi_version = MLAV_ABI_VERSION;
  b.self = self;
  b.name = "ctable";
  b.memory = MLAV_MEMORY_HOST;
  b.can_implement = c_can;
  b.workspace_bytes = c_ws;
  b.run = c_run;
  b.destroy = c_destroy;
  return b;
}

props::Case small_case(int32_t heads = 2) {
  props::Case c;
  c.requests = {{{-1, 0, 1, 1}, 30}, {{-1, 0}, 5}};
  c.num_heads = heads;
  c.seed = 3;
  return c;
}

TEST(PluginBackend, StatusesBecomeExceptionsWithTheMessage) {
  CTable self;
  {
    PluginBackend b(c_table(&self));
    EXPECT_EQ(b.name(), "plugin:ctable");
    model::VerifyBatch batch = props::build_batch(small_case());
    const VerifyParams p = batch.params();
    EXPECT_TRUE(b.can_implement(p)) << b.can_implement(p).reason;
    EXPECT_EQ(b.workspace_bytes(p), 123u);
    b.run(p);
    EXPECT_EQ(self.runs, 1);
    self.status = MLAV_INVALID_INPUT;
    try {
      b.run(p);
      ADD_FAILURE() << "no throw";
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find("told to fail"), std::string::npos) << e.what();
    }
    self.status = MLAV_UNSUPPORTED;
    EXPECT_THROW(b.run(p), Unsupported);
    self.status = MLAV_ERROR;
    try {
      b.run(p);
      ADD_FAILURE() << "no throw";
    } catch (const InvalidInput&) {
      ADD_FAILURE() << "MLAV_ERROR is not bad input";
    } catch (const Unsupported&) {
      ADD_FAILURE() << "MLAV_ERROR is not a skip";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("plugin ctable: run: told to fail"), std::string::npos)
          << e.what();
    }
    model::VerifyBatch wide = props::build_batch(small_case(8));
    const Support s = b.can_implement(wide.params());
    EXPECT_FALSE(s);
    EXPECT_EQ(s.reason, "at most 4 heads here");
    EXPECT_THROW(b.run(wide.params()), Unsupported);
  }
  EXPECT_EQ(self.destroyed, 1);
}

TEST(PluginBackend, RejectsBrokenTables) {
  CTable self;
  mlav_backend t = c_table(&self);
  t.run = nullptr;
  EXPECT_THROW(PluginBackend{t}, InvalidInput);
  t = c_table(&self);
  t.struct_size = 16;
  EXPECT_THROW(PluginBackend{t}, InvalidInput);
  t = c_table(&self);
  t.memory = 7;
  EXPECT_THROW(PluginBackend{t}, InvalidInput);
}

TEST(PluginBackend, CudaMemoryPluginWithoutDeviceSaysWhy) {
  CTable self;
  mlav_backend t = c_table(&self);
  t.memory = MLAV_MEMORY_CUDA;
  PluginBackend b(t);
  model::VerifyBatch batch = props::build_batch(small_case());
  const Support s = b.can_implement(batch.params());
  // This machine has no GPU (or a build without CUDA): a reason, never a crash.
  if (!s) {
    EXPECT_NE(s.reason.find("CUDA"), std::string::npos) << s.reason;
    EXPECT_THROW(b.run(batch.params()), Unsupported);
  }
}

// A plugin written in C: its capabilities reach the suite, its refusal reads as a reason, and a
// run goes through with the workspace it asked for (guarded too: it writes only real rows).
TEST(CPlugin, LoadsDeclaresRefusesAndRuns) {
  auto b = load_plugin(MLAV_C_PLUGIN);
  EXPECT_EQ(b->name(), "plugin:c-zeros");
  const Capabilities k = b->capabilities();
  EXPECT_EQ(k.kv_dtypes, bit(DType::BF16));
  EXPECT_FALSE(k.writes_lse);
  EXPECT_TRUE(k.deterministic);  // a default the plugin left alone
  EXPECT_EQ(k.max_heads, 4);
  model::VerifyBatch wide = props::build_batch(small_case(8));
  const Support s = b->can_implement(wide.params());
  EXPECT_FALSE(s);
  EXPECT_EQ(s.reason, "num_heads 8 not declared");  // Capabilities::admits answers first
  model::VerifyBatch batch = props::build_batch(small_case(2));
  EXPECT_EQ(b->workspace_bytes(batch.params()), 128u);
  const props::RunOutput out = props::run_backend(*b, batch);
  EXPECT_EQ(out.o_at(0, 0, 0), 0.0f);
  auto g = make_plugin_backend(std::string(MLAV_C_PLUGIN) + "?guarded");
  const props::RunOutput gout = props::run_backend(*g, batch);
  EXPECT_EQ(gout.o, out.o);
}

std::string load_error(const std::string& path, const std::string& config = "") {
  try {
    load_plugin(path, config);
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "";
}

TEST(LoadPlugin, EveryFailureIsOneLineNamingThePath) {
  const std::string missing = load_error("/nonexistent/libnothing.so");
  EXPECT_NE(missing.find("plugin:/nonexistent/libnothing.so: cannot load"), std::string::npos)
      << missing;
  const std::string nosym = load_error(MLAV_NOSYMBOL_LIB);
  EXPECT_NE(nosym.find(std::string("plugin:") + MLAV_NOSYMBOL_LIB + ": no symbol mlav_plugin_open"),
            std::string::npos)
      << nosym;
  const std::string refused = load_error(MLAV_FAULTY_PLUGIN, "fault=bogus");
  EXPECT_NE(refused.find("mlav_plugin_open failed"), std::string::npos) << refused;
  EXPECT_NE(refused.find("unknown fault 'bogus'"), std::string::npos) << refused;
  const std::string bad = load_error(MLAV_FAULTY_PLUGIN, "fault=bad_table");
  EXPECT_NE(bad.find("not an mlav_backend"), std::string::npos) << bad;
  const std::string cfg = load_error(MLAV_CPU_PLUGIN, "threads=2&color=blue");
  EXPECT_NE(cfg.find("unknown item 'color=blue'"), std::string::npos) << cfg;
  EXPECT_NE(load_error(MLAV_CPU_PLUGIN, "threads=x").find("threads is 0..1024"), std::string::npos);
  for (const std::string& s : {missing, nosym, refused, bad, cfg}) {
    EXPECT_EQ(s.find('\n'), std::string::npos) << s;
  }
}

TEST(PluginSpec, MlaverifysItemsAreNotPassedOn) {
  PluginSpec s = parse_plugin_spec("/x/libk.so?mode=fast&guarded&timeout=2.5&tile=64");
  EXPECT_EQ(s.path, "/x/libk.so");
  EXPECT_EQ(s.config, "mode=fast&tile=64");
  EXPECT_TRUE(s.guarded);
  EXPECT_DOUBLE_EQ(s.timeout_s, 2.5);
  s = parse_plugin_spec("libk.so");
  EXPECT_EQ(s.config, "");
  EXPECT_FALSE(s.guarded);
  EXPECT_THROW(parse_plugin_spec(""), InvalidInput);
  EXPECT_THROW(parse_plugin_spec("?guarded"), InvalidInput);
  EXPECT_THROW(parse_plugin_spec("libk.so?timeout=0"), InvalidInput);
  EXPECT_THROW(parse_plugin_spec("libk.so?timeout=soon"), InvalidInput);
}

#ifdef MLAV_CLI
// Runs the CLI, returning its exit status and what it wrote to stderr.
std::pair<int, std::string> cli(const std::string& args) {
  const std::string err_file = std::string(MLAV_PLUGIN_OUT_DIR) + "/cli_stderr.txt";
  const std::string cmd = std::string(MLAV_CLI) + " " + args + " >/dev/null 2>" + err_file;
  const int status = std::system(cmd.c_str());
  std::string err;
  if (FILE* f = std::fopen(err_file.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) err.append(buf, n);
    std::fclose(f);
  }
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, err};
}

TEST(PluginCli, BadPluginIsExit2WithOneLine) {
  for (const std::string& spec :
       {std::string("plugin:/nonexistent/libk.so"), std::string("plugin:") + MLAV_NOSYMBOL_LIB,
        std::string("plugin:/nonexistent/libk.so?guarded"),
        std::string("plugin:") + MLAV_NOSYMBOL_LIB + "?guarded",
        std::string("plugin:") + MLAV_CPU_PLUGIN + "?timeout=x"}) {
    SCOPED_TRACE(spec);
    const auto [code, err] = cli("fuzz --cases 1 --backend '" + spec + "'");
    EXPECT_EQ(code, 2);
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_NE(err.find("bad input"), std::string::npos) << err;
  }
}

TEST(PluginCli, FuzzThroughTheCpuPluginPasses) {
  const auto [code, err] =
      cli(std::string("fuzz --cases 3 --seed 5 --backend plugin:") + MLAV_CPU_PLUGIN);
  EXPECT_EQ(code, 0) << err;
}
#endif

}  // namespace
}  // namespace mlaverify::plugin
