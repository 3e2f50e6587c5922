// TokenAllocator and PagedAllocator: SGLang's free-list policies plus ownership tracking, so a
// double free, a sink slot or a page id passed as a slot id is rejected before anything changes.
#include "model/allocator.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <unordered_set>

#include "mlaverify/error.h"

namespace mlaverify::model {

namespace {

int64_t ceil_div64(int64_t a, int64_t b) { return (a + b - 1) / b; }

void invariant(bool ok, const std::string& what) {
  if (!ok) throw std::logic_error("allocator accounting: " + what);
}

}  // namespace

// ---------------------------------------------------------------------------- TokenAllocator

TokenAllocator::TokenAllocator(int64_t size) : size_(size) {
  if (size < 1) throw InvalidInput("size", -1, "must be >= 1, got " + std::to_string(size));
  allocated_.assign(static_cast<size_t>(size) + 1, 0);
  for (int64_t s = 1; s <= size; ++s) free_.push_back(s);
}

void TokenAllocator::check_slot(int64_t slot) const {
  if (slot == 0) throw InvalidInput("slot", 0, "slot 0 is the padding sink, never allocated");
  if (slot < 0 || slot > size_) {
    throw InvalidInput("slot", slot, "outside [1, " + std::to_string(size_) + "]");
  }
}

bool TokenAllocator::is_allocated(int64_t slot) const {
  return slot >= 1 && slot <= size_ && allocated_[static_cast<size_t>(slot)] != 0;
}

std::optional<std::vector<int64_t>> TokenAllocator::alloc(int64_t n) {
  if (n < 0) throw InvalidInput("n", -1, "negative allocation size " + std::to_string(n));
  // SGLang merges only when need_sort is set; merging whenever the release list is non-empty is
  // the same when need_sort never changes, and cannot strand released slots if it is switched off.
  if (n > static_cast<int64_t>(free_.size()) && !release_.empty()) merge_and_sort_free();
  if (n > static_cast<int64_t>(free_.size())) return std::nullopt;
  std::vector<int64_t> out(free_.begin(), free_.begin() + n);  // [n]
  free_.erase(free_.begin(), free_.begin() + n);
  for (int64_t s : out) allocated_[static_cast<size_t>(s)] = 1;
  return out;
}

void TokenAllocator::free(std::span<const int64_t> slots) {
  // Validate the whole call first: a rejected free changes nothing.
  std::unordered_set<int64_t> seen;
  for (int64_t s : slots) {
    check_slot(s);
    if (!allocated_[static_cast<size_t>(s)] || !seen.insert(s).second) {
      throw InvalidInput("slot", s, "freed twice");
    }
  }
  for (int64_t s : slots) {
    allocated_[static_cast<size_t>(s)] = 0;
    if (need_sort_) {
      release_.push_back(s);
    } else {
      free_.push_back(s);
    }
  }
}

void TokenAllocator::merge_and_sort_free() {
  if (release_.empty()) return;
  free_.insert(free_.end(), release_.begin(), release_.end());
  release_.clear();
  std::sort(free_.begin(), free_.end());
}

void TokenAllocator::check_accounting() const {
  std::vector<uint8_t> seen(static_cast<size_t>(size_) + 1, 0);  // [size + 1]
  auto visit = [&](int64_t s, const char* where) {
    invariant(s >= 1 && s <= size_, std::string(where) + " holds slot " + std::to_string(s));
    invariant(!seen[static_cast<size_t>(s)],
              std::string(where) + " repeats slot " + std::to_string(s));
    invariant(!allocated_[static_cast<size_t>(s)],
              std::string(where) + " holds handed-out slot " + std::to_string(s));
    seen[static_cast<size_t>(s)] = 1;
  };
  for (int64_t s : free_) visit(s, "free list");
  for (int64_t s : release_) visit(s, "release list");
  invariant(allocated_[0] == 0, "sink slot 0 marked allocated");
  for (int64_t s = 1; s <= size_; ++s) {
    invariant(seen[static_cast<size_t>(s)] || allocated_[static_cast<size_t>(s)],
              "slot " + std::to_string(s) + " is neither free nor handed out (leaked)");
  }
}

void TokenAllocator::rebuild(std::span<const int64_t> in_use) {
  std::vector<uint8_t> next(static_cast<size_t>(size_) + 1, 0);  // [size + 1]
  for (int64_t s : in_use) {
    check_slot(s);
    if (next[static_cast<size_t>(s)]) throw InvalidInput("slot", s, "listed twice");
    next[static_cast<size_t>(s)] = 1;
  }
  allocated_ = std::move(next);
  free_.clear();
  release_.clear();
  for (int64_t s = 1; s <= size_; ++s) {
    if (!allocated_[static_cast<size_t>(s)]) free_.push_back(s);
  }
}

// ---------------------------------------------------------------------------- PagedAllocator

PagedAllocator::PagedAllocator(int64_t size, int64_t page_size) : page_size_(page_size) {
  if (page_size < 1) {
    throw InvalidInput("page_size", -1, "must be >= 1, got " + std::to_string(page_size));
  }
  // SGLang: num_pages = size // page_size; a remainder of slots past the last page is unused.
  num_pages_ = size / page_size;
  if (size < 1 || num_pages_ < 1) {
    throw InvalidInput("size", -1, "needs at least one page, got " + std::to_string(size));
  }
  state_.assign(static_cast<size_t>((num_pages_ + 1) * page_size), SlotState::Free);
  for (int64_t p = 1; p <= num_pages_; ++p) free_pages_.push_back(p);
}

void PagedAllocator::check_slot(int64_t slot, const char* field, int64_t index) const {
  if (slot >= 0 && slot < page_size_) {
    throw InvalidInput(field, index, "slot " + std::to_string(slot) + " is in the sink page 0");
  }
  if (slot < 0 || slot >= (num_pages_ + 1) * page_size_) {
    throw InvalidInput(field, index,
                       "slot " + std::to_string(slot) + " outside [" + std::to_string(page_size_) +
                           ", " + std::to_string((num_pages_ + 1) * page_size_) + ")");
  }
}

PagedAllocator::SlotState PagedAllocator::slot_state(int64_t slot) const {
  if (slot < 0 || slot >= static_cast<int64_t>(state_.size())) {
    throw InvalidInput("slot", slot, "outside the pool");
  }
  return state_[static_cast<size_t>(slot)];
}

void PagedAllocator::mark_page(int64_t page, SlotState s) {
  for (int64_t o = 0; o < page_size_; ++o) state_[static_cast<size_t>(page * page_size_ + o)] = s;
}

// Pops n pages from the front of the free list (merging the release list first if short).
// Returns n, or -1 with nothing taken.
int64_t PagedAllocator::take_pages(int64_t n, std::vector<int64_t>* pages) {
  if (n > static_cast<int64_t>(free_pages_.size()) && !release_pages_.empty()) {
    merge_and_sort_free();  // see TokenAllocator::alloc on why not only under need_sort
  }
  if (n > static_cast<int64_t>(free_pages_.size())) return -1;
  pages->assign(free_pages_.begin(), free_pages_.begin() + n);
  free_pages_.erase(free_pages_.begin(), free_pages_.begin() + n);
  for (int64_t p : *pages) mark_page(p, SlotState::Reserved);
  allocated_pages_ += n;
  reserved_ += n * page_size_;
  return n;
}

std::optional<std::vector<int64_t>> PagedAllocator::alloc(int64_t need_size) {
  if (need_size < 0 || need_size % page_size_ != 0) {
    throw InvalidInput("need_size", -1,
                       std::to_string(need_size) + " is not a non-negative multiple of page_size " +
                           std::to_string(page_size_));
  }
  std::vector<int64_t> pages;
  if (take_pages(need_size / page_size_, &pages) < 0) return std::nullopt;
  std::vector<int64_t> out;  // [need_size]
  out.reserve(static_cast<size_t>(need_size));
  for (int64_t p : pages) {
    for (int64_t o = 0; o < page_size_; ++o) {
      out.push_back(p * page_size_ + o);
      state_[static_cast<size_t>(out.back())] = SlotState::Committed;
    }
  }
  committed_ += need_size;
  reserved_ -= need_size;
  return out;
}

std::optional<std::vector<int64_t>> PagedAllocator::alloc_extend(
    std::span<const int64_t> prefix_lens, std::span<const int64_t> seq_lens,
    std::span<const int64_t> last_slots) {
  const int64_t bs = static_cast<int64_t>(prefix_lens.size());
  if (static_cast<int64_t>(seq_lens.size()) != bs) {
    throw InvalidInput("seq_lens", -1,
                       "length " + std::to_string(seq_lens.size()) + " != prefix_lens length " +
                           std::to_string(bs));
  }
  if (static_cast<int64_t>(last_slots.size()) != bs) {
    throw InvalidInput("last_slots", -1,
                       "length " + std::to_string(last_slots.size()) + " != prefix_lens length " +
                           std::to_string(bs));
  }
  const int64_t ps = page_size_;
  // Pass 1: validate every request and count new pages; nothing changes until all pass.
  std::vector<int64_t> tail_count(static_cast<size_t>(bs), 0);  // [bs] slots filled in old page
  std::unordered_set<int64_t> claimed;                          // tail slots claimed so far
  int64_t new_pages = 0;
  for (int64_t i = 0; i < bs; ++i) {
    const int64_t prefix = prefix_lens[static_cast<size_t>(i)];
    const int64_t seq = seq_lens[static_cast<size_t>(i)];
    if (prefix < 0) throw InvalidInput("prefix_lens", i, "negative: " + std::to_string(prefix));
    if (seq < prefix) {
      throw InvalidInput("seq_lens", i,
                         std::to_string(seq) + " < prefix_lens " + std::to_string(prefix));
    }
    // Pages already held cover positions [0, ceil(prefix / ps) * ps).
    const int64_t held_end = ceil_div64(prefix, ps) * ps;
    tail_count[static_cast<size_t>(i)] = std::min(seq, held_end) - prefix;
    new_pages += ceil_div64(seq, ps) - ceil_div64(prefix, ps);
    if (tail_count[static_cast<size_t>(i)] == 0) continue;  // last_slots[i] not read (SGLang)
    const int64_t last = last_slots[static_cast<size_t>(i)];
    check_slot(last, "last_slots", i);
    if (last % ps != (prefix - 1) % ps) {
      throw InvalidInput("last_slots", i,
                         "slot " + std::to_string(last) + " sits at page offset " +
                             std::to_string(last % ps) + " but token " +
                             std::to_string(prefix - 1) + " belongs at offset " +
                             std::to_string((prefix - 1) % ps) + " (a page id passed as a slot?)");
    }
    if (state_[static_cast<size_t>(last)] != SlotState::Committed) {
      throw InvalidInput("last_slots", i, "slot " + std::to_string(last) + " is not handed out");
    }
    for (int64_t k = 1; k <= tail_count[static_cast<size_t>(i)]; ++k) {
      const int64_t s = last + k;
      if (state_[static_cast<size_t>(s)] != SlotState::Reserved || !claimed.insert(s).second) {
        throw InvalidInput(
            "last_slots", i,
            "tail slot " + std::to_string(s) + " of its page is not reserved for this request");
      }
    }
  }
  std::vector<int64_t> pages;  // [new_pages] in free-list order
  if (take_pages(new_pages, &pages) < 0) return std::nullopt;

  // Pass 2: hand out, request by request, in position order.
  std::vector<int64_t> out;  // [sum(seq - prefix)]
  size_t next_page = 0;
  for (int64_t i = 0; i < bs; ++i) {
    const int64_t prefix = prefix_lens[static_cast<size_t>(i)];
    const int64_t seq = seq_lens[static_cast<size_t>(i)];
    const int64_t last = last_slots[static_cast<size_t>(i)];
    for (int64_t k = 1; k <= tail_count[static_cast<size_t>(i)]; ++k) out.push_back(last + k);
    // Positions from the first new page on: position pos sits at offset pos % ps of its page.
    for (int64_t pos = prefix + tail_count[static_cast<size_t>(i)]; pos < seq; ++pos) {
      if (pos % ps == 0) ++next_page;
      out.push_back(pages[next_page - 1] * ps + pos % ps);
    }
  }
  for (int64_t s : out) state_[static_cast<size_t>(s)] = SlotState::Committed;
  committed_ += static_cast<int64_t>(out.size());
  reserved_ -= static_cast<int64_t>(out.size());
  return out;
}

void PagedAllocator::free(std::span<const int64_t> slots) {
  std::unordered_set<int64_t> seen;
  std::vector<int64_t> pages;  // unique page ids, sorted (SGLang: torch.unique)
  for (int64_t s : slots) {
    check_slot(s, "slot", s);
    const SlotState st = state_[static_cast<size_t>(s)];
    if (st == SlotState::Free || !seen.insert(s).second) {
      throw InvalidInput("slot", s, "freed twice");
    }
    if (st == SlotState::Reserved) {
      throw InvalidInput("slot", s, "not handed out (reserved tail of its page)");
    }
    pages.push_back(s / page_size_);
  }
  std::sort(pages.begin(), pages.end());
  pages.erase(std::unique(pages.begin(), pages.end()), pages.end());
  for (int64_t p : pages) {
    for (int64_t o = 0; o < page_size_; ++o) {
      SlotState& st = state_[static_cast<size_t>(p * page_size_ + o)];
      (st == SlotState::Committed ? committed_ : reserved_) -= 1;
      st = SlotState::Free;
    }
  }
  allocated_pages_ -= static_cast<int64_t>(pages.size());
  // Freed pages go to the front, ascending: SGLang's torch.cat((free_page_indices, free_pages)).
  std::deque<int64_t>& dst = need_sort_ ? release_pages_ : free_pages_;
  dst.insert(dst.begin(), pages.begin(), pages.end());
}

void PagedAllocator::release_tail(std::span<const int64_t> slots) {
  std::unordered_set<int64_t> seen;
  for (int64_t s : slots) {
    check_slot(s, "slot", s);
    if (state_[static_cast<size_t>(s)] != SlotState::Committed || !seen.insert(s).second) {
      throw InvalidInput("slot", s, "not handed out, cannot be released to its page");
    }
  }
  for (int64_t s : slots) state_[static_cast<size_t>(s)] = SlotState::Reserved;
  committed_ -= static_cast<int64_t>(slots.size());
  reserved_ += static_cast<int64_t>(slots.size());
}

void PagedAllocator::merge_and_sort_free() {
  if (release_pages_.empty()) return;
  free_pages_.insert(free_pages_.end(), release_pages_.begin(), release_pages_.end());
  release_pages_.clear();
  std::sort(free_pages_.begin(), free_pages_.end());
}

void PagedAllocator::check_accounting() const {
  const int64_t ps = page_size_;
  for (int64_t o = 0; o < ps; ++o) {
    invariant(state_[static_cast<size_t>(o)] == SlotState::Free, "sink page 0 handed out");
  }
  int64_t committed = 0, reserved = 0, pages_taken = 0;
  std::vector<uint8_t> listed(static_cast<size_t>(num_pages_) + 1, 0);  // [num_pages + 1]
  for (int64_t p = 1; p <= num_pages_; ++p) {
    int64_t free_slots = 0;
    for (int64_t o = 0; o < ps; ++o) {
      switch (state_[static_cast<size_t>(p * ps + o)]) {
        case SlotState::Free:
          ++free_slots;
          break;
        case SlotState::Reserved:
          ++reserved;
          break;
        case SlotState::Committed:
          ++committed;
          break;
      }
    }
    invariant(free_slots == 0 || free_slots == ps,
              "page " + std::to_string(p) + " is partly free: pages are allocated whole");
    if (free_slots == 0) ++pages_taken;
  }
  auto visit = [&](int64_t p, const char* where) {
    invariant(p >= 1 && p <= num_pages_, std::string(where) + " holds page " + std::to_string(p));
    invariant(!listed[static_cast<size_t>(p)],
              std::string(where) + " repeats page " + std::to_string(p));
    invariant(state_[static_cast<size_t>(p * ps)] == SlotState::Free,
              std::string(where) + " holds allocated page " + std::to_string(p));
    listed[static_cast<size_t>(p)] = 1;
  };
  for (int64_t p : free_pages_) visit(p, "free list");
  for (int64_t p : release_pages_) visit(p, "release list");
  int64_t listed_count = static_cast<int64_t>(free_pages_.size() + release_pages_.size());
  invariant(listed_count + pages_taken == num_pages_, "a free page is on no list (leaked)");
  invariant(committed == committed_ && reserved == reserved_ && pages_taken == allocated_pages_,
            "cached counters disagree with slot states");
  invariant(allocated() == committed + reserved, "allocated != committed + reserved");
}

void PagedAllocator::rebuild(std::span<const int64_t> committed) {
  std::vector<SlotState> next(state_.size(), SlotState::Free);  // [(num_pages + 1) * ps]
  for (int64_t s : committed) {
    check_slot(s, "slot", s);
    if (next[static_cast<size_t>(s)] == SlotState::Committed) {
      throw InvalidInput("slot", s, "listed twice");
    }
    next[static_cast<size_t>(s)] = SlotState::Committed;
  }
  committed_ = static_cast<int64_t>(committed.size());
  reserved_ = 0;
  allocated_pages_ = 0;
  free_pages_.clear();
  release_pages_.clear();
  for (int64_t p = 1; p <= num_pages_; ++p) {
    bool taken = false;
    for (int64_t o = 0; o < page_size_; ++o) {
      taken |= next[static_cast<size_t>(p * page_size_ + o)] == SlotState::Committed;
    }
    if (!taken) {
      free_pages_.push_back(p);
      continue;
    }
    ++allocated_pages_;
    for (int64_t o = 0; o < page_size_; ++o) {
      SlotState& st = next[static_cast<size_t>(p * page_size_ + o)];
      if (st == SlotState::Free) {
        st = SlotState::Reserved;
        ++reserved_;
      }
    }
  }
  state_ = std::move(next);
}

}  // namespace mlaverify::model
