// DraftTree: a speculative-decoding draft tree (docs/spec.md §2) as a validated parent array, with
// its interconvertible forms: ancestor bitsets, SGLang first-child / next-sibling links, positions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/bitrows.h"

namespace mlaverify::model {

// SGLang's tree links (retrive_next_token / retrive_next_sibling), int64 as SGLang stores them.
struct TreeLinks {
  std::vector<int64_t> next_token;    // [D] first child (smallest index) of node t, or -1
  std::vector<int64_t> next_sibling;  // [D] next sibling of t in increasing index order, or -1
};

// Node 0 is the root (the last verified token); parents precede children (parent[t] < t), so the
// node order is a topological order and every per-node quantity is computed in one forward pass.
// Immutable once built: every constructor validates.
class DraftTree {
 public:
  // The one-node tree (root only, D = 1), so that containers of trees can be sized up front.
  DraftTree() = default;

  // parent[0] == -1 and 0 <= parent[t] < t for t >= 1; otherwise InvalidInput("parent", t, why).
  static DraftTree from_parents(std::vector<int32_t> parent);
  // parent[t] = t - 1: a DeepSeek MTP chain, causal attention with the bottom-right rule.
  static DraftTree chain(int32_t n);
  // Every node t >= 1 a child of the root: the widest tree of n nodes.
  static DraftTree star(int32_t n);
  // Inverse of ancestor_bits(): a square, lower-triangular matrix with unit diagonal, column 0 all
  // ones, and each row = its parent's row plus its own bit. Errors name the offending row.
  static DraftTree from_ancestor_bits(const BitRows& bits);
  // Inverse of links(). Accepts sibling lists in any order (the tree is still well defined), but
  // rejects indices out of range, cycles, nodes reached twice, unreachable nodes and children that
  // do not come after their parent, naming the field and node index.
  static DraftTree from_links(const TreeLinks& links);

  int32_t size() const { return static_cast<int32_t>(parent_.size()); }
  const std::vector<int32_t>& parents() const { return parent_; }  // [D]
  int32_t parent(int32_t t) const;
  int32_t depth(int32_t t) const;
  int32_t max_depth() const { return max_depth_; }
  // position(t) = prefix_len + depth(t): siblings share a position (docs/spec.md §2).
  std::vector<int64_t> positions(int64_t prefix_len) const;  // [D]
  // Strict: a != t and a lies on the path from t to the root. O(depth(t)).
  bool is_ancestor(int32_t a, int32_t t) const;
  // Draft query t sees draft column j iff j == t or j is an ancestor of t.
  bool visible(int32_t t, int32_t j) const;
  // The D x D visibility block (diagonal included); row t has depth(t) + 1 bits. O(D^2 / 64).
  BitRows ancestor_bits() const;
  TreeLinks links() const;
  // Children of t in increasing index order.
  std::vector<int32_t> children(int32_t t) const;
  // Compact parent array, e.g. "[-1,0,0,1]", for diagnostics and counterexamples.
  std::string to_string() const;

  friend bool operator==(const DraftTree& a, const DraftTree& b) { return a.parent_ == b.parent_; }

 private:
  void check_node(const char* field, int32_t t) const;

  std::vector<int32_t> parent_{-1};         // [D]
  std::vector<int32_t> depth_{0};           // [D]
  std::vector<int32_t> child_begin_{0, 0};  // [D + 1] CSR offsets into child_list_
  std::vector<int32_t> child_list_;         // [D - 1] children grouped by parent, increasing index
  int32_t max_depth_ = 0;
};

}  // namespace mlaverify::model
