// Verify-batch metadata builders (docs/spec.md §3) and CUDA-graph padding with stale garbage,
// following SGLang's eager buffers and its graph runner's fill values.
#include "model/metadata.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "mlaverify/error.h"

namespace mlaverify::model {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

void check_lengths(size_t bs, size_t prefix_lens, size_t draft_sizes, const char* draft_field) {
  if (bs == 0) throw InvalidInput("req_pool_indices", -1, "empty batch (bs must be >= 1)");
  if (prefix_lens != bs) {
    throw InvalidInput("prefix_lens", -1,
                       "length " + str(static_cast<int64_t>(prefix_lens)) + " != bs " +
                           str(static_cast<int64_t>(bs)));
  }
  if (draft_sizes != bs) {
    throw InvalidInput(draft_field, -1,
                       "length " + str(static_cast<int64_t>(draft_sizes)) + " != bs " +
                           str(static_cast<int64_t>(bs)));
  }
}

// Appends `size` to a CSR int32 indptr, refusing a total past INT32_MAX (SGLang's int32
// kv_indptr would wrap there; the error says which entry would have).
void push_csr(std::vector<int32_t>& indptr, int64_t size, const char* field) {
  const int64_t next = static_cast<int64_t>(indptr.back()) + size;
  if (next > std::numeric_limits<int32_t>::max()) {
    throw InvalidInput(field, static_cast<int64_t>(indptr.size()),
                       "total " + str(next) + " overflows int32");
  }
  indptr.push_back(static_cast<int32_t>(next));
}

}  // namespace

VerifyMetadata build_metadata(const ReqToToken& req_to_token,
                              std::span<const int32_t> req_pool_indices,
                              std::span<const int64_t> prefix_lens,
                              std::span<const int32_t> draft_sizes, DraftKvSource draft_source) {
  const size_t bs = req_pool_indices.size();
  check_lengths(bs, prefix_lens.size(), draft_sizes.size(), "draft_sizes");
  if (draft_source != DraftKvSource::ExtendRows && draft_source != DraftKvSource::CacheSlots) {
    throw InvalidInput("draft_source", -1,
                       "unknown draft source " + str(static_cast<int32_t>(draft_source)));
  }
  const bool cache_slots = draft_source == DraftKvSource::CacheSlots;
  const int64_t cols = req_to_token.cols();

  VerifyMetadata m;
  m.draft_source = draft_source;
  m.qo_indptr.reserve(bs + 1);
  m.kv_indptr.reserve(bs + 1);
  m.qo_indptr.push_back(0);
  m.kv_indptr.push_back(0);
  // First pass: sizes and checks, so kv_indices is allocated once.
  for (size_t i = 0; i < bs; ++i) {
    const auto ii = static_cast<int64_t>(i);
    const int64_t r = req_pool_indices[i];
    if (r < 0 || r >= req_to_token.rows()) {
      throw InvalidInput(
          "req_pool_indices", ii,
          "row " + str(r) + " outside req_to_token rows [0, " + str(req_to_token.rows()) + ")");
    }
    const int64_t p = prefix_lens[i];
    if (p < 0) throw InvalidInput("prefix_lens", ii, "negative prefix length " + str(p));
    const int64_t d = draft_sizes[i];
    if (d < 1) throw InvalidInput("draft_sizes", ii, "D = " + str(d) + " < 1");
    // Only the entries that are read must lie in the row: ExtendRows reads the prefix only.
    const int64_t kv_len = cache_slots ? p + d : p;
    if (kv_len > cols) {
      throw InvalidInput("prefix_lens", ii,
                         (cache_slots ? "P + D = " : "P = ") + str(kv_len) +
                             " exceeds the req_to_token row of " + str(cols) + " columns");
    }
    push_csr(m.qo_indptr, d, "qo_indptr");
    push_csr(m.kv_indptr, kv_len, "kv_indptr");
  }
  m.kv_indices.resize(static_cast<size_t>(m.kv_indptr.back()));  // [kv_indptr[bs]]
  for (size_t i = 0; i < bs; ++i) {
    const int64_t r = req_pool_indices[i];
    const int64_t begin = m.kv_indptr[i];
    const int64_t kv_len = static_cast<int64_t>(m.kv_indptr[i + 1]) - begin;
    const std::span<const int32_t> row = req_to_token.row(r);  // [cols]
    for (int64_t j = 0; j < kv_len; ++j) {
      const int32_t slot = row[static_cast<size_t>(j)];
      if (slot < 0) {
        throw InvalidInput("req_to_token", r * cols + j, "negative slot " + str(slot));
      }
      m.kv_indices[static_cast<size_t>(begin + j)] = slot;
    }
  }
  return m;
}

VerifyMetadata build_metadata(const ReqToToken& req_to_token,
                              std::span<const int32_t> req_pool_indices,
                              std::span<const int64_t> prefix_lens,
                              std::span<const DraftTree> trees, DraftKvSource draft_source) {
  check_lengths(req_pool_indices.size(), prefix_lens.size(), trees.size(), "trees");
  std::vector<int32_t> sizes(trees.size());  // [bs]
  for (size_t i = 0; i < trees.size(); ++i) sizes[i] = trees[i].size();
  VerifyMetadata m =
      build_metadata(req_to_token, req_pool_indices, prefix_lens, sizes, draft_source);
  m.positions.resize(static_cast<size_t>(m.total_q()));  // [T]
  for (size_t i = 0; i < trees.size(); ++i) {
    const std::vector<int64_t> pos = trees[i].positions(prefix_lens[i]);  // [D_i]
    std::copy(pos.begin(), pos.end(), m.positions.begin() + m.qo_indptr[i]);
  }
  return m;
}

int32_t pad_batch_size(int32_t bs, std::span<const int32_t> captured_sizes) {
  if (bs < 1) throw InvalidInput("batch_size", -1, "bs " + str(bs) + " < 1");
  int32_t best = 0;
  int32_t largest = 0;
  for (size_t k = 0; k < captured_sizes.size(); ++k) {
    const int32_t c = captured_sizes[k];
    if (c < 1) {
      throw InvalidInput("captured_sizes", static_cast<int64_t>(k), "size " + str(c) + " < 1");
    }
    largest = std::max(largest, c);
    if (c >= bs && (best == 0 || c < best)) best = c;
  }
  if (best == 0) {
    throw InvalidInput(
        "batch_size", -1,
        "bs " + str(bs) + " exceeds every captured size (largest " + str(largest) + ")");
  }
  return best;
}

RequestRows pad_requests(std::span<const int32_t> req_pool_indices,
                         std::span<const int64_t> prefix_lens, std::span<const int32_t> draft_sizes,
                         int32_t padded_bs) {
  const size_t bs = req_pool_indices.size();
  check_lengths(bs, prefix_lens.size(), draft_sizes.size(), "draft_sizes");
  if (padded_bs < 0 || static_cast<size_t>(padded_bs) < bs) {
    throw InvalidInput("padded_bs", -1, str(padded_bs) + " < bs " + str(static_cast<int64_t>(bs)));
  }
  RequestRows rows;
  rows.req_pool_indices.assign(req_pool_indices.begin(), req_pool_indices.end());
  rows.prefix_lens.assign(prefix_lens.begin(), prefix_lens.end());
  rows.draft_sizes.assign(draft_sizes.begin(), draft_sizes.end());
  const int32_t batch_d = *std::max_element(draft_sizes.begin(), draft_sizes.end());
  rows.req_pool_indices.resize(static_cast<size_t>(padded_bs), 0);
  rows.prefix_lens.resize(static_cast<size_t>(padded_bs), 1);
  rows.draft_sizes.resize(static_cast<size_t>(padded_bs), batch_d);
  return rows;
}

ByteRange padded_mask_bytes(const EncodedMask& mask, int32_t real_bs, int64_t real_tokens) {
  const auto total = static_cast<int64_t>(mask.data.size());
  int64_t begin = total;
  switch (mask.format) {
    case MaskFormat::FullMask:
    case MaskFormat::FlashInferPacked: {
      // indptr entry i is request i's start under both conventions; the FullMask unit is one byte
      // per element, the FlashInfer unit is a byte already.
      if (real_bs < static_cast<int32_t>(mask.indptr.size())) begin = mask.indptr[real_bs];
      break;
    }
    case MaskFormat::QlenOnly:
      begin = int64_t{real_bs} * mask.draft_stride * mask.draft_stride;  // [bs, S, S] bytes
      break;
    case MaskFormat::QlenOnlyBitpacking:
      begin = int64_t{real_bs} * mask.draft_stride * mask.word_bytes;  // [bs, S] words
      break;
    case MaskFormat::DraftBits:
      begin = real_tokens * mask.draft_stride * 4;  // [T, S] uint32 words, one row per token
      break;
  }
  begin = std::clamp<int64_t>(begin, 0, total);
  return {begin, total};
}

void scribble_padded_mask(EncodedMask& mask, int32_t real_bs, int64_t real_tokens, uint64_t seed) {
  const ByteRange r = padded_mask_bytes(mask, real_bs, real_tokens);
  SplitMix64 rng(seed);
  for (int64_t b = r.begin; b < r.end; ++b) {
    mask.data[static_cast<size_t>(b)] = static_cast<uint8_t>(rng.next() >> 56);
  }
}

void scribble_padded_positions(std::vector<int64_t>& positions, int64_t real_tokens,
                               uint64_t seed) {
  SplitMix64 rng(seed);
  for (size_t t = static_cast<size_t>(std::max<int64_t>(real_tokens, 0)); t < positions.size();
       ++t) {
    positions[t] = static_cast<int64_t>(rng.next());
  }
}

}  // namespace mlaverify::model
