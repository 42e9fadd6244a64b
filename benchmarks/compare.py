"""Compare two runs of ``benchmarks/run.py`` — typically this library and the reference
library, each measured in its own environment on the same machine.

    python benchmarks/run.py --json ours.json
    /path/to/reference-venv/bin/python benchmarks/run.py --json reference.json
    python benchmarks/compare.py ours.json reference.json

Per op it prints both ratios to the plain-dict floor (each measured against its own
floor in its own run, which cancels most machine drift) and ours / reference.
"""

from __future__ import annotations

import argparse
import json
import math


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ours", help="JSON written by run.py for this library")
    parser.add_argument("reference", help="JSON written by run.py for the other library")
    args = parser.parse_args()
    ours = json.load(open(args.ours))
    ref = json.load(open(args.reference))
    ref_by_name = {r["name"]: r for r in ref["results"]}
    print(f"{'op':36s} {'ours/floor':>10s} {'ref/floor':>10s} {'ours/ref':>9s}")
    logs = []
    for r in ours["results"]:
        other = ref_by_name.get(r["name"])
        if other is None:
            continue
        speedup = r["ratio"] / other["ratio"]
        logs.append(math.log(speedup))
        print(f"{r['name']:36s} {r['ratio']:9.2f}x {other['ratio']:9.2f}x {speedup:8.2f}x")
    print(
        f"\ngeometric mean vs floor: ours {ours['summary']['geomean']:.2f}x, "
        f"reference {ref['summary']['geomean']:.2f}x (tensordict "
        f"{ours['meta']['tensordict']} vs {ref['meta']['tensordict']})"
    )
    if logs:
        print(f"geometric mean ours/reference: {math.exp(sum(logs) / len(logs)):.2f}x")


if __name__ == "__main__":
    main()
