// Mask files and convert (docs/spec.md §11): every format round-trips through every other and
// back, bit for bit in what a decoder reads (CUDA-graph padded garbage included), on the shared
// SGLang dumps and on generated batches; a converted dump still loads and replays identically;
// the block encoder is the tree encoder; rejections name the file, field and index.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>

#include "tests/dump/dump_testing.h"
#include "dump/diagnose.h"
#include "dump/dump.h"
#include "dump/mask_file.h"
#include "dump/replay.h"
#include "dump/safetensors.h"
#include "mlaverify/error.h"
#include "model/batch.h"
#include "model/mask.h"
#include "model/tree.h"

namespace mlaverify::dump {
namespace {

using model::BitRows;
using model::DraftTree;
using model::EncodedMask;
using F = MaskFormat;

const std::filesystem::path kDumps = MLAV_DUMPS_DIR;
const std::filesystem::path kEagle = kDumps / "k2_eagle16.safetensors";
const std::filesystem::path kPadded = kDumps / "k2_padded.safetensors";

const F kFormats[] = {F::FullMask, F::QlenOnly, F::QlenOnlyBitpacking, F::FlashInferPacked,
                      F::DraftBits};

std::filesystem::path temp(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "mlav_mask_file_tests";
  std::filesystem::create_directories(dir);
  return dir / name;
}

std::string name(F f) { return std::string(mask_format_name(f)); }

using testing::expect_invalid;

// What every decoder reads of a mask: each request's draft block, and its prefix columns where
// the format stores them (ones where it does not: every draft query sees the prefix).
struct Bits {
  std::vector<BitRows> draft, prefix;
};
Bits bits(const MaskFile& m) {
  const VerifyParams p = m.params();
  Bits b;
  for (int32_t i = 0; i < m.batch_size(); ++i) {
    b.draft.push_back(model::draft_block(p, i));
    if (model::mask_has_prefix_columns(m.mask.format)) {
      b.prefix.push_back(model::prefix_block(p, i));
    } else {
      BitRows ones(m.draft_nodes(i), static_cast<int32_t>(m.prefix_len(i)));
      for (int32_t t = 0; t < ones.rows(); ++t) {
        for (int32_t c = 0; c < ones.cols(); ++c) ones.set(t, c);
      }
      b.prefix.push_back(std::move(ones));
    }
  }
  return b;
}
BitRows all_ones(const BitRows& like) {
  BitRows b(like.rows(), like.cols());
  for (int32_t t = 0; t < b.rows(); ++t) {
    for (int32_t c = 0; c < b.cols(); ++c) b.set(t, c);
  }
  return b;
}

void expect_same_mask(const EncodedMask& a, const EncodedMask& b, const std::string& what) {
  EXPECT_EQ(a.format, b.format) << what;
  EXPECT_EQ(a.len, b.len) << what;
  EXPECT_TRUE(a.data == b.data) << what << ": mask bytes differ";
  EXPECT_EQ(a.indptr, b.indptr) << what;
  if (!a.indptr.empty()) {
    EXPECT_EQ(a.indptr_convention, b.indptr_convention) << what;
  }
  EXPECT_EQ(a.draft_stride, b.draft_stride) << what;
  if (a.format == F::QlenOnlyBitpacking) {
    EXPECT_EQ(a.word_bytes, b.word_bytes) << what;
  }
}

// Converting `src` to `to` keeps every draft bit, and the prefix bits where `to` stores them.
void expect_bits_kept(const MaskFile& src, const MaskFile& out, const std::string& what) {
  const Bits a = bits(src), b = bits(out);
  ASSERT_EQ(a.draft.size(), b.draft.size()) << what;
  for (size_t i = 0; i < a.draft.size(); ++i) {
    EXPECT_TRUE(a.draft[i] == b.draft[i]) << what << ": request " << i << " draft block";
    const BitRows want = model::mask_has_prefix_columns(out.mask.format) ? a.prefix[i]
                                                                         : all_ones(a.prefix[i]);
    EXPECT_TRUE(want == b.prefix[i]) << what << ": request " << i << " prefix columns";
  }
}

MaskFile write_and_read(const MaskFile& m, const std::string& file) {
  const auto path = temp(file);
  write_mask_file(path, m);
  return read_mask_file(path);
}

// A random recursive tree (parent uniform over earlier nodes): deep and wide mixed.
DraftTree random_tree(int32_t n, std::mt19937_64& rng) {
  std::vector<int32_t> parent(static_cast<size_t>(n), -1);
  for (int32_t t = 1; t < n; ++t) parent[t] = static_cast<int32_t>(rng() % t);
  return DraftTree::from_parents(parent);
}

// A generated batch (model::VerifyBatch) as an in-memory mask file, graph-padded rows (garbage
// mask bytes, §3.5) included.
MaskFile from_batch(const model::VerifyBatch& b) {
  MaskFile m;
  m.qo_indptr = b.metadata().qo_indptr;
  m.kv_indptr = b.metadata().kv_indptr;  // ExtendRows: the prefix lengths
  m.mask = b.mask();
  return m;
}

model::VerifyBatch make_batch(const std::vector<int32_t>& sizes, F format, IndptrConvention conv,
                              int32_t word_bytes, uint64_t seed, int32_t padded_bs) {
  std::mt19937_64 rng(seed);
  model::BatchSpec spec;
  for (int32_t n : sizes) {
    spec.requests.push_back({random_tree(n, rng), static_cast<int64_t>(rng() % 70)});
  }
  spec.num_heads = 1;
  spec.mask_format = format;
  spec.mask_indptr_convention = conv;
  spec.mask_word_bytes = word_bytes;
  spec.graph_padded_bs = padded_bs;
  spec.seed = seed;
  return model::VerifyBatch::build(spec);
}

int32_t smallest_word(int32_t d) { return d <= 8 ? 1 : d <= 16 ? 2 : 4; }

// ---- the encoder over blocks is the encoder over trees ----

TEST(MaskFile, EncodeBlocksIsEncodeMask) {
  std::mt19937_64 rng(11);
  for (const std::vector<int32_t>& sizes :
       {std::vector<int32_t>{1}, {7}, {32}, {33}, {100}, {1, 7, 32}, {33, 100, 7, 1}}) {
    std::vector<DraftTree> trees;
    std::vector<BitRows> blocks, prefixes;
    std::vector<int64_t> prefix;
    int32_t max_d = 0;
    for (int32_t n : sizes) {
      trees.push_back(random_tree(n, rng));
      blocks.push_back(trees.back().ancestor_bits());
      prefix.push_back(static_cast<int64_t>(rng() % 40));
      prefixes.push_back(all_ones(BitRows(n, static_cast<int32_t>(prefix.back()))));
      max_d = std::max(max_d, n);
    }
    for (F f : kFormats) {
      for (IndptrConvention c : {IndptrConvention::Csr, IndptrConvention::OffsetsOnly}) {
        for (int32_t wb : {1, 2, 4}) {
          if (f == F::QlenOnlyBitpacking && max_d > 8 * wb) continue;
          const std::string what = name(f) + " D " + std::to_string(max_d) + " wb " +
                                   std::to_string(wb);
          const EncodedMask want = model::encode_mask(f, trees, prefix, c, wb);
          expect_same_mask(want, model::encode_mask_blocks(f, blocks, prefix, c, wb), what);
          expect_same_mask(want, model::encode_mask_blocks(f, blocks, prefix, c, wb, prefixes),
                           what + " (prefix ones given)");
        }
      }
    }
  }
}

// prefix_block reads the stored prefix columns (a zero there shows), nothing for other formats.
TEST(MaskFile, PrefixBlockReadsTheStoredPrefixColumns) {
  const std::vector<DraftTree> trees{DraftTree::chain(3), DraftTree::star(4)};
  const std::vector<int64_t> prefix{5, 9};
  for (F f : {F::FullMask, F::FlashInferPacked}) {
    std::vector<BitRows> blocks{trees[0].ancestor_bits(), trees[1].ancestor_bits()};
    std::vector<BitRows> pre{all_ones(BitRows(3, 5)), all_ones(BitRows(4, 9))};
    pre[1].set(2, 7, false);
    pre[0].set(0, 0, false);
    const EncodedMask m = model::encode_mask_blocks(f, blocks, prefix, IndptrConvention::Csr, 4, pre);
    VerifyParams p;
    const std::vector<int32_t> qo{0, 3, 7}, kv{0, 5, 14};
    p.batch_size = 2;
    p.qo_indptr = qo.data();
    p.kv_indptr = kv.data();
    model::attach_mask(p, m);
    EXPECT_TRUE(model::prefix_block(p, 0) == pre[0]) << name(f);
    EXPECT_TRUE(model::prefix_block(p, 1) == pre[1]) << name(f);
    EXPECT_TRUE(model::draft_block(p, 1) == blocks[1]) << name(f);
  }
  const EncodedMask q = model::encode_mask(F::QlenOnly, trees, prefix);
  VerifyParams p;
  const std::vector<int32_t> qo{0, 3, 7}, kv{0, 5, 14};
  p.batch_size = 2;
  p.qo_indptr = qo.data();
  p.kv_indptr = kv.data();
  model::attach_mask(p, q);
  expect_invalid([&] { model::prefix_block(p, 0); }, {"mask_format", "no prefix columns"});
}

// ---- the shared dumps through every format and back ----

// full_mask -> every format -> full_mask on both SGLang dumps: every draft bit of every row kept
// (the padded dump's garbage rows, which are no trees, included); the custom_mask bytes come back
// identical, except that a format without prefix columns returns them as ones: the padded rows'
// garbage prefix bytes are the only ones that change, and exactly those.
TEST(Convert, SharedDumpsRoundTripThroughEveryFormat) {
  for (const auto& path : {kEagle, kPadded}) {
    const MaskFile in = read_mask_file(path);
    ASSERT_EQ(in.mask.format, F::FullMask) << path << ": a dump is a full_mask mask file";
    const SafetensorsFile raw = SafetensorsFile::read(path, int64_t{1} << 30);
    const TensorInfo& cm = *raw.find("custom_mask");
    const auto* orig = reinterpret_cast<const uint8_t*>(raw.data(cm));
    for (F f : kFormats) {
      const std::string what = path.filename().string() + " -> " + name(f);
      ConvertReport report;
      const MaskFile c = convert_mask_file(in, f, std::nullopt, 0, &report);
      expect_bits_kept(in, c, what);
      const MaskFile r = write_and_read(c, "shared_" + name(f) + ".safetensors");
      expect_same_mask(c.mask, r.mask, what + " (file round trip)");
      const MaskFile back = convert_mask_file(r, F::FullMask);
      // Through a format without prefix columns they come back as ones (checked bytewise below).
      expect_bits_kept(model::mask_has_prefix_columns(f) ? in : c, back, what + " -> full_mask");
      ASSERT_EQ(back.mask.len, cm.numel()) << what;
      int64_t changed = 0;
      for (int32_t i = 0; i < in.batch_size(); ++i) {
        const int64_t D = in.draft_nodes(i), P = in.prefix_len(i);
        for (int64_t t = 0; t < D; ++t) {
          for (int64_t k = 0; k < P + D; ++k) {
            const int64_t at = in.mask.indptr[i] + t * (P + D) + k;
            const bool prefix_col = k < P;
            const uint8_t want = prefix_col && !model::mask_has_prefix_columns(f) ? 1 : orig[at];
            ASSERT_EQ(back.mask.data[at], want) << what << ": custom_mask[" << at << "]";
            changed += back.mask.data[at] != orig[at];
          }
        }
      }
      const bool padded = path == kPadded && !model::mask_has_prefix_columns(f);
      EXPECT_EQ(changed > 0, padded) << what;
      EXPECT_EQ(report.notes.size(), path == kPadded ? (padded ? 2u : 1u) : 0u) << what;
      // Every other tensor rides along byte for byte, and the metadata too.
      ASSERT_EQ(back.others.size(), in.others.size());
      for (size_t k = 0; k < in.others.size(); ++k) {
        EXPECT_EQ(back.others[k].name, in.others[k].name);
        EXPECT_TRUE(back.others[k].bytes == in.others[k].bytes) << in.others[k].name;
      }
      for (const auto& [key, value] : in.metadata) EXPECT_EQ(r.metadata.at(key), value) << key;
      EXPECT_EQ(r.metadata.at("mask_format"), name(f));
    }
  }
}

// A dump converted to full_mask (from draft_bits, and to an offsets-only mask_indptr) is still a
// dump: it loads, and the model's reference output is bit-identical to the original's, so replay
// says the same thing.
TEST(Convert, ConvertedDumpLoadsAndReplaysIdentically) {
  for (const auto& path : {kEagle, kPadded}) {
    ServerDump orig = ServerDump::load(path);
    const Reference want = reference(orig, KernelAssumptions{});
    const MaskFile in = read_mask_file(path);
    const MaskFile bits = convert_mask_file(in, F::DraftBits);
    for (IndptrConvention c : {IndptrConvention::Csr, IndptrConvention::OffsetsOnly}) {
      const std::string what = path.filename().string() + " via draft_bits, " +
                               std::string(indptr_convention_name(c));
      const auto out = temp("replay_" + std::string(indptr_convention_name(c)) + ".safetensors");
      write_mask_file(out, convert_mask_file(bits, F::FullMask, c));
      ServerDump d = ServerDump::load(out);
      EXPECT_EQ(d.mask_indptr_convention(), c) << what;
      EXPECT_EQ(d.real_batch_size(), orig.real_batch_size()) << what;
      EXPECT_TRUE(d.findings().empty()) << what;
      const Reference got = reference(d, KernelAssumptions{});
      EXPECT_TRUE(got.o == want.o) << what << ": the model's o changed";
      EXPECT_TRUE(got.lse == want.lse) << what;
      const Comparison cmp = compare(d.params(), d.real_batch_size(), d.server_o(),
                                     d.server_lse(), got.o, got.lse, got.bound);
      EXPECT_TRUE(cmp.pass()) << what;
    }
  }
}

// ---- generated batches: every source format, every target, D = 1, 7, 32, 33, 100 ----

// Each batch is built in each format it can be (bitpacking only up to D = 32), CUDA-graph padded
// by two rows of garbage mask bytes, converted to every format it fits and back: every bit a
// decoder reads is kept, the real rows decode to their trees, and back in its own format the
// mask equals the canonical encoding of the same blocks (convert to itself), through files too.
TEST(Convert, GeneratedBatchesRoundTripThroughEveryFormat) {
  uint64_t seed = 100;
  for (const std::vector<int32_t>& sizes :
       {std::vector<int32_t>{1}, {7}, {32}, {33}, {100}, {1, 7, 32}, {33, 100, 7, 1}}) {
    const int32_t max_d = *std::max_element(sizes.begin(), sizes.end());
    for (F src : kFormats) {
      if (src == F::QlenOnlyBitpacking && max_d > 32) continue;
      for (IndptrConvention conv : {IndptrConvention::Csr, IndptrConvention::OffsetsOnly}) {
        if (conv == IndptrConvention::OffsetsOnly && !model::mask_has_prefix_columns(src)) continue;
        ++seed;
        const int32_t padded_bs = static_cast<int32_t>(sizes.size()) + 2;
        const model::VerifyBatch b =
            make_batch(sizes, src, conv, smallest_word(max_d), seed, padded_bs);
        const MaskFile in = from_batch(b);
        const std::string base = name(src) + " D max " + std::to_string(max_d) + " seed " +
                                 std::to_string(seed);
        for (int32_t i = 0; i < b.real_batch_size(); ++i) {
          ASSERT_TRUE(bits(in).draft[i] == b.tree(i).ancestor_bits()) << base;
        }
        const MaskFile canon = convert_mask_file(in, src);
        expect_bits_kept(in, canon, base + " -> itself");
        for (F to : kFormats) {
          const std::string what = base + " -> " + name(to);
          if (to == F::QlenOnlyBitpacking && max_d > 32) {
            expect_invalid([&] { convert_mask_file(in, to); }, {"qo_indptr", "at most 32"});
            continue;
          }
          const MaskFile c = convert_mask_file(in, to);
          expect_bits_kept(in, c, what);
          const MaskFile r = write_and_read(c, "gen.safetensors");
          expect_same_mask(c.mask, r.mask, what + " (file round trip)");
          const MaskFile back = convert_mask_file(
              r, src,
              model::mask_has_prefix_columns(src) ? std::optional(in.mask.indptr_convention)
                                                  : std::nullopt);
          if (model::mask_has_prefix_columns(src) && !model::mask_has_prefix_columns(to)) {
            expect_bits_kept(c, back, what + " -> back");  // prefix garbage returns as ones
          } else {
            expect_same_mask(canon.mask, back.mask, what + " -> back");
          }
        }
      }
    }
  }
}

// Without padding, converting a generated full_mask batch gives exactly the mask the batch
// builder writes for the same trees in the other format (model::encode_mask over the trees).
TEST(Convert, MatchesTheBuilderEncodingOfTheSameTrees) {
  uint64_t seed = 900;
  for (const std::vector<int32_t>& sizes :
       {std::vector<int32_t>{1}, {7, 1}, {32, 5}, {33}, {100, 7}}) {
    const int32_t max_d = *std::max_element(sizes.begin(), sizes.end());
    ++seed;
    const MaskFile full =
        from_batch(make_batch(sizes, F::FullMask, IndptrConvention::Csr, 4, seed, 0));
    for (F to : kFormats) {
      if (to == F::QlenOnlyBitpacking && max_d > 32) continue;
      const model::VerifyBatch want =
          make_batch(sizes, to, IndptrConvention::Csr, smallest_word(max_d), seed, 0);
      expect_same_mask(want.mask(), convert_mask_file(full, to).mask,
                       "full_mask -> " + name(to) + " D max " + std::to_string(max_d));
    }
  }
}

// ---- what a format cannot hold, and files that disagree with themselves ----

TEST(Convert, RefusesWhatAFormatCannotHold) {
  const model::VerifyBatch b =
      make_batch({7, 33, 5}, F::FullMask, IndptrConvention::Csr, 4, 5, 0);
  const MaskFile in = from_batch(b);
  // D = 33 in request 1: no bit-packing word holds it. The error names qo_indptr[2] (its end).
  try {
    convert_mask_file(in, F::QlenOnlyBitpacking);
    ADD_FAILURE() << "converted D = 33 to bit-packing";
  } catch (const InvalidInput& e) {
    EXPECT_NE(e.field().find("qo_indptr"), std::string::npos) << e.what();
    EXPECT_EQ(e.index(), 2) << e.what();
    EXPECT_NE(std::string(e.what()).find("D_i = 33"), std::string::npos) << e.what();
  }
  const MaskFile small = from_batch(make_batch({16, 3}, F::FullMask, IndptrConvention::Csr, 4, 6, 0));
  expect_invalid([&] { convert_mask_file(small, F::QlenOnlyBitpacking, std::nullopt, 1); },
                 {"word_bytes", "8 columns", "D_i = 16"});
  EXPECT_EQ(convert_mask_file(small, F::QlenOnlyBitpacking).mask.word_bytes, 2);
  EXPECT_EQ(convert_mask_file(small, F::QlenOnlyBitpacking, std::nullopt, 4).mask.word_bytes, 4);
}

// Copies the eagle dump, converted to `format` first, with its tensors and metadata edited.
using testing::Edit;
using testing::tensor;
std::filesystem::path edited(F format, const std::string& file, const Edit& edit) {
  const auto conv = temp("base_" + name(format) + ".safetensors");
  write_mask_file(conv, convert_mask_file(read_mask_file(kEagle), format));
  const auto path = temp(file);
  testing::rewrite_file(conv, path, edit);
  return path;
}
void set_i64(TensorOut& t, size_t k, int64_t v) { std::memcpy(t.bytes.data() + 8 * k, &v, 8); }

TEST(MaskFile, RejectsFilesThatDisagreeNamingTheField) {
  using T = std::vector<TensorOut>;
  using M = std::map<std::string, std::string>;
  auto rejects = [](const std::filesystem::path& p, std::initializer_list<std::string> parts) {
    expect_invalid([&] { read_mask_file(p); }, parts);
  };
  // mask_indptr disagrees with D_i (P_i + D_i): request 1's segment is one element short.
  rejects(edited(F::FullMask, "short.safetensors",
                 [](T& t, M&) { set_i64(tensor(t, "mask_indptr"), 2, 2575); }),
          {"short.safetensors: mask_indptr[1]", "expected D_i * (P_i + D_i) = 1296"});
  rejects(edited(F::FlashInferPacked, "fi_short.safetensors",
                 [](T& t, M&) { set_i64(tensor(t, "mask_indptr"), 1, 159); }),
          {"mask_indptr[0]", "ceil(D_i * (P_i + D_i) / 8)"});
  // A [:bs] slice where the metadata says csr; an indptr of neither length.
  rejects(edited(F::FullMask, "sliced.safetensors",
                 [](T& t, M&) {
                   TensorOut& mi = tensor(t, "mask_indptr");
                   mi.shape = {4};
                   mi.bytes.resize(32);
                 }),
          {"sliced.safetensors: mask_indptr", "convention says csr", "[:bs] slice"});
  rejects(edited(F::FullMask, "three.safetensors",
                 [](T& t, M&) {
                   TensorOut& mi = tensor(t, "mask_indptr");
                   mi.shape = {3};
                   mi.bytes.resize(24);
                 }),
          {"mask_indptr", "3 entries, expected bs + 1 = 5"});
  rejects(edited(F::FullMask, "no_indptr.safetensors",
                 [](T& t, M&) {
                   t.erase(std::find_if(t.begin(), t.end(),
                                        [](const TensorOut& o) { return o.name == "mask_indptr"; }));
                 }),
          {"mask_indptr", "missing"});
  rejects(edited(F::QlenOnly, "extra_indptr.safetensors",
                 [](T& t, M&) { t.push_back({"mask_indptr", StDType::I64, {5}, std::vector<std::byte>(40)}); }),
          {"mask_indptr", "qlen_only has no mask_indptr"});
  // Metadata: an unknown format, a missing or too small stride, a word that is not 1, 2, 4.
  rejects(edited(F::FullMask, "fmt.safetensors", [](T&, M& m) { m["mask_format"] = "packed"; }),
          {"__metadata__.mask_format", "\"packed\""});
  rejects(edited(F::QlenOnly, "nostride.safetensors",
                 [](T&, M& m) { m.erase("mask_draft_stride"); }),
          {"__metadata__.mask_draft_stride", "missing"});
  rejects(edited(F::DraftBits, "stride0.safetensors", [](T& t, M& m) {
            m["mask_draft_stride"] = "0";
            (void)t;
          }),
          {"__metadata__.mask_draft_stride", "outside [1, 1024]"});
  rejects(edited(F::QlenOnly, "stride_small.safetensors",
                 [](T& t, M& m) {
                   m["mask_draft_stride"] = "15";
                   TensorOut& cm = tensor(t, "custom_mask");
                   cm.shape = {4 * 15 * 15};
                   cm.bytes.resize(4 * 15 * 15);
                 }),
          {"__metadata__.mask_draft_stride[0]", "15 < D_i = 16"});
  rejects(edited(F::QlenOnlyBitpacking, "wb3.safetensors",
                 [](T&, M& m) { m["mask_word_bytes"] = "3"; }),
          {"__metadata__.mask_word_bytes", "must be 1, 2 or 4"});
  rejects(edited(F::QlenOnlyBitpacking, "wb1.safetensors",
                 [](T& t, M& m) {
                   m["mask_word_bytes"] = "1";
                   TensorOut& cm = tensor(t, "custom_mask");
                   cm.dtype = StDType::U8;
                   cm.shape = {cm.shape[0] * cm.shape[1] * 2};
                 }),
          {"__metadata__.mask_word_bytes", "D_i = 16"});
  // The mask tensor: the wrong dtype, too short, the wrong shape.
  rejects(edited(F::DraftBits, "u8bits.safetensors",
                 [](T& t, M&) {
                   TensorOut& cm = tensor(t, "custom_mask");
                   cm.dtype = StDType::U8;
                   cm.shape = {static_cast<int64_t>(cm.bytes.size())};
                 }),
          {"u8bits.safetensors: custom_mask", "uint32 words"});
  rejects(edited(F::DraftBits, "shortbits.safetensors",
                 [](T& t, M&) {
                   TensorOut& cm = tensor(t, "custom_mask");
                   cm.shape = {63};
                   cm.bytes.resize(63 * 4);
                 }),
          {"custom_mask", "reads up to index 63", "holds 63 uint32 words"});
  rejects(edited(F::QlenOnlyBitpacking, "shape.safetensors",
                 [](T& t, M&) { tensor(t, "custom_mask").shape = {16, 4}; }),
          {"custom_mask", "expected [bs, S] = [4, 16]"});
  rejects(edited(F::FullMask, "twos.safetensors",
                 [](T& t, M&) {
                   TensorOut& cm = tensor(t, "custom_mask");
                   std::vector<std::byte> wide(cm.bytes.size() * 4);
                   for (size_t k = 0; k < cm.bytes.size(); ++k) wide[4 * k] = cm.bytes[k];
                   wide[4 * 7] = std::byte{2};
                   cm.dtype = StDType::I32;
                   cm.bytes = wide;
                 }),
          {"custom_mask[7]", "not 0 or 1"});
  // The batch itself.
  rejects(edited(F::FullMask, "nokv.safetensors",
                 [](T& t, M&) {
                   t.erase(std::find_if(t.begin(), t.end(),
                                        [](const TensorOut& o) { return o.name == "kv_indptr"; }));
                 }),
          {"nokv.safetensors: kv_indptr", "missing"});
  rejects(edited(F::DraftBits, "qo.safetensors",
                 [](T& t, M&) {
                   TensorOut& qo = tensor(t, "qo_indptr");
                   int32_t v = 40;
                   std::memcpy(qo.bytes.data() + 4, &v, 4);  // request 1: D = 32 - 40
                 }),
          {"qo.safetensors: qo_indptr[2]", "-8 draft tokens"});
}

}  // namespace
}  // namespace mlaverify::dump
