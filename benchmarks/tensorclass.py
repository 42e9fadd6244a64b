#!/usr/bin/env python
"""Tensorclass overhead benchmark: each op on a tensorclass against the same op on the
equivalent TensorDict, in the same run.

Two tensorclasses: ``Flat``, with 10 tensor fields ``f0``..``f9`` of shape ``(64, F)`` (the
*flat* data of ``run.py``), and ``Labeled``, the same 10 tensor fields plus a non-tensor
field with a default (``label: str = "x"``). Each one's TensorDict twin holds the same
entries under the same keys (for ``Labeled``, ``"label"`` as a non-tensor value, given in
the constructor's entries). Each row times the tensorclass call and its TensorDict twin
with ``run.py``'s harness (alternating rounds, process CPU time, minimum over rounds, minus
the cost of an empty call). One more row compares a field read with the attribute read of
a plain ``@dataclass`` holding the same tensors. Before timing, both sides run once and
their results are compared (non-tensor entries by value).

Targets (issues 9 and 22): every op <= 1.2x its TensorDict twin; a field read <= 3x the
dataclass attribute read.

Usage::

    python benchmarks/tensorclass.py            # full run (~30 s on 2 cores)
    python benchmarks/tensorclass.py --quick    # smoke run; exit 1 only if an op raises
    python benchmarks/tensorclass.py --json out.json

Benchmarks never assert timings.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import traceback
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the shared harness)

from tensordict import (  # noqa: E402
    NonTensorData,
    NonTensorStack,
    TensorClass,
    TensorDict,
    TensorDictBase,
)

TARGET_TWIN = 1.2
TARGET_DATACLASS = 3.0


class Flat(TensorClass):
    """The tensorclass twin of ``run.flat_source()``."""

    f0: torch.Tensor
    f1: torch.Tensor
    f2: torch.Tensor
    f3: torch.Tensor
    f4: torch.Tensor
    f5: torch.Tensor
    f6: torch.Tensor
    f7: torch.Tensor
    f8: torch.Tensor
    f9: torch.Tensor


class Labeled(Flat):
    """``Flat``'s 10 tensor fields and a non-tensor field with a default."""

    label: str = "x"


@dataclasses.dataclass
class FlatDataclass:
    """A plain dataclass with the same fields: the floor of a field read."""

    f0: torch.Tensor
    f1: torch.Tensor
    f2: torch.Tensor
    f3: torch.Tensor
    f4: torch.Tensor
    f5: torch.Tensor
    f6: torch.Tensor
    f7: torch.Tensor
    f8: torch.Tensor
    f9: torch.Tensor


def setup() -> SimpleNamespace:
    src = run.flat_source()
    tc = Flat(**run.clone_nest(src), batch_size=[run.B])
    td = TensorDict(run.clone_nest(src), batch_size=[run.B])
    return SimpleNamespace(
        src=src,
        src_l={**src, "label": "x"},  # the entries of a Labeled with its default label
        tc=tc,
        td=td,
        dc=FlatDataclass(**src),
        v=torch.randn(run.B, 16),
        tcs=[Flat(**run.clone_nest(src), batch_size=[run.B]) for _ in range(10)],
        tds=[TensorDict(run.clone_nest(src), batch_size=[run.B]) for _ in range(10)],
        tcl=Labeled(**run.clone_nest(src), batch_size=[run.B]),
        tdl=_labeled_td(src),
        tcls=[Labeled(**run.clone_nest(src), batch_size=[run.B]) for _ in range(10)],
        tdls=[_labeled_td(src) for _ in range(10)],
        batch=[run.B],
    )


def _labeled_td(src: dict) -> TensorDict:
    return TensorDict({**run.clone_nest(src), "label": "x"}, batch_size=[run.B])


def _write_tc(s: SimpleNamespace) -> None:
    s.tc.f0 = s.v


def _write_td(s: SimpleNamespace) -> None:
    s.td["f0"] = s.v


@dataclasses.dataclass(frozen=True)
class Row:
    name: str
    tc_fn: Callable[[SimpleNamespace], Any]
    other_fn: Callable[[SimpleNamespace], Any]
    other: str = "TensorDict"
    target: float = TARGET_TWIN
    tc_cls: type = Flat  # the class the tensorclass side returns


# fmt: off
ROWS: list[Row] = [
    Row("field read tc.f0 / td['f0']", lambda s: s.tc.f0, lambda s: s.td["f0"]),
    Row("field read tc.f0 / dataclass .f0", lambda s: s.tc.f0, lambda s: s.dc.f0,
        "@dataclass", TARGET_DATACLASS),
    Row("field write tc.f0 = v", _write_tc, _write_td),
    Row("construct (10 fields)", lambda s: Flat(**s.src, batch_size=s.batch),
        lambda s: TensorDict(**s.src, batch_size=s.batch)),
    Row("index int [3]", lambda s: s.tc[3], lambda s: s.td[3]),
    Row("clone", lambda s: s.tc.clone(), lambda s: s.td.clone()),
    Row("torch.stack of 10", lambda s: torch.stack(s.tcs, 0), lambda s: torch.stack(s.tds, 0)),
    Row("to(float64)", lambda s: s.tc.to(torch.float64), lambda s: s.td.to(torch.float64)),
    # Labeled: the same fields and a non-tensor one (label: str = "x")
    Row("+label: construct (10 + default)", lambda s: Labeled(**s.src, batch_size=s.batch),
        lambda s: TensorDict(**s.src_l, batch_size=s.batch), tc_cls=Labeled),
    Row("+label: index int [3]", lambda s: s.tcl[3], lambda s: s.tdl[3], tc_cls=Labeled),
    Row("+label: clone", lambda s: s.tcl.clone(), lambda s: s.tdl.clone(), tc_cls=Labeled),
    Row("+label: torch.stack of 10", lambda s: torch.stack(s.tcls, 0),
        lambda s: torch.stack(s.tdls, 0), tc_cls=Labeled),
    Row("+label: to(float64)", lambda s: s.tcl.to(torch.float64),
        lambda s: s.tdl.to(torch.float64), tc_cls=Labeled),
]
# fmt: on


def _plain(x: Any) -> Any:
    if isinstance(x, (NonTensorData, NonTensorStack)):  # compared by value
        return x.tolist()
    if isinstance(x, TensorDictBase):
        return {k: _plain(v) for k, v in x.items()}
    if dataclasses.is_dataclass(x):
        return {f.name: getattr(x, f.name) for f in dataclasses.fields(x)}
    return x


def check(row: Row) -> str:
    torch.manual_seed(0)
    a = setup()
    torch.manual_seed(0)
    b = setup()
    ra, rb = row.tc_fn(a), row.other_fn(b)
    if ra is None:  # in-place: compare the states
        ra, rb = a.tc, b.td
    if isinstance(rb, TensorDictBase) and type(ra) is not row.tc_cls:
        return f"the tensorclass side returned a {type(ra).__name__}, not a {row.tc_cls.__name__}"
    return run.diff(_plain(ra), _plain(rb))


def main(argv: list | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="short smoke run")
    p.add_argument("--json", metavar="PATH", help="write the results as JSON to PATH")
    p.add_argument("--rounds", type=int, help="alternating rounds per op (default 25, quick 5)")
    args = p.parse_args(argv)
    torch.manual_seed(0)
    rounds = args.rounds or (5 if args.quick else 25)
    sample_s = (5.0 if args.quick else 20.0) / 1000
    overhead = run.harness_overhead(sample_s, rounds)
    meta = run.machine()
    meta.update(mode="quick" if args.quick else "full", rounds=rounds, sample_ms=sample_s * 1e3)
    print(
        f"tensordict {meta['tensordict']} ({meta['git']}) | torch {meta['torch']} | "
        f"Python {meta['python']} | {meta['cores']} cores ({meta['cpu']})"
    )
    results = []
    for row in ROWS:
        entry: dict = {"name": row.name, "against": row.other, "target": row.target}
        try:
            mismatch = check(row)
            op = run.Op(row.name, setup, row.tc_fn, row.other_fn)
            entry.update(run.summarize(run.measure(op, rounds, sample_s), overhead))
            if mismatch:
                entry["mismatch"] = mismatch
        except Exception as err:  # report every failing op, keep going
            entry["error"] = f"{type(err).__name__}: {err}"
            print(traceback.format_exc(), file=sys.stderr)
        results.append(entry)
    width = max(len(r["name"]) for r in results) + 2
    print(f"\n{'op':<{width}}{'tensorclass µs':>15}{'twin':>12}{'twin µs':>10}{'ratio':>8}  target")
    print("-" * (width + 55))
    for r in results:
        if "error" in r:
            print(f"{r['name']:<{width}}  ERROR: {r['error']}")
            continue
        flag = "" if r["ratio"] <= r["target"] else "  ABOVE"
        if r["floor_us"] < 0.1:  # a few ns after the harness subtraction: noise-sized
            flag += f"  (raw {r['td_raw_us'] / r['floor_raw_us']:.2f}x before subtraction)"
        if r.get("mismatch"):
            flag += f"  MISMATCH: {r['mismatch']}"
        print(
            f"{r['name']:<{width}}{r['td_us']:>15.3f}{r['against']:>12}{r['floor_us']:>10.3f}"
            f"{r['ratio']:>7.2f}x  <= {r['target']:g}x{flag}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=2)
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
