#!/usr/bin/env python
"""Tabular formats against pyarrow's own calls on the same data (issue 13).

A tensordict of ``--rows`` rows (default 1M) and 20 columns (float32, float64, int64,
int32, uint8, bool; eight of them nested under ``"obs"``) is converted with

* ``to_arrow(td)`` against ``pa.Table.from_pydict({name: numpy column})``;
* ``from_arrow(table)`` against ``{name: column.to_numpy()}`` (pyarrow's own conversion);
* ``td.to_parquet(path, separator=".")`` against ``pq.write_table(table, path)`` of the
  table built from the same NumPy columns (the two files hold the same columns);
* ``TensorDict.from_parquet(path, separator=".")`` against ``pq.read_table(path)``.

Both sides of a row run in alternating rounds (the order flips every round) so that load
from other jobs hits both; the figure per side is the minimum wall time over the rounds
(wall time: pyarrow's Parquet reader and writer use threads). Before timing, both sides'
results are checked to hold the same values. No timing is asserted: the script reports.

    python benchmarks/formats.py                     # 1M rows, 9 rounds
    python benchmarks/formats.py --rows 100000 --rounds 5 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

import tensordict
from tensordict import TensorDict, from_arrow, to_arrow

DTYPES = [torch.float32] * 6 + [torch.float64] * 4 + [torch.int64] * 5 + [torch.int32] * 3
DTYPES += [torch.uint8, torch.bool]


def make(rows: int) -> tuple[TensorDict, dict[str, np.ndarray]]:
    g = torch.Generator().manual_seed(0)
    td = TensorDict(batch_size=[rows])
    columns: dict[str, np.ndarray] = {}
    for i, dtype in enumerate(DTYPES):
        if dtype.is_floating_point:
            t = torch.randn(rows, generator=g, dtype=dtype)
        elif dtype is torch.bool:
            t = torch.randint(0, 2, (rows,), generator=g).bool()
        else:
            t = torch.randint(0, 100, (rows,), generator=g).to(dtype)
        key: Any = ("obs", f"c{i}") if i < 8 else f"c{i}"
        td.set(key, t)
        columns[key if isinstance(key, str) else ".".join(key)] = t.numpy()
    return td, columns


def measure(sides: dict[str, Callable[[], Any]], rounds: int) -> dict[str, float]:
    best = dict.fromkeys(sides, float("inf"))
    names = list(sides)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            start = time.perf_counter()
            sides[name]()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def same_values(td: Any, columns: dict[str, Any]) -> None:
    flat = td.flatten_keys(".")
    for name, column in columns.items():
        got = flat[name].numpy()
        want = column if isinstance(column, np.ndarray) else np.asarray(column)
        if not np.array_equal(got, want):
            raise AssertionError(f"the two sides differ on column {name!r}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--json", help="also write the results to this file")
    args = p.parse_args(argv)

    td, columns = make(args.rows)
    table = pa.Table.from_pydict(columns)
    ours_table = to_arrow(td.flatten_keys("."))
    assert ours_table.equals(table)
    same_values(
        from_arrow(table), {k: v.to_numpy() for k, v in zip(table.column_names, table.columns)}
    )
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        ours_path, theirs_path = (
            os.path.join(tmp, "ours.parquet"),
            os.path.join(tmp, "theirs.parquet"),
        )
        td.to_parquet(ours_path, separator=".")
        pq.write_table(table, theirs_path)
        assert pq.read_table(ours_path).equals(pq.read_table(theirs_path))
        same_values(tensordict.from_parquet(theirs_path, separator="."), columns)
        rows = [
            (
                "to_arrow",
                lambda: to_arrow(td),
                "pa.Table.from_pydict(numpy)",
                lambda: pa.Table.from_pydict({k: v for k, v in columns.items()}),
            ),
            (
                "from_arrow",
                lambda: from_arrow(table),
                "{col: column.to_numpy()}",
                lambda: {n: c.to_numpy() for n, c in zip(table.column_names, table.columns)},
            ),
            (
                "to_parquet",
                lambda: td.to_parquet(ours_path, separator="."),
                "pq.write_table(from_pydict(numpy))",
                lambda: pq.write_table(pa.Table.from_pydict(columns), theirs_path),
            ),
            (
                "from_parquet",
                lambda: TensorDict.from_parquet(ours_path, separator="."),
                "pq.read_table",
                lambda: pq.read_table(theirs_path),
            ),
        ]
        for name, ours, base_name, base in rows:
            best = measure({"ours": ours, "base": base}, args.rounds)
            results.append(
                {
                    "op": name,
                    "ours_ms": best["ours"] * 1e3,
                    "baseline": base_name,
                    "baseline_ms": best["base"] * 1e3,
                    "ratio": best["ours"] / best["base"],
                }
            )
    meta = {
        "rows": args.rows,
        "columns": len(DTYPES),
        "rounds": args.rounds,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "pyarrow": pa.__version__,
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "load": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }
    print(
        f"{args.rows} rows x {len(DTYPES)} columns, {args.rounds} alternating rounds, "
        f"minimum wall time; pyarrow {pa.__version__}, torch {torch.__version__}, "
        f"load {meta['load']}"
    )
    print("| op | ours ms | baseline | baseline ms | ratio |\n|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['op']} | {r['ours_ms']:.3f} | {r['baseline']} | {r['baseline_ms']:.3f} | "
            f"{r['ratio']:.2f}x |"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
