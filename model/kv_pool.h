// One layer's MLA KV pool: size + page_size slots of one 576-wide latent-first row each, stored
// as bf16 or fp32 through a KvLayout (padded rows, rope-first, or FlashInfer's split views).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "mlaverify/bf16.h"
#include "mlaverify/types.h"
#include "mlaverify/verify_params.h"

namespace mlaverify::model {

// Slot 0 (page 0 when paged) is the sink where CUDA-graph padded tokens write (docs/spec.md §4): it
// is storage like any other slot here, and allocators never hand it out.
class KvPool {
 public:
  // `size` allocatable slots plus one page (the sink page), as SGLang sizes its MLA pool:
  // [size + page_size, 576]. `layout` says where slot s's c and k_pe live in the buffer; it must
  // keep every slot's 576 elements apart from every other slot's (checked).
  KvPool(int64_t size, int64_t page_size, DType dtype, KvLayout layout = KvLayout::latent_first());

  // The FlashInfer layout of a pool of `num_slots` slots: one buffer holding the ckv region
  // [num_slots, 512] and then the kpe region [num_slots, 64].
  static KvLayout split_regions(int64_t num_slots);

  int64_t num_slots() const { return num_slots_; }  // size + page_size
  // Points a launch at this pool: kv_pool, kv_dtype, kv_layout and pool_slots.
  void attach(VerifyParams& p) const {
    p.kv_pool = data();
    p.kv_dtype = dtype();
    p.kv_layout = layout();
    p.pool_slots = num_slots();
  }
  int64_t page_size() const { return page_size_; }
  DType dtype() const { return dtype_; }
  const KvLayout& layout() const { return layout_; }
  const void* data() const { return storage_.data(); }  // storage_elements() of dtype()
  int64_t storage_elements() const { return elements_; }

  // Element index (in dtype units from data()) of logical column k of `slot`'s latent-first row:
  // k < 512 is c[k], 512 <= k < 576 is k_pe[k - 512]. int64 throughout: slot * 576 passes 2^31 at
  // 3.73M slots (docs/spec.md §7 class 14). The static form needs no pool, so a test can probe
  // slots far beyond anything it could allocate; it does not range-check the slot.
  static int64_t element_index(const KvLayout& layout, int64_t slot, int k);
  // Range-checked: InvalidInput("slot", slot) / InvalidInput("k", k).
  int64_t element_index(int64_t slot, int k) const;

  // Stores a latent-first row [576] into `slot`, each element rounded once (bf16: RNE).
  void write_row(int64_t slot, const float* row576);
  // The stored row [576] of `slot`, latent-first, widened exactly to float.
  std::array<float, kRowDim> read_row(int64_t slot) const;
  // The stored bytes of `slot`'s 576 elements in latent-first order [576 * dtype_bytes]: what
  // "byte-identical" compares (padding between rows is not part of a row).
  std::vector<std::byte> raw_row(int64_t slot) const;
  // Stores bytes produced by raw_row (same dtype) into `slot`: a relocation that cannot round.
  // InvalidInput("row", -1) when the length is not 576 * dtype_bytes.
  void write_raw_row(int64_t slot, std::span<const std::byte> bytes);
  // dst's row := src's row, bit for bit (no rounding: both are stored in the same dtype).
  void copy_row(int64_t dst, int64_t src);
  // Poisons `slot`'s 576 elements with quiet NaN, so a read of a slot that is not named by the
  // metadata shows up in any output it touches.
  void fill_nan(int64_t slot);
  // Poisons the whole buffer, padding and sink included.
  void fill_nan_all();

 private:
  void check_slot(int64_t slot) const;
  // The 576 elements of `slot` from / to a latent-first byte row [576 * dtype_bytes].
  void store_bytes(int64_t slot, const std::byte* row_bytes);
  void load_bytes(int64_t slot, std::byte* row_bytes) const;
  void validate_layout() const;

  int64_t num_slots_;
  int64_t page_size_;
  DType dtype_;
  KvLayout layout_;
  int64_t elements_;                // buffer length in dtype elements
  std::vector<std::byte> storage_;  // [elements_ * dtype_bytes] raw, as a kernel sees it
};

}  // namespace mlaverify::model
