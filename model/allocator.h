// KV-slot allocators in SGLang's conventions (docs/spec.md §4): the token allocator (page size 1)
// and the paged one (alloc_extend fills a request's partial page first). Both refuse bad frees.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <vector>

namespace mlaverify::model {

// Page size 1. The free list starts 1..size (slot 0 is the sink and never handed out); alloc takes
// from the front, free appends at the back, or, with need_sort, parks slots on a release list that
// is merged and sorted when an allocation would otherwise fail (SGLang's TokenToKVPoolAllocator).
// Unlike SGLang, it tracks which slots are out, so a double free is an error instead of a
// duplicated free-list entry that later hands one slot to two requests.
class TokenAllocator {
 public:
  explicit TokenAllocator(int64_t size);

  int64_t size() const { return size_; }
  // The first n free slots, in free-list order; nullopt (and nothing taken) when fewer than n are
  // available even after merging the release list. n < 0 is InvalidInput("n", -1).
  std::optional<std::vector<int64_t>> alloc(int64_t n);
  // Returns handed-out slots. Validates everything before changing anything:
  // InvalidInput("slot", s, ...) for slot 0, out of range, or already free ("freed twice"; also a
  // slot listed twice in one call).
  void free(std::span<const int64_t> slots);
  // Appends the release list to the free list and sorts the whole free list ascending.
  void merge_and_sort_free();
  void set_need_sort(bool need_sort) { need_sort_ = need_sort; }
  bool need_sort() const { return need_sort_; }
  // Slots that alloc could hand out: free list plus release list (SGLang's available_size).
  int64_t available() const { return static_cast<int64_t>(free_.size() + release_.size()); }
  int64_t allocated() const { return size_ - available(); }
  bool is_allocated(int64_t slot) const;

  const std::deque<int64_t>& free_slots() const { return free_; }         // alloc order
  const std::vector<int64_t>& release_slots() const { return release_; }  // need_sort parking

  // Throws std::logic_error unless free list, release list and handed-out slots partition
  // 1..size exactly once each and slot 0 appears nowhere.
  void check_accounting() const;

  // Defragmentation: `in_use` becomes exactly the handed-out set; every other slot of 1..size is
  // free, sorted ascending, and the release list is empty. InvalidInput("slot", s) for slot 0,
  // out of range or listed twice.
  void rebuild(std::span<const int64_t> in_use);

 private:
  void check_slot(int64_t slot) const;

  int64_t size_;
  bool need_sort_ = false;
  std::deque<int64_t> free_;        // [<= size] slot ids in alloc order
  std::vector<int64_t> release_;    // [<= size] slot ids freed while need_sort was set
  std::vector<uint8_t> allocated_;  // [size + 1] 1 when handed out; entry 0 (the sink) stays 0
};

// Page size >= 1. The free list holds page ids 1..size / page_size (page 0, slots
// 0..page_size-1, is the sink); slot = page * page_size + offset. A slot of an allocated page is
// either committed (handed out, holding a token) or reserved (the unused tail of a request's last
// page, which that request's next alloc_extend fills first). allocated == committed + reserved.
class PagedAllocator {
 public:
  enum class SlotState : uint8_t { Free = 0, Reserved = 1, Committed = 2 };

  PagedAllocator(int64_t size, int64_t page_size);

  int64_t page_size() const { return page_size_; }
  int64_t num_pages() const { return num_pages_; }  // allocatable pages: ids 1..num_pages

  // Whole pages: need_size must be a multiple of page_size (InvalidInput("need_size", -1));
  // every slot of the pages is committed. nullopt when short, nothing taken.
  std::optional<std::vector<int64_t>> alloc(int64_t need_size);

  // SGLang's alloc_extend for a batch: request i grows from prefix_lens[i] to seq_lens[i] tokens;
  // last_slots[i] is the slot of its token prefix_lens[i] - 1 (ignored when prefix_lens[i] is a
  // multiple of page_size: there is no partial page). Per request, in position order: first the
  // tail of its last partial page (last_slots[i] + 1, ...), then whole new pages, then a new
  // partial page. New pages come from the front of the free list, request by request. Returns the
  // new slots of all requests concatenated [sum(seq - prefix)]; nullopt when short, nothing taken.
  // Errors (nothing taken): InvalidInput("prefix_lens"|"seq_lens"|"last_slots", i, ...), e.g. a
  // last slot whose page offset does not match prefix_lens[i] - 1 (a page id passed as a slot),
  // that is not handed out, or whose page tail is not reserved.
  std::optional<std::vector<int64_t>> alloc_extend(std::span<const int64_t> prefix_lens,
                                                   std::span<const int64_t> seq_lens,
                                                   std::span<const int64_t> last_slots);

  // Frees the whole page of every listed slot (SGLang: unique pages, prepended to the free list in
  // ascending order, or to the release list with need_sort). Every listed slot must be committed:
  // InvalidInput("slot", s, "freed twice") when its page is free or it is listed twice,
  // "not handed out" when reserved, and out-of-range / sink slots are rejected too.
  void free(std::span<const int64_t> slots);

  // Un-commits slots the caller stops using while keeping their page (the rejected draft tail of
  // a request's last page after acceptance): committed -> reserved, so the next alloc_extend of
  // that request fills them again. InvalidInput("slot", s) unless s is committed.
  void release_tail(std::span<const int64_t> slots);

  void merge_and_sort_free();
  void set_need_sort(bool need_sort) { need_sort_ = need_sort; }
  bool need_sort() const { return need_sort_; }

  // Slots in free or released pages (SGLang's available_size: pages * page_size).
  int64_t available() const {
    return static_cast<int64_t>(free_pages_.size() + release_pages_.size()) * page_size_;
  }
  int64_t allocated() const { return allocated_pages_ * page_size_; }  // slots of taken pages
  int64_t committed() const { return committed_; }
  int64_t reserved() const { return reserved_; }
  SlotState slot_state(int64_t slot) const;

  const std::deque<int64_t>& free_pages() const { return free_pages_; }  // alloc order
  const std::deque<int64_t>& release_pages() const { return release_pages_; }

  // Throws std::logic_error unless allocated == committed + reserved (recounted from the slot
  // states), free, released and allocated pages partition 1..num_pages, and page 0 is untouched.
  void check_accounting() const;

  // Defragmentation: `committed` becomes exactly the committed set; the other slots of their
  // pages are reserved; every other page is free, sorted ascending; no release list.
  void rebuild(std::span<const int64_t> committed);

 private:
  void check_slot(int64_t slot, const char* field, int64_t index) const;
  int64_t take_pages(int64_t n, std::vector<int64_t>* pages);
  void mark_page(int64_t page, SlotState s);

  int64_t page_size_;
  int64_t num_pages_;
  bool need_sort_ = false;
  std::deque<int64_t> free_pages_;     // [<= num_pages] page ids in alloc order
  std::deque<int64_t> release_pages_;  // [<= num_pages] page ids freed while need_sort was set
  std::vector<SlotState> state_;       // [(num_pages + 1) * page_size] per slot
  int64_t allocated_pages_ = 0;
  int64_t committed_ = 0;
  int64_t reserved_ = 0;
};

}  // namespace mlaverify::model
