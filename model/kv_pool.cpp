// KvPool: stores and reads latent-first rows through a KvLayout, bf16 with one RNE rounding.
// Element access goes through memcpy so the raw byte buffer is never type-punned.
#include "model/kv_pool.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "mlaverify/error.h"

namespace mlaverify::model {

namespace {

// Largest element index + 1 touched by `count` items of `width` starting at `offset`, `stride`
// apart; false on int64 overflow.
bool region_end(int64_t offset, int64_t stride, int64_t count, int64_t width, int64_t* end) {
  int64_t span;
  if (__builtin_mul_overflow(count - 1, stride, &span)) return false;
  if (__builtin_add_overflow(offset, span, &span)) return false;
  return !__builtin_add_overflow(span, width, end);
}

}  // namespace

KvPool::KvPool(int64_t size, int64_t page_size, DType dtype, KvLayout layout)
    : page_size_(page_size), dtype_(dtype), layout_(layout) {
  if (size < 1) throw InvalidInput("size", -1, "must be >= 1, got " + std::to_string(size));
  if (page_size < 1) {
    throw InvalidInput("page_size", -1, "must be >= 1, got " + std::to_string(page_size));
  }
  if (dtype != DType::BF16 && dtype != DType::F32) {
    throw InvalidInput("dtype", -1, "unknown DType " + std::to_string(static_cast<int>(dtype)));
  }
  if (__builtin_add_overflow(size, page_size, &num_slots_)) {
    throw InvalidInput("size", -1, "size + page_size overflows int64");
  }
  validate_layout();
  int64_t latent_end = 0, rope_end = 0;
  region_end(layout_.latent_offset, layout_.latent_stride, num_slots_, kLatentDim, &latent_end);
  region_end(layout_.rope_offset, layout_.rope_stride, num_slots_, kRopeDim, &rope_end);
  elements_ = std::max(latent_end, rope_end);
  // A row layout is a [num_slots, row_stride] tensor: the last row keeps its padding too, so a
  // reader that walks whole rows stays inside the buffer.
  int64_t whole_rows;
  if (layout_.latent_stride == layout_.rope_stride &&
      !__builtin_mul_overflow(num_slots_, layout_.latent_stride, &whole_rows)) {
    elements_ = std::max(elements_, whole_rows);
  }
  int64_t bytes;
  if (__builtin_mul_overflow(elements_, int64_t{dtype_bytes(dtype_)}, &bytes)) {
    throw InvalidInput("size", -1, "pool bytes overflow int64");
  }
  // Zero-filled: bf16 and fp32 zero are both all-zero bytes.
  storage_.assign(static_cast<size_t>(bytes), std::byte{0});
}

KvLayout KvPool::split_regions(int64_t num_slots) {
  return KvLayout::split(0, kLatentDim, num_slots * kLatentDim, kRopeDim);
}

// Accepts the layouts real systems use and rejects any where two slots (or c and k_pe of one slot)
// could share an element, since a write to one would then silently corrupt another.
void KvPool::validate_layout() const {
  const KvLayout& l = layout_;
  if (l.latent_offset < 0) throw InvalidInput("layout.latent_offset", -1, "negative");
  if (l.rope_offset < 0) throw InvalidInput("layout.rope_offset", -1, "negative");
  if (l.latent_stride < 1) throw InvalidInput("layout.latent_stride", -1, "must be >= 1");
  if (l.rope_stride < 1) throw InvalidInput("layout.rope_stride", -1, "must be >= 1");
  if ((l.kind == LayoutKind::LatentFirst || l.kind == LayoutKind::RopeFirst) &&
      (l.latent_stride != l.rope_stride || l.latent_stride < kRowDim)) {
    throw InvalidInput("layout.latent_stride", -1,
                       "a row layout needs one row stride >= 576 for c and k_pe");
  }
  int64_t latent_end, rope_end;
  if (!region_end(l.latent_offset, l.latent_stride, num_slots_, kLatentDim, &latent_end) ||
      !region_end(l.rope_offset, l.rope_stride, num_slots_, kRopeDim, &rope_end)) {
    throw InvalidInput("layout", -1, "pool extent overflows int64");
  }
  bool c_kpe_disjoint_in_row =
      l.latent_offset + kLatentDim <= l.rope_offset || l.rope_offset + kRopeDim <= l.latent_offset;
  if (l.latent_stride == l.rope_stride) {
    // Row-structured: each slot's c and k_pe lie inside one window of `stride` elements.
    int64_t lo = std::min(l.latent_offset, l.rope_offset);
    int64_t hi = std::max(l.latent_offset + kLatentDim, l.rope_offset + kRopeDim);
    if (c_kpe_disjoint_in_row && hi - lo <= l.latent_stride) return;
  }
  // Region-structured (FlashInfer's ckv / kpe views): two disjoint regions, rows apart in each.
  bool regions_disjoint = latent_end <= l.rope_offset || rope_end <= l.latent_offset;
  if (l.latent_stride >= kLatentDim && l.rope_stride >= kRopeDim && regions_disjoint) return;
  throw InvalidInput("layout", -1, "slots' c / k_pe elements would overlap");
}

int64_t KvPool::element_index(const KvLayout& layout, int64_t slot, int k) {
  return k < kLatentDim ? layout.latent_index(slot) + k
                        : layout.rope_index(slot) + (k - kLatentDim);
}

int64_t KvPool::element_index(int64_t slot, int k) const {
  check_slot(slot);
  if (k < 0 || k >= kRowDim) throw InvalidInput("k", k, "column outside [0, 576)");
  return element_index(layout_, slot, k);
}

void KvPool::check_slot(int64_t slot) const {
  if (slot < 0 || slot >= num_slots_) {
    throw InvalidInput("slot", slot, "outside [0, " + std::to_string(num_slots_) + ")");
  }
}

// Every layout keeps c (512) and k_pe (64) each contiguous, so a row moves as two memcpy
// segments: bytes [0, 512 * eb) of the latent-first row go to c, the rest to k_pe.
void KvPool::store_bytes(int64_t slot, const std::byte* row_bytes) {
  const size_t eb = static_cast<size_t>(dtype_bytes(dtype_));
  std::memcpy(storage_.data() + static_cast<size_t>(layout_.latent_index(slot)) * eb, row_bytes,
              kLatentDim * eb);
  std::memcpy(storage_.data() + static_cast<size_t>(layout_.rope_index(slot)) * eb,
              row_bytes + kLatentDim * eb, kRopeDim * eb);
}

void KvPool::load_bytes(int64_t slot, std::byte* row_bytes) const {
  const size_t eb = static_cast<size_t>(dtype_bytes(dtype_));
  std::memcpy(row_bytes, storage_.data() + static_cast<size_t>(layout_.latent_index(slot)) * eb,
              kLatentDim * eb);
  std::memcpy(row_bytes + kLatentDim * eb,
              storage_.data() + static_cast<size_t>(layout_.rope_index(slot)) * eb, kRopeDim * eb);
}

void KvPool::write_row(int64_t slot, const float* row576) {
  check_slot(slot);
  if (row576 == nullptr) throw InvalidInput("row", -1, "null");
  if (dtype_ == DType::F32) {
    store_bytes(slot, reinterpret_cast<const std::byte*>(row576));
    return;
  }
  std::array<bf16, kRowDim> row;  // [576] latent-first
  for (int k = 0; k < kRowDim; ++k) row[static_cast<size_t>(k)] = float_to_bf16(row576[k]);
  store_bytes(slot, reinterpret_cast<const std::byte*>(row.data()));
}

std::array<float, kRowDim> KvPool::read_row(int64_t slot) const {
  check_slot(slot);
  std::array<float, kRowDim> row;  // [576] latent-first
  if (dtype_ == DType::F32) {
    load_bytes(slot, reinterpret_cast<std::byte*>(row.data()));
    return row;
  }
  std::array<bf16, kRowDim> stored;  // [576] latent-first
  load_bytes(slot, reinterpret_cast<std::byte*>(stored.data()));
  for (int k = 0; k < kRowDim; ++k) {
    row[static_cast<size_t>(k)] = bf16_to_float(stored[static_cast<size_t>(k)]);
  }
  return row;
}

std::vector<std::byte> KvPool::raw_row(int64_t slot) const {
  check_slot(slot);
  std::vector<std::byte> out(kRowDim * static_cast<size_t>(dtype_bytes(dtype_)));  // [576 * eb]
  load_bytes(slot, out.data());
  return out;
}

void KvPool::write_raw_row(int64_t slot, std::span<const std::byte> bytes) {
  check_slot(slot);
  const size_t eb = static_cast<size_t>(dtype_bytes(dtype_));
  if (bytes.size() != kRowDim * eb) {
    throw InvalidInput(
        "row", -1,
        std::to_string(bytes.size()) + " bytes, a row is " + std::to_string(kRowDim * eb));
  }
  store_bytes(slot, bytes.data());
}

void KvPool::copy_row(int64_t dst, int64_t src) {
  check_slot(dst);
  check_slot(src);
  if (dst == src) return;
  // Through a buffer: simple, and slots never share elements anyway (validate_layout).
  std::array<std::byte, kRowDim * sizeof(float)> row;  // [576 * eb] latent-first
  load_bytes(src, row.data());
  store_bytes(dst, row.data());
}

void KvPool::fill_nan(int64_t slot) {
  check_slot(slot);
  if (dtype_ == DType::F32) {
    std::array<float, kRowDim> row;  // [576]
    row.fill(std::numeric_limits<float>::quiet_NaN());
    store_bytes(slot, reinterpret_cast<const std::byte*>(row.data()));
  } else {
    std::array<bf16, kRowDim> row;  // [576]
    row.fill(bf16{0x7fc0});         // quiet NaN
    store_bytes(slot, reinterpret_cast<const std::byte*>(row.data()));
  }
}

void KvPool::fill_nan_all() {
  const size_t eb = static_cast<size_t>(dtype_bytes(dtype_));
  const bf16 nan16{0x7fc0};
  const float nan32 = std::numeric_limits<float>::quiet_NaN();
  for (int64_t i = 0; i < elements_; ++i) {
    std::byte* dst = storage_.data() + static_cast<size_t>(i) * eb;
    if (dtype_ == DType::BF16) {
      std::memcpy(dst, &nan16, sizeof nan16);
    } else {
      std::memcpy(dst, &nan32, sizeof nan32);
    }
  }
}

}  // namespace mlaverify::model
