// Buffer extents and output geometry of a VerifyParams (buffers.h): what CUDA staging copies and
// what the guarded worker places in its shared region and checks after the call.
#include "plugin/buffers.h"

#include <algorithm>

namespace mlaverify::plugin {

const char* buffer_name(BufferId id) {
  static constexpr const char* kNames[kNumBuffers] = {
      "q",           "kv_pool",  "qo_indptr", "kv_indptr",   "kv_indices", "kv_indices_i32",
      "block_table", "k_extend", "mask",      "mask_indptr", "o_lat",      "lse"};
  return id >= 0 && id < kNumBuffers ? kNames[id] : "?";
}

std::array<size_t, kNumBuffers> buffer_bytes(const VerifyParams& p) {
  std::array<size_t, kNumBuffers> b{};
  auto sz = [](int64_t elements, int bytes) {
    return elements > 0 ? static_cast<size_t>(elements) * static_cast<size_t>(bytes) : size_t{0};
  };
  const int64_t bs = p.batch_size;
  // Strides are non-negative (validate_params), so the last row or slot reaches furthest.
  b[kQ] = sz((p.max_total_q - 1) * p.q_token_stride + (p.num_heads - 1) * p.q_head_stride +
                 std::max(p.q_latent_offset + kLatentDim, p.q_rope_offset + kRopeDim),
             dtype_bytes(p.q_dtype));
  const KvLayout& l = p.kv_layout;
  b[kKvPool] = sz(std::max(l.latent_index(p.pool_slots - 1) + kLatentDim,
                           l.rope_index(p.pool_slots - 1) + kRopeDim),
                  dtype_bytes(p.kv_dtype));
  b[kQoIndptr] = sz(bs + 1, 4);
  b[kKvIndptr] = sz(bs + 1, 4);
  switch (p.kv_indexing) {
    case KvIndexing::TokenI32:
      b[kKvIndicesI32] = sz(std::max<int64_t>(p.kv_indices_len, 1), 4);
      break;
    case KvIndexing::PageTable:
      b[kBlockTable] = sz(std::max<int64_t>(bs * p.block_table_stride, 1), 4);
      break;
    case KvIndexing::TokenI64:
    default:
      b[kKvIndices] = sz(std::max<int64_t>(p.kv_indices_len, 1), 8);
      break;
  }
  if (p.draft_source == DraftKvSource::ExtendRows) {
    b[kKExtend] = sz((p.max_total_q - 1) * p.k_extend_stride + kRowDim, dtype_bytes(p.kv_dtype));
  }
  b[kMask] = sz(std::max<int64_t>(p.mask_len, 1), p.mask_format == MaskFormat::DraftBits ? 4 : 1);
  if (p.mask_format == MaskFormat::FullMask || p.mask_format == MaskFormat::FlashInferPacked) {
    b[kMaskIndptr] = sz(indptr_length(p.mask_indptr_convention, bs), 8);
  }
  b[kOLat] =
      sz((p.max_total_q - 1) * p.o_token_stride + (p.num_heads - 1) * p.o_head_stride + kLatentDim,
         dtype_bytes(p.o_dtype));
  if (p.lse != nullptr) b[kLse] = sz(p.max_total_q * p.num_heads, 4);
  // A buffer the caller did not pass (null) is not passed on either.
  for (int id = 0; id < kNumBuffers; ++id) {
    if (buffer_ptr(p, BufferId(id)) == nullptr) b[id] = 0;
  }
  return b;
}

const void* buffer_ptr(const VerifyParams& p, BufferId id) {
  switch (id) {
    case kQ:
      return p.q;
    case kKvPool:
      return p.kv_pool;
    case kQoIndptr:
      return p.qo_indptr;
    case kKvIndptr:
      return p.kv_indptr;
    case kKvIndices:
      return p.kv_indices;
    case kKvIndicesI32:
      return p.kv_indices_i32;
    case kBlockTable:
      return p.block_table;
    case kKExtend:
      return p.k_extend;
    case kMask:
      return p.mask;
    case kMaskIndptr:
      return p.mask_indptr;
    case kOLat:
      return p.o_lat;
    case kLse:
      return p.lse;
    default:
      return nullptr;
  }
}

void set_buffer_ptr(VerifyParams& p, BufferId id, const void* ptr) {
  void* w = const_cast<void*>(ptr);
  switch (id) {
    case kQ:
      p.q = ptr;
      break;
    case kKvPool:
      p.kv_pool = ptr;
      break;
    case kQoIndptr:
      p.qo_indptr = static_cast<const int32_t*>(ptr);
      break;
    case kKvIndptr:
      p.kv_indptr = static_cast<const int32_t*>(ptr);
      break;
    case kKvIndices:
      p.kv_indices = static_cast<const int64_t*>(ptr);
      break;
    case kKvIndicesI32:
      p.kv_indices_i32 = static_cast<const int32_t*>(ptr);
      break;
    case kBlockTable:
      p.block_table = static_cast<const int32_t*>(ptr);
      break;
    case kKExtend:
      p.k_extend = ptr;
      break;
    case kMask:
      p.mask = ptr;
      break;
    case kMaskIndptr:
      p.mask_indptr = static_cast<const int64_t*>(ptr);
      break;
    case kOLat:
      p.o_lat = w;
      break;
    case kLse:
      p.lse = static_cast<float*>(w);
      break;
    default:
      break;
  }
}

OutputGeometry output_geometry(const VerifyParams& p, BufferId id, bool writes_lse) {
  OutputGeometry g;
  g.tokens = p.qo_indptr[p.batch_size];
  g.heads = p.num_heads;
  if (id == kOLat) {
    g.token_stride = p.o_token_stride;
    g.head_stride = p.o_head_stride;
    g.row_elements = kLatentDim;
    g.elem_bytes = dtype_bytes(p.o_dtype);
  } else {
    g.token_stride = p.num_heads;
    g.head_stride = 1;
    g.row_elements = 1;
    g.elem_bytes = 4;
    g.writable = writes_lse;
  }
  return g;
}

bool OutputGeometry::writes(size_t offset) const {
  if (!writable) return false;
  const int64_t e = static_cast<int64_t>(offset) / elem_bytes;
  const int64_t t = e / token_stride;
  const int64_t r = e % token_stride;
  return t < tokens && r / head_stride < heads && r % head_stride < row_elements;
}

std::string OutputGeometry::describe(size_t offset) const {
  const int64_t e = static_cast<int64_t>(offset) / elem_bytes;
  const int64_t t = e / token_stride;
  const int64_t r = e % token_stride;
  std::string s = "token " + std::to_string(t);
  if (r / head_stride >= heads)
    return s + " past head " + std::to_string(heads - 1) + " (token-stride gap)";
  s += " head " + std::to_string(r / head_stride);
  if (row_elements > 1) {
    s += " column " + std::to_string(r % head_stride);
    if (r % head_stride >= row_elements) s += " (head-stride gap)";
  }
  return s;
}

int32_t request_of_token(const VerifyParams& p, int64_t t) {
  if (t < 0 || t >= p.qo_indptr[p.batch_size]) return -1;
  // qo_indptr is CSR (validated): the last request whose start is <= t.
  const int32_t* first = p.qo_indptr;
  const int32_t* last = p.qo_indptr + p.batch_size + 1;
  return static_cast<int32_t>(std::upper_bound(first, last, t) - first) - 1;
}

}  // namespace mlaverify::plugin
