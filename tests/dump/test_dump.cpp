// Server dumps: the safetensors reader's rejections, the loader on the two SGLang dumps, the
// element-wise replay (one wrong element anywhere fails, at its place), and diagnose naming the
// reading a server's wrong output came from.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>

#include "dump/diagnose.h"
#include "tests/dump/dump_testing.h"
#include "dump/dump.h"
#include "dump/replay.h"
#include "dump/safetensors.h"
#include "mlaverify/bf16.h"
#include "mlaverify/error.h"
#include "model/attention.h"
#include "model/storage.h"

namespace mlaverify::dump {
namespace {

const std::filesystem::path kDumps = MLAV_DUMPS_DIR;
const std::filesystem::path kEagle = kDumps / "k2_eagle16.safetensors";
const std::filesystem::path kPadded = kDumps / "k2_padded.safetensors";

std::filesystem::path temp(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "mlav_dump_tests";
  std::filesystem::create_directories(dir);
  return dir / name;
}

std::vector<std::byte> file_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> b(c.size());
  std::memcpy(b.data(), c.data(), c.size());
  return b;
}

using testing::Edit;
using testing::tensor;

// A copy of a dump with its tensors and metadata rewritten by `edit`, in the tests' temp folder.
std::filesystem::path rewrite(const std::filesystem::path& src, const std::string& name,
                              const Edit& edit) {
  const auto path = temp(name);
  testing::rewrite_file(src, path, edit);
  return path;
}

// Writes o [T, H, 512] (double) into the dump's bf16 "o", rounded once as a kernel would.
void set_o(TensorOut& o, const std::vector<double>& v) {
  ASSERT_EQ(o.dtype, StDType::BF16);
  ASSERT_EQ(o.bytes.size(), v.size() * 2);
  for (size_t k = 0; k < v.size(); ++k) {
    const bf16 b = model::double_to_bf16(v[k]);
    std::memcpy(o.bytes.data() + 2 * k, &b, 2);
  }
}

Comparison replay(ServerDump& d) {
  const Reference ref = reference(d, KernelAssumptions{});
  return compare(d.params(), d.real_batch_size(), d.server_o(), d.server_lse(), ref.o, ref.lse,
                 ref.bound);
}

using testing::expect_invalid;

TEST(Dump, SharedDumpsLoadAsSglangWroteThem) {
  ServerDump e = ServerDump::load(kEagle);
  EXPECT_EQ(e.batch_size(), 4);
  EXPECT_EQ(e.real_batch_size(), 4);
  EXPECT_EQ(e.num_heads(), 8);
  EXPECT_EQ(e.total_tokens(), 64);
  EXPECT_EQ(e.preset(), "kimi-k2");
  EXPECT_EQ(e.tp(), 8);  // 64 heads / 8 on this rank
  EXPECT_EQ(e.prefix_len(0), 64);
  EXPECT_EQ(e.prefix_len(3), 1);
  EXPECT_EQ(e.draft_source(), DraftKvSource::ExtendRows);
  EXPECT_TRUE(e.has_o());
  EXPECT_FALSE(e.has_lse());
  EXPECT_EQ(e.parents().size(), 4u);
  EXPECT_TRUE(e.findings().empty()) << e.findings()[0].field << ": " << e.findings()[0].detail;
  ServerDump p = ServerDump::load(kPadded);
  EXPECT_EQ(p.batch_size(), 4);
  EXPECT_EQ(p.real_batch_size(), 2);
  EXPECT_TRUE(p.padded(2) && p.padded(3) && !p.padded(1));
}

// Both real dumps replay green: the Triton kernel's o is within the bound everywhere. The
// dumps' own README measured a worst element of 2.5e-3 and 3.2e-3 of max|o|; the bound is per
// element, so a ratio well under 1 (not just "passes") is what the numbers should show.
TEST(Dump, SharedDumpsReplayGreen) {
  for (const auto& path : {kEagle, kPadded}) {
    ServerDump d = ServerDump::load(path);
    const Comparison c = replay(d);
    EXPECT_TRUE(c.pass()) << path;
    EXPECT_LT(c.worst_ratio(), 0.5) << path;
    EXPECT_GT(c.worst_ratio(), 0.01) << path << ": a kernel's rounding is visible at this bound";
    EXPECT_LT(c.rel_frobenius(), 0x1.0p-8) << path;  // bf16 output rounding alone is <= 2^-8
  }
}

// Padded rows are reported apart and never fail: garbage written into a padded row's o leaves
// the replay green, and the same garbage in a real row fails it.
TEST(Dump, PaddedRowsNeverFailARealRow) {
  ServerDump d = ServerDump::load(kPadded);
  const int64_t padded_token = d.q_begin(2);  // request 2 is padded
  auto garbage = [](int64_t token) {
    return [token](std::vector<TensorOut>& ts, std::map<std::string, std::string>&) {
      TensorOut& o = tensor(ts, "o");
      for (int k = 0; k < 8 * 512; ++k) {
        const bf16 b = float_to_bf16(1e4f);
        std::memcpy(o.bytes.data() + 2 * (token * 8 * 512 + k), &b, 2);
      }
    };
  };
  ServerDump pad = ServerDump::load(rewrite(kPadded, "garbage_padded.safetensors",
                                            garbage(padded_token)));
  const Comparison cp = replay(pad);
  EXPECT_TRUE(cp.pass());
  EXPECT_FALSE(cp.requests[2].pass());  // reported, not judged
  ServerDump real = ServerDump::load(rewrite(kPadded, "garbage_real.safetensors", garbage(0)));
  EXPECT_FALSE(replay(real).pass());
}

// One wrong element anywhere fails the replay, at its (request, token, head, column), although
// it barely moves the aggregate: the change is 4x that element's own bound.
TEST(Dump, OneWrongElementFailsAtItsPlace) {
  ServerDump d = ServerDump::load(kEagle);
  const Reference ref = reference(d, KernelAssumptions{});
  const int64_t token = 37;  // request 2 (tokens 32..47)
  const int32_t head = 5, col = 300;
  const size_t at = (static_cast<size_t>(token) * 8 + head) * 512 + col;
  const double bound = ref.bound.o_coeff[at / 512] * ref.bound.a_abs[at] +
                       0x1.0p-8 * std::fabs(ref.o[at]);
  const double bad = ref.o[at] + 4 * bound;
  const auto path = rewrite(kEagle, "one_element.safetensors",
                            [&](std::vector<TensorOut>& ts, std::map<std::string, std::string>&) {
                              const bf16 b = model::double_to_bf16(bad);
                              std::memcpy(tensor(ts, "o").bytes.data() + 2 * at, &b, 2);
                            });
  ServerDump w = ServerDump::load(path);
  const Comparison base = replay(d);
  const Comparison c = replay(w);
  EXPECT_FALSE(c.pass());
  const RequestResult* worst = c.worst();
  ASSERT_NE(worst, nullptr);
  EXPECT_EQ(worst->request, 2);
  EXPECT_EQ(worst->worst_token, token);
  EXPECT_EQ(worst->worst_head, head);
  EXPECT_EQ(worst->worst_column, col);
  EXPECT_EQ(worst->over, 1);
  EXPECT_TRUE(c.requests[0].pass() && c.requests[1].pass() && c.requests[3].pass());
  // The aggregate hardly moves: an aggregate check alone would not see it.
  EXPECT_LT(c.rel_frobenius(), 1.2 * base.rel_frobenius());
}

// The bound pass's o (exact weights against V = c) is the model's o: two computations of the
// same double-precision softmax agree to a few ulps (relative 1e-12 leaves room for 1e4 ulps).
TEST(Dump, BoundPassReproducesTheModel) {
  ServerDump d = ServerDump::load(kEagle);
  std::vector<double> o;
  ValueReading v;
  v.v_stride = 576;  // V read explicitly, through the value path, at c's own place
  bound_terms(d.params(), KernelAssumptions{}, v, &o);
  const model::RefResult ref = model::reference_verify(d.params());
  double worst = 0;
  for (size_t k = 0; k < o.size(); ++k) worst = std::max(worst, std::fabs(o[k] - ref.o_lat[k]));
  EXPECT_LT(worst, 1e-12);
}

// A server whose kernel made one known mistake: its o is the model under that reading, rounded
// to bf16. diagnose must name exactly that reading and reject the as-given one.
class DiagnoseNames : public ::testing::TestWithParam<std::string> {};

TEST_P(DiagnoseNames, TheReadingTheServerMade) {
  const std::string reading = GetParam();
  ServerDump d = ServerDump::load(kEagle);
  const std::vector<double> wrong = reading_output(d, reading);
  const auto path = rewrite(kEagle, reading + ".safetensors",
                            [&](std::vector<TensorOut>& ts, std::map<std::string, std::string>&) {
                              set_o(tensor(ts, "o"), wrong);
                            });
  ServerDump w = ServerDump::load(path);
  EXPECT_FALSE(replay(w).pass());
  const Diagnosis dg = diagnose(w, KernelAssumptions{});
  EXPECT_FALSE(dg.as_given.explains());
  ASSERT_FALSE(dg.ranked.empty());
  EXPECT_EQ(dg.ranked[0].info.name, reading) << dg.verdict;
  EXPECT_TRUE(dg.ranked[0].explains()) << dg.verdict;
  EXPECT_NE(dg.verdict.find("matches the model when"), std::string::npos) << dg.verdict;
  for (size_t k = 1; k < dg.ranked.size(); ++k) {
    EXPECT_FALSE(dg.ranked[k].explains() && dg.ranked[k].distance_from_given > 1)
        << dg.ranked[k].info.name << " also explains it: " << dg.verdict;
  }
}

INSTANTIATE_TEST_SUITE_P(Readings, DiagnoseNames,
                         ::testing::Values("rope_first_cache", "rope_first_query",
                                           "v_wrong_columns", "v_stride_512", "sm_scale_576",
                                           "no_mscale", "mask_indptr_shifted", "mask_row_stride_d",
                                           "parent_only", "no_diagonal", "prefix_masked"));

TEST(Dump, DiagnoseOnAGreenDumpSaysAsGiven) {
  ServerDump d = ServerDump::load(kPadded);
  const Diagnosis dg = diagnose(d, KernelAssumptions{});
  EXPECT_TRUE(dg.as_given.explains());
  EXPECT_NE(dg.verdict.find("matches the model as given"), std::string::npos) << dg.verdict;
}

// ---- bad input: one InvalidInput naming file, tensor or key, and index ----

TEST(Safetensors, RejectsWhatTheFileCannotHold) {
  const std::vector<std::byte> good = file_bytes(kPadded);
  auto with = [&](const std::function<void(std::vector<std::byte>&)>& f) {
    std::vector<std::byte> b = good;
    f(b);
    return b;
  };
  auto set_len = [](std::vector<std::byte>& b, uint64_t n) {
    for (int k = 0; k < 8; ++k) b[k] = std::byte((n >> (8 * k)) & 0xff);
  };
  expect_invalid([&] { SafetensorsFile::parse(with([&](auto& b) { b.resize(5); }), "x"); },
                 {"x: header", "8-byte"});
  expect_invalid(
      [&] { SafetensorsFile::parse(with([&](auto& b) { set_len(b, good.size()); }), "x"); },
      {"x: header", "runs past the file"});
  expect_invalid([&] { SafetensorsFile::parse(with([&](auto& b) { b.resize(b.size() - 1); }), "x"); },
                 {"data_offsets", "runs past the data section"});
  // A header naming overlapping tensors.
  auto header_file = [](const std::string& json, size_t data) {
    std::vector<std::byte> b(8 + json.size() + data);
    uint64_t n = json.size();
    for (int k = 0; k < 8; ++k) b[k] = std::byte((n >> (8 * k)) & 0xff);
    std::memcpy(b.data() + 8, json.data(), json.size());
    return b;
  };
  expect_invalid(
      [&] {
        SafetensorsFile::parse(
            header_file(R"({"a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"I32","shape":[2],"data_offsets":[4,12]}})",
                        12),
            "x");
      },
      {"x: b.data_offsets", "overlap a"});
  expect_invalid(
      [&] {
        SafetensorsFile::parse(
            header_file(R"({"a":{"dtype":"I32","shape":[3],"data_offsets":[0,8]}})", 8), "x");
      },
      {"x: a.data_offsets", "12 expected"});
  expect_invalid(
      [&] {
        SafetensorsFile::parse(
            header_file(R"({"a":{"dtype":"Q7","shape":[2],"data_offsets":[0,2]}})", 2), "x");
      },
      {"x: a.dtype", "unknown dtype"});
  expect_invalid(
      [&] {
        SafetensorsFile::parse(header_file(R"({"a":{"dtype":"I8","shape":[4294967296,4294967296],)"
                                           R"("data_offsets":[0,2]}})",
                                           2),
                               "x");
      },
      {"x: a.shape[0]", "more elements"});
  expect_invalid([&] { SafetensorsFile::parse(header_file(std::string(40, '[') , 0), "x"); },
                 {"x: header", "nested deeper"});
  expect_invalid([&] { SafetensorsFile::parse(header_file("{\"a\":", 0), "x"); },
                 {"x: header", "not valid JSON"});
  expect_invalid(
      [&] { SafetensorsFile::parse(header_file(R"({"__metadata__":{"k":3}})", 0), "x"); },
      {"x: __metadata__.k", "not a string"});
}

TEST(Dump, RejectsInconsistentTensorsNamingThem) {
  auto edited = [](const std::string& name, const Edit& e) { return rewrite(kEagle, name, e); };
  expect_invalid(
      [&] {
        ServerDump::load(edited("no_q.safetensors", [](auto& ts, auto&) {
          ts.erase(std::remove_if(ts.begin(), ts.end(), [](auto& t) { return t.name == "q"; }),
                   ts.end());
        }));
      },
      {"no_q.safetensors: q", "missing"});
  expect_invalid(
      [&] {
        ServerDump::load(edited("slot.safetensors", [](auto& ts, auto&) {
          TensorOut& t = tensor(ts, "kv_indices");
          const int64_t bad = 100000;
          std::memcpy(t.bytes.data() + 8 * 7, &bad, 8);
        }));
      },
      {"slot.safetensors: kv_indices[7]", "outside the pool"});
  expect_invalid(
      [&] {
        ServerDump::load(edited("scale.safetensors", [](auto&, auto& m) {
          m["sm_scale"] = "0.0416667";  // 576^-0.5 beside preset kimi-k2
        }));
      },
      {"scale.safetensors: __metadata__.sm_scale", "disagrees with itself"});
  // A parent beyond int32 is refused before it could be narrowed (2^32 once loaded as 0).
  expect_invalid(
      [&] {
        ServerDump::load(edited("parents.safetensors", [](auto&, auto& m) {
          std::string p = m["parents"];
          p.replace(p.find("-1, 0"), 5, "-1, 4294967296");
          m["parents"] = p;
        }));
      },
      {"parents.safetensors: __metadata__.parents[0]", "outside [-1"});
  expect_invalid(
      [&] {
        ServerDump::load(edited("rawbs.safetensors", [](auto&, auto& m) { m["raw_bs"] = "5"; }));
      },
      {"__metadata__.raw_bs", "above the batch"});
  expect_invalid(
      [&] {
        ServerDump::load(edited("mi.safetensors", [](auto& ts, auto&) {
          TensorOut& t = tensor(ts, "mask_indptr");
          int64_t v;
          std::memcpy(&v, t.bytes.data() + 16, 8);
          v += 1;  // request 1's segment one byte longer than D (P + D)
          std::memcpy(t.bytes.data() + 16, &v, 8);
        }));
      },
      {"mi.safetensors: mask_indptr"});
  expect_invalid(
      [&] {
        ServerDump::load(edited("shape.safetensors", [](auto& ts, auto&) {
          tensor(ts, "o").shape = {64, 8, 256, 2};
        }));
      },
      {"shape.safetensors: o", "expected [T, H, 512]"});
  expect_invalid(
      [&] {
        LoadLimits small;
        small.max_bytes = 100000;  // the file is 1.5 MB
        ServerDump::load(kEagle, small);
      },
      {"memory budget"});
}

// Tensors that only describe the batch disagreeing with the ones the kernel reads are findings
// (what a person debugging the server wants to see), not errors.
TEST(Dump, FindingsNameStaleMetadata) {
  const auto path = rewrite(kEagle, "stale.safetensors", [](auto& ts, auto&) {
    TensorOut& sl = tensor(ts, "seq_lens");
    const int64_t v = 99;
    std::memcpy(sl.bytes.data() + 8, &v, 8);  // request 1
  });
  ServerDump d = ServerDump::load(path);
  ASSERT_EQ(d.findings().size(), 1u);
  EXPECT_EQ(d.findings()[0].field, "seq_lens");
  EXPECT_EQ(d.findings()[0].index, 1);
}

// Random damage to a real dump's bytes: the loader either loads it or throws InvalidInput,
// never crashes, hangs or throws anything else. Most flips land in the header, where parsing
// decisions live; MLAV_FUZZ_ITERS scales it (libFuzzer runs the same entry longer in CI).
TEST(Dump, LoaderSurvivesRandomDamage) {
  const std::vector<std::byte> good = file_bytes(kPadded);
  const char* it_env = std::getenv("MLAV_FUZZ_ITERS");
  const int iters = it_env ? std::max(1, std::atoi(it_env) / 50) : 400;
  std::mt19937_64 rng(20261201);
  int loaded = 0, rejected = 0;
  for (int i = 0; i < iters; ++i) {
    std::vector<std::byte> b = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      const size_t at = (rng() % 4 == 0) ? rng() % b.size() : rng() % 1400;
      b[at] = std::byte(rng() & 0xff);
    }
    if (rng() % 8 == 0) b.resize(rng() % b.size());
    const auto path = temp("fuzz.safetensors");
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    }
    try {
      ServerDump d = ServerDump::load(path);
      (void)d.params();
      ++loaded;
    } catch (const InvalidInput&) {
      ++rejected;
    }
  }
  EXPECT_EQ(loaded + rejected, iters);
  EXPECT_GT(rejected, 0);
}

}  // namespace
}  // namespace mlaverify::dump
