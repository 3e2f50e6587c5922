// The planted faults, through ServingState's test access: the only code outside model/ that
// writes req_to_token or frees slots behind the lifecycle's back.
#include "sim/faults.h"

#include <array>
#include <variant>

namespace mlaverify::model {

struct ServingStateTestAccess {
  static ReqToToken& req_to_token(ServingState& s) { return s.req_to_token_; }
  static std::variant<TokenAllocator, PagedAllocator>& allocator(ServingState& s) {
    return s.alloc_;
  }
};

}  // namespace mlaverify::model

namespace mlaverify::sim {

using model::ServingStateTestAccess;

bool plant(PlantedFault fault, model::ServingState& state, int64_t req, int64_t prefix_before,
           std::span<const int64_t> draft, std::span<const int32_t> path) {
  const int64_t row = state.row(req);
  const int64_t a = static_cast<int64_t>(path.size());
  const int64_t len = state.prefix_len(req);  // prefix_before + a
  switch (fault) {
    case PlantedFault::None:
      return false;
    case PlantedFault::StaleSlotAfterAccept: {
      if (state.paged()) return false;
      // req_to_token not rewritten: column P + k keeps the slot of draft node k where the path
      // took another node, so it names a rejected (freed) slot.
      bool any = false;
      for (int64_t k = 1; k < a; ++k) {
        if (path[static_cast<size_t>(k)] != k) {
          ServingStateTestAccess::req_to_token(state).set(
              row, prefix_before + k, static_cast<int32_t>(draft[static_cast<size_t>(k)]));
          any = true;
        }
      }
      return any;
    }
    case PlantedFault::DoubleFree: {
      // The last accepted slot is freed with the rejected ones; finish will free it again (and
      // until then the allocator may hand it to another request).
      const std::array<int64_t, 1> slot{state.req_to_token().at(row, len - 1)};
      std::visit([&](auto& al) { al.free(slot); }, ServingStateTestAccess::allocator(state));
      return true;
    }
    case PlantedFault::StrandedPartialTail: {
      if (!state.paged()) return false;
      const int64_t ps = state.config().page_size;
      if (len % ps == 0) return false;
      // The rejected tail of the last page stays committed though no column names it: neither
      // reserved for this request's next extend nor freed.
      auto& pa = std::get<model::PagedAllocator>(ServingStateTestAccess::allocator(state));
      const std::array<int64_t, 1> prefix{len}, seq{len + (ps - len % ps)};
      const std::array<int64_t, 1> last{state.req_to_token().at(row, len - 1)};
      return pa.alloc_extend(prefix, seq, last).has_value();
    }
  }
  return false;
}

}  // namespace mlaverify::sim
