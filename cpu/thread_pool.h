// A small persistent pool of std::threads running index-parallel loops for the CPU backend.
// Work items write disjoint outputs, so which thread runs an item never changes a result bit.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mlaverify::cpu {

class ThreadPool {
 public:
  // `threads` counts the calling thread too: ThreadPool(1) starts no worker and runs inline.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(i) for every i in [0, n), on the workers and the calling thread, and returns when all
  // are done. The first exception an item throws is rethrown here (the other items still run).
  // Not re-entrant: one parallel_for at a time per pool.
  void parallel_for(int64_t n, const std::function<void(int64_t)>& fn);

 private:
  void worker_loop();
  void drain();  // runs items of the current job until none is left

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;  // a new job or stop
  std::condition_variable done_;  // the last busy worker left the current job
  uint64_t generation_ = 0;       // bumped per job, so a worker runs each job at most once
  int busy_ = 0;                  // workers not yet finished with the current job
  bool stop_ = false;

  const std::function<void(int64_t)>* fn_ = nullptr;
  int64_t count_ = 0;
  std::atomic<int64_t> next_{0};
  std::exception_ptr error_;
};

}  // namespace mlaverify::cpu
