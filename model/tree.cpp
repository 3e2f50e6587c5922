// DraftTree construction, validation and conversions (parent array <-> ancestor bits <-> links).
// Every rejection is an InvalidInput naming the field and the node index at fault.
#include "model/tree.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>

#include "mlaverify/error.h"

namespace mlaverify::model {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

DraftTree DraftTree::from_parents(std::vector<int32_t> parent) {
  if (parent.empty()) throw InvalidInput("parent", -1, "empty tree: the root (node 0) is required");
  if (parent[0] != -1) {
    throw InvalidInput("parent", 0, "root must have parent -1, got " + str(parent[0]));
  }
  if (parent.size() > static_cast<size_t>(INT32_MAX)) {
    throw InvalidInput("parent", -1, "more than 2^31 - 1 nodes");
  }
  const int32_t n = static_cast<int32_t>(parent.size());
  DraftTree tree;
  tree.depth_.assign(n, 0);
  // One forward pass suffices: parent[t] < t means depth[parent[t]] is final when t is reached.
  for (int32_t t = 1; t < n; ++t) {
    int32_t p = parent[t];
    if (p < 0 || p >= t) {
      throw InvalidInput(
          "parent", t, "must lie in [0, " + str(t) + ") (parents precede children), got " + str(p));
    }
    tree.depth_[t] = tree.depth_[p] + 1;
    tree.max_depth_ = std::max(tree.max_depth_, tree.depth_[t]);
  }
  // Children as CSR by counting sort over parents: a stable pass keeps each list in index order.
  tree.child_begin_.assign(static_cast<size_t>(n) + 1, 0);
  for (int32_t t = 1; t < n; ++t) ++tree.child_begin_[parent[t] + 1];
  for (int32_t t = 0; t < n; ++t) tree.child_begin_[t + 1] += tree.child_begin_[t];
  tree.child_list_.assign(static_cast<size_t>(n > 0 ? n - 1 : 0), 0);
  std::vector<int32_t> fill(tree.child_begin_.begin(), tree.child_begin_.end() - 1);  // [D]
  for (int32_t t = 1; t < n; ++t) tree.child_list_[fill[parent[t]]++] = t;
  tree.parent_ = std::move(parent);
  return tree;
}

DraftTree DraftTree::chain(int32_t n) {
  if (n < 1) throw InvalidInput("n", -1, "a tree has at least one node, got " + str(n));
  std::vector<int32_t> parent(n);  // [D]
  for (int32_t t = 0; t < n; ++t) parent[t] = t - 1;
  return from_parents(std::move(parent));
}

DraftTree DraftTree::star(int32_t n) {
  if (n < 1) throw InvalidInput("n", -1, "a tree has at least one node, got " + str(n));
  std::vector<int32_t> parent(n, 0);  // [D]
  parent[0] = -1;
  return from_parents(std::move(parent));
}

void DraftTree::check_node(const char* field, int32_t t) const {
  if (t < 0 || t >= size()) {
    throw InvalidInput(field, t, "node outside [0, " + str(size()) + ")");
  }
}

int32_t DraftTree::parent(int32_t t) const {
  check_node("node", t);
  return parent_[t];
}

int32_t DraftTree::depth(int32_t t) const {
  check_node("node", t);
  return depth_[t];
}

std::vector<int64_t> DraftTree::positions(int64_t prefix_len) const {
  if (prefix_len < 0) throw InvalidInput("prefix_len", -1, "negative: " + str(prefix_len));
  if (prefix_len > INT64_MAX - max_depth_) {
    throw InvalidInput("prefix_len", -1, "prefix_len + depth overflows int64");
  }
  std::vector<int64_t> pos(parent_.size());  // [D]
  for (size_t t = 0; t < parent_.size(); ++t) pos[t] = prefix_len + depth_[t];
  return pos;
}

bool DraftTree::is_ancestor(int32_t a, int32_t t) const {
  check_node("ancestor", a);
  check_node("node", t);
  // Ancestors have smaller indices than their descendants, and indices strictly decrease walking
  // up, so the walk stops as soon as it passes below a.
  int32_t x = parent_[t];
  while (x > a) x = parent_[x];
  return x == a;
}

bool DraftTree::visible(int32_t t, int32_t j) const {
  check_node("node", t);
  check_node("column", j);
  return j == t || is_ancestor(j, t);
}

BitRows DraftTree::ancestor_bits() const {
  const int32_t n = size();
  BitRows bits(n, n);  // [D, D]
  const int32_t wpr = bits.words_per_row();
  for (int32_t t = 0; t < n; ++t) {
    uint64_t* row = bits.row_words(t);
    if (t > 0) std::copy_n(bits.row_words(parent_[t]), wpr, row);  // inherit the parent's ancestors
    row[t >> 6] |= uint64_t{1} << (t & 63);
  }
  return bits;
}

DraftTree DraftTree::from_ancestor_bits(const BitRows& bits) {
  const int32_t n = bits.rows();
  if (bits.cols() != n) {
    throw InvalidInput("ancestor_bits", -1,
                       "not square: " + str(n) + " rows x " + str(bits.cols()) + " cols");
  }
  if (n == 0) throw InvalidInput("ancestor_bits", -1, "empty: the root (node 0) is required");
  const int32_t wpr = bits.words_per_row();
  std::vector<int32_t> parent(n, -1);  // [D]
  for (int32_t t = 0; t < n; ++t) {
    const uint64_t* row = bits.row_words(t);
    if (!bits.test(t, t)) throw InvalidInput("ancestor_bits", t, "diagonal bit missing");
    if (!bits.test(t, 0)) throw InvalidInput("ancestor_bits", t, "column 0 (the root) not set");
    // Lower-triangular: no bit at a column > t. Check the word holding t above bit t, then the
    // words after it.
    const int32_t wt = t >> 6;
    const int32_t bt = t & 63;
    uint64_t above = bt == 63 ? 0 : (row[wt] >> (bt + 1));
    for (int32_t k = wt + 1; k < wpr && above == 0; ++k) above = row[k];
    if (above != 0) {
      throw InvalidInput("ancestor_bits", t,
                         "bit set above the diagonal (a node sees a later node)");
    }
    if (t == 0) continue;
    // The parent is the highest set column below t: ancestors' indices strictly decrease upward,
    // so the nearest ancestor has the largest index.
    int32_t p = -1;
    uint64_t below = bt == 0 ? 0 : (row[wt] & ((uint64_t{1} << bt) - 1));
    if (below != 0) {
      p = wt * 64 + 63 - std::countl_zero(below);
    } else {
      for (int32_t k = wt - 1; k >= 0; --k) {
        if (row[k] != 0) {
          p = k * 64 + 63 - std::countl_zero(row[k]);
          break;
        }
      }
    }
    // Column 0 is set and t > 0, so p >= 0. The row must be exactly the parent's row plus bit t;
    // this rejects "parent only" blocks and any skipped or extra ancestor.
    const uint64_t* prow = bits.row_words(p);
    for (int32_t k = 0; k < wpr; ++k) {
      uint64_t expect = prow[k] | (k == wt ? (uint64_t{1} << bt) : 0);
      if (row[k] != expect) {
        throw InvalidInput("ancestor_bits", t,
                           "row is not its nearest ancestor's row (node " + str(p) +
                               ") plus its own bit: ancestors are not transitive");
      }
    }
    parent[t] = p;
  }
  return from_parents(std::move(parent));
}

TreeLinks DraftTree::links() const {
  const int32_t n = size();
  TreeLinks l;
  l.next_token.assign(n, -1);    // [D]
  l.next_sibling.assign(n, -1);  // [D]
  // Walking nodes in decreasing index and pushing each onto the front of its parent's list leaves
  // every list in increasing index, with the smallest child first. This is the order SGLang's
  // build_tree_efficient produces (it also walks i = D-1 .. 1 and pushes to the front), so
  // verify_tree_greedy visits siblings in the same order here and there.
  for (int32_t t = n - 1; t >= 1; --t) {
    int32_t p = parent_[t];
    l.next_sibling[t] = l.next_token[p];
    l.next_token[p] = t;
  }
  return l;
}

DraftTree DraftTree::from_links(const TreeLinks& links) {
  const size_t n_sz = links.next_token.size();
  if (n_sz == 0) throw InvalidInput("next_token", -1, "empty: the root (node 0) is required");
  if (links.next_sibling.size() != n_sz) {
    throw InvalidInput("next_sibling", -1,
                       "has " + str(static_cast<int64_t>(links.next_sibling.size())) +
                           " entries, next_token has " + str(static_cast<int64_t>(n_sz)));
  }
  if (n_sz > static_cast<size_t>(INT32_MAX)) {
    throw InvalidInput("next_token", -1, "more than 2^31 - 1 nodes");
  }
  const int32_t n = static_cast<int32_t>(n_sz);
  if (links.next_sibling[0] != -1) {
    throw InvalidInput("next_sibling", 0,
                       "the root has no siblings, got " + str(links.next_sibling[0]));
  }
  std::vector<int32_t> parent(n, -2);  // [D] -2: not reached yet
  parent[0] = -1;
  std::vector<int32_t> stack{0};  // explicit stack: a 4096-deep chain must not recurse
  while (!stack.empty()) {
    const int32_t u = stack.back();
    stack.pop_back();
    // Walk u's child list: the first link comes from next_token[u], the rest from next_sibling.
    const char* field = "next_token";
    int32_t from = u;
    int64_t c = links.next_token[u];
    while (c != -1) {
      if (c < 0 || c >= n) {
        throw InvalidInput(field, from, "index " + str(c) + " outside [-1, " + str(n) + ")");
      }
      const int32_t ci = static_cast<int32_t>(c);
      if (parent[ci] != -2) {
        // A node met again. If it is u itself, an ancestor of u, or already in u's own child list,
        // the links loop; otherwise two parents claim the same child.
        bool loops = parent[ci] == u;
        for (int32_t x = u; x >= 0 && !loops; x = parent[x]) loops = x == ci;
        throw InvalidInput(field, from,
                           "node " + str(c) + (loops ? " closes a cycle" : " reached twice") +
                               " (already under parent " + str(parent[ci]) + ")");
      }
      if (ci <= u) {
        throw InvalidInput(field, from,
                           "child " + str(c) + " does not come after its parent " + str(u));
      }
      parent[ci] = u;
      stack.push_back(ci);
      field = "next_sibling";
      from = ci;
      c = links.next_sibling[ci];
    }
  }
  for (int32_t t = 0; t < n; ++t) {
    if (parent[t] == -2) {
      throw InvalidInput("next_token", t, "node unreachable from the root through the links");
    }
  }
  return from_parents(std::move(parent));
}

std::vector<int32_t> DraftTree::children(int32_t t) const {
  check_node("node", t);
  return {child_list_.begin() + child_begin_[t], child_list_.begin() + child_begin_[t + 1]};
}

std::string DraftTree::to_string() const {
  std::string s = "[";
  for (size_t t = 0; t < parent_.size(); ++t) {
    if (t) s += ',';
    s += std::to_string(parent_[t]);
  }
  return s + "]";
}

}  // namespace mlaverify::model
