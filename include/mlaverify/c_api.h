/* mlaverify's stable C ABI: how a verify kernel that lives outside mlaverify (a CUDA kernel behind
 * a torch op, a Triton kernel, a CUTLASS launcher in a shared library, a Python function) becomes a
 * backend the property suite, scenario replay, diagnose and simulate run, without recompiling
 * mlaverify.
 *
 * A plugin is a shared library exporting mlav_plugin_open (below); `--backend plugin:PATH.so` loads
 * it with dlopen. Everything here is plain C: fixed-width integers for enums, no C++ types.
 *
 * Versioning. Every struct starts with struct_size (sizeof the struct as the writer compiled it)
 * and abi_version. Fields are only ever appended; a reader uses the fields that lie inside both its
 * own sizeof and the writer's struct_size, and takes the documented default for the rest. So a
 * plugin built against version 1 keeps working with a later mlaverify, and the reverse.
 *
 * Memory. Which memory a pointer lives in is the plugin's choice, declared once in
 * mlav_backend.memory: MLAV_MEMORY_HOST (every pointer in mlav_params is host memory) or
 * MLAV_MEMORY_CUDA (every buffer pointer is device memory of the current CUDA device; the scalar
 * fields are host values as always). Every buffer in mlav_params is owned by mlaverify, valid only
 * during the call, and read-only except o_lat and lse. The plugin owns its own state (self) and
 * frees it in destroy. The workspace passed to run is mlaverify's, in the plugin's memory, at least
 * the size workspace_bytes asked for, and not preserved between runs.
 *
 * Outputs. For every real token t < T = qo_indptr[batch_size] and head h the plugin writes
 * o_lat[t, h, 0:512] and, if it declares MLAV_CAP_WRITES_LSE, lse[t, h] (natural log; -inf for a
 * row that sees no key). Rows of CUDA-graph padded requests (prefix 1 at slot 0) may hold anything.
 * Rows t >= T, up to max_total_q, and every element a stride skips must not be written, nor lse
 * at all by a plugin that does not declare MLAV_CAP_WRITES_LSE: guarded runs surround each output
 * with a pattern and report any byte that changed.
 *
 * num_splits is a request, not a promise, unless the plugin declares MLAV_CAP_HONOURS_NUM_SPLITS.
 * One backend object serves many runs, one at a time, each with its own shapes and pointers:
 * nothing may be cached by pointer or by shape without checking both.
 *
 * Which pointers a call sees. can_implement and workspace_bytes get an mlav_params whose buffer
 * pointers are all NULL: they decide from the shapes, strides, dtypes and formats alone (the
 * buffers are staged for run only). run gets only the buffers the case uses, the others NULL: of
 * kv_indices / kv_indices_i32 / block_table only the one kv_indexing names, k_extend only for
 * MLAV_DRAFT_EXTEND_ROWS, mask_indptr only for MLAV_MASK_FULL and MLAV_MASK_FLASHINFER_PACKED, lse
 * only when the caller wants it. workspace is NULL when workspace_bytes asked for 0. Staged
 * buffers (every MLAV_MEMORY_CUDA buffer; every buffer of a guarded run) start 256-byte aligned.
 *
 * Guarded runs (`plugin:PATH.so?guarded&timeout=SECONDS`; `guarded` and `timeout=` are
 * mlaverify's and are removed from the config the plugin gets). Every call is made in a worker
 * process that mlaverify forks and that dlopens the plugin (so a CUDA plugin initializes CUDA
 * only there); a crash (signal, exit) or a call that does not return within the time limit
 * (default 60 s) is a failing case, shrunk and written as a scenario like any other, and the
 * worker is started again for the next call. Every output and the workspace lie between guard
 * regions of a pattern (plugin/guarded.h), and so does every byte of o_lat and lse the Outputs
 * rule forbids; after the call any changed byte is reported with the buffer, the request or the
 * side it lies on. Inputs of a host plugin are compared with the caller's copies too.
 *
 * Errors. Every entry point returns an mlav_status. On anything but MLAV_OK the plugin writes a
 * NUL-terminated message of at most err_size bytes into err (which may be NULL when err_size is 0).
 * MLAV_INVALID_INPUT: the metadata breaks the documented invariants (docs/spec.md §3).
 * MLAV_UNSUPPORTED: the case is outside what the plugin takes (the suite counts it as a skip).
 * MLAV_ERROR: anything else; a failing case. A crash or a hang in a guarded run is one too.
 */
#ifndef MLAVERIFY_C_API_H
#define MLAVERIFY_C_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MLAV_ABI_VERSION 1u

/* Marks a plugin's exported entry point (plugins build with hidden visibility):
 *   extern "C" MLAV_EXPORT mlav_status mlav_plugin_open(...);  (C: without extern "C") */
#if defined(_WIN32)
#define MLAV_EXPORT __declspec(dllexport)
#else
#define MLAV_EXPORT __attribute__((visibility("default")))
#endif

typedef enum mlav_status {
  MLAV_OK = 0,
  MLAV_INVALID_INPUT = 1,
  MLAV_UNSUPPORTED = 2,
  MLAV_ERROR = 3,
} mlav_status;

/* Enum values are those of include/mlaverify/types.h. */
enum { MLAV_DTYPE_BF16 = 0, MLAV_DTYPE_F32 = 1 };
enum { MLAV_LAYOUT_LATENT_FIRST = 0, MLAV_LAYOUT_ROPE_FIRST = 1, MLAV_LAYOUT_SPLIT = 2 };
enum { MLAV_INDPTR_CSR = 0, MLAV_INDPTR_OFFSETS_ONLY = 1 };
enum { MLAV_DRAFT_EXTEND_ROWS = 0, MLAV_DRAFT_CACHE_SLOTS = 1 };
enum {
  MLAV_MASK_FULL = 0,
  MLAV_MASK_QLEN_ONLY = 1,
  MLAV_MASK_QLEN_ONLY_BITPACKING = 2,
  MLAV_MASK_FLASHINFER_PACKED = 3,
  MLAV_MASK_DRAFT_BITS = 4,
};
enum { MLAV_KV_TOKEN_I64 = 0, MLAV_KV_TOKEN_I32 = 1, MLAV_KV_PAGE_TABLE = 2 };
enum { MLAV_MEMORY_HOST = 0, MLAV_MEMORY_CUDA = 1 };

/* Slot s's latent c[512] and rotated k_pe[64], in elements of kv_dtype from kv_pool:
 * c[s][k] = kv_pool[latent_offset + s * latent_stride + k], k_pe likewise with rope_*. */
typedef struct mlav_kv_layout {
  int32_t kind; /* MLAV_LAYOUT_* */
  int32_t reserved;
  int64_t latent_offset;
  int64_t latent_stride;
  int64_t rope_offset;
  int64_t rope_stride;
} mlav_kv_layout;

/* One verify launch: the C mirror of mlaverify::VerifyParams (include/mlaverify/verify_params.h
 * says what every field means). Strides and offsets are in elements. */
typedef struct mlav_params {
  uint32_t struct_size; /* sizeof(mlav_params) as the caller compiled it */
  uint32_t abi_version;

  int32_t batch_size; /* bs: metadata rows, CUDA-graph padded rows included */
  int32_t num_heads;  /* H, 1..128 */
  int32_t max_draft;  /* >= every D_i, <= 1024 */
  int32_t num_splits; /* a request (see above), >= 1 */
  int64_t max_total_q; /* rows of q, k_extend, o_lat, lse */
  float sm_scale;
  int32_t reserved0;

  const void* q; /* [max_total_q, H, row] of q_dtype */
  int32_t q_dtype;
  int32_t reserved1;
  int64_t q_token_stride;
  int64_t q_head_stride;
  int64_t q_latent_offset; /* q_lat[512] starts here within a head's row */
  int64_t q_rope_offset;   /* q_pe[64] */

  const void* kv_pool;
  int32_t kv_dtype;
  int32_t reserved2;
  mlav_kv_layout kv_layout;
  int64_t pool_slots; /* valid slot ids: [0, pool_slots) */

  const int32_t* qo_indptr; /* [bs + 1] */
  const int32_t* kv_indptr; /* [bs + 1]; page table: only differences (lengths) are read */
  int32_t kv_indexing;      /* MLAV_KV_* */
  int32_t reserved3;
  const int64_t* kv_indices;     /* TOKEN_I64 */
  const int32_t* kv_indices_i32; /* TOKEN_I32 */
  int64_t kv_indices_len;
  const int32_t* block_table; /* PAGE_TABLE: [bs, block_table_stride] page ids */
  int32_t block_table_stride;
  int32_t page_size; /* slot = block_table[i][k / page_size] * page_size + k % page_size */

  int32_t draft_source; /* MLAV_DRAFT_* */
  int32_t reserved4;
  const void* k_extend; /* [max_total_q, k_extend_stride] latent-first, kv_dtype; EXTEND_ROWS */
  int64_t k_extend_stride;

  int32_t mask_format; /* MLAV_MASK_* */
  int32_t mask_indptr_convention;
  const void* mask;
  int64_t mask_len;
  const int64_t* mask_indptr;
  int32_t mask_draft_stride;
  int32_t mask_word_bytes;

  void* o_lat; /* [max_total_q, H, 512] of o_dtype */
  int32_t o_dtype;
  int32_t reserved5;
  int64_t o_token_stride;
  int64_t o_head_stride;
  float* lse; /* [max_total_q, H] contiguous */
} mlav_params;

/* Capability flags (mlav_capabilities.flags). */
#define MLAV_CAP_WRITES_LSE (1u << 0)
#define MLAV_CAP_DETERMINISTIC (1u << 1)
#define MLAV_CAP_HONOURS_NUM_SPLITS (1u << 2)
#define MLAV_CAP_PADDED_KV_ROWS (1u << 3)
#define MLAV_CAP_STRIDED_Q (1u << 4)
#define MLAV_CAP_STRIDED_O (1u << 5)
#define MLAV_CAP_PADDED_EXTEND_ROWS (1u << 6)

/* What a plugin takes (sets: bit 1 << value of the MLAV_* enums) and how it computes. The caller
 * fills every field with the defaults of mlav_capabilities_default before asking, so a plugin sets
 * only what differs. The tolerance the suite holds the plugin to is derived from the numerics. */
typedef struct mlav_capabilities {
  uint32_t struct_size;
  uint32_t abi_version;
  uint32_t mask_formats;
  uint32_t mask_indptr_conventions;
  uint32_t kv_dtypes;
  uint32_t q_dtypes;
  uint32_t o_dtypes;
  uint32_t kv_layouts;
  uint32_t draft_sources;
  uint32_t kv_indexings;
  uint32_t page_sizes; /* page-table page sizes: bit log2(page_size) */
  uint32_t flags;      /* MLAV_CAP_* */
  int32_t max_heads;
  int32_t max_draft;
  int64_t max_prefix;
  /* Numerics: relative units (0 = exact), as mlaverify::Numerics (backend.h). Defaults: operands
   * stored as f32 rounded to bf16 (2^-8; bf16 ones are read exactly), fp32 tensor-core
   * accumulation 2^-23, P rounded to bf16 2^-8, exp 2^-21, up to 64 partials, 64-key tiles. */
  double operand_unit;
  double accumulate_unit;
  double p_unit;
  double exp_unit;
  int32_t max_partials; /* 0 = unknown (64) */
  int32_t tile_keys;
} mlav_capabilities;

/* A backend as a table of entry points. self is the plugin's; name is a NUL-terminated string
 * the plugin owns for the object's lifetime. */
typedef struct mlav_backend {
  uint32_t struct_size;
  uint32_t abi_version;
  void* self;
  const char* name;
  int32_t memory; /* MLAV_MEMORY_* */
  int32_t reserved;
  /* Fills what differs from the defaults already in *caps. Called once, right after open; NULL
   * means the defaults. */
  mlav_status (*capabilities)(void* self, mlav_capabilities* caps, char* err, size_t err_size);
  /* MLAV_OK when the plugin can run p; MLAV_UNSUPPORTED with the reason in why otherwise. */
  mlav_status (*can_implement)(void* self, const mlav_params* p, char* why, size_t why_size);
  /* Bytes of workspace run needs for p, in the plugin's memory. */
  mlav_status (*workspace_bytes)(void* self, const mlav_params* p, uint64_t* bytes, char* err,
                                 size_t err_size);
  /* Runs one launch. A CUDA plugin enqueues on stream (a cudaStream_t; NULL is the legacy default
   * stream) and may return before the work ends: the caller synchronizes the stream. A host
   * plugin gets stream NULL and returns when the outputs are written. */
  mlav_status (*run)(void* self, const mlav_params* p, void* workspace, uint64_t workspace_bytes,
                     void* stream, char* err, size_t err_size);
  /* Frees self. May be NULL. */
  void (*destroy)(void* self);
} mlav_backend;

/* The one symbol a plugin exports. abi_version is the caller's MLAV_ABI_VERSION; config is the
 * text after '?' in `plugin:PATH.so?config` (empty if none; mlaverify's own items `guarded` and
 * `timeout=` removed). Fills *out (whose struct_size the caller set: write at most that many
 * bytes, and set struct_size to the size written) or returns an error with the reason in err.
 * can_implement, workspace_bytes and run must be non-NULL. */
typedef mlav_status (*mlav_plugin_open_fn)(uint32_t abi_version, const char* config,
                                           mlav_backend* out, char* err, size_t err_size);
#define MLAV_PLUGIN_OPEN_SYMBOL "mlav_plugin_open"

/* The defaults the caller fills before asking a plugin (static inline: no symbol to link). */
static inline mlav_capabilities mlav_capabilities_default(void) {
  mlav_capabilities c;
  c.struct_size = (uint32_t)sizeof(mlav_capabilities);
  c.abi_version = MLAV_ABI_VERSION;
  c.mask_formats = 0x1Fu;
  c.mask_indptr_conventions = 0x3u;
  c.kv_dtypes = 0x3u;
  c.q_dtypes = 0x3u;
  c.o_dtypes = 0x3u;
  c.kv_layouts = 0x7u;
  c.draft_sources = 0x3u;
  c.kv_indexings = 0x7u;
  c.page_sizes = 0xFFFFFFFFu;
  c.flags = MLAV_CAP_WRITES_LSE | MLAV_CAP_DETERMINISTIC | MLAV_CAP_PADDED_KV_ROWS |
            MLAV_CAP_STRIDED_Q | MLAV_CAP_STRIDED_O | MLAV_CAP_PADDED_EXTEND_ROWS;
  c.max_heads = 128;
  c.max_draft = 1024;
  c.max_prefix = (int64_t)1 << 20;
  c.operand_unit = 1.0 / 256.0;       /* 2^-8 */
  c.accumulate_unit = 1.0 / 8388608.0; /* 2^-23 */
  c.p_unit = 1.0 / 256.0;             /* 2^-8 */
  c.exp_unit = 1.0 / 2097152.0;       /* 2^-21 */
  c.max_partials = 0;
  c.tile_keys = 64;
  return c;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MLAVERIFY_C_API_H */
