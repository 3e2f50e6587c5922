// `mlaverify convert` as a function: exit 0 and a file the reader takes back, exit 2 with one line
// naming the field for a batch the format cannot hold, an unknown format or a bad option.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli/convert.h"
#include "dump/mask_file.h"
#include "model/mask.h"

namespace mlaverify::cli {
namespace {

const std::filesystem::path kDumps = MLAV_DUMPS_DIR;

std::filesystem::path temp(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "mlav_convert_cli_tests";
  std::filesystem::create_directories(dir);
  return dir / name;
}

ConvertOptions opts(std::filesystem::path in, std::filesystem::path out, std::string to,
                    std::string indptr = "", int32_t word_bytes = 0) {
  ConvertOptions o;
  o.in = std::move(in);
  o.out = std::move(out);
  o.to = std::move(to);
  o.indptr = std::move(indptr);
  o.word_bytes = word_bytes;
  return o;
}

int run(ConvertOptions o, std::string& text) {
  std::ostringstream out;
  const int rc = convert(o, out);
  text = out.str();
  return rc;
}

TEST(ConvertCli, WritesEveryFormatAndBack) {
  const auto in = kDumps / "k2_padded.safetensors";
  for (const char* to : {"qlen_only", "qlen_only_bitpacking", "flashinfer_packed", "draft_bits"}) {
    std::string text;
    const auto mid = temp(std::string(to) + ".safetensors");
    ASSERT_EQ(run(opts(in, mid, to), text), 0) << text;
    EXPECT_NE(text.find(std::string("-> ") + mid.string() + ": " + to), std::string::npos) << text;
    EXPECT_NE(text.find("note: request(s) 2, 3: the draft block is no tree"), std::string::npos)
        << text;
    EXPECT_EQ(dump::read_mask_file(mid).mask.format, dump::parse_mask_format(to, "to"));
    const auto back = temp(std::string(to) + "_back.safetensors");
    ASSERT_EQ(run(opts(mid, back, "full", "offsets"), text), 0) << text;
    const dump::MaskFile m = dump::read_mask_file(back);
    EXPECT_EQ(m.mask.format, MaskFormat::FullMask);
    EXPECT_EQ(m.mask.indptr_convention, IndptrConvention::OffsetsOnly);
  }
  std::string text;
  const auto parents = temp("parents.json");
  ASSERT_EQ(run(opts(kDumps / "k2_eagle16.safetensors", parents, "parents"), text), 0) << text;
  std::ifstream f(parents);
  std::string json((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(json.substr(0, 20), "[[-1,0,0,0,0,1,1,1,1");
  // The padded dump names 2 real requests: their trees only, the garbage rows left out.
  ASSERT_EQ(run(opts(kDumps / "k2_padded.safetensors", parents, "parents"), text), 0) << text;
  std::ifstream g(parents);
  std::string two((std::istreambuf_iterator<char>(g)), std::istreambuf_iterator<char>());
  EXPECT_EQ(std::count(two.begin(), two.end(), '['), 3) << two;
}

TEST(ConvertCli, BadInputExitsTwoWithOneLine) {
  const auto in = kDumps / "k2_eagle16.safetensors";
  const auto out = temp("never.safetensors");
  struct Case {
    ConvertOptions o;
    std::string says;
  };
  const Case cases[] = {
      {opts(in, out, "bitpacked"), "--to: \"bitpacked\""},
      {opts(in, out, "qlen_only_bitpacking", "", 1), "word_bytes: a 1-byte word holds 8 columns"},
      {opts(in, out, "qlen_only", "offsets"), "--indptr: qlen_only has no mask_indptr"},
      {opts(in, out, "full", "rows"), "--indptr: \"rows\""},
      {opts(in, out, "draft_bits", "", 2), "--word-bytes: only qlen_only_bitpacking"},
      {opts(kDumps / "missing.safetensors", out, "full"), "missing.safetensors"},
  };
  for (const Case& c : cases) {
    std::string text;
    EXPECT_EQ(run(c.o, text), 2) << text;
    EXPECT_NE(text.find(c.says), std::string::npos) << text << " lacks " << c.says;
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  }
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(ConvertCli, JsonSaysWhatWasWrittenOrTheFieldAtFault) {
  const auto in = kDumps / "k2_padded.safetensors";
  ConvertOptions o = opts(in, temp("json.safetensors"), "qlen_only_bitpacking");
  o.json = true;
  std::string text;
  ASSERT_EQ(run(o, text), 0) << text;
  for (const char* part : {"{\"command\":\"convert\",\"exit_code\":0,\"in\":{", "\"format\":\"full_mask\"",
                           "\"format\":\"qlen_only_bitpacking\"", "\"mask_word_bytes\":1",
                           "\"notes\":[\"request(s) 2, 3"}) {
    EXPECT_NE(text.find(part), std::string::npos) << text << " lacks " << part;
  }
  o.word_bytes = 3;
  ASSERT_EQ(run(o, text), 2) << text;
  EXPECT_NE(text.find("\"exit_code\":2,\"error\":{\"field\":\"--word-bytes\",\"index\":-1"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace mlaverify::cli
