// ServingState: admit / begin_verify / accept / finish over req_to_token, an allocator and the
// KV layers, plus an exhaustive invariant check that the allocator and the map agree slot by slot.
#include "model/serving.h"

#include <algorithm>
#include <array>
#include <limits>
#include <string>

#include "mlaverify/error.h"

namespace mlaverify::model {

namespace {

std::variant<TokenAllocator, PagedAllocator> make_allocator(const ServingConfig& cfg) {
  if (cfg.allocator == AllocatorKind::Token) {
    if (cfg.page_size != 1) {
      throw InvalidInput(
          "page_size", -1,
          "the token allocator has page size 1, got " + std::to_string(cfg.page_size));
    }
    return TokenAllocator(cfg.pool_size);
  }
  if (cfg.allocator != AllocatorKind::Paged) {
    throw InvalidInput("allocator", -1, "unknown AllocatorKind");
  }
  return PagedAllocator(cfg.pool_size, cfg.page_size);
}

const ServingConfig& checked(const ServingConfig& cfg) {
  if (cfg.num_layers < 1) {
    throw InvalidInput("num_layers", -1, "must be >= 1, got " + std::to_string(cfg.num_layers));
  }
  if (cfg.pool_size < 1) throw InvalidInput("pool_size", -1, "must be >= 1");
  if (cfg.page_size < 1) throw InvalidInput("page_size", -1, "must be >= 1");
  // req_to_token stores int32 slot ids (SGLang), so every slot of the pool must fit.
  if (cfg.pool_size > std::numeric_limits<int32_t>::max() - cfg.page_size) {
    throw InvalidInput("pool_size", -1, "slot ids must fit req_to_token's int32");
  }
  return cfg;
}

void violated(const std::string& what) { throw InvariantViolation("serving state: " + what); }

}  // namespace

ServingState::ServingState(const ServingConfig& cfg)
    : cfg_(checked(cfg)),
      req_to_token_(cfg.max_reqs, cfg.max_context_len),
      alloc_(make_allocator(cfg)) {
  layers_.reserve(static_cast<size_t>(cfg.num_layers));
  for (int32_t l = 0; l < cfg.num_layers; ++l) {
    layers_.emplace_back(cfg.pool_size, cfg.page_size, cfg.dtype, cfg.layout);
  }
  for (int64_t r = 1; r <= cfg.max_reqs; ++r) free_rows_.push_back(r);
}

const ServingState::Request& ServingState::live(int64_t req) const {
  auto it = requests_.find(req);
  if (it == requests_.end()) throw InvalidInput("request", req, "not a live request");
  return it->second;
}

ServingState::Request& ServingState::live(int64_t req) {
  auto it = requests_.find(req);
  if (it == requests_.end()) throw InvalidInput("request", req, "not a live request");
  return it->second;
}

const KvPool& ServingState::layer(int32_t i) const {
  if (i < 0 || i >= num_layers()) throw InvalidInput("layer", i, "no such layer");
  return layers_[static_cast<size_t>(i)];
}

KvPool& ServingState::layer(int32_t i) {
  if (i < 0 || i >= num_layers()) throw InvalidInput("layer", i, "no such layer");
  return layers_[static_cast<size_t>(i)];
}

void ServingState::set_need_sort(bool need_sort) {
  std::visit([&](auto& a) { a.set_need_sort(need_sort); }, alloc_);
}

void ServingState::write_rows(int64_t req, const Request& r, int64_t begin, int64_t end,
                              const RowGenerator& gen) {
  std::array<float, kRowDim> row;  // [576] latent-first
  for (int32_t l = 0; l < num_layers(); ++l) {
    for (int64_t c = begin; c < end; ++c) {
      row.fill(0.f);
      gen(l, req, c, row.data());
      layers_[static_cast<size_t>(l)].write_row(req_to_token_.at(r.row, c), row.data());
    }
  }
}

void ServingState::free_slots(std::span<const int64_t> slots) {
  std::visit([&](auto& a) { a.free(slots); }, alloc_);
}

std::optional<int64_t> ServingState::admit(int64_t prefix_len, const RowGenerator& gen) {
  if (prefix_len < 0 || prefix_len > cfg_.max_context_len) {
    throw InvalidInput("prefix_len", -1,
                       std::to_string(prefix_len) + " outside [0, max_context_len " +
                           std::to_string(cfg_.max_context_len) + "]");
  }
  if (!gen) throw InvalidInput("row_generator", -1, "empty");
  if (free_rows_.empty()) return std::nullopt;
  std::optional<std::vector<int64_t>> slots;  // [P]
  if (auto* t = std::get_if<TokenAllocator>(&alloc_)) {
    slots = t->alloc(prefix_len);
  } else {
    const std::array<int64_t, 1> prefix{0}, seq{prefix_len}, last{-1};
    slots = std::get<PagedAllocator>(alloc_).alloc_extend(prefix, seq, last);
  }
  if (!slots) return std::nullopt;
  const int64_t id = next_id_++;
  Request r{free_rows_.front(), prefix_len, 0};
  free_rows_.erase(free_rows_.begin());
  for (int64_t j = 0; j < prefix_len; ++j) {
    req_to_token_.set(r.row, j, static_cast<int32_t>((*slots)[static_cast<size_t>(j)]));
  }
  requests_.emplace(id, r);
  write_rows(id, r, 0, prefix_len, gen);
  return id;
}

std::optional<std::vector<int64_t>> ServingState::begin_verify(int64_t req, int32_t draft_nodes,
                                                               const RowGenerator& gen) {
  Request& r = live(req);
  if (r.draft_nodes != 0) throw InvalidInput("request", req, "already in a verify step");
  if (draft_nodes < 1) {
    throw InvalidInput("draft_nodes", req, "must be >= 1, got " + std::to_string(draft_nodes));
  }
  if (r.prefix_len + draft_nodes > cfg_.max_context_len) {
    throw InvalidInput("draft_nodes", req,
                       "P + D = " + std::to_string(r.prefix_len + draft_nodes) +
                           " exceeds max_context_len " + std::to_string(cfg_.max_context_len));
  }
  if (!gen) throw InvalidInput("row_generator", -1, "empty");
  std::optional<std::vector<int64_t>> slots;  // [D]
  if (auto* t = std::get_if<TokenAllocator>(&alloc_)) {
    slots = t->alloc(draft_nodes);
  } else {
    const std::array<int64_t, 1> prefix{r.prefix_len}, seq{r.prefix_len + draft_nodes};
    const std::array<int64_t, 1> last{r.prefix_len > 0 ? req_to_token_.at(r.row, r.prefix_len - 1)
                                                       : int64_t{-1}};
    slots = std::get<PagedAllocator>(alloc_).alloc_extend(prefix, seq, last);
  }
  if (!slots) return std::nullopt;
  for (int32_t t = 0; t < draft_nodes; ++t) {
    req_to_token_.set(r.row, r.prefix_len + t,
                      static_cast<int32_t>((*slots)[static_cast<size_t>(t)]));
  }
  r.draft_nodes = draft_nodes;
  write_rows(req, r, r.prefix_len, r.prefix_len + draft_nodes, gen);
  return slots;
}

void ServingState::accept(int64_t req, std::span<const int32_t> path,
                          std::span<const int32_t> parents) {
  Request& r = live(req);
  const int32_t d = r.draft_nodes;
  if (d == 0) throw InvalidInput("request", req, "not in a verify step");
  // Validate everything first: a rejected accept leaves the step open and unchanged.
  if (path.empty()) throw InvalidInput("path", -1, "empty: the root (node 0) is always accepted");
  if (path[0] != 0) throw InvalidInput("path", 0, "must start at the root node 0");
  if (!parents.empty() && static_cast<int64_t>(parents.size()) != d) {
    throw InvalidInput(
        "parents", -1,
        "length " + std::to_string(parents.size()) + " != draft_nodes " + std::to_string(d));
  }
  for (size_t k = 1; k < path.size(); ++k) {
    // Topological order (parents before children) makes every ancestor chain increasing.
    if (path[k] <= path[k - 1] || path[k] >= d) {
      throw InvalidInput("path", static_cast<int64_t>(k),
                         "node " + std::to_string(path[k]) + " must be in (" +
                             std::to_string(path[k - 1]) + ", " + std::to_string(d) + ")");
    }
    if (!parents.empty() && parents[static_cast<size_t>(path[k])] != path[k - 1]) {
      throw InvalidInput("parents", path[k],
                         "parent is " + std::to_string(parents[static_cast<size_t>(path[k])]) +
                             ", path says " + std::to_string(path[k - 1]));
    }
  }
  const int64_t p = r.prefix_len;
  const int64_t a = static_cast<int64_t>(path.size());
  std::vector<int64_t> draft(static_cast<size_t>(d));  // [D] slot of draft node t
  for (int32_t t = 0; t < d; ++t) draft[static_cast<size_t>(t)] = req_to_token_.at(r.row, p + t);

  if (!paged()) {
    // SGLang, page_size 1: keep the accepted slots in place, rewrite req_to_token to name them in
    // path order, free the rejected ones. No KV row moves.
    std::vector<uint8_t> kept(static_cast<size_t>(d), 0);  // [D]
    for (int64_t k = 0; k < a; ++k) {
      const int32_t node = path[static_cast<size_t>(k)];
      kept[static_cast<size_t>(node)] = 1;
      req_to_token_.set(r.row, p + k, static_cast<int32_t>(draft[static_cast<size_t>(node)]));
    }
    std::vector<int64_t> rejected;  // [D - a]
    for (int32_t t = 0; t < d; ++t) {
      if (!kept[static_cast<size_t>(t)]) rejected.push_back(draft[static_cast<size_t>(t)]);
    }
    std::get<TokenAllocator>(alloc_).free(rejected);
  } else {
    // SGLang, paged with topk > 1: move the accepted rows to the first a draft slots (their
    // columns P..P+a-1 keep their page offsets), then return the rest. In-order copying is safe:
    // path[k] >= k, so a source is never a slot an earlier step overwrote.
    for (int64_t k = 0; k < a; ++k) {
      const int64_t src = draft[static_cast<size_t>(path[static_cast<size_t>(k)])];
      const int64_t dst = draft[static_cast<size_t>(k)];
      if (src == dst) continue;
      for (KvPool& pool : layers_) pool.copy_row(dst, src);
    }
    const int64_t ps = cfg_.page_size;
    const int64_t new_len = p + a;
    const int64_t last_block = (new_len - 1) / ps;  // page block of the last kept token
    std::vector<int64_t> to_reserve, to_free;
    for (int64_t c = new_len; c < p + d; ++c) {
      (c / ps == last_block ? to_reserve : to_free).push_back(draft[static_cast<size_t>(c - p)]);
    }
    auto& pa = std::get<PagedAllocator>(alloc_);
    pa.release_tail(to_reserve);
    pa.free(to_free);
  }
  for (int64_t c = p + a; c < p + d; ++c) req_to_token_.set(r.row, c, 0);
  r.prefix_len = p + a;
  r.draft_nodes = 0;
}

void ServingState::finish(int64_t req) {
  const Request r = live(req);
  const int64_t len = r.prefix_len + r.draft_nodes;
  std::vector<int64_t> slots(static_cast<size_t>(len));  // [P + D]
  for (int64_t c = 0; c < len; ++c) slots[static_cast<size_t>(c)] = req_to_token_.at(r.row, c);
  free_slots(slots);
  for (int64_t c = 0; c < len; ++c) req_to_token_.set(r.row, c, 0);
  free_rows_.push_back(r.row);  // SGLang's ReqToTokenPool.free appends
  requests_.erase(req);
}

int64_t ServingState::prefix_len(int64_t req) const { return live(req).prefix_len; }
int32_t ServingState::draft_nodes(int64_t req) const { return live(req).draft_nodes; }
int64_t ServingState::row(int64_t req) const { return live(req).row; }

std::vector<int64_t> ServingState::prefix_slots(int64_t req) const {
  const Request& r = live(req);
  std::vector<int64_t> out(static_cast<size_t>(r.prefix_len));  // [P]
  for (int64_t j = 0; j < r.prefix_len; ++j)
    out[static_cast<size_t>(j)] = req_to_token_.at(r.row, j);
  return out;
}

std::vector<int64_t> ServingState::draft_slots(int64_t req) const {
  const Request& r = live(req);
  std::vector<int64_t> out(static_cast<size_t>(r.draft_nodes));  // [D]
  for (int32_t t = 0; t < r.draft_nodes; ++t) {
    out[static_cast<size_t>(t)] = req_to_token_.at(r.row, r.prefix_len + t);
  }
  return out;
}

std::vector<int64_t> ServingState::live_requests() const {
  std::vector<int64_t> ids;
  ids.reserve(requests_.size());
  for (const auto& [id, r] : requests_) ids.push_back(id);
  return ids;
}

void ServingState::check_invariants() const {
  const int64_t ps = cfg_.page_size;
  const int64_t num_slots = layers_.front().num_slots();
  // One past the last allocatable slot: the paged allocator leaves size % page_size slots unused.
  const int64_t slot_end = paged() ? (paged_allocator()->num_pages() + 1) * ps : num_slots;
  // Rows: live rows and free rows partition 1..max_reqs.
  std::vector<int64_t> row_owner(static_cast<size_t>(req_to_token_.rows()), 0);  // [max_reqs + 1]
  for (int64_t r : free_rows_) {
    if (r < 1 || r >= req_to_token_.rows() || row_owner[static_cast<size_t>(r)] != 0) {
      violated("free row " + std::to_string(r) + " invalid or listed twice");
    }
    row_owner[static_cast<size_t>(r)] = -1;
  }
  for (const auto& [id, r] : requests_) {
    if (r.row < 1 || r.row >= req_to_token_.rows() || row_owner[static_cast<size_t>(r.row)] != 0) {
      violated("request " + std::to_string(id) + " holds row " + std::to_string(r.row) +
               " that is row 0, free or shared");
    }
    row_owner[static_cast<size_t>(r.row)] = id;
    if (r.prefix_len < 0 || r.draft_nodes < 0 ||
        r.prefix_len + r.draft_nodes > req_to_token_.cols()) {
      violated("request " + std::to_string(id) + " has a bad extent");
    }
  }
  for (int64_t r = 1; r < req_to_token_.rows(); ++r) {
    if (row_owner[static_cast<size_t>(r)] == 0) violated("row " + std::to_string(r) + " leaked");
  }
  // Slots: every live column names a distinct, allocatable slot.
  std::vector<int64_t> owner(static_cast<size_t>(num_slots), 0);  // [size + page_size] request id
  std::vector<int64_t> page_owner(static_cast<size_t>(num_slots / ps + 1), 0);  // [pages] id
  for (int64_t row = 0; row < req_to_token_.rows(); ++row) {
    const int64_t id = row_owner[static_cast<size_t>(row)];
    const int64_t len = id > 0 ? requests_.at(id).prefix_len + requests_.at(id).draft_nodes : 0;
    for (int64_t c = 0; c < req_to_token_.cols(); ++c) {
      const int64_t s = req_to_token_.at(row, c);
      if (c >= len) {
        if (s != 0) {
          violated("req_to_token[" + std::to_string(row) + ", " + std::to_string(c) +
                   "] = " + std::to_string(s) + " outside any live request");
        }
        continue;
      }
      const std::string where = "request " + std::to_string(id) + " column " + std::to_string(c);
      if (s < ps || s >= slot_end) violated(where + " names slot " + std::to_string(s));
      if (owner[static_cast<size_t>(s)] != 0) {
        violated(where + ": slot " + std::to_string(s) + " also owned by request " +
                 std::to_string(owner[static_cast<size_t>(s)]));
      }
      owner[static_cast<size_t>(s)] = id;
      if (paged()) {
        // Position c lives at offset c % ps of the page holding its whole block c / ps.
        if (s % ps != c % ps)
          violated(where + ": slot " + std::to_string(s) + " off its page offset");
        if (c % ps != 0 && req_to_token_.at(row, c - 1) / ps != s / ps) {
          violated(where + ": block split across pages");
        }
        int64_t& po = page_owner[static_cast<size_t>(s / ps)];
        if (po != 0 && po != id)
          violated(where + ": page shared with request " + std::to_string(po));
        po = id;
      }
    }
  }
  if (const TokenAllocator* t = token_allocator()) {
    for (int64_t s = 1; s <= t->size(); ++s) {
      if ((owner[static_cast<size_t>(s)] != 0) != t->is_allocated(s)) {
        violated("slot " + std::to_string(s) +
                 (t->is_allocated(s) ? " handed out but unowned" : " owned but free"));
      }
    }
    try {
      t->check_accounting();
    } catch (const std::logic_error& e) {
      violated(e.what());
    }
  } else {
    const PagedAllocator& pa = *paged_allocator();
    for (int64_t s = ps; s < (pa.num_pages() + 1) * ps; ++s) {
      const auto st = pa.slot_state(s);
      const bool owned = owner[static_cast<size_t>(s)] != 0;
      if (owned != (st == PagedAllocator::SlotState::Committed)) {
        violated("slot " + std::to_string(s) +
                 (owned ? " owned but not committed" : " committed but unowned"));
      }
      if (st == PagedAllocator::SlotState::Reserved) {
        // A reserved slot is the unused tail of its owner's last page, after its last token.
        const int64_t id = page_owner[static_cast<size_t>(s / ps)];
        if (id == 0) violated("page " + std::to_string(s / ps) + " allocated but unowned");
        const Request& r = requests_.at(id);
        const int64_t len = r.prefix_len + r.draft_nodes;
        if (len == 0 || req_to_token_.at(r.row, len - 1) / ps != s / ps ||
            s % ps <= (len - 1) % ps) {
          violated("reserved slot " + std::to_string(s) + " is not the tail of request " +
                   std::to_string(id) + "'s last page");
        }
      }
    }
    try {
      pa.check_accounting();
    } catch (const std::logic_error& e) {
      violated(e.what());
    }
  }
}

}  // namespace mlaverify::model
