// Synthetic pictures for the viz tests and the sample renders: trees shaped like EAGLE and DDTree
// drafts, the masks they imply, and error ratios from a fixed-seed generator.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "viz/show.h"

namespace mlaverify::viz::testing {

// A small deterministic generator (splitmix64): the pictures are the same on every run.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t s_;
};

// Breadth-first expansion: node k (in creation order) gets fanout[k] children (0 past the end).
inline std::vector<int32_t> tree_from_fanout(const std::vector<int32_t>& fanout, int32_t nodes) {
  std::vector<int32_t> parents{-1};
  for (size_t k = 0; parents.size() < static_cast<size_t>(nodes); ++k) {
    const int32_t f = k < fanout.size() ? fanout[k] : (k < parents.size() ? 1 : 0);
    if (k >= parents.size()) break;
    for (int32_t c = 0; c < f && parents.size() < static_cast<size_t>(nodes); ++c)
      parents.push_back(static_cast<int32_t>(k));
  }
  return parents;
}

// A 16-node EAGLE-style tree: top-4 at the first step, narrowing with depth.
inline std::vector<int32_t> eagle16() {
  return tree_from_fanout({4, 3, 2, 1, 0, 1, 1, 0, 0, 1, 0, 1}, 16);
}

// DDTree-style best-first budget (as props/generators.cpp draws it): shallow and very wide.
inline std::vector<int32_t> ddtree(int32_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> parents{-1}, depth{0};
  for (int32_t t = 1; t < n; ++t) {
    const double u = rng.uniform();
    auto p = static_cast<int32_t>(u * u * t);
    while (depth[p] >= 16) p = parents[p];
    parents.push_back(p);
    depth.push_back(depth[p] + 1);
  }
  return parents;
}

// What the tree implies: query t sees draft column j iff j is t or one of its ancestors.
inline std::vector<uint8_t> tree_mask(const std::vector<int32_t>& parents) {
  const size_t d = parents.size();
  std::vector<uint8_t> m(d * d, 0);
  for (size_t t = 0; t < d; ++t)
    for (int32_t j = static_cast<int32_t>(t); j >= 0; j = parents[j]) m[t * d + j] = 1;
  return m;
}

inline RequestPicture request(std::vector<int32_t> parents, int64_t prefix, std::string label) {
  RequestPicture r;
  r.expected = tree_mask(parents);
  r.visible = r.expected;
  r.parents = std::move(parents);
  r.prefix_len = prefix;
  r.label = std::move(label);
  return r;
}

// Ratios of a passing case: mostly small, a few larger, per token and head.
inline ErrorPicture errors_for(const std::vector<RequestPicture>& requests, int32_t heads,
                               uint64_t seed) {
  ErrorPicture e;
  e.heads = heads;
  e.columns = 512;
  e.request_begin.push_back(0);
  for (const RequestPicture& r : requests) {
    e.tokens += static_cast<int64_t>(r.parents.size());
    e.request_begin.push_back(e.tokens);
    e.token_padded.insert(e.token_padded.end(), r.parents.size(), r.padded ? 1 : 0);
  }
  Rng rng(seed);
  e.ratio.resize(static_cast<size_t>(e.tokens) * heads * e.columns);
  for (int64_t t = 0; t < e.tokens; ++t) {
    const bool padded = e.token_padded[t] != 0;
    for (int32_t h = 0; h < heads; ++h) {
      const double scale = 0.05 + 0.25 * rng.uniform();
      for (int32_t c = 0; c < e.columns; ++c) {
        const double u = rng.uniform();
        const size_t k = (static_cast<size_t>(t) * heads + h) * e.columns + c;
        e.ratio[k] = padded ? 0.f : static_cast<float>(scale * u * u * (c >= 448 ? 1.8 : 1.0));
      }
    }
  }
  return e;
}

inline float& ratio_at(ErrorPicture& e, int64_t t, int32_t h, int32_t c) {
  return e.ratio[(static_cast<size_t>(t) * e.heads + h) * e.columns + c];
}

}  // namespace mlaverify::viz::testing
