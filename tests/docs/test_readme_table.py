#!/usr/bin/env python3
"""scripts/readme_table.py's column heads and markers from synthetic verify_bench outputs.

The README's table heads a column "sm_120 default (<ring>)" from the ring the kernel column of
verify_bench printed, not from the file's name for the column; a cell whose runs printed another
ring (the route's chain4) carries a "*" and its ring is named under the table; --per-layer's rows
each take their own plan's files (the plan in every call, or once) and peer. Each case writes a
call folder the way scripts/device_call_lib.sh leaves one and reads what the script prints.
usage: test_readme_table.py REPO_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = "."
SIX = ["k2-tp8-tree16", "v3-tp8-tree32", "v3-tp8-chain4", "k2-tp8-ddtree128", "v3-tp1-tree8",
       "long-ctx"]
MIXED = ["mix-long-short", "mix-64x100-4000", "mix-p0-p1-p4097"]


def bench_text(ring_env, rings):
    """A verify_bench output: device line, env line, then one row per workload of SIX, whose
    kernel column prints mma.sync x2/<rings[w]> (every row 100 us against a 50 us roofline)."""
    lines = ["device: Test GPU, 132 SMs, cc 9.0, MLAV_CUDA_KERNEL=mma2",
             f"MLAV_MMA2_RING={ring_env} MLAV_MMA2_L1=(default)", "",
             "workload splits us KV TFLOP/s roof frac vs vs issue kernel"]
    for w in SIX:
        lines.append(f"{w} 2 100.0 1 1 50.0 50% 1x 1x 1 mma.sync x2/{rings[w]}")
    return "\n".join(lines) + "\n"


class ReadmeTable(unittest.TestCase):
    def table(self, files, flags=()):
        with tempfile.TemporaryDirectory() as d:
            for name, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(d, name)), exist_ok=True)
                with open(os.path.join(d, name), "w") as f:
                    f.write(text)
            out = subprocess.run([sys.executable, "scripts/readme_table.py", *flags, d], cwd=ROOT,
                                 capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        return out.stdout

    def test_default_column_named_by_the_ring_that_ran(self):
        # A device whose default is ring 4 (no ws image): the "ws" files hold ring 4's rows.
        out = self.table({"bench_ws_uni_1.txt": bench_text("(default)", dict.fromkeys(SIX, "ring4"))})
        self.assertIn("sm_120 default (ring 4)", out)
        self.assertNotIn("sm_120 default (ws)", out)
        self.assertNotIn("*", out)

    def test_routed_row_is_marked_and_named(self):
        rings = dict.fromkeys(SIX, "ws")
        rings["v3-tp8-chain4"] = "ring4"
        out = self.table({"bench_ws_uni_1.txt": bench_text("(default)", rings)})
        self.assertIn("sm_120 default (ws)", out)
        self.assertIn("| v3-tp8-chain4 | 50.0 | 100.0* |", out)
        self.assertIn("| v3-tp8-tree32 | 50.0 | 100.0 |", out)
        self.assertIn("* ran ring 4: v3-tp8-chain4", out)

    def test_forced_ring_is_not_a_default(self):
        out = self.table({"bench_r4_uni_1.txt": bench_text("4", dict.fromkeys(SIX, "ring4"))})
        self.assertNotIn("sm_120 default", out)
        self.assertIn("| ring 4 |", out)

    def test_per_layer_rows_come_from_their_plans(self):
        # Each plan's files hold their own times (bal 130 and 140 us: mean 135; once 120), the
        # peers their graph times; every row of the per-layer table takes its own source.
        def mixed_text(kernel_env, us, ring=""):
            lines = ["device: Test GPU, 132 SMs, cc 9.0, MLAV_CUDA_KERNEL=" + kernel_env,
                     "MLAV_MMA2_RING=(default) MLAV_MMA2_L1=(default)", ""]
            for w in MIXED:
                lines.append(f"{w} 2 {us:.1f} 1 1 50.0 50% 1x 1x 1 {ring}")
            return "\n".join(lines) + "\n"

        def peer_json(us):
            return json.dumps({"env": {"gpu": "Test GPU"},
                               "results": [{"name": w, "fi_graph_cold_us": us} for w in MIXED]})

        files = {"bench_wg_bal_1.txt": mixed_text("wgmma", 130, "wgmma/folded/merge-kernel"),
                 "bench_wg_bal_2.txt": mixed_text("wgmma", 140, "wgmma/folded/merge-kernel"),
                 "bench_wg_once_1.txt": mixed_text("wgmma", 120, "wgmma/folded/merge-kernel"),
                 "bench_ws_bal_1.txt": mixed_text("mma2", 300, "mma.sync x2/ws"),
                 "bench_ws_once_1.txt": mixed_text("mma2", 290, "mma.sync x2/ws"),
                 "peer_fa3/peer_results.json": peer_json(125),
                 "peer_fa2/peer_results.json": peer_json(250)}
        out = self.table(files, ["--per-layer"])
        self.assertIn("| wgmma, plan in every call | 135.0 | 135.0 | 135.0 |", out)
        self.assertIn("| wgmma, one plan per forward pass | 120.0 | 120.0 | 120.0 |", out)
        self.assertIn("| FlashInfer fa3 | 125 | 125 | 125 |", out)
        self.assertIn("| sm_120 default (ws), one plan per forward pass | 290.0 | 290.0 | 290.0 |",
                      out)
        self.assertIn("| FlashInfer fa2, 228 KB | 250 | 250 | 250 |", out)


if __name__ == "__main__":
    ROOT = sys.argv.pop(1) if len(sys.argv) > 1 else "."
    unittest.main()
