// The CPU backend's thread pool: every index runs exactly once for any thread count, jobs can
// follow each other, and an exception in an item reaches the caller after all items finished.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "cpu/thread_pool.h"

namespace mlaverify::cpu {
namespace {

TEST(ThreadPool, RunsEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(n, [&](int64_t i) { hits[i].fetch_add(1); });
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(hits[i].load(), 1) << "threads " << threads << " n " << n << " index " << i;
      }
    }
  }
}

TEST(ThreadPool, ManyJobsInARow) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  for (int job = 0; job < 200; ++job) {
    pool.parallel_for(10, [&](int64_t i) { sum.fetch_add(i); });
  }
  EXPECT_EQ(sum.load(), 200 * 45);
}

TEST(ThreadPool, ExceptionReachesCallerAfterAllItems) {
  ThreadPool pool(3);
  std::atomic<int> ran{0};
  EXPECT_THROW(pool.parallel_for(50,
                                 [&](int64_t i) {
                                   ran.fetch_add(1);
                                   if (i == 17) throw std::runtime_error("item 17");
                                 }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 50);
  // The pool is still usable afterwards.
  std::atomic<int> again{0};
  pool.parallel_for(5, [&](int64_t) { again.fetch_add(1); });
  EXPECT_EQ(again.load(), 5);
}

}  // namespace
}  // namespace mlaverify::cpu
