#!/usr/bin/env python3
"""The README's kernel table is the output of the command the README names, row for row.

The README cites the raw output its side-by-side table comes from as a command line
(`scripts/readme_table.py bench/results/<date>/callN ...`), and the per-layer table of the mixed
batches as `scripts/readme_table.py --per-layer ...`. This check runs each command and requires
every table row it prints to appear verbatim in README.md, so a hand-edited number, or a table
left behind when the cited calls change, fails CI.
usage: check_readme_table.py REPO_ROOT
"""
import re
import subprocess
import sys


def main(root):
    readme = open(f"{root}/README.md", encoding="utf-8").read()
    cited = re.findall(r"`(scripts/readme_table\.py(?: --per-layer)?(?: bench/results/[^` ]+)+)`",
                       readme)
    main_tables = [c for c in cited if "--per-layer" not in c]
    if len(main_tables) != 1:
        print(f"README.md: expected one `scripts/readme_table.py <call folders>` command, found "
              f"{len(main_tables)}")
        return 1
    lines = set(readme.splitlines())
    for command in cited:
        out = subprocess.run([sys.executable] + command.split(), cwd=root, capture_output=True,
                             text=True)
        if out.returncode != 0:
            print(f"{command}: exit {out.returncode}: {out.stderr.strip()}")
            return 1
        rows = [line for line in out.stdout.splitlines() if line.startswith("|")]
        missing = [row for row in rows if row not in lines]
        if len(rows) < 3 or missing:
            print(f"README.md: {len(missing)} of the {len(rows)} rows that `{command}` prints "
                  f"are not in it, first: {missing[0] if missing else '(no rows)'}")
            return 1
        print(f"README.md holds all {len(rows)} rows of `{command}`")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
