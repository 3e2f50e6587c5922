// Model-based test of the serving lifecycle (rc::state commands: admit, verify, accept, finish,
// tier-0 sorting, tier-1 compaction) over model::ServingState against a trivially correct model.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <rapidcheck/state.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "model/defrag.h"
#include "model/serving.h"
#include "props/generators.h"

namespace mlaverify::props {
namespace {

// The trivially correct model: requests as lists of content tags (what each column must hold),
// and free capacity as a count (token slots, or pages when paged).
struct ReqModel {
  int64_t id = 0;                    // model id (the SUT's ids are mapped in Sut::ids)
  int32_t rounds = 0;                // verify rounds so far: part of every tag
  std::vector<uint32_t> tags;        // [P] committed columns
  std::vector<uint32_t> draft_tags;  // [D] while verifying
  std::vector<int32_t> parents;      // [D] the draft tree while verifying
};

struct AllocModel {
  bool paged = false;
  int64_t page_size = 1;
  int64_t pool_size = 0;  // allocatable slots
  int64_t max_reqs = 0;
  int64_t max_context = 0;
  int64_t next_id = 0;
  std::vector<ReqModel> reqs;

  int64_t pages_of(int64_t tokens) const { return (tokens + page_size - 1) / page_size; }
  // Free capacity in allocation units (slots, or pages).
  int64_t free_units() const {
    int64_t used = 0;
    for (const auto& r : reqs) {
      const int64_t n = static_cast<int64_t>(r.tags.size() + r.draft_tags.size());
      used += paged ? pages_of(n) : n;
    }
    return (paged ? pool_size / page_size : pool_size) - used;
  }
};

struct Sut {
  model::ServingState state;
  std::map<int64_t, int64_t> ids;  // model id -> SUT id
};

constexpr int32_t kLayers = 2;

// A 24-bit content tag per (request, verify round, column): what the row generator writes, so a
// misplaced or lost row shows up as a wrong tag.
uint32_t tag_of(int64_t model_id, int32_t epoch, int64_t column) {
  uint64_t z = (static_cast<uint64_t>(model_id) << 40) ^ (static_cast<uint64_t>(epoch) << 24) ^
               static_cast<uint64_t>(column);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return static_cast<uint32_t>((z ^ (z >> 31)) & 0xffffff);
}

// Bytes of the tag in the first three elements (integers <= 255 are exact in bf16), the layer
// in the fourth, zeros elsewhere.
model::RowGenerator generator_for(int64_t model_id, int32_t epoch) {
  return [model_id, epoch](int32_t layer, int64_t, int64_t column, float* row) {
    std::fill(row, row + kRowDim, 0.0f);
    const uint32_t t = tag_of(model_id, epoch, column);
    for (int k = 0; k < 3; ++k) row[k] = static_cast<float>((t >> (8 * k)) & 0xff);
    row[3] = static_cast<float>(layer);
  };
}

uint32_t read_tag(const model::ServingState& s, int32_t layer, int64_t slot) {
  auto row = s.layer(layer).read_row(slot);
  RC_ASSERT(row[3] == static_cast<float>(layer));
  return static_cast<uint32_t>(row[0]) | static_cast<uint32_t>(row[1]) << 8 |
         static_cast<uint32_t>(row[2]) << 16;
}

std::set<int64_t> owned_slots(const Sut& sut) {
  std::set<int64_t> owned;
  for (int64_t id : sut.state.live_requests()) {
    for (int64_t s : sut.state.prefix_slots(id)) owned.insert(s);
    for (int64_t s : sut.state.draft_slots(id)) owned.insert(s);
  }
  return owned;
}

// Everything the model says must hold of the SUT.
void verify(const AllocModel& m, const Sut& sut) {
  sut.state.check_invariants();  // throws InvariantViolation: double ownership, slot 0, leaks
  RC_ASSERT(sut.state.live_requests().size() == m.reqs.size());
  size_t tokens = 0;
  for (const auto& r : m.reqs) {
    const int64_t id = sut.ids.at(r.id);
    RC_ASSERT(sut.state.prefix_len(id) == static_cast<int64_t>(r.tags.size()));
    RC_ASSERT(sut.state.draft_nodes(id) == static_cast<int32_t>(r.draft_tags.size()));
    const auto prefix = sut.state.prefix_slots(id);
    const auto draft = sut.state.draft_slots(id);
    tokens += prefix.size() + draft.size();
    for (int32_t layer = 0; layer < kLayers; ++layer) {
      for (size_t c = 0; c < prefix.size(); ++c) {
        RC_ASSERT(prefix[c] != 0);
        RC_ASSERT(read_tag(sut.state, layer, prefix[c]) == r.tags[c]);
      }
      for (size_t t = 0; t < draft.size(); ++t) {
        RC_ASSERT(read_tag(sut.state, layer, draft[t]) == r.draft_tags[t]);
      }
    }
  }
  // No slot is owned twice: the union is as large as the token count.
  RC_ASSERT(owned_slots(sut).size() == tokens);
  const int64_t unit = m.paged ? m.page_size : 1;
  if (auto* a = sut.state.token_allocator()) RC_ASSERT(a->available() == m.free_units() * unit);
  if (auto* a = sut.state.paged_allocator()) RC_ASSERT(a->available() == m.free_units() * unit);
}

using Cmd = rc::state::Command<AllocModel, Sut>;

struct Admit : Cmd {
  int64_t prefix_len = *rc::gen::inRange<int64_t>(0, 49);
  bool fits(const AllocModel& m) const {
    const int64_t need = m.paged ? m.pages_of(prefix_len) : prefix_len;
    return static_cast<int64_t>(m.reqs.size()) < m.max_reqs && need <= m.free_units();
  }
  void apply(AllocModel& m) const override {
    const int64_t id = m.next_id++;
    if (!fits(m)) return;  // the id is spent either way: ids are never reused
    ReqModel r;
    r.id = id;
    for (int64_t c = 0; c < prefix_len; ++c) r.tags.push_back(tag_of(id, 0, c));
    m.reqs.push_back(std::move(r));
  }
  void run(const AllocModel& m, Sut& sut) const override {
    const auto before = owned_slots(sut);
    auto got = sut.state.admit(prefix_len, generator_for(m.next_id, 0));
    RC_ASSERT(got.has_value() == fits(m));
    if (got) {
      sut.ids[m.next_id] = *got;
      // The new request's slots were all free before.
      for (int64_t s : sut.state.prefix_slots(*got)) RC_ASSERT(before.count(s) == 0);
    }
    AllocModel next = m;
    apply(next);
    verify(next, sut);
  }
  void show(std::ostream& os) const override { os << "admit(P=" << prefix_len << ")"; }
};

struct BeginVerify : Cmd {
  size_t which = 0;
  std::vector<int32_t> parents;
  explicit BeginVerify(const AllocModel& m) {
    std::vector<size_t> idle;
    for (size_t k = 0; k < m.reqs.size(); ++k) {
      if (m.reqs[k].draft_tags.empty()) idle.push_back(k);
    }
    RC_PRE(!idle.empty());
    which = *rc::gen::elementOf(idle);
    parents = make_tree(*gen_tree_shape(), *rc::gen::container<std::vector<uint32_t>>(
                                               static_cast<size_t>(*rc::gen::inRange(0, 12)),
                                               rc::gen::arbitrary<uint32_t>()));
  }
  bool fits(const AllocModel& m) const {
    const auto& r = m.reqs[which];
    const int64_t p = static_cast<int64_t>(r.tags.size());
    const int64_t d = static_cast<int64_t>(parents.size());
    const int64_t need = m.paged ? m.pages_of(p + d) - m.pages_of(p) : d;
    return need <= m.free_units();
  }
  void checkPreconditions(const AllocModel& m) const override {
    RC_PRE(which < m.reqs.size() && m.reqs[which].draft_tags.empty());
    RC_PRE(static_cast<int64_t>(m.reqs[which].tags.size() + parents.size()) <= m.max_context);
  }
  void apply(AllocModel& m) const override {
    if (!fits(m)) return;
    auto& r = m.reqs[which];
    const int64_t p = static_cast<int64_t>(r.tags.size());
    for (size_t t = 0; t < parents.size(); ++t) {
      r.draft_tags.push_back(tag_of(r.id, r.rounds + 1, p + static_cast<int64_t>(t)));
    }
    r.parents = parents;
  }
  void run(const AllocModel& m, Sut& sut) const override {
    const auto& r = m.reqs[which];
    const auto before = owned_slots(sut);
    auto got = sut.state.begin_verify(sut.ids.at(r.id), static_cast<int32_t>(parents.size()),
                                      generator_for(r.id, r.rounds + 1));
    RC_ASSERT(got.has_value() == fits(m));
    if (got) {
      for (int64_t s : *got) RC_ASSERT(before.count(s) == 0 && s != 0);
    }
    AllocModel next = m;
    apply(next);
    verify(next, sut);
  }
  void show(std::ostream& os) const override {
    os << "begin_verify(req#" << which << ", D=" << parents.size() << ")";
  }
};

struct Accept : Cmd {
  size_t which = 0;
  int32_t node = 0;
  explicit Accept(const AllocModel& m) {
    std::vector<size_t> busy;
    for (size_t k = 0; k < m.reqs.size(); ++k) {
      if (!m.reqs[k].draft_tags.empty()) busy.push_back(k);
    }
    RC_PRE(!busy.empty());
    which = *rc::gen::elementOf(busy);
    node = *rc::gen::inRange<int32_t>(0, static_cast<int32_t>(m.reqs[which].draft_tags.size()));
  }
  std::vector<int32_t> path(const ReqModel& r) const {
    std::vector<int32_t> p;
    for (int32_t t = node; t >= 0; t = r.parents[static_cast<size_t>(t)]) p.push_back(t);
    std::reverse(p.begin(), p.end());
    return p;
  }
  void checkPreconditions(const AllocModel& m) const override {
    RC_PRE(which < m.reqs.size() && node < static_cast<int32_t>(m.reqs[which].draft_tags.size()));
  }
  void apply(AllocModel& m) const override {
    auto& r = m.reqs[which];
    for (int32_t t : path(r)) r.tags.push_back(r.draft_tags[static_cast<size_t>(t)]);
    r.draft_tags.clear();
    r.parents.clear();
    ++r.rounds;
  }
  void run(const AllocModel& m, Sut& sut) const override {
    const auto& r = m.reqs[which];
    const auto before = owned_slots(sut);
    const auto p = path(r);
    sut.state.accept(sut.ids.at(r.id), p, r.parents);
    // Accepting only releases: nothing new is owned.
    for (int64_t s : owned_slots(sut)) {
      if (!sut.state.paged()) RC_ASSERT(before.count(s) == 1);
    }
    AllocModel next = m;
    apply(next);
    verify(next, sut);
  }
  void show(std::ostream& os) const override {
    os << "accept(req#" << which << ", up to node " << node << ")";
  }
};

struct Finish : Cmd {
  size_t which = 0;
  explicit Finish(const AllocModel& m) {
    RC_PRE(!m.reqs.empty());
    which = *rc::gen::inRange<size_t>(0, m.reqs.size());
  }
  void checkPreconditions(const AllocModel& m) const override { RC_PRE(which < m.reqs.size()); }
  void apply(AllocModel& m) const override {
    m.reqs.erase(m.reqs.begin() + static_cast<std::ptrdiff_t>(which));
  }
  void run(const AllocModel& m, Sut& sut) const override {
    sut.state.finish(sut.ids.at(m.reqs[which].id));
    AllocModel next = m;
    apply(next);
    verify(next, sut);
  }
  void show(std::ostream& os) const override { os << "finish(req#" << which << ")"; }
};

struct Compact : Cmd {
  void apply(AllocModel&) const override {}  // defragmentation changes nothing observable
  void run(const AllocModel& m, Sut& sut) const override {
    const size_t before = owned_slots(sut).size();
    model::compact(sut.state);
    RC_ASSERT(owned_slots(sut).size() == before);
    verify(m, sut);
    // Tier 1 leaves every live request one ascending run.
    if (!m.reqs.empty()) RC_ASSERT(model::measure(sut.state).runs_per_request <= 1.0);
  }
  void show(std::ostream& os) const override { os << "compact()"; }
};

struct SortedAllocation : Cmd {
  void apply(AllocModel&) const override {}
  void run(const AllocModel& m, Sut& sut) const override {
    model::enable_sorted_allocation(sut.state);
    verify(m, sut);
  }
  void show(std::ostream& os) const override { os << "enable_sorted_allocation()"; }
};

void check_lifecycle(bool paged, int64_t page_size) {
  model::ServingConfig cfg;
  cfg.page_size = page_size;
  // Small on purpose: 96 slots fill up within a few admissions, so allocation failure, reuse of
  // freed slots and the release-list merge are all exercised.
  cfg.pool_size = 96;
  cfg.allocator = paged ? model::AllocatorKind::Paged : model::AllocatorKind::Token;
  cfg.num_layers = kLayers;
  cfg.max_reqs = 6;
  cfg.max_context_len = 160;
  AllocModel m;
  m.paged = paged;
  m.page_size = page_size;
  m.pool_size = cfg.pool_size;
  m.max_reqs = cfg.max_reqs;
  m.max_context = cfg.max_context_len;
  Sut sut{model::ServingState(cfg), {}};
  rc::state::check(m, sut,
                   rc::state::gen::execOneOfWithArgs<Admit, BeginVerify, Accept, Finish, Compact,
                                                     SortedAllocation>());
}

RC_GTEST_PROP(ServingLifecycle, TokenAllocatorAgainstModel, ()) { check_lifecycle(false, 1); }

RC_GTEST_PROP(ServingLifecycle, PagedAllocatorAgainstModel, ()) { check_lifecycle(true, 4); }

}  // namespace
}  // namespace mlaverify::props
