#!/usr/bin/env python3
"""The README's side-by-side kernel table, from a device call's raw output (no hand-copied numbers).

usage: scripts/readme_table.py [--per-layer] CALL_DIR [CALL_DIR ...]

Each CALL_DIR is an unpacked bench/results/<date>/callN folder as scripts/device_call_lib.sh
leaves it: bench_<kernel>_<plan>_<round>.txt from verify_bench (kernel r4 | ws | mma6 | wg, plan
uni | bal) and peer_<name>/peer_results.json from the peer benchmark (fa2, fa3, sm120 for fa2 in
the sm_120 shape). Our kernels' cell is the mean over the rounds found (all CALL_DIRs together)
of verify_bench's median; a peer's cell is its CUDA-graph median (fi_graph_cold_us; PyTorch's
and Triton's, torch_graph_cold_us and triton_graph_cold_us, from the first peer folder that has
them). The six SPEC workloads take the uniform plan, the mixed batches the balanced one. "of
roof" is the roofline time verify_bench printed (measured ceilings of the same run, averaged over
rounds) over the kernel's time. The ws and ring 4 columns are headed "sm_120 default (...)" when
every run of the column printed MLAV_MMA2_RING=(default), i.e. ran the kernel's default ring;
the ring named there is the one verify_bench's kernel column printed on most of the column's
rows, and a cell whose runs printed another ring (chain4, which the default routes to ring 4)
is marked "*" with that ring named under the table. A cell with no data prints as "–"; a column
with none is left out.

--per-layer prints the mixed batches' table of one plan per forward pass instead: the wgmma
kernel and the ws column under the balanced plan with the planning kernel in every call
(bench_<kernel>_bal_<round>.txt) and with one plan for all calls (MLAV_BENCH_PLAN=once,
bench_<kernel>_once_<round>.txt, VerifyKernel::attend() alone), beside fa3 and fa2 (228 KB).
"""
import glob
import json
import os
import re
import statistics
import sys

SIX = ["k2-tp8-tree16", "v3-tp8-tree32", "v3-tp8-chain4", "k2-tp8-ddtree128", "v3-tp1-tree8",
       "long-ctx"]
MIXED = ["mix-long-short", "mix-64x100-4000", "mix-p0-p1-p4097"]
KERNELS = {"wg": "wgmma", "mma6": "mma.sync ×6 (228 KB)", "r4": "ring 4", "ws": "ws"}
RING_NAMES = {"ws": "ws", "ring4": "ring 4", "ring3": "ring 3", "ring2": "ring 2"}
PEERS = {"fa2": "fa2, 228 KB", "sm120": "fa2, sm_120 shape", "fa3": "fa3"}
PEER_KEYS = ("fi_graph_cold_us", "torch_graph_cold_us", "triton_graph_cold_us")


def die(msg):
    print(f"readme_table: {msg}", file=sys.stderr)
    sys.exit(2)


def read_bench(path):
    """{workload: (us, roof_us, ring)} from one verify_bench output; ring is what the kernel
    column printed after "mma.sync x2/" (ws, ring4, ...), None for the other kernels."""
    rows = {}
    with open(path, errors="replace") as f:
        for line in f:
            parts = line.split()
            if parts and parts[0] in SIX + MIXED and len(parts) >= 6:
                try:
                    us, roof = float(parts[2]), float(parts[5])
                except ValueError:
                    die(f"{path}: workload {parts[0]}: columns 3 and 6 are not numbers")
                ring = re.search(r"mma\.sync x2/(\S+)", line)
                rows[parts[0]] = (us, roof, ring[1] if ring else None)
    return rows


def main(args):
    per_layer = args[:1] == ["--per-layer"]
    dirs = args[1:] if per_layer else args
    if not dirs:
        die("usage: readme_table.py [--per-layer] CALL_DIR [CALL_DIR ...]")
    ours = {}   # (kernel, plan) -> workload -> [(us, roof)]
    peers = {}  # peer -> workload -> that workload's result object
    gpus = set()
    rings = {}  # r4 / ws -> the MLAV_MMA2_RING values their runs printed
    for d in dirs:
        if not os.path.isdir(d):
            die(f"{d}: not a folder")
        for path in sorted(glob.glob(os.path.join(d, "bench_*_*_*.txt"))):
            m = re.fullmatch(r"bench_(r4|ws|mma6|wg)_(uni|bal|once)_(\d+)\.txt",
                             os.path.basename(path))
            if not m:
                continue
            with open(path, errors="replace") as f:
                head = f.readline()
                ring = re.search(r"MLAV_MMA2_RING=(\S+)", f.readline() or "")
            gpus.add(re.sub(r"^device:\s*", "", head.split(",")[0], flags=re.I).strip())
            if m[1] in ("r4", "ws"):
                rings.setdefault(m[1], set()).add(ring[1] if ring else "?")
            for w, v in read_bench(path).items():
                ours.setdefault((m[1], m[2]), {}).setdefault(w, []).append(v)
        for name in PEERS:
            path = os.path.join(d, f"peer_{name}", "peer_results.json")
            if not os.path.exists(path):
                continue
            try:
                with open(path) as f:
                    data = json.load(f)
            except (OSError, ValueError) as e:
                die(f"{path}: not readable as JSON ({e})")
            if not isinstance(data, dict):
                die(f"{path}: not a JSON object")
            env, results = data.get("env"), data.get("results")
            if not isinstance(env, dict) or not isinstance(env.get("gpu"), str):
                die(f"{path}: env.gpu: missing or not a string")
            if not isinstance(results, list):
                die(f"{path}: results: missing or not a list")
            gpus.add(env["gpu"])
            for i, r in enumerate(results):
                if not isinstance(r, dict) or not isinstance(r.get("name"), str):
                    die(f"{path}: results[{i}].name: missing or not a string")
                for key in PEER_KEYS:
                    if r.get(key) is not None and not isinstance(r[key], (int, float)):
                        die(f"{path}: results[{i}].{key}: not a number")
                peers.setdefault(name, {})[r["name"]] = r
    if not ours:
        die(f"{', '.join(dirs)}: no bench_<kernel>_<plan>_<round>.txt")

    def runs_of(kernel, w):
        return ours.get((kernel, "uni" if w in SIX else "bal"), {}).get(w)

    def main_ring(kernel):
        # The ring most of the column's rows ran (verify_bench's kernel column).
        seen = [r for w in SIX + MIXED for _, _, r in runs_of(kernel, w) or [] if r]
        return max(set(seen), key=seen.count) if seen else None

    others = {}  # ring -> workloads whose cells ran it instead of their column's main ring

    def cell(kernel, w, frac=False):
        runs = runs_of(kernel, w)
        if not runs:
            return "–"
        us = statistics.mean(u for u, _, _ in runs)
        roof = statistics.mean(r for _, r, _ in runs)
        if frac:
            return f"{roof / us:.0%}"
        ran = {r for _, _, r in runs if r} - {main_ring(kernel)}
        for r in ran:
            others.setdefault(r, []).append(w)
        return f"{us:.1f}" + ("*" if ran else "")

    def peer_cell(name, w, key="fi_graph_cold_us"):
        v = peers.get(name, {}).get(w, {}).get(key)
        return "–" if v is None else f"{v:.0f}"

    def roof_us(w):
        runs = [r for k in ours for r in ours[k].get(w, [])]
        return f"{statistics.mean(r for _, r, _ in runs):.1f}" if runs else "–"

    def sm120_label(kernel):
        # "sm_120 default (...)" only where every run of the column left MLAV_MMA2_RING unset,
        # naming the ring the kernel column printed, not the file's name for the column.
        if rings.get(kernel) != {"(default)"}:
            return KERNELS[kernel]
        ran = main_ring(kernel)
        return f"sm_120 default ({RING_NAMES.get(ran, ran) if ran else '?'})"

    if per_layer:
        def mean_cell(kernel, plan, w):
            runs = ours.get((kernel, plan), {}).get(w)
            return f"{statistics.mean(u for u, _, _ in runs):.1f}" if runs else "–"

        rows = []
        for kernel, peer in (("wg", "fa3"), ("ws", "fa2")):
            name = KERNELS[kernel] if kernel == "wg" else sm120_label(kernel)
            rows.append([f"{name}, plan in every call"] +
                        [mean_cell(kernel, "bal", w) for w in MIXED])
            rows.append([f"{name}, one plan per forward pass"] +
                        [mean_cell(kernel, "once", w) for w in MIXED])
            rows.append([f"FlashInfer {PEERS[peer]}"] + [peer_cell(peer, w) for w in MIXED])
        rounds = sorted({len(v) for (k, p), d in ours.items() if p in ("bal", "once")
                         for v in d.values()})
        print(f"| µs per layer ({', '.join(sorted(gpus))}) | " + " | ".join(MIXED) + " |")
        print("|" + "---|" * (1 + len(MIXED)))
        for r in rows:
            print("| " + " | ".join(r) + " |")
        print(f"\n(our kernels: mean of {'/'.join(map(str, rounds))} round(s) of medians)")
        return

    cols = ["workload", "roofline µs", KERNELS["wg"], "of roof", KERNELS["mma6"],
            sm120_label("ws"), "of roof", sm120_label("r4"), "of roof"]
    cols += [PEERS[p] for p in PEERS] + ["PyTorch", "SGLang Triton"]
    rows = []
    for w in SIX + MIXED:
        row = [w, roof_us(w), cell("wg", w), cell("wg", w, True), cell("mma6", w), cell("ws", w),
               cell("ws", w, True), cell("r4", w), cell("r4", w, True)]
        row += [peer_cell(p, w) for p in PEERS]
        for key in ("torch_graph_cold_us", "triton_graph_cold_us"):
            cells = [peer_cell(p, w, key) for p in PEERS]
            row.append(next((c for c in cells if c != "–"), "–"))
        rows.append(row)
    # A column no folder had data for (a peer not run) is left out.
    keep = [i for i in range(len(cols)) if i == 0 or any(r[i] != "–" for r in rows)]
    print("| " + " | ".join(cols[i] for i in keep) + " |")
    print("|" + "---|" * len(keep))
    for r in rows:
        print("| " + " | ".join(r[i] for i in keep) + " |")
    rounds = sorted({len(v) for k in ours for v in ours[k].values()})
    for r, ws in sorted(others.items()):
        print(f"\n* ran {RING_NAMES.get(r, r)}: {', '.join(dict.fromkeys(ws))}")
    print(f"\n(GPU: {', '.join(sorted(gpus))}; our kernels: mean of {'/'.join(map(str, rounds))} "
          f"round(s) of medians)")


if __name__ == "__main__":
    main(sys.argv[1:])
