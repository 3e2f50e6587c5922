// Guarded runs of a foreign kernel (`plugin:PATH.so?guarded[&timeout=S]`): every call made in a
// worker process, every output surrounded by guard bytes and checked afterwards, so an
// out-of-bounds write, a crash or a hang becomes one failing case with a pointed message instead
// of corrupted memory or the end of the campaign.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "mlaverify/backend.h"
#include "plugin/plugin_backend.h"

namespace mlaverify::plugin {

// The guard pattern: 4 bytes repeated from each guarded area's start, 0x7FA5A5A5 as a
// little-endian word (an fp32 signalling NaN with a payload no kernel computes; as bf16 halves
// 0xA5A5, a tiny negative number, and 0x7FA5, a NaN). A write of exactly this value is the one
// write a guard cannot see.
inline constexpr unsigned char kGuardPattern[4] = {0xA5, 0xA5, 0xA5, 0x7F};
// Bytes of pattern before and after each output and the workspace.
inline constexpr size_t kGuardBytes = 4096;

// Process model. One worker process, started on first use and again after it dies (a crash, a
// time limit): fork, then exec of the worker executable mlaverify-plugin-worker (worker_executable
// below), a fresh process whatever this one holds (threads, an initialized CUDA context). It
// dlopens the plugin and makes every plugin call, so this process never loads the plugin (a CUDA
// plugin initializes CUDA only in the worker). Where no worker executable is found the child is
// a plain fork of this process (then CUDA must not have been initialized here). Requests go over a
// socketpair; the buffers of a run go through one shared memory region (memfd, passed once per
// growth with SCM_RIGHTS): the inputs copied in, each output laid out as
// [guard | extent | guard] with the caller's values in the elements the plugin must write and
// the pattern in every other byte (rows t >= T, stride gaps, lse when not declared), and the
// workspace as [guard | workspace_bytes | guard]. After the call every guard and non-writable
// byte is compared with the pattern and every input with the caller's copy; any difference is a
// std::runtime_error naming the buffer, the side (before the start, after the end, token t of
// request i, a stride gap) and the byte range. Only the writable elements are copied back.
// A worker that dies (signal or exit) or does not answer within timeout_s is reported as a
// std::runtime_error for that call (the worker is killed and reaped); the next call starts a new
// one. The worker dies with this process (PR_SET_PDEATHSIG: strictly, with the thread that
// started it, so start guarded backends from a thread that lives as long as they are used).
// The worker executable: $MLAV_PLUGIN_WORKER when set ("fork": none, fork without exec; a path
// that is not executable: InvalidInput naming the variable), else the build tree's, else the
// installed one (<libexecdir>/mlaverify/mlaverify-plugin-worker), else "" (fork without exec).
std::string worker_executable();
// The worker executable's main (plugin/plugin_worker.cpp): serves one GuardedPluginBackend over
// the socket it is handed, until that hangs up.
int run_plugin_worker(int argc, char** argv);

class GuardedPluginBackend : public Backend {
 public:
  // Starts the worker and opens the plugin in it: InvalidInput("backend", -1, "plugin:PATH: ...")
  // for every load failure load_plugin reports.
  explicit GuardedPluginBackend(const PluginSpec& spec);
  ~GuardedPluginBackend() override;
  GuardedPluginBackend(const GuardedPluginBackend&) = delete;
  GuardedPluginBackend& operator=(const GuardedPluginBackend&) = delete;

  // "plugin:<name>[guarded]".
  std::string name() const override { return "plugin:" + plugin_name_ + "[guarded]"; }
  Capabilities capabilities() const override { return caps_; }
  // Asks the worker. Unlike Backend's rule this can throw: a worker that crashes or hangs while
  // answering is the plugin's failure (a failing case), not a refusal to skip.
  Support can_implement(const VerifyParams& p) const override;
  size_t workspace_bytes(const VerifyParams& p) const override;
  // Validates p here, then runs it in the worker under the rules above.
  void run(const VerifyParams& p) override;

  // Workers started so far (1 + respawns), and the live one's pid (-1: none), for tests.
  int32_t workers_started() const;
  int64_t worker_pid() const;

 private:
  struct Worker;
  std::unique_ptr<Worker> worker_;
  std::string plugin_name_;
  Capabilities caps_;
};

}  // namespace mlaverify::plugin
