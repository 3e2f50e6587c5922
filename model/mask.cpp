// Mask encoders and the shared decoder: a per-request view checks every read against mask_len
// once, then mask_visible / draft_block / validate_mask all read through the same index formulas.
#include "model/mask.h"

#include <algorithm>
#include <string>

#include "mlaverify/error.h"

namespace mlaverify::model {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

// Checked int64 arithmetic: metadata comes from outside, and an overflowed offset would turn a
// bounds check into a wild read.
int64_t mul(int64_t a, int64_t b, const char* field, int64_t index) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) throw InvalidInput(field, index, "offset overflows int64");
  return r;
}
int64_t add(int64_t a, int64_t b, const char* field, int64_t index) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) throw InvalidInput(field, index, "offset overflows int64");
  return r;
}

bool uses_indptr(MaskFormat f) {
  return f == MaskFormat::FullMask || f == MaskFormat::FlashInferPacked;
}

// Size of one request's segment: elements (FullMask) or bytes (FlashInferPacked).
int64_t segment_size(MaskFormat f, int64_t d, int64_t p, const char* field, int64_t index) {
  int64_t elements = mul(d, add(p, d, field, index), field, index);
  return f == MaskFormat::FullMask ? elements : (elements + 7) / 8;
}

// Where request i's bits live, with every read bounds-checked at construction. Reads are
// monotone in (t, j) in every format (row-major, strides >= D_i), so checking the first and the
// last read of the block covers all of them.
struct RequestView {
  MaskFormat format;
  const uint8_t* bytes;  // p.mask as bytes
  int32_t draft_nodes;   // D_i
  int64_t prefix_len;    // P_i
  int64_t base;          // format units: element (FullMask), bit (FlashInfer), byte, or word
  int64_t row_stride;    // same units, between consecutive draft rows
  int32_t word_bytes;    // QlenOnlyBitpacking

  // Byte index and bit within it of (t, j). Little-endian everywhere: bit j of a multi-byte word
  // is bit j % 8 of its byte j / 8; bit k of a FlashInfer segment is bit k % 8 of byte k / 8.
  bool read(int32_t t, int32_t j) const {
    int64_t byte;
    int bit;
    switch (format) {
      case MaskFormat::FullMask:
        return bytes[base + t * row_stride + j] != 0;
      case MaskFormat::QlenOnly:
        return bytes[base + t * row_stride + j] != 0;
      case MaskFormat::QlenOnlyBitpacking:
        byte = (base + t * row_stride) * word_bytes + j / 8;
        bit = j % 8;
        break;
      case MaskFormat::FlashInferPacked: {
        int64_t k = base + t * row_stride + j;
        byte = k / 8;
        bit = static_cast<int>(k % 8);
        break;
      }
      case MaskFormat::DraftBits:
      default:
        byte = (base + t * row_stride + j / 32) * 4 + (j % 32) / 8;
        bit = j % 8;
        break;
    }
    return (bytes[byte] >> bit) & 1u;
  }
};

RequestView view_request(const VerifyParams& p, int32_t i) {
  if (p.mask == nullptr) throw InvalidInput("mask", -1, "null pointer");
  if (p.qo_indptr == nullptr) throw InvalidInput("qo_indptr", -1, "null pointer");
  if (p.kv_indptr == nullptr) throw InvalidInput("kv_indptr", -1, "null pointer");
  if (i < 0 || i >= p.batch_size) {
    throw InvalidInput("request", i, "outside [0, batch_size = " + str(p.batch_size) + ")");
  }
  if (p.mask_len < 0) throw InvalidInput("mask_len", -1, "negative: " + str(p.mask_len));
  const RequestExtent e = request_extent(p, i);
  if (e.draft_nodes < 0) {
    throw InvalidInput("qo_indptr", i + 1, "decreasing: request " + str(i) + " has D_i < 0");
  }
  if (e.prefix_len < 0) {
    throw InvalidInput("kv_indptr", i + 1,
                       "request " + str(i) + " has prefix length " + str(e.prefix_len) + " < 0");
  }
  RequestView v{
      p.mask_format,    static_cast<const uint8_t*>(p.mask), e.draft_nodes, e.prefix_len, 0, 0,
      p.mask_word_bytes};
  const int64_t d = e.draft_nodes;
  // Last read in format units, checked against mask_len below.
  int64_t first = 0;
  int64_t last = -1;
  switch (p.mask_format) {
    case MaskFormat::FullMask:
    case MaskFormat::FlashInferPacked: {
      if (p.mask_indptr == nullptr) throw InvalidInput("mask_indptr", -1, "null pointer");
      const int64_t start = p.mask_indptr[i];
      const int64_t size = segment_size(p.mask_format, d, e.prefix_len, "kv_indptr", i + 1);
      if (start < 0 || start > p.mask_len || size > p.mask_len - start) {
        throw InvalidInput("mask_indptr", i,
                           "segment [" + str(start) + ", " + str(start) + " + " + str(size) +
                               ") of request " + str(i) + " outside the mask of " +
                               str(p.mask_len) +
                               (p.mask_format == MaskFormat::FullMask ? " elements" : " bytes"));
      }
      v.row_stride = e.prefix_len + d;
      if (p.mask_format == MaskFormat::FullMask) {
        v.base = start + e.prefix_len;  // column P_i of row 0: the draft block starts there
      } else {
        v.base = mul(start, 8, "mask_indptr", i) + e.prefix_len;  // in bits
      }
      // The whole segment is inside the buffer, so every read is.
      return v;
    }
    case MaskFormat::QlenOnly: {
      const int64_t s = p.mask_draft_stride;
      if (s < d) {
        throw InvalidInput("mask_draft_stride", i,
                           str(s) + " < D_i = " + str(d) + " of request " + str(i));
      }
      v.row_stride = s;
      v.base = mul(mul(i, s, "mask_draft_stride", i), s, "mask_draft_stride", i);
      first = v.base;
      if (d > 0) {
        last = add(add(v.base, mul(d - 1, s, "mask_draft_stride", i), "mask_len", -1), d - 1,
                   "mask_len", -1);
      }
      break;
    }
    case MaskFormat::QlenOnlyBitpacking: {
      const int32_t wb = p.mask_word_bytes;
      if (wb != 1 && wb != 2 && wb != 4) {
        throw InvalidInput("mask_word_bytes", -1, "must be 1, 2 or 4, got " + str(wb));
      }
      if (d > 8 * wb) {
        throw InvalidInput("mask_word_bytes", -1,
                           "request " + str(i) + " has D_i = " + str(d) + " columns, more than a " +
                               str(wb) + "-byte word holds");
      }
      const int64_t s = p.mask_draft_stride;
      if (s < d) {
        throw InvalidInput("mask_draft_stride", i,
                           str(s) + " < D_i = " + str(d) + " of request " + str(i));
      }
      v.row_stride = 1;  // one word per draft row; requests are s words apart
      v.base = mul(i, s, "mask_draft_stride", i);  // in words
      first = mul(v.base, wb, "mask_draft_stride", i);
      if (d > 0) {
        last = add(mul(add(v.base, d - 1, "mask_len", -1), wb, "mask_draft_stride", i), wb - 1,
                   "mask_len", -1);
      }
      break;
    }
    case MaskFormat::DraftBits: {
      const int64_t words = (d + 31) / 32;
      const int64_t s = p.mask_draft_stride;
      if (s < words) {
        throw InvalidInput("mask_draft_stride", i,
                           str(s) + " uint32 words per row cannot hold D_i = " + str(d) +
                               " columns of request " + str(i));
      }
      if (e.q_begin < 0) throw InvalidInput("qo_indptr", i, "negative: " + str(e.q_begin));
      v.row_stride = s;
      v.base = mul(e.q_begin, s, "mask_draft_stride", i);  // in words
      first = v.base;
      if (d > 0) {
        last = add(mul(e.q_begin + d - 1, s, "mask_draft_stride", i), words - 1, "mask_len", -1);
      }
      break;
    }
    default:
      throw InvalidInput("mask_format", -1,
                         "unknown format " + str(static_cast<int32_t>(p.mask_format)));
  }
  if (d > 0 && (first < 0 || last >= p.mask_len)) {
    throw InvalidInput("mask_len", -1,
                       "request " + str(i) + " reads up to index " + str(last) +
                           " but the mask holds " + str(p.mask_len) +
                           (p.mask_format == MaskFormat::DraftBits ? " uint32 words" : " bytes"));
  }
  return v;
}

void set_le_bit(std::vector<uint8_t>& bytes, int64_t bit) {
  bytes[static_cast<size_t>(bit / 8)] |= static_cast<uint8_t>(1u << (bit % 8));
}

}  // namespace

namespace {

// The one encoder: request i's D_i x D_i block (every bit, so garbage above the diagonal survives)
// and, for the formats that store them, its D_i x P_i prefix columns (ones when none are given).
// `what` names the caller's input in errors ("trees" for encode_mask, "blocks" otherwise).
EncodedMask encode_blocks(MaskFormat format, std::span<const BitRows> blocks,
                          std::span<const int64_t> prefix_lens, IndptrConvention conv,
                          int32_t word_bytes, std::span<const BitRows> prefix_blocks,
                          const char* what) {
  if (blocks.empty()) throw InvalidInput(what, -1, "empty batch");
  if (prefix_lens.size() != blocks.size()) {
    throw InvalidInput("prefix_lens", -1,
                       "has " + str(static_cast<int64_t>(prefix_lens.size())) + " entries for " +
                           str(static_cast<int64_t>(blocks.size())) + " " + what);
  }
  if (conv != IndptrConvention::Csr && conv != IndptrConvention::OffsetsOnly) {
    throw InvalidInput("conv", -1, "unknown convention " + str(static_cast<int32_t>(conv)));
  }
  const int64_t bs = static_cast<int64_t>(blocks.size());
  const bool with_prefix = !prefix_blocks.empty() && uses_indptr(format);
  if (with_prefix && prefix_blocks.size() != blocks.size()) {
    throw InvalidInput("prefix_blocks", -1,
                       "has " + str(static_cast<int64_t>(prefix_blocks.size())) +
                           " entries for " + str(bs) + " " + what);
  }
  int32_t max_d = 0;
  int64_t total_q = 0;
  for (int64_t i = 0; i < bs; ++i) {
    if (prefix_lens[i] < 0)
      throw InvalidInput("prefix_lens", i, "negative: " + str(prefix_lens[i]));
    if (blocks[i].rows() != blocks[i].cols()) {
      throw InvalidInput(what, i,
                         "block of " + str(blocks[i].rows()) + " x " + str(blocks[i].cols()) +
                             " is not square");
    }
    if (with_prefix && (prefix_blocks[i].rows() != blocks[i].rows() ||
                        prefix_blocks[i].cols() != prefix_lens[i])) {
      throw InvalidInput("prefix_blocks", i,
                         str(prefix_blocks[i].rows()) + " x " + str(prefix_blocks[i].cols()) +
                             ", expected D_i x P_i = " + str(blocks[i].rows()) + " x " +
                             str(prefix_lens[i]));
    }
    max_d = std::max(max_d, blocks[i].rows());
    total_q += blocks[i].rows();
  }
  if (total_q > INT32_MAX) {
    throw InvalidInput(what, -1,
                       "total draft tokens " + str(total_q) + " overflow int32 qo_indptr");
  }
  auto prefix_bit = [&](int64_t i, int32_t t, int64_t c) {
    return !with_prefix || prefix_blocks[i].test(t, static_cast<int32_t>(c));
  };

  EncodedMask m;
  m.format = format;
  m.indptr_convention = conv;
  m.word_bytes = word_bytes;
  switch (format) {
    case MaskFormat::FullMask:
    case MaskFormat::FlashInferPacked: {
      std::vector<int64_t> starts(bs + 1, 0);  // [bs + 1] CSR; trimmed to [bs] for OffsetsOnly
      for (int64_t i = 0; i < bs; ++i) {
        int64_t size = segment_size(format, blocks[i].rows(), prefix_lens[i], "prefix_lens", i);
        starts[i + 1] = add(starts[i], size, "prefix_lens", i);
      }
      m.len = starts[bs];
      m.data.assign(static_cast<size_t>(m.len), 0);  // [len] bytes
      for (int64_t i = 0; i < bs; ++i) {
        const BitRows& block = blocks[i];  // [D, D]
        const int64_t d = block.rows();
        const int64_t p = prefix_lens[i];
        for (int64_t t = 0; t < d; ++t) {
          const int64_t row = t * (p + d);  // element index within the segment
          const auto tt = static_cast<int32_t>(t);
          if (format == MaskFormat::FullMask) {
            uint8_t* out = m.data.data() + starts[i] + row;
            if (with_prefix) {
              for (int64_t c = 0; c < p; ++c) out[c] = prefix_bit(i, tt, c) ? 1 : 0;
            } else {
              std::fill_n(out, p, uint8_t{1});  // prefix columns: every draft query sees the prefix
            }
            for (int64_t j = 0; j < d; ++j) {
              out[p + j] = block.test(tt, static_cast<int32_t>(j)) ? 1 : 0;
            }
          } else {
            const int64_t seg_bit = starts[i] * 8;  // segments start on whole bytes
            for (int64_t c = 0; c < p; ++c) {
              if (prefix_bit(i, tt, c)) set_le_bit(m.data, seg_bit + row + c);
            }
            for (int64_t j = 0; j < d; ++j) {
              if (block.test(tt, static_cast<int32_t>(j))) set_le_bit(m.data, seg_bit + row + p + j);
            }
          }
        }
      }
      if (conv == IndptrConvention::OffsetsOnly) starts.pop_back();
      m.indptr = std::move(starts);
      break;
    }
    case MaskFormat::QlenOnly: {
      const int64_t s = max_d;
      m.draft_stride = max_d;
      m.len = mul(mul(bs, s, what, -1), s, what, -1);
      m.data.assign(static_cast<size_t>(m.len), 0);  // [bs, S, S] bytes, padding zero
      for (int64_t i = 0; i < bs; ++i) {
        const BitRows& block = blocks[i];  // [D, D]
        for (int32_t t = 0; t < block.rows(); ++t) {
          for (int32_t j = 0; j < block.rows(); ++j) {
            m.data[(i * s + t) * s + j] = block.test(t, j) ? 1 : 0;
          }
        }
      }
      break;
    }
    case MaskFormat::QlenOnlyBitpacking: {
      for (int64_t i = 0; i < bs; ++i) {
        if (blocks[i].rows() > 32) {
          throw InvalidInput(what, i,
                             "D_i = " + str(blocks[i].rows()) +
                                 " exceeds the 32 columns QLEN_ONLY_BITPACKING can hold");
        }
      }
      if (word_bytes != 1 && word_bytes != 2 && word_bytes != 4) {
        throw InvalidInput("word_bytes", -1, "must be 1, 2 or 4, got " + str(word_bytes));
      }
      if (max_d > 8 * word_bytes) {
        throw InvalidInput(
            "word_bytes", -1,
            "a " + str(word_bytes) + "-byte word cannot hold max D_i = " + str(max_d) + " columns");
      }
      const int64_t s = max_d;
      m.draft_stride = max_d;
      m.len = bs * s * word_bytes;
      m.data.assign(static_cast<size_t>(m.len), 0);  // [bs, S] words of word_bytes, little-endian
      for (int64_t i = 0; i < bs; ++i) {
        const BitRows& block = blocks[i];  // [D, D]
        for (int32_t t = 0; t < block.rows(); ++t) {
          const int64_t word_bit = (i * s + t) * word_bytes * 8;
          for (int32_t j = 0; j < block.rows(); ++j) {
            if (block.test(t, j)) set_le_bit(m.data, word_bit + j);
          }
        }
      }
      break;
    }
    case MaskFormat::DraftBits: {
      const int64_t s = (max_d + 31) / 32;  // uint32 words per draft token row
      m.draft_stride = static_cast<int32_t>(s);
      m.len = total_q * s;
      m.data.assign(static_cast<size_t>(m.len) * 4, 0);  // [T, S] uint32, little-endian bytes
      int64_t q_begin = 0;
      for (int64_t i = 0; i < bs; ++i) {
        const BitRows& block = blocks[i];  // [D, D]
        for (int32_t t = 0; t < block.rows(); ++t) {
          const int64_t row_bit = (q_begin + t) * s * 32;
          for (int32_t j = 0; j < block.rows(); ++j) {
            if (block.test(t, j)) set_le_bit(m.data, row_bit + j);
          }
        }
        q_begin += block.rows();
      }
      break;
    }
    default:
      throw InvalidInput("format", -1, "unknown mask format " + str(static_cast<int32_t>(format)));
  }
  return m;
}

}  // namespace

EncodedMask encode_mask(MaskFormat format, std::span<const DraftTree> trees,
                        std::span<const int64_t> prefix_lens, IndptrConvention conv,
                        int32_t word_bytes) {
  std::vector<BitRows> blocks;
  blocks.reserve(trees.size());
  for (const DraftTree& t : trees) blocks.push_back(t.ancestor_bits());  // [D, D]
  return encode_blocks(format, blocks, prefix_lens, conv, word_bytes, {}, "trees");
}

EncodedMask encode_mask_blocks(MaskFormat format, std::span<const BitRows> draft_blocks,
                               std::span<const int64_t> prefix_lens, IndptrConvention conv,
                               int32_t word_bytes, std::span<const BitRows> prefix_blocks) {
  return encode_blocks(format, draft_blocks, prefix_lens, conv, word_bytes, prefix_blocks,
                       "blocks");
}

bool mask_has_prefix_columns(MaskFormat format) { return uses_indptr(format); }

void attach_mask(VerifyParams& p, const EncodedMask& m) {
  p.mask_format = m.format;
  p.mask = m.data.data();
  p.mask_len = m.len;
  p.mask_indptr = m.indptr.empty() ? nullptr : m.indptr.data();
  p.mask_indptr_convention = m.indptr_convention;
  p.mask_draft_stride = m.draft_stride;
  p.mask_word_bytes = m.word_bytes;
}

bool mask_visible(const VerifyParams& p, int32_t request, int32_t t, int32_t j) {
  const RequestView v = view_request(p, request);
  if (t < 0 || t >= v.draft_nodes) {
    throw InvalidInput("t", t, "draft query outside [0, D_i = " + str(v.draft_nodes) + ")");
  }
  if (j < 0 || j >= v.draft_nodes) {
    throw InvalidInput("j", j, "draft column outside [0, D_i = " + str(v.draft_nodes) + ")");
  }
  return v.read(t, j);
}

BitRows draft_block(const VerifyParams& p, int32_t request) {
  const RequestView v = view_request(p, request);
  BitRows block(v.draft_nodes, v.draft_nodes);  // [D_i, D_i]
  // Every column is read, upper triangle included: a garbage bit there must reach the caller
  // (from_ancestor_bits rejects it) rather than be silently ignored.
  for (int32_t t = 0; t < v.draft_nodes; ++t) {
    for (int32_t j = 0; j < v.draft_nodes; ++j) {
      if (v.read(t, j)) block.set(t, j);
    }
  }
  return block;
}

BitRows prefix_block(const VerifyParams& p, int32_t request) {
  if (!uses_indptr(p.mask_format)) {
    throw InvalidInput("mask_format", -1,
                       "format " + str(static_cast<int32_t>(p.mask_format)) +
                           " stores no prefix columns");
  }
  const RequestView v = view_request(p, request);
  if (v.prefix_len > INT32_MAX) {
    throw InvalidInput("kv_indptr", request + 1, "prefix length " + str(v.prefix_len) + " too long");
  }
  const auto plen = static_cast<int32_t>(v.prefix_len);
  BitRows block(v.draft_nodes, plen);  // [D_i, P_i]
  // Column c of the row is draft column c - P_i of the view (its base is the draft block's).
  for (int32_t t = 0; t < v.draft_nodes; ++t) {
    for (int32_t c = 0; c < plen; ++c) {
      if (v.read(t, c - plen)) block.set(t, c);
    }
  }
  return block;
}

void validate_mask(const VerifyParams& p) {
  if (p.mask == nullptr) throw InvalidInput("mask", -1, "null pointer");
  if (p.batch_size < 0) throw InvalidInput("batch_size", -1, "negative: " + str(p.batch_size));
  if (uses_indptr(p.mask_format)) {
    if (p.mask_indptr == nullptr) throw InvalidInput("mask_indptr", -1, "null pointer");
    const int64_t* ip = p.mask_indptr;
    const bool csr = p.mask_indptr_convention == IndptrConvention::Csr;
    if (!csr && p.mask_indptr_convention != IndptrConvention::OffsetsOnly) {
      throw InvalidInput("mask_indptr_convention", -1,
                         "unknown " + str(static_cast<int32_t>(p.mask_indptr_convention)));
    }
    if (csr && ip[0] != 0) {
      throw InvalidInput("mask_indptr", 0,
                         "CSR must start at 0, got " + str(ip[0]) +
                             " (offsets of a larger buffer passed as CSR?)");
    }
    for (int32_t i = 0; i < p.batch_size; ++i) {
      if (i > 0 && ip[i] < ip[i - 1]) {
        throw InvalidInput("mask_indptr", i,
                           "not non-decreasing (" + str(ip[i]) + " < " + str(ip[i - 1]) + ")");
      }
      view_request(p, i);  // the segment of request i lies inside the buffer
      if (csr) {
        const RequestExtent e = request_extent(p, i);
        const int64_t want =
            segment_size(p.mask_format, e.draft_nodes, e.prefix_len, "kv_indptr", i + 1);
        if (ip[i + 1] < ip[i]) {
          throw InvalidInput("mask_indptr", i + 1,
                             "not non-decreasing (" + str(ip[i + 1]) + " < " + str(ip[i]) + ")");
        }
        if (ip[i + 1] - ip[i] != want) {
          throw InvalidInput(
              "mask_indptr", i,
              "request " + str(i) + " spans " + str(ip[i + 1] - ip[i]) + ", expected " +
                  (p.mask_format == MaskFormat::FullMask ? "D_i * (P_i + D_i) = "
                                                         : "ceil(D_i * (P_i + D_i) / 8) = ") +
                  str(want) + " (D_i = " + str(e.draft_nodes) + ", P_i = " + str(e.prefix_len) +
                  ")");
        }
      }
    }
    return;
  }
  for (int32_t i = 0; i < p.batch_size; ++i) view_request(p, i);
}

std::vector<DraftTree> decode_trees(const VerifyParams& p) {
  validate_mask(p);
  std::vector<DraftTree> trees;
  trees.reserve(static_cast<size_t>(p.batch_size));
  for (int32_t i = 0; i < p.batch_size; ++i) {
    try {
      trees.push_back(DraftTree::from_ancestor_bits(draft_block(p, i)));
    } catch (const InvalidInput& e) {
      // Name the request: the block's own error only knows the row.
      throw InvalidInput("mask", i, "request " + str(i) + " is not a tree: " + e.what());
    }
  }
  return trees;
}

}  // namespace mlaverify::model
