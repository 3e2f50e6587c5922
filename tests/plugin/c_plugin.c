/* libmlav_test_c_plugin.so: a plugin written in plain C (C11), which proves c_api.h is C: it
 * declares narrow capabilities (bf16 only, no lse, at most 4 heads), refuses more than 4 heads
 * with a reason, asks for a workspace, and "runs" by zeroing the real rows of o_lat (not a
 * correct kernel: the tests check the ABI's flow, not its numbers). */
#include <stdio.h>
#include <string.h>

#include "mlaverify/c_api.h"

typedef struct {
  int runs;
} c_plugin;

static void put(char* err, size_t n, const char* msg) {
  if (err != NULL && n > 0) snprintf(err, n, "%s", msg);
}

static mlav_status caps(void* self, mlav_capabilities* c, char* err, size_t n) {
  (void)self;
  (void)err;
  (void)n;
  c->kv_dtypes = 1u << MLAV_DTYPE_BF16;
  c->q_dtypes = 1u << MLAV_DTYPE_BF16;
  c->flags &= ~(uint32_t)MLAV_CAP_WRITES_LSE;
  c->max_heads = 4;
  return MLAV_OK;
}

static mlav_status can(void* self, const mlav_params* p, char* why, size_t n) {
  (void)self;
  if (p->num_heads > 4) {
    put(why, n, "c plugin: at most 4 heads");
    return MLAV_UNSUPPORTED;
  }
  return MLAV_OK;
}

static mlav_status ws(void* self, const mlav_params* p, uint64_t* bytes, char* err, size_t n) {
  (void)self;
  (void)err;
  (void)n;
  *bytes = (uint64_t)p->num_heads * 64u;
  return MLAV_OK;
}

static mlav_status run(void* self, const mlav_params* p, void* workspace, uint64_t ws_bytes,
                       void* stream, char* err, size_t n) {
  c_plugin* s = (c_plugin*)self;
  int32_t t, h;
  const int eb = p->o_dtype == MLAV_DTYPE_BF16 ? 2 : 4;
  (void)stream;
  if (workspace == NULL || ws_bytes < (uint64_t)p->num_heads * 64u) {
    put(err, n, "c plugin: no workspace");
    return MLAV_ERROR;
  }
  memset(workspace, 0, (size_t)ws_bytes);
  for (t = 0; t < p->qo_indptr[p->batch_size]; ++t) {
    for (h = 0; h < p->num_heads; ++h) {
      memset((char*)p->o_lat + (t * p->o_token_stride + h * p->o_head_stride) * eb, 0,
             (size_t)512 * (size_t)eb);
    }
  }
  ++s->runs;
  return MLAV_OK;
}

static void destroy(void* self) { (void)self; }

static c_plugin the_plugin;

MLAV_EXPORT mlav_status mlav_plugin_open(uint32_t abi_version, const char* config,
                                         mlav_backend* out, char* err, size_t err_size) {
  mlav_backend t;
  (void)config;
  if (abi_version < 1 || out == NULL || out->struct_size < sizeof(mlav_backend)) {
    put(err, err_size, "c plugin: needs ABI >= 1");
    return MLAV_INVALID_INPUT;
  }
  memset(&t, 0, sizeof(t));
  t.struct_size = (uint32_t)sizeof(t);
  t.abi_version = MLAV_ABI_VERSION;
  t.self = &the_plugin;
  t.name = "c-zeros";
  t.memory = MLAV_MEMORY_HOST;
  t.capabilities = caps;
  t.can_implement = can;
  t.workspace_bytes = ws;
  t.run = run;
  t.destroy = destroy;
  *out = t;
  return MLAV_OK;
}
