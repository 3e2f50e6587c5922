// Host-side validation of a whole VerifyParams: every invariant a backend may rely on, so that
// backends can read metadata without bounds checks and bad input never becomes a crash or UB.
#pragma once

#include <cstdint>
#include <vector>

#include "mlaverify/verify_params.h"

namespace mlaverify::model {

// Checks `p` (host pointers) in this order, throwing the first InvalidInput(field, index, detail):
//  1. static sizes: batch_size >= 1, num_heads in 1..128, max_draft in 1..1024, num_splits in
//     1..kMaxSplits, max_total_q >= 1, sm_scale finite and > 0;
//  2. enums hold known values (dtypes, layout kind, draft source, mask format, convention);
//  3. queries, pool and outputs: non-null pointers, offsets >= 0 and strides wide enough that the
//     512 + 64 (q, pool) and 512 (o) elements a backend reads per row lie inside their row;
//     pool_slots >= 1;
//  4. qo_indptr: CSR (bs+1 entries from 0, non-decreasing), 1 <= D_i <= max_draft, and
//     T = qo_indptr[bs] <= max_total_q; the index of a bad D_i is the entry i + 1 ending request i;
//  5. kv_indptr: CSR, kv_indptr[bs] <= kv_indices_len (PageTable: non-decreasing only, the
//     lengths are what is read); CacheSlots: kv length >= D_i;
//  6. every slot a backend reads lies in [0, pool_slots): kv_indices (int64 or int32) entries
//     k < kv_indptr[bs], or, for a page table, every page a request's length reaches (each row
//     wide enough: block_table_stride >= ceil(kv length / page_size));
//  7. ExtendRows: k_extend non-null with stride >= 576;
//  8. the mask, through model::validate_mask (model/mask.h).
// CSR is required of qo_indptr and kv_indptr (docs/spec.md §3: SGLang passes both as [bs+1]); only
// mask_indptr may be offsets-only, and it says so in mask_indptr_convention.
void validate_params(const VerifyParams& p);

// The same launch with token-level int64 kv_indices (kv_indptr rebased to 0): how a backend whose
// kernel reads only KvIndexing::TokenI64 takes int32 indices and page tables. Returns `p` itself
// when it is TokenI64 already; otherwise the result points into `kv_indptr` and `kv_indices`.
// Call on validated params.
VerifyParams with_token_indices(const VerifyParams& p, std::vector<int32_t>& kv_indptr,
                                std::vector<int64_t>& kv_indices);

// Largest head count, draft size and KV row element count the library accepts.
inline constexpr int32_t kMaxHeads = 128;
inline constexpr int32_t kMaxDraft = 1024;

}  // namespace mlaverify::model
