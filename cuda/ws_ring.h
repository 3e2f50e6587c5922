// The chunk rings of the warp-specialized sm_120 kernel (cuda/verify_partial_ws.cu) as
// compile-time arithmetic. The kernel's ring steps are written with these functions, and a host
// test runs the same schedule over several tiles (tests/cuda/test_ws_ring.cpp), checking what no
// GPU run shows directly: every chunk complete when it is read, no buffer re-filled while a warp
// of the group may still read it, P's bytes left alone while P is the PV warps', and every latent
// copy reading the hand-over table's row of its own tile.
//
// A ring of `stages` buffers carries `parts` chunks per tile. Chunks are issued in stream order
// (tile by tile, part by part), each as one cp.async group, the n-th of the stream into buffer
// n % stages. A step consumes `width` consecutive parts (1; 2 under MLAV_WS_SPAIR): it waits for
// them (cp.async.wait_group), meets its group on a named barrier, then issues the `width` parts
// `ahead` past its own into the buffers of the `width` parts before it, which every warp of the
// group has finished reading once it is past the barrier.
#pragma once

#if defined(__CUDACC__)
#define MLAV_WS_RING_FN __host__ __device__ constexpr
#else
#define MLAV_WS_RING_FN constexpr
#endif

namespace mlaverify::cuda::ws_ring {

struct Ring {
  int stages;      // buffers
  int parts;       // chunks per tile
  int width;       // parts per step (divides parts)
  bool p_in_ring;  // P (the softmax's output) lies over the ring's last two buffers
};

// Parts issued before the first step, and how far past its own first part a step issues: the
// ring holds the `width` parts being read and stages - width in flight.
MLAV_WS_RING_FN int ahead(Ring r) { return r.stages - r.width; }
// cp.async.wait_group's N at a step: the groups newer than the step's own parts in the steady
// state, one per part issued up to the step before. (With P over a one-part ring, steps 0-2 of
// every tile after the first see one group more, the last step's empty one: they wait for one
// chunk beyond their own. tests/cuda/test_ws_ring.cpp shows the schedule holds without that
// empty group too, with every wait exact; the kernel keeps it, as measured.)
MLAV_WS_RING_FN int pending(Ring r) { return r.stages - 2 * r.width; }
// The part of a tile (0 .. parts - 1) that step `step`'s i-th issue carries, and how many tiles
// past the step's own tile it lies.
MLAV_WS_RING_FN int issue_part(Ring r, int step, int i) { return (step + i + ahead(r)) % r.parts; }
MLAV_WS_RING_FN int issue_tiles_ahead(Ring r, int step, int i) {
  return (step + i + ahead(r)) / r.parts;
}

// P over the ring (the S ring of 6 with 18 parts: the last two buffers hold the tile's two k_pe
// chunks, the last parts read, when the softmax writes P there). The ring must not fill them
// again until the PV warps have P in registers ("P empty", waited at step 0 of the next tile).
MLAV_WS_RING_FN int p_buffer(Ring r) { return r.stages - 2; }  // the first of P's two
// Step 0 of every tile but the first waits for "P empty" before its ring step.
MLAV_WS_RING_FN bool waits_p_empty(Ring r, int step) { return r.p_in_ring && step == 0; }
// With one part per step the last step's issue would fill P's first buffer: that step issues
// nothing (it commits an empty group, keeping one group per step), and step 0 of the next tile
// issues the part (deferred_part) into p_buffer after its "P empty" wait. With two parts per step,
// step 0's own issues are P's two buffers, after its wait.
MLAV_WS_RING_FN bool skips_issue(Ring r, int step) {
  return r.p_in_ring && r.width == 1 && step == r.parts - 1;
}
MLAV_WS_RING_FN int deferred_part(Ring r) { return issue_part(r, r.parts - 1, 0); }
// Whether a ring's shape admits P over it as above: parts % stages == 0 puts a tile's last two
// parts in the last two buffers and the deferred part (stages - 2) in P's first; stages >= 4
// leaves two buffers beside P's; a step of one or two parts, whole steps per tile and per ring.
MLAV_WS_RING_FN bool p_ring_ok(Ring r) {
  return r.parts % r.stages == 0 && r.stages >= 4 && (r.width == 1 || r.width == 2) &&
         r.parts % r.width == 0 && r.stages % r.width == 0;
}

// The S ring's latent copies read their row from the hand-over table, which changes where the
// loader enters a tile (the issue of a tile's part 0). Under MLAV_WS_ROW_EARLY=1 a single-width
// step reads it before its waits when it issues a latent part other than a tile's first (part
// 0's issue reads the table itself, after entering): `lat_parts` latent parts come first in a
// tile. (Two-part steps read it before every step, and part 0's issue reads it again for the
// part after it.)
MLAV_WS_RING_FN bool reads_table(Ring r, int step, int lat_parts) {
  const int part = issue_part(r, step, 0);
  return !skips_issue(r, step) && part != 0 && part < lat_parts;
}

MLAV_WS_RING_FN bool operator==(Ring a, Ring b) {
  return a.stages == b.stages && a.parts == b.parts && a.width == b.width &&
         a.p_in_ring == b.p_in_ring;
}

// The shapes the kernel builds (verify_partial_ws.cu asserts its rings against these): a tile's
// 16 latent and 2 k_pe chunks of 64 keys x 32 columns; the S ring of 6 with P over it, one part
// per step or two (MLAV_WS_SPAIR); the V ring of 2 whole-tile chunks, 16 steps per tile (the
// default since cuda/NOTES.md v37), or of 4 half-tile chunks, 32 steps (MLAV_WS_VKEYS=32).
inline constexpr int kLatParts = 16;
inline constexpr Ring kSRingBy1{6, 18, 1, true};
inline constexpr Ring kSRingBy2{6, 18, 2, true};
inline constexpr Ring kVRing64{2, 16, 1, false};
inline constexpr Ring kVRing{4, 32, 1, false};

}  // namespace mlaverify::cuda::ws_ring
