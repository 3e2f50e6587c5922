// Fuzzes the scenario loader: random mutations of valid files and random bytes must give an
// InvalidInput or a valid scenario (that then round-trips), never a crash or another exception.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "mlaverify/error.h"
#include "scenarios/scenario.h"

namespace mlaverify::scenarios {
namespace {

uint64_t seed_from_env() {
  const char* s = std::getenv("MLAV_SEED");
  uint64_t seed = s ? std::strtoull(s, nullptr, 10) : 20261129ull;
  std::printf("loader fuzz: MLAV_SEED=%llu\n", static_cast<unsigned long long>(seed));
  return seed;
}

int iterations() {
  // Parsing a ~2 KB document takes microseconds: 20000 inputs take ~0.3 s (~2 s under ASan) and
  // cover every mutation operator thousands of times.
  const char* s = std::getenv("MLAV_FUZZ_ITERS");
  return s ? std::atoi(s) : 20000;
}

std::vector<std::string> seeds() {
  std::vector<std::string> out;
  Scenario a;
  a.property = "vs_model";
  a.backend = "cpu";
  a.spec.requests = {{{-1, 0, 1, 1, 0}, 64}, {{-1, 0}, 1}, {{-1}, 0}};
  a.spec.graph_padded_bs = 4;
  out.push_back(to_json(a));
  Scenario b = a;
  b.spec.mask_format = MaskFormat::QlenOnlyBitpacking;
  b.spec.mask_word_bytes = 1;
  b.spec.layout = LayoutKind::Split;
  b.spec.kv_dtype = DType::F32;
  b.spec.seed = ~0ull;
  out.push_back(to_json(b));
  Scenario c = a;  // the balanced plan's optional field, so mutations reach it
  c.spec.num_splits = 4;
  c.spec.plan_blocks = 8;
  out.push_back(to_json(c));
  return out;
}

// Values that sit on type or range edges of the fields.
const char* kTokens[] = {"-1",
                         "0",
                         "1",
                         "65",
                         "1e308",
                         "-0",
                         "1.5",
                         "null",
                         "true",
                         "false",
                         "[]",
                         "{}",
                         "\"\"",
                         "\"bf16\"",
                         "\"x\"",
                         "[-1]",
                         "2147483648",
                         "18446744073709551616",
                         "-9223372036854775809",
                         "1024",
                         "1025",
                         "4096",
                         "1048576",  // kMaxPlanBlocks, and one past it
                         "1048577",
                         "[[[[",
                         "}",
                         ",",
                         "\"\\u0000\""};

std::string mutate(std::string s, std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return n ? static_cast<size_t>(rng() % n) : 0; };
  int ops = 1 + static_cast<int>(rng() % 4);
  for (int k = 0; k < ops; ++k) {
    size_t at = pick(s.size() + 1);
    switch (rng() % 7) {
      case 0:  // flip one bit
        if (!s.empty()) s[pick(s.size())] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1:  // delete a run
        if (!s.empty()) s.erase(pick(s.size()), 1 + pick(16));
        break;
      case 2:  // insert random bytes
        for (size_t n = 1 + pick(8); n > 0; --n) s.insert(s.begin() + at, static_cast<char>(rng()));
        break;
      case 3:  // truncate
        s.resize(at);
        break;
      case 4: {  // replace a number or literal with an edge token
        size_t b = s.find_first_of("-0123456789tfn", at);
        if (b == std::string::npos) break;
        size_t e = s.find_first_of(",]}\n", b);
        if (e == std::string::npos) e = s.size();
        s.replace(b, e - b, kTokens[pick(std::size(kTokens))]);
        break;
      }
      case 5: {  // duplicate a chunk elsewhere
        size_t b = pick(s.size());
        std::string chunk = s.substr(b, 1 + pick(40));
        s.insert(pick(s.size() + 1), chunk);
        break;
      }
      case 6: {  // replace a string value with an edge token
        size_t b = s.find('"', at);
        if (b == std::string::npos) break;
        size_t e = s.find('"', b + 1);
        if (e == std::string::npos) break;
        s.replace(b, e - b + 1, kTokens[pick(std::size(kTokens))]);
        break;
      }
    }
  }
  return s;
}

// The contract under test: InvalidInput, or a scenario that is valid and round-trips.
void check_one(const std::string& input, int64_t& accepted, int64_t& rejected) {
  try {
    Scenario sc = parse_scenario(input);
    ++accepted;
    EXPECT_NO_THROW(validate_case(sc.spec)) << input;
    EXPECT_EQ(parse_scenario(to_json(sc)), sc) << input;
  } catch (const InvalidInput& e) {
    ++rejected;
    EXPECT_FALSE(e.field().empty() && e.index() == -1 && e.detail().empty()) << input;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "unexpected " << typeid(e).name() << ": " << e.what() << "\ninput:\n" << input;
  }
}

TEST(LoaderFuzz, MutatedValidFiles) {
  std::mt19937_64 rng(seed_from_env());
  auto base = seeds();
  int64_t accepted = 0, rejected = 0;
  for (int n = 0; n < iterations(); ++n) {
    check_one(mutate(base[n % base.size()], rng), accepted, rejected);
  }
  std::printf("mutated: %lld accepted, %lld rejected\n", static_cast<long long>(accepted),
              static_cast<long long>(rejected));
  // Both outcomes must occur, or the mutator is not exercising the loader: a single bit flip in
  // a digit of the seed or a note leaves the file valid, most structural edits do not.
  EXPECT_GT(accepted, 0);
  EXPECT_GT(rejected, 0);
}

TEST(LoaderFuzz, RandomBytes) {
  std::mt19937_64 rng(seed_from_env() ^ 0x9e3779b97f4a7c15ull);
  int64_t accepted = 0, rejected = 0;
  const std::string alphabet = "{}[]\":,-0123456789.eE truefalsnl\\u";
  for (int n = 0; n < iterations(); ++n) {
    std::string s(rng() % 512, '\0');
    bool json_ish = n % 2;
    for (char& c : s) {
      c = json_ish ? alphabet[rng() % alphabet.size()] : static_cast<char>(rng());
    }
    check_one(s, accepted, rejected);
  }
  // Random bytes are never a valid scenario (it needs a dozen named fields).
  EXPECT_EQ(accepted, 0);
}

}  // namespace
}  // namespace mlaverify::scenarios
