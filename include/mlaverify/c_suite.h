/* The library side of mlaverify's C ABI: what libmlaverify_c.so (capi/) exports, so that a program
 * that is not C++ (the Python package `mlaverify`, through ctypes) runs the suite on a backend it
 * brings as an mlav_backend table (c_api.h), or on a built-in one, without compiling anything.
 *
 * Everything is plain C. Options go in and reports come out as JSON text, the same documents the
 * command line prints with --json (cli/json_io.h), so a report read from Python and one read from
 * `mlaverify fuzz --json` are the same object. A report string is allocated by the library and
 * freed with mlav_free.
 *
 * Errors: every entry point returns an mlav_status and, on anything but MLAV_OK, writes one
 * NUL-terminated line of at most err_size bytes into err: "<field>[<index>]: <why>" for
 * MLAV_INVALID_INPUT (bad options, an unknown backend, property or reading), the reason for
 * MLAV_UNSUPPORTED, the exception's text for MLAV_ERROR. A campaign that ran and found failures is
 * MLAV_OK: its verdict and exit_code are in the report.
 *
 * Options are read strictly (capi/c_options.h): every key known, every value of its exact JSON
 * type and in range (integers as integers: "cases": 2.5 or 2^32 + 1 is an error, never rounded
 * or wrapped; cases 1 .. 1,000,000 as the CLI's --cases; max_memory >= 1; max_seconds finite
 * and > 0), null the same as absent; anything else is MLAV_INVALID_INPUT naming options.<key>.
 *
 * Threads: one call at a time per backend table; the suite calls the table's entry points on the
 * calling thread only (a Python callback runs under the GIL ctypes takes for it).
 */
#ifndef MLAVERIFY_C_SUITE_H
#define MLAVERIFY_C_SUITE_H

#include <stddef.h>
#include <stdint.h>

#include "mlaverify/c_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The MLAV_ABI_VERSION the library was built with, and the project's version ("0.1.0"). */
uint32_t mlav_suite_abi_version(void);
const char* mlav_suite_version(void);

/* Layout check for callers that declare the c_api.h structs themselves (ctypes): sizeof the named
 * struct ("mlav_params", "mlav_capabilities", "mlav_backend", "mlav_kv_layout") and offsetof one of
 * its fields, as the library was compiled; -1 for an unknown struct or field. */
int64_t mlav_suite_sizeof(const char* struct_name);
int64_t mlav_suite_offsetof(const char* struct_name, const char* field);

/* What this library holds, as JSON: {"version", "abi_version", "backends": ["model", "cpu",
 * "cpu-folded", "cuda"?], "mutants": ["mutant:<name>", ...], "properties": [...],
 * "cuda": {"built": bool, "available": bool, "reason": "..."}}. */
mlav_status mlav_suite_info(char** json, char* err, size_t err_size);

/* A built-in backend as a table (model, cpu, cpu-folded, cuda when built, or mutant:<name> over
 * cpu), in host memory (the CUDA backend stages its own device copies). out->struct_size must be
 * set by the caller; free the table with out->destroy(out->self). Without a CUDA build "cuda" is
 * MLAV_INVALID_INPUT; with one and no device the table exists and its can_implement says why. */
mlav_status mlav_builtin_backend(const char* name, mlav_backend* out, char* err, size_t err_size);

/* One launch of p on a host-memory table: the declared capabilities admit p, can_implement, a
 * workspace of workspace_bytes, run. MLAV_UNSUPPORTED with the reason when the backend does not
 * take p; MLAV_INVALID_INPUT when p breaks docs/spec.md section 3 (the model validates it first). */
mlav_status mlav_run(const mlav_backend* backend, const mlav_params* p, char* err, size_t err_size);

/* A fuzz campaign (props::run_campaign) on the table. options_json, every key optional:
 *   {"cases": 100, "seed": 20261129, "properties": ["name", ...] (empty: all),
 *    "out_dir": "folder for the shrunk failures' scenario files" (empty: none written),
 *    "label": "the backend's name in reports and file names" (default: the table's name),
 *    "shard": "K/N" (cases i with i % N == K), "verbose": false (the summary on stderr)}
 * Shrinking and stopping are the command line's (props::CampaignOptions defaults).
 * *report_json: the document `mlaverify fuzz --json` prints (format mlaverify-fuzz-report). */
mlav_status mlav_fuzz(const mlav_backend* backend, const char* options_json, char** report_json,
                      char* err, size_t err_size);

/* Replay of scenario files (or folders of them) on the table, and of server dumps (.safetensors):
 * the model's answer against the server's outputs and, when backend is not NULL, the backend's.
 *   {"paths": [...] (required), "allow_skipped": false, "check_recorded": true,
 *    "max_memory": 8 GiB, "max_seconds": 600, "verbose": false}
 * *report_json: {"command": "replay", "exit_code", "scenarios": <`replay --json` of the scenario
 * paths, or null>, "dumps": [<`replay --json` of each dump>]}; exit_code is the worst of them.
 * backend may be NULL only when every path is a dump. */
mlav_status mlav_replay(const mlav_backend* backend, const char* options_json, char** report_json,
                        char* err, size_t err_size);

/* Diagnose of one server dump: {"readings": [...] (empty: all), "max_memory", "max_seconds"};
 * *report_json: the document `mlaverify diagnose --json` prints. */
mlav_status mlav_diagnose(const char* path, const char* options_json, char** report_json,
                          char* err, size_t err_size);

/* Frees a string the library returned (NULL is fine). */
void mlav_free(char* s);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MLAVERIFY_C_SUITE_H */
