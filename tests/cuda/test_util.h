// Small helpers shared by the CUDA tests: the device-or-skip guard, a seeded generator, and
// random draft trees (parent[t] uniform in [0, t), as docs/spec.md §8 draws them).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "cuda/cuda_backend.h"
#include "model/metadata.h"
#include "model/tree.h"

// GPU tests skip, visibly, where there is no device (CI has none).
#define MLAV_SKIP_WITHOUT_DEVICE()                                               \
  do {                                                                           \
    ::mlaverify::Support mlav_dev_ = ::mlaverify::cuda::cuda_device_available(); \
    if (!mlav_dev_) GTEST_SKIP() << "no CUDA device: " << mlav_dev_.reason;      \
  } while (0)

namespace mlaverify::cuda::testing {

// splitmix64: seeded and identical on every machine.
class Rng {
 public:
  explicit Rng(uint64_t seed) : bits_(seed) {}
  uint64_t next() { return bits_.next(); }
  int32_t below(int32_t n) { return static_cast<int32_t>(next() % static_cast<uint64_t>(n)); }

 private:
  model::SplitMix64 bits_;  // the model's generator: the same stream everywhere
};

inline model::DraftTree random_tree(int32_t nodes, Rng& rng) {
  std::vector<int32_t> parent(static_cast<size_t>(nodes));
  parent[0] = -1;
  for (int32_t t = 1; t < nodes; ++t) parent[t] = rng.below(t);
  return model::DraftTree::from_parents(std::move(parent));
}

}  // namespace mlaverify::cuda::testing
