// The ws kernel's chunk rings (cuda/ws_ring.h) run on the host: a group's steps over several
// tiles, in the kernel's order (cuda/verify_partial_ws.cu: the P-empty wait, the wait_group, the
// group barrier, the issues, the reads; the softmax writing P after a tile's last step), with a
// ledger of every chunk's cp.async group, buffer and read. What a GPU run cannot show directly is
// checked at each event: a chunk is complete when read, a buffer is re-filled only after every
// warp of the group has read its last chunk (its step lies before the issuing step's barrier), P
// is written over no chunk still to land and no chunk lands on P before "P empty", and every
// latent copy reads the hand-over table's row of its own tile. Each check is shown to fire by a
// mutant of the schedule. No device is needed: this runs in CI.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/ws_ring.h"

namespace mlaverify::cuda::ws_ring {
namespace {

// A deliberate fault in the schedule, for the checks' own test.
struct Mutant {
  int pending_delta = 0;       // wait_group's N off by this
  int ahead_delta = 0;         // issues this many parts further ahead
  bool no_skip = false;        // the last step issues into P's buffer
  bool no_p_empty = false;     // step 0 does not wait for "P empty"
  bool no_early_read = false;  // single-width steps never re-read the table
  bool no_entry_read = false;  // part 0's issue does not re-read the table for the next part
};

// Runs `tiles` tiles of the group's steps; returns the violations (empty: the schedule holds).
std::vector<std::string> run(Ring r, int tiles, const Mutant& m = {}) {
  std::vector<std::string> bad;
  auto fail = [&](const std::string& what) {
    if (bad.size() < 8) bad.push_back(what);
  };
  const int ahead_n = ahead(r) + m.ahead_delta;
  const int pending_n = pending(r) + m.pending_delta;
  const long total = static_cast<long>(tiles + 2) * r.parts;  // the stream runs past the last
  std::vector<long> group(total, -1), read_at(total, -1);
  std::vector<long> holder(r.stages, -1);  // stream index of the chunk last issued there
  long commits = 0, next = 0, step_id = 0;
  bool p_live = false;
  int table_tile = -1, row_tile = -1;  // the table's tile; the tile of the thread's held row
  auto name = [&](long n) {
    return "tile " + std::to_string(n / r.parts) + " part " + std::to_string(n % r.parts);
  };

  // The next chunk of the stream into buffer n % stages, one cp.async group.
  auto issue = [&](bool pair_entry_read) {
    const long n = next++;
    const int b = static_cast<int>(n % r.stages);
    const int part = static_cast<int>(n % r.parts), tile = static_cast<int>(n / r.parts);
    if (holder[b] >= 0 && (read_at[holder[b]] < 0 || read_at[holder[b]] >= step_id))
      fail("step " + std::to_string(step_id) + " re-fills buffer " + std::to_string(b) + " while " +
           name(holder[b]) + " is still to be read there");
    if (r.p_in_ring && p_live && (b == p_buffer(r) || b == p_buffer(r) + 1))
      fail(name(n) + " lands on P (buffer " + std::to_string(b) + ") before \"P empty\"");
    if (part == 0) {
      table_tile = tile;  // entering the tile writes its rows; part 0 reads them itself
      if (pair_entry_read) row_tile = table_tile;
    } else if (r.p_in_ring && part < kLatParts && row_tile != tile) {
      // (the S ring: its latent copies read the table's rows, which needs P over the ring)
      fail(name(n) + " copies from tile " + std::to_string(row_tile) + "'s row");
    }
    holder[b] = n;
    group[n] = commits++;
  };

  ++commits;                  // Q's group, the oldest
  table_tile = row_tile = 0;  // tile 0 entered, its row read, before the prologue's issues
  for (int i = 0; i < ahead_n; ++i) issue(false);
  if (0 > commits - 1 - ahead_n) fail("Q read before its copy completes");

  for (int tile = 0; tile < tiles; ++tile) {
    for (int s = 0; s < r.parts; s += r.width, ++step_id) {
      // before the waits: the row for this step's latent issues
      if ((r.width == 2 || reads_table(r, s, kLatParts)) && !(r.width == 1 && m.no_early_read))
        row_tile = table_tile;
      if (waits_p_empty(r, s) && tile > 0) {
        if (!m.no_p_empty) p_live = false;
        if (r.width == 1) {
          if (next % r.stages != p_buffer(r) || next % r.parts != deferred_part(r))
            fail("step 0's deferred issue is not part " + std::to_string(deferred_part(r)) +
                 " into P's first buffer");
          issue(false);
        }
      }
      // cp.async.wait_group pending_n: all but the newest pending_n groups are complete
      for (int i = 0; i < r.width; ++i) {
        const long n = static_cast<long>(tile) * r.parts + s + i;
        if (group[n] < 0 || group[n] > commits - 1 - pending_n)
          fail(name(n) + " read before its copy completes");
      }
      // the group barrier, then the issues
      for (int i = 0; i < r.width; ++i) {
        if (skips_issue(r, s) && !m.no_skip) {
          ++commits;  // the empty group
          continue;
        }
        const long want = static_cast<long>(tile + issue_tiles_ahead(r, s, i)) * r.parts +
                          issue_part(r, s, i) + m.ahead_delta;
        if (next != want) fail("step " + std::to_string(step_id) + " issues out of stream order");
        issue(r.width == 2 && !m.no_entry_read);
      }
      for (int i = 0; i < r.width; ++i) {
        const long n = static_cast<long>(tile) * r.parts + s + i;
        if (holder[n % r.stages] != n) fail(name(n) + " overwritten before it is read");
        if (read_at[n] >= 0) fail(name(n) + " read twice");
        read_at[n] = step_id;
      }
    }
    // The softmax: after the group's max barrier, P over the ring's last two buffers.
    if (r.p_in_ring) {
      for (int b = p_buffer(r); b < p_buffer(r) + 2; ++b)
        if (holder[b] >= 0 && read_at[holder[b]] < 0)
          fail("P written over " + name(holder[b]) + ", still in flight");
      p_live = true;  // "P full"; the PV warps release it ("P empty") at the next step 0
    }
  }
  for (long n = 0; n < static_cast<long>(tiles) * r.parts; ++n)
    if (read_at[n] < 0) fail(name(n) + " never read");
  return bad;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& e : v) s += e + "\n";
  return s;
}

TEST(WsRing, KernelRingsHoldOverManyTiles) {
  for (const Ring r : {kSRing, kSRingPairs, kVRing})
    for (int tiles : {1, 2, 3, 7}) {
      const auto bad = run(r, tiles);
      EXPECT_TRUE(bad.empty()) << "stages " << r.stages << " width " << r.width << ", " << tiles
                               << " tiles:\n"
                               << joined(bad);
    }
}

TEST(WsRing, PastTheBudgetRingsHold) {
  // MLAV_WS_STAGES / MLAV_WS_SSTAGES forms (P in a buffer of its own), timing-only builds.
  for (int stages : {2, 3, 4, 5, 8})
    for (const Ring r : {Ring{stages, 18, 1, false}, Ring{stages, 16, 1, false}})
      EXPECT_TRUE(run(r, 4).empty()) << "stages " << stages << " parts " << r.parts << ":\n"
                                     << joined(run(r, 4));
}

TEST(WsRing, PairsNeedAnEvenRing) {
  EXPECT_TRUE(p_ring_ok(kSRing));
  EXPECT_TRUE(p_ring_ok(kSRingPairs));
  EXPECT_EQ(pending(kSRing), 4);       // wait_group 4: five chunks ahead of the one read
  EXPECT_EQ(pending(kSRingPairs), 2);  // wait_group 2: four ahead of the two read
  EXPECT_EQ(deferred_part(kSRing), 4);
}

// Each check fires on the fault it is there for (and the unmutated runs above pass).
TEST(WsRing, ChecksFireOnMutants) {
  struct Case {
    Ring ring;
    Mutant m;
    std::string expect;  // a fragment of the first violation
  };
  const Case cases[] = {
      {kSRing, {.pending_delta = 1}, "before its copy completes"},
      {kSRingPairs, {.pending_delta = 1}, "before its copy completes"},
      {kVRing, {.pending_delta = 1}, "before its copy completes"},
      {kSRing, {.ahead_delta = 1}, "is still to be read there"},
      {kSRingPairs, {.ahead_delta = 1}, "is still to be read there"},
      {kVRing, {.ahead_delta = 1}, "is still to be read there"},
      {kSRing, {.no_skip = true}, "still in flight"},
      {kSRing, {.no_p_empty = true}, "before \"P empty\""},
      {kSRingPairs, {.no_p_empty = true}, "before \"P empty\""},
      {kSRing, {.no_early_read = true}, "'s row"},
      {kSRingPairs, {.no_entry_read = true}, "'s row"},
  };
  for (const auto& c : cases) {
    const auto bad = run(c.ring, 3, c.m);
    ASSERT_FALSE(bad.empty()) << "width " << c.ring.width << ": a mutant ran clean";
    EXPECT_NE(joined(bad).find(c.expect), std::string::npos)
        << "width " << c.ring.width << ", expected \"" << c.expect << "\" in:\n"
        << joined(bad);
  }
}

}  // namespace
}  // namespace mlaverify::cuda::ws_ring
