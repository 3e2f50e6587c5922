// GuardedPluginBackend (guarded.h): the worker process, its request protocol over a socketpair,
// the shared region of one run with guard bytes around every output, and the check afterwards.
#include "plugin/guarded.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <vector>

#include "mlaverify/error.h"
#include "model/validate.h"
#include "plugin/buffers.h"

namespace mlaverify::plugin {
namespace {

static_assert(std::is_trivially_copyable_v<VerifyParams>);
static_assert(std::is_trivially_copyable_v<Capabilities>);

enum Op : uint32_t { kOpCanImplement = 1, kOpWorkspaceBytes = 2, kOpRun = 3 };

const char* op_name(uint32_t op) {
  switch (op) {
    case kOpCanImplement:
      return "can_implement";
    case kOpWorkspaceBytes:
      return "workspace_bytes";
    case kOpRun:
      return "run";
    default:
      return "opening the plugin";
  }
}

// One request. Both ends are the same binary (fork without exec), so plain structs travel.
struct Request {
  uint32_t op = 0;
  uint32_t region_gen = 0;  // the region the offsets refer to; its fd comes with a new one
  uint64_t region_bytes = 0;
  VerifyParams p{};                  // pointers NULL; the buffers are at offset[] in the region
  int64_t offset[kNumBuffers] = {};  // -1: not passed
  int64_t ws_offset = -1;
  uint64_t ws_bytes = 0;
  uint64_t guard = 0;
};

// Both ends must agree on these structs: the worker executable is built from the same sources,
// and its hello carries this stamp so a stale one is refused rather than misread.
constexpr uint64_t kProtocolStamp =
    0x6d6c6176'00000002ull ^ (sizeof(VerifyParams) << 16) ^ (sizeof(Capabilities) << 40);

struct Reply {
  uint64_t stamp = kProtocolStamp;
  int32_t status = MLAV_OK;  // mlav_status of what the worker's PluginBackend threw
  int32_t memory = 0;
  int32_t lost = 0;  // 1: it threw BackendLost (its CUDA context is gone): the worker exits
  uint64_t value = 0;  // workspace_bytes
  int64_t index = -1;  // InvalidInput's
  Capabilities caps{};
  char field[128] = {0};
  char name[256] = {0};
  char text[4096] = {0};
};

void copy_text(char* dst, size_t n, std::string_view s) { write_error(dst, n, s); }

// ---- socket helpers ----

bool send_all(int sock, const void* data, size_t n, int fd_to_pass) {
  const auto* p = static_cast<const unsigned char*>(data);
  bool first = true;
  while (n > 0) {
    iovec iov{const_cast<unsigned char*>(p), n};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    if (first && fd_to_pass >= 0) {
      std::memset(control, 0, sizeof(control));
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &fd_to_pass, sizeof(int));
    }
    const ssize_t k = sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
    first = false;
  }
  return true;
}

// Reads exactly n bytes (and a passed fd, if any, into *fd). deadline_ms < 0: no limit.
// Returns 1 on success, 0 on EOF or error, -1 on timeout.
int recv_all(int sock, void* data, size_t n, int* fd, double timeout_s) {
  auto* p = static_cast<unsigned char*>(data);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (n > 0) {
    if (timeout_s > 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0) return -1;
      pollfd pfd{sock, POLLIN, 0};
      const int r = poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) return -1;
      if (r < 0) return 0;
    }
    iovec iov{p, n};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t k = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && fd != nullptr) {
        std::memcpy(fd, CMSG_DATA(c), sizeof(int));
      }
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
  return 1;
}

void fill_reply_from(Reply& r, const std::exception_ptr& ep) {
  try {
    std::rethrow_exception(ep);
  } catch (const BackendLost& e) {
    r.status = MLAV_ERROR;
    r.lost = 1;
    copy_text(r.text, sizeof(r.text), e.what());
  } catch (const InvalidInput& e) {
    r.status = MLAV_INVALID_INPUT;
    r.index = e.index();
    copy_text(r.field, sizeof(r.field), e.field());
    copy_text(r.text, sizeof(r.text), e.detail());
  } catch (const Unsupported& e) {
    r.status = MLAV_UNSUPPORTED;
    copy_text(r.text, sizeof(r.text), e.what());
  } catch (const std::exception& e) {
    r.status = MLAV_ERROR;
    copy_text(r.text, sizeof(r.text), e.what());
  } catch (...) {
    r.status = MLAV_ERROR;
    copy_text(r.text, sizeof(r.text), "unknown exception");
  }
}

// ---- the worker process ----

// Keeps only stdio and the socket (as fd 3): the parent's other descriptors (another worker's
// socket, its region) must not stay open here, or that worker would never see its parent hang up.
int keep_only_socket(int sock) {
  if (sock != 3) {
    dup2(sock, 3);
    sock = 3;
  }
  fcntl(sock, F_SETFD, 0);  // survives exec (dup2 clears FD_CLOEXEC, but not when sock was 3)
  close_range(4, ~0u, 0);
  return sock;
}

[[noreturn]] void worker_main(int sock, const PluginSpec& spec, pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(0);  // the parent died before prctl took effect
  sock = keep_only_socket(sock);

  Reply hello;
  std::shared_ptr<PluginBackend> plugin;
  try {
    plugin = load_plugin(spec.path, spec.config);
    hello.memory = plugin->memory();
    hello.caps = plugin->capabilities();
    copy_text(hello.name, sizeof(hello.name), plugin->plugin_name());
  } catch (...) {
    fill_reply_from(hello, std::current_exception());
  }
  if (!send_all(sock, &hello, sizeof(hello), -1) || !plugin) _exit(0);

  unsigned char* region = nullptr;
  size_t region_bytes = 0;
  for (;;) {
    Request q;
    int fd = -1;
    if (recv_all(sock, &q, sizeof(q), &fd, 0) != 1) break;  // the parent hung up: done
    Reply a;
    try {
      if (fd >= 0) {
        if (region != nullptr) munmap(region, region_bytes);
        region_bytes = q.region_bytes;
        void* m = mmap(nullptr, region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (m == MAP_FAILED) {
          region = nullptr;
          throw std::runtime_error(std::string("worker: mmap of the run's region: ") +
                                   std::strerror(errno));
        }
        region = static_cast<unsigned char*>(m);
      }
      switch (q.op) {
        case kOpCanImplement: {
          const Support s = plugin->can_implement(q.p);
          if (!s) {
            a.status = MLAV_UNSUPPORTED;
            copy_text(a.text, sizeof(a.text), s.reason);
          }
          break;
        }
        case kOpWorkspaceBytes:
          a.value = plugin->workspace_bytes(q.p);
          break;
        case kOpRun: {
          if (region == nullptr) throw std::runtime_error("worker: run without a region");
          VerifyParams p = q.p;
          for (int id = 0; id < kNumBuffers; ++id) {
            set_buffer_ptr(p, BufferId(id), q.offset[id] < 0 ? nullptr : region + q.offset[id]);
          }
          plugin->invoke(p, q.guard, region + q.ws_offset, q.ws_bytes);
          break;
        }
        default:
          throw std::runtime_error("worker: unknown request");
      }
    } catch (...) {
      fill_reply_from(a, std::current_exception());
    }
    if (!send_all(sock, &a, sizeof(a), -1)) break;
    if (a.lost) _exit(0);  // no more CUDA work here (nor the plugin's teardown on a dead context)
  }
  plugin.reset();
  _exit(0);
}

// ---- the run's region ----

size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

unsigned char pattern_at(size_t area_offset) { return kGuardPattern[area_offset % 4]; }

void fill_pattern(unsigned char* area, size_t n) {
  for (size_t i = 0; i < n; ++i) area[i] = pattern_at(i);
}

// [begin, end) byte ranges of an output the plugin must write, ascending.
std::vector<std::pair<size_t, size_t>> writable_ranges(const OutputGeometry& g, size_t extent) {
  std::vector<std::pair<size_t, size_t>> r;
  if (!g.writable) return r;
  const size_t eb = static_cast<size_t>(g.elem_bytes);
  for (int64_t t = 0; t < g.tokens; ++t) {
    for (int32_t h = 0; h < g.heads; ++h) {
      const size_t b = static_cast<size_t>(t * g.token_stride + h * g.head_stride) * eb;
      const size_t e = std::min(extent, b + static_cast<size_t>(g.row_elements) * eb);
      if (!r.empty() && r.back().second == b) {
        r.back().second = e;  // dense rows: one range
      } else {
        r.emplace_back(b, e);
      }
    }
  }
  return r;
}

struct Area {
  BufferId id;
  size_t offset = 0;  // of the buffer's first byte in the region (its guard lies before it)
  size_t bytes = 0;
  OutputGeometry geometry;
  std::vector<std::pair<size_t, size_t>> writable;
};

}  // namespace

std::string worker_executable() {
  const char* env = std::getenv("MLAV_PLUGIN_WORKER");
  if (env != nullptr && std::string_view(env) == "fork") return "";
  if (env != nullptr && env[0] != '\0') {
    if (access(env, X_OK) != 0) {
      throw InvalidInput("MLAV_PLUGIN_WORKER", -1,
                         std::string("'") + env + "' is not an executable (" +
                             std::strerror(errno) + "); unset it, or 'fork' for no exec");
    }
    return env;
  }
  for (const char* candidate : {MLAV_PLUGIN_WORKER_BUILD, MLAV_PLUGIN_WORKER_INSTALL}) {
    if (candidate[0] != '\0' && access(candidate, X_OK) == 0) return candidate;
  }
  return "";
}

int run_plugin_worker(int argc, char** argv) {
  PluginSpec spec;
  int fd = -1;
  pid_t parent = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    if (key == "--fd") fd = std::atoi(argv[i + 1]);
    if (key == "--parent") parent = static_cast<pid_t>(std::atol(argv[i + 1]));
    if (key == "--plugin") spec.path = argv[i + 1];
    if (key == "--config") spec.config = argv[i + 1];
  }
  if (fd < 0 || parent <= 0 || spec.path.empty()) {
    std::fprintf(stderr,
                 "mlaverify-plugin-worker: started by GuardedPluginBackend only (--fd N --parent "
                 "PID --plugin PATH --config TEXT)\n");
    return 2;
  }
  worker_main(fd, spec, parent);
}

struct GuardedPluginBackend::Worker {
  PluginSpec spec;
  pid_t pid = -1;
  int sock = -1;
  int32_t started = 0;
  Reply hello;
  // The shared region of the runs (grow-only) and which generation the live worker has mapped.
  int region_fd = -1;
  unsigned char* region = nullptr;
  size_t region_bytes = 0;
  uint32_t region_gen = 0;
  uint32_t worker_gen = 0;

  std::string label() const { return "plugin:" + spec.path; }

  ~Worker() {
    stop();
    if (region != nullptr) munmap(region, region_bytes);
    if (region_fd >= 0) close(region_fd);
  }

  // Forks a worker and reads its hello (the plugin opened, or why not).
  void start() {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      throw std::runtime_error(label() + ": socketpair: " + std::strerror(errno));
    }
    const pid_t parent = getpid();
    // Everything exec needs is made before fork: the child only calls async-signal-safe
    // functions until execv (this process may have other threads).
    const std::string worker = worker_executable();
    const std::string parent_text = std::to_string(parent);
    const char* argv[] = {worker.c_str(),
                          "--fd",
                          "3",
                          "--parent",
                          parent_text.c_str(),
                          "--plugin",
                          spec.path.c_str(),
                          "--config",
                          spec.config.c_str(),
                          nullptr};
    const pid_t child = fork();
    if (child < 0) {
      close(sv[0]);
      close(sv[1]);
      throw std::runtime_error(label() + ": fork: " + std::strerror(errno));
    }
    if (child == 0) {
      close(sv[0]);
      if (worker.empty()) worker_main(sv[1], spec, parent);  // no worker executable: fork only
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      keep_only_socket(sv[1]);
      execv(worker.c_str(), const_cast<char* const*>(argv));
      _exit(127);
    }
    close(sv[1]);
    pid = child;
    sock = sv[0];
    worker_gen = 0;
    ++started;
    Reply r;
    const int got = recv_all(sock, &r, sizeof(r), nullptr, spec.timeout_s);
    if (got != 1) {
      const std::string why = got < 0 ? kill_after_timeout() : reap();
      throw std::runtime_error(label() + ": the worker " + why + " while opening the plugin");
    }
    if (r.stamp != kProtocolStamp) {
      stop();
      throw std::runtime_error(label() + ": the worker executable " + worker_executable() +
                               " speaks another protocol (built from other sources?)");
    }
    if (r.status != MLAV_OK) {
      stop();
      if (r.status == MLAV_INVALID_INPUT) throw InvalidInput(r.field, r.index, r.text);
      throw InvalidInput("backend", -1, label() + ": " + r.text);
    }
    hello = r;
  }

  // Hangs up and waits for the worker (killing it after 2 s).
  void stop() {
    if (sock >= 0) close(sock);
    sock = -1;
    if (pid <= 0) return;
    for (int i = 0; i < 200; ++i) {
      if (waitpid(pid, nullptr, WNOHANG) == pid) {
        pid = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    pid = -1;
  }

  // The worker hung up: how it ended.
  std::string reap() {
    if (sock >= 0) close(sock);
    sock = -1;
    int status = 0;
    std::string why = "ended";
    if (pid > 0 && waitpid(pid, &status, 0) == pid) {
      if (WIFSIGNALED(status)) {
        why = "crashed: killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
              strsignal(WTERMSIG(status)) + ")";
      } else if (WIFEXITED(status)) {
        why = "exited with status " + std::to_string(WEXITSTATUS(status));
      }
    }
    pid = -1;
    return why;
  }

  std::string kill_after_timeout() {
    if (pid > 0) kill(pid, SIGKILL);
    reap();
    char limit[32];
    std::snprintf(limit, sizeof(limit), "%g", spec.timeout_s);
    return std::string("did not answer within the time limit of ") + limit + " s (hang): killed";
  }

  // One request and its reply; a dead or hung worker is a std::runtime_error naming the call.
  Reply call(Request& q) {
    if (pid < 0) start();
    int fd = -1;
    if (q.op == kOpRun && worker_gen != region_gen) fd = region_fd;
    q.region_gen = region_gen;
    q.region_bytes = region_bytes;
    Reply r;
    int got = send_all(sock, &q, sizeof(q), fd) ? 1 : 0;
    if (got == 1) got = recv_all(sock, &r, sizeof(r), nullptr, spec.timeout_s);
    if (got != 1) {
      const std::string why = got < 0 ? kill_after_timeout() : reap();
      throw std::runtime_error(label() + ": the worker " + why + " during " + op_name(q.op) +
                               " (a failing case; a new worker starts for the next call)");
    }
    if (fd >= 0) worker_gen = region_gen;
    if (r.lost) {
      // The worker's CUDA context is lost and it is exiting: wait for it, so the next call starts
      // a fresh worker (a fresh context) and a campaign goes on shrinking the case.
      stop();
      copy_text(r.text, sizeof(r.text),
                std::string(r.text) + " (in the worker; a new worker starts for the next call)");
    }
    return r;
  }

  unsigned char* ensure_region(size_t bytes) {
    if (bytes <= region_bytes) return region;
    bytes = align_up(std::max(bytes, region_bytes * 2), 1 << 20);
    const int fd = memfd_create("mlaverify-guarded-run", MFD_CLOEXEC);
    if (fd < 0) throw std::runtime_error(label() + ": memfd_create: " + std::strerror(errno));
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      close(fd);
      throw std::runtime_error(label() +
                               ": ftruncate of the run's region: " + std::strerror(errno));
    }
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
      close(fd);
      throw std::runtime_error(label() + ": mmap of the run's region: " + std::strerror(errno));
    }
    if (region != nullptr) munmap(region, region_bytes);
    if (region_fd >= 0) close(region_fd);
    region = static_cast<unsigned char*>(m);
    region_bytes = bytes;
    region_fd = fd;
    ++region_gen;
    return region;
  }
};

namespace {

void throw_reply(const Reply& r, const std::string& name) {
  switch (r.status) {
    case MLAV_OK:
      return;
    case MLAV_INVALID_INPUT:
      throw InvalidInput(r.field, r.index, r.text);
    case MLAV_UNSUPPORTED:
      throw Unsupported(r.text);
    default:
      throw std::runtime_error(std::string(r.text) + " [" + name + "]");
  }
}

Request shape_request(uint32_t op, const VerifyParams& p) {
  Request q;
  q.op = op;
  q.p = p;
  for (int id = 0; id < kNumBuffers; ++id) {
    set_buffer_ptr(q.p, BufferId(id), nullptr);
    q.offset[id] = -1;
  }
  return q;
}

// "token 7 (request 2)" / "token 9 (t >= T = 8: after the last request, 3)".
std::string where(const VerifyParams& p, const Area& a, size_t offset) {
  std::string s = a.geometry.describe(offset);
  const int64_t t = static_cast<int64_t>(offset / a.geometry.elem_bytes) / a.geometry.token_stride;
  const int32_t req = request_of_token(p, t);
  if (req >= 0) return s + " (request " + std::to_string(req) + ")";
  return s + " (row t >= T = " + std::to_string(a.geometry.tokens) + ", after the last request, " +
         std::to_string(p.batch_size - 1) + ")";
}

// Compares [from, to) of the area (area-relative offsets, pattern expected) and appends what
// changed: the range and where it lies.
void check_range(const unsigned char* area, size_t from, size_t to,
                 const std::function<std::string(size_t first, size_t last)>& describe,
                 std::vector<std::string>& out, size_t& changed) {
  size_t first = SIZE_MAX, last = 0, n = 0;
  for (size_t i = from; i < to; ++i) {
    if (area[i] != pattern_at(i)) {
      first = std::min(first, i);
      last = i;
      ++n;
    }
  }
  if (n == 0) return;
  changed += n;
  if (out.size() < 6)
    out.push_back(describe(first, last) + " (" + std::to_string(n) + " byte" + (n == 1 ? "" : "s") +
                  ")");
}

}  // namespace

GuardedPluginBackend::GuardedPluginBackend(const PluginSpec& spec)
    : worker_(std::make_unique<Worker>()) {
  worker_->spec = spec;
  worker_->start();
  plugin_name_ = worker_->hello.name;
  caps_ = worker_->hello.caps;
}

GuardedPluginBackend::~GuardedPluginBackend() = default;

int32_t GuardedPluginBackend::workers_started() const { return worker_->started; }
int64_t GuardedPluginBackend::worker_pid() const { return worker_->pid; }

Support GuardedPluginBackend::can_implement(const VerifyParams& p) const {
  if (Support s = caps_.admits(p); !s) return s;
  Request q = shape_request(kOpCanImplement, p);
  const Reply r = worker_->call(q);
  if (r.status == MLAV_OK) return Support::yes();
  if (r.status == MLAV_UNSUPPORTED) return Support::no(r.text);
  throw_reply(r, name());
  return Support::yes();
}

size_t GuardedPluginBackend::workspace_bytes(const VerifyParams& p) const {
  Request q = shape_request(kOpWorkspaceBytes, p);
  const Reply r = worker_->call(q);
  throw_reply(r, name());
  return static_cast<size_t>(r.value);
}

void GuardedPluginBackend::run(const VerifyParams& p) {
  model::validate_params(p);
  if (Support s = can_implement(p); !s) throw Unsupported(name() + ": " + s.reason);
  const size_t ws_bytes = workspace_bytes(p);
  const auto bytes = buffer_bytes(p);
  constexpr size_t G = kGuardBytes;

  // Layout: inputs, then [G | o_lat | G], [G | lse | G], [G | workspace | G], all 256-aligned.
  Request q = shape_request(kOpRun, p);
  q.guard = G;
  size_t end = 0;
  std::vector<Area> areas;
  for (int id = 0; id < kNumBuffers; ++id) {
    if (bytes[id] == 0) continue;
    const BufferId b = BufferId(id);
    const size_t at = align_up(end, G) + (is_output(b) ? G : 0);
    q.offset[id] = static_cast<int64_t>(at);
    end = at + bytes[id] + (is_output(b) ? G : 0);
    if (is_output(b)) {
      Area a{b, at, bytes[id], output_geometry(p, b, caps_.writes_lse), {}};
      a.writable = writable_ranges(a.geometry, a.bytes);
      areas.push_back(std::move(a));
    }
  }
  q.ws_offset = static_cast<int64_t>(align_up(end, G) + G);
  q.ws_bytes = ws_bytes;
  end = static_cast<size_t>(q.ws_offset) + align_up(ws_bytes, 256) + G;

  unsigned char* region = worker_->ensure_region(end);
  for (int id = 0; id < kNumBuffers; ++id) {
    if (bytes[id] == 0 || is_output(BufferId(id))) continue;
    std::memcpy(region + q.offset[id], buffer_ptr(p, BufferId(id)), bytes[id]);
  }
  for (const Area& a : areas) {
    unsigned char* area = region + a.offset - G;
    fill_pattern(area, a.bytes + 2 * G);
    const auto* caller = static_cast<const unsigned char*>(buffer_ptr(p, a.id));
    for (const auto& [b, e] : a.writable) std::memcpy(area + G + b, caller + b, e - b);
  }
  unsigned char* ws = region + q.ws_offset;
  fill_pattern(ws - G, G);
  fill_pattern(ws + ws_bytes, G);

  const Reply r = worker_->call(q);
  throw_reply(r, name());

  // The check: every byte outside the writable elements is still the pattern; inputs unchanged.
  std::vector<std::string> found;
  size_t changed = 0;
  for (const Area& a : areas) {
    const unsigned char* area = region + a.offset - G;
    const std::string bn = buffer_name(a.id);
    check_range(
        area, 0, G,
        [&](size_t f, size_t l) {
          return bn + ": before the start of the buffer, bytes -" + std::to_string(G - f) + "..-" +
                 std::to_string(G - l);
        },
        found, changed);
    size_t from = 0;
    auto gap = [&](size_t b, size_t e) {
      check_range(
          area + G, b, e,
          [&](size_t f, size_t l) {
            std::string s = bn + ": " + where(p, a, f);
            if (a.id == kLse && !a.geometry.writable)
              s += " (the plugin does not declare writes_lse)";
            if (l / a.geometry.elem_bytes != f / a.geometry.elem_bytes)
              s += " to " + where(p, a, l);
            return s;
          },
          found, changed);
    };
    // check_range on area + G compares with pattern_at(i) relative to area + G: shift by G (a
    // multiple of the pattern's period, so the same bytes).
    for (const auto& [b, e] : a.writable) {
      gap(from, b);
      from = e;
    }
    gap(from, a.bytes);
    check_range(
        area, G + a.bytes, 2 * G + a.bytes,
        [&](size_t f, size_t l) {
          const int64_t last_t = a.geometry.tokens - 1;
          return bn + ": after the end of the buffer, bytes +" + std::to_string(f - G - a.bytes) +
                 "..+" + std::to_string(l - G - a.bytes) + " (its last real row is token " +
                 std::to_string(last_t) + ", request " +
                 std::to_string(request_of_token(p, last_t)) +
                 "; the buffer holds max_total_q = " + std::to_string(p.max_total_q) + " rows)";
        },
        found, changed);
  }
  check_range(
      ws - G, 0, G,
      [&](size_t f, size_t l) {
        return "workspace: before its start, bytes -" + std::to_string(G - f) + "..-" +
               std::to_string(G - l);
      },
      found, changed);
  check_range(
      ws + ws_bytes, 0, G,
      [&](size_t f, size_t l) {
        return "workspace: after its end (" + std::to_string(ws_bytes) + " bytes asked), bytes +" +
               std::to_string(f) + "..+" + std::to_string(l);
      },
      found, changed);
  for (int id = 0; id < kNumBuffers; ++id) {
    if (bytes[id] == 0 || is_output(BufferId(id))) continue;
    const auto* orig = static_cast<const unsigned char*>(buffer_ptr(p, BufferId(id)));
    if (std::memcmp(region + q.offset[id], orig, bytes[id]) != 0) {
      size_t f = 0;
      while (region[q.offset[id] + f] == orig[f]) ++f;
      ++changed;
      if (found.size() < 6) {
        found.push_back(std::string(buffer_name(BufferId(id))) + ": input modified from byte " +
                        std::to_string(f) + " (inputs are read-only)");
      }
    }
  }
  if (!found.empty()) {
    std::string msg = name() + ": out-of-bounds write: " + std::to_string(changed) +
                      " byte(s) outside what the Outputs rule lets a plugin write: ";
    for (size_t i = 0; i < found.size(); ++i) msg += (i ? "; " : "") + found[i];
    throw std::runtime_error(msg);
  }
  for (const Area& a : areas) {
    auto* caller = static_cast<unsigned char*>(const_cast<void*>(buffer_ptr(p, a.id)));
    for (const auto& [b, e] : a.writable) std::memcpy(caller + b, region + a.offset + b, e - b);
  }
}

}  // namespace mlaverify::plugin
