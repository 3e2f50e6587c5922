#!/usr/bin/env python3
"""Condenses the per-block trace that a -DMLAV_WGMMA_TRACE build of verify_bench prints.

usage: scripts/trace_summary.py TRACE_OUTPUT

For each traced launch (one per workload), per split index z: how many blocks, and min / median /
max over them of the prologue end (warpgroup 0 enters its loop), the loop end and the block end,
in microseconds from the launch's first block start; and the median epilogue (end - loop end).
Traces that split the prologue (work, qstaged, tile0: cuda/NOTES.md v45) add a line of the same
spreads from each block's own start: its work known, Q in shared memory, Q in registers, tile 0
landed; and one that splits the epilogue (pvdone, stored): warpgroup 1's last PV retired and
warpgroup 0's partial stores issued (the merge-kernel path; -1 under the cluster merge).
The blocks that end last are the ones to look at: a call lasts as long as its slowest block.
"""
import statistics
import sys


def parse(lines):
    launches = []
    for line in lines:
        fields = line.split()
        if line.startswith("TRACE"):
            launches.append((line.strip(), []))
        elif line.startswith("TB") and launches:
            # TB <id> z <z> sm <sm> start <t> [work <t> qstaged <t>] pro <t> [tile0 <t>] loop <t>
            # [pvdone <t> stored <t>] [sync <t> merged <t>] end <t>
            block = {"z": int(fields[3])}
            for i in range(6, len(fields) - 1, 2):
                block[fields[i]] = float(fields[i + 1])
            launches[-1][1].append(block)
    return launches


def spread(values):
    return "%.1f/%.1f/%.1f" % (min(values), statistics.median(values), max(values))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        launches = parse(f)
    if not launches:
        sys.exit("no TRACE lines in " + sys.argv[1] + " (built with -DMLAV_WGMMA_TRACE?)")
    for header, blocks in launches:
        print(header)
        for z in sorted({b["z"] for b in blocks}):
            zb = [b for b in blocks if b["z"] == z]
            print("  z %2d  blocks %3d  prologue %s  loop end %s  end %s  epilogue %.1f" % (
                z, len(zb), spread([b["pro"] for b in zb]), spread([b["loop"] for b in zb]),
                spread([b["end"] for b in zb]),
                statistics.median([b["end"] - b["loop"] for b in zb])))
            if all(b.get("work", -1) >= 0 and b.get("tile0", -1) >= 0 for b in zb):
                since = lambda key: spread([b[key] - b["start"] for b in zb])
                print("        from its start: start %s  work %s  Q staged %s  Q in registers %s"
                      "  tile 0 %s" % (spread([b["start"] for b in zb]), since("work"),
                                       since("qstaged"), since("pro"), since("tile0")))
            if all(b.get("pvdone", -1) >= 0 for b in zb):
                line = "        epilogue: loop end %s  last PV retired %s" % (
                    spread([b["loop"] for b in zb]), spread([b["pvdone"] for b in zb]))
                if all(b.get("stored", -1) >= 0 for b in zb):
                    line += "  stores issued %s" % spread([b["stored"] for b in zb])
                print(line + "  end %s" % spread([b["end"] for b in zb]))
            # The cluster merge's phases (-1: not reached, i.e. no cluster merge).
            if all(b.get("sync", -1) >= 0 for b in zb):
                print("        cluster merge: barrier passed %s  rows merged %s" % (
                    spread([b["sync"] for b in zb]), spread([b["merged"] for b in zb])))


if __name__ == "__main__":
    main()
