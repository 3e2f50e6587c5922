// The ws kernel's chunk rings (cuda/ws_ring.h) run on the host: a group's steps over several
// tiles, in the kernel's order (cuda/verify_partial_ws.cu: the P-empty wait, the wait_group, the
// group barrier, the issues, the reads; the softmax writing P after a tile's last step), with a
// ledger of every chunk's cp.async group, buffer and read. What a GPU run cannot show directly is
// checked at each event: a chunk is complete when read, a buffer is re-filled only after every
// warp of the group has read its last chunk (its step lies before the issuing step's barrier), P
// is written over no chunk still to land and no chunk lands on P before "P empty", and every
// latent copy of the S ring after a tile's first reads the hand-over table's row of its own tile.
// Each of those checks is shown to fire on a mutant of the schedule written for it; the run also
// counts the waits that hold a step for chunks beyond its own. No device is needed: this runs
// in CI.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/ws_ring.h"

namespace mlaverify::cuda::ws_ring {
namespace {

// A deliberate fault in the schedule, for the checks' own test.
struct Mutant {
  int pending_delta = 0;        // wait_group's N off by this
  int ahead_delta = 0;          // issues this many parts further ahead
  bool no_skip = false;         // the last step issues into P's buffer
  bool no_p_empty = false;      // step 0 does not wait for "P empty"
  bool no_early_read = false;   // single-width steps never re-read the table
  bool no_entry_read = false;   // part 0's issue does not re-read the table for the next part
  bool no_empty_group = false;  // the last step of a one-part P ring commits no empty group
};

struct Outcome {
  std::vector<std::string> bad;    // the violations (empty: the schedule holds)
  std::vector<std::string> slack;  // steps whose wait also holds them for a later chunk
};

// Runs `tiles` tiles of the group's steps.
Outcome run(Ring r, int tiles, const Mutant& m = {}) {
  Outcome out;
  auto fail = [&](const std::string& what) {
    if (out.bad.size() < 8) out.bad.push_back(what);
  };
  const int ahead_n = ahead(r) + m.ahead_delta;
  const int pending_n = pending(r) + m.pending_delta;
  const long total = static_cast<long>(tiles + 2) * r.parts;  // the stream runs past the last
  std::vector<long> group(total, -1), read_at(total, -1);
  std::vector<long> holder(r.stages, -1);  // stream index of the chunk last issued there
  std::vector<bool> empty_group(2 * total + 8, false);  // by commit index
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

  ++commits;                  // Q's group (the S ring's), the oldest
  table_tile = row_tile = 0;  // tile 0 entered, its row read, before the prologue's issues
  for (int i = 0; i < ahead_n; ++i) issue(false);

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
      const long complete_through = commits - 1 - pending_n;
      for (int i = 0; i < r.width; ++i) {
        const long n = static_cast<long>(tile) * r.parts + s + i;
        if (group[n] < 0 || group[n] > complete_through)
          fail(name(n) + " read before its copy completes");
      }
      // a chunk's group past the step's own that the wait also needs (an empty group costs none)
      const long own = group[static_cast<long>(tile) * r.parts + s + r.width - 1];
      for (long g = own + 1; own >= 0 && g <= complete_through; ++g)
        if (!empty_group[g]) {
          out.slack.push_back("tile " + std::to_string(tile) + " step " + std::to_string(s));
          break;
        }
      // the group barrier, then the issues
      for (int i = 0; i < r.width; ++i) {
        if (skips_issue(r, s) && !m.no_skip) {
          if (!m.no_empty_group) empty_group[commits++] = true;  // the empty group
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
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& e : v) s += e + "\n";
  return s;
}

TEST(WsRing, KernelRingsHoldOverManyTiles) {
  for (const Ring r : {kSRingBy1, kSRingBy2, kVRing64, kVRing})
    for (int tiles : {1, 2, 3, 7}) {
      const auto bad = run(r, tiles).bad;
      EXPECT_TRUE(bad.empty()) << "stages " << r.stages << " width " << r.width << ", " << tiles
                               << " tiles:\n"
                               << joined(bad);
    }
}

TEST(WsRing, PastTheBudgetRingsHold) {
  // MLAV_WS_STAGES / MLAV_WS_SSTAGES forms (P in a buffer of its own), timing-only builds.
  for (int stages : {2, 3, 4, 5, 8})
    for (const Ring r : {Ring{stages, 18, 1, false}, Ring{stages, 16, 1, false}})
      EXPECT_TRUE(run(r, 4).bad.empty()) << "stages " << stages << " parts " << r.parts << ":\n"
                                         << joined(run(r, 4).bad);
}

TEST(WsRing, KernelRingConstants) {
  EXPECT_TRUE(p_ring_ok(kSRingBy1));
  EXPECT_TRUE(p_ring_ok(kSRingBy2));
  EXPECT_FALSE(p_ring_ok(Ring{9, 18, 2, true}));  // a pair would straddle the ring's end
  EXPECT_FALSE(p_ring_ok(Ring{4, 18, 1, true}));  // the last two parts are not the last buffers
  EXPECT_EQ(pending(kSRingBy1), 4);               // wait_group 4: five chunks ahead of the one read
  EXPECT_EQ(pending(kSRingBy2), 2);               // wait_group 2: four ahead of the two read
  EXPECT_EQ(deferred_part(kSRingBy1), 4);
}

// Where a wait holds a step for more than its own chunks. The one-part P ring's steps 0-2 of each
// tile after the first wait for one chunk more (the last step's empty group counts as one of
// theirs); without that group every wait is exact and the schedule still holds. The other rings
// never wait for more.
TEST(WsRing, WaitsBeyondTheStepsOwnChunks) {
  const Outcome by1 = run(kSRingBy1, 3);
  EXPECT_EQ(joined(by1.slack),
            "tile 1 step 0\ntile 1 step 1\ntile 1 step 2\n"
            "tile 2 step 0\ntile 2 step 1\ntile 2 step 2\n");
  const Outcome exact = run(kSRingBy1, 3, {.no_empty_group = true});
  EXPECT_TRUE(exact.bad.empty()) << joined(exact.bad);
  EXPECT_TRUE(exact.slack.empty()) << joined(exact.slack);
  EXPECT_TRUE(run(kSRingBy2, 3).slack.empty()) << joined(run(kSRingBy2, 3).slack);
  EXPECT_TRUE(run(kVRing64, 3).slack.empty()) << joined(run(kVRing64, 3).slack);
  EXPECT_TRUE(run(kVRing, 3).slack.empty()) << joined(run(kVRing, 3).slack);
}

// Each check fires on the fault it is there for (and the unmutated runs above pass).
TEST(WsRing, ChecksFireOnMutants) {
  struct Case {
    Ring ring;
    Mutant m;
    std::string expect;  // a fragment of one of the violations (the first 8 are kept)
  };
  const Case cases[] = {
      {kSRingBy1, {.pending_delta = 1}, "before its copy completes"},
      {kSRingBy2, {.pending_delta = 1}, "before its copy completes"},
      {kVRing, {.pending_delta = 1}, "before its copy completes"},
      {kSRingBy1, {.ahead_delta = 1}, "is still to be read there"},
      {kSRingBy2, {.ahead_delta = 1}, "is still to be read there"},
      {kVRing, {.ahead_delta = 1}, "is still to be read there"},
      {kSRingBy1, {.no_skip = true}, "still in flight"},
      {kSRingBy1, {.no_p_empty = true}, "before \"P empty\""},
      {kSRingBy2, {.no_p_empty = true}, "before \"P empty\""},
      {kSRingBy1, {.no_early_read = true}, "'s row"},
      {kSRingBy2, {.no_entry_read = true}, "'s row"},
  };
  for (const auto& c : cases) {
    const auto bad = run(c.ring, 3, c.m).bad;
    ASSERT_FALSE(bad.empty()) << "width " << c.ring.width << ": a mutant ran clean";
    EXPECT_NE(joined(bad).find(c.expect), std::string::npos)
        << "width " << c.ring.width << ", expected \"" << c.expect << "\" in:\n"
        << joined(bad);
  }
}

}  // namespace
}  // namespace mlaverify::cuda::ws_ring
