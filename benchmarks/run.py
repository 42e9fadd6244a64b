#!/usr/bin/env python
"""TensorDict overhead benchmark: every op against the plain-nested-dict floor.

For each operation this script times the TensorDict call and, in the same run, the same
torch work done on plain (nested) Python dicts by the tightest hand-written loop (the
"floor"). The floor does exactly the work the TensorDict op guarantees: where the op
validates (e.g. leading dims equal the batch size), the floor validates the cheapest way
(``v.shape[:n] != bs``); where it doesn't, the floor doesn't. ``README.md`` in this folder
states what each floor does.

Measurement: the two sides are timed in alternating rounds (the order flips every round)
so that machine noise hits both; each sample is a ``timeit`` run of ``number`` calls
(``number`` calibrated per side so a sample lasts ``--sample-ms``). The reported time per
side is the minimum over rounds, minus the cost of calling an empty ``lambda s: s``
through the same harness (measured at start-up). Before timing, every op's TensorDict
result is checked against its floor result (same keys, shapes, dtypes and values), so a
floor that does less or different work shows up as a MISMATCH.

Usage::

    python benchmarks/run.py                 # full run (~1 min on 2 cores)
    python benchmarks/run.py --quick         # smoke run (~5 s); exit 1 only if an op raises
    python benchmarks/run.py --json out.json # also save the results
    python benchmarks/run.py -k index        # only ops whose name matches a regex
    python benchmarks/run.py --profile "td \\+ 1"  # cProfile the TensorDict side of an op

Benchmarks never assert timings: the exit status is 1 only when an op (its setup, either
side, or the result check) raises, or, with ``--strict``, when a result check mismatches.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import json
import math
import os
import platform
import pstats
import re
import statistics
import subprocess
import sys
import time
import timeit
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch
from torch.utils._pytree import tree_map

import tensordict
from tensordict import TensorDict, TensorDictBase

# ----------------------------------------------------------------------------- data
B = 64  # batch size
BS = torch.Size([B])
FLAT_FEATURES = (16, 4, 1, 1, 8, 8, 2, 3, 5, 1)  # 10 leaves
FLAG = 3.0  # flag threshold on the ratio (issue 22: no op above it)
TARGET_GEOMEAN = 1.35  # issue 22: and no op above FLAG


def _rand(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


def flat_source(batch: tuple = (B,)) -> dict:
    """10 float32 leaves ``f0``..``f9`` of shape ``(*batch, feature)``."""
    return {f"f{i}": _rand(*batch, f) for i, f in enumerate(FLAT_FEATURES)}


def nest_source(batch: tuple = (B,)) -> dict:
    """A 3-level RL-style nest, 10 float32 leaves (4 at the root, 3 + 3 below)."""
    return {
        "obs": _rand(*batch, 16),
        "action": _rand(*batch, 4),
        "reward": _rand(*batch, 1),
        "done": _rand(*batch, 1),
        "next": {
            "obs": _rand(*batch, 16),
            "reward": _rand(*batch, 1),
            "done": _rand(*batch, 1),
            "info": {"a": _rand(*batch, 3), "b": _rand(*batch, 2), "c": _rand(*batch, 5)},
        },
    }


def chain_source(depth: int, leaves_per_level: int, batch: tuple = (B,)) -> dict:
    """``depth`` nested levels ``k0 > k1 > ...``, each with ``leaves_per_level`` leaves."""
    node: dict = {f"x{j}": _rand(*batch, 4) for j in range(leaves_per_level)}
    for i in reversed(range(depth - 1)):
        node = {**{f"x{j}": _rand(*batch, 4) for j in range(leaves_per_level)}, f"k{i + 1}": node}
    return node


def deep_key_source(depth: int) -> dict:
    """``{"k0": {"k1": ... {"k<depth-1>": leaf}}}``: a leaf ``depth`` keys down."""
    node: Any = _rand(B, 4)
    for i in reversed(range(depth)):
        node = {f"k{i}": node}
    return node


def clone_nest(d: dict) -> dict:
    return {k: clone_nest(v) if type(v) is dict else v.clone() for k, v in d.items()}


def pair(src: dict, batch: Any = BS) -> tuple:
    """A plain nested dict and a TensorDict with equal (but not shared) leaves."""
    return src, TensorDict(clone_nest(src), batch_size=batch)


# ----------------------------------------------------------------------------- floors
# Each floor is the tightest plain-Python version of the op on nested dicts. They share
# nothing with the library. ``n`` is the number of batch dims, ``bs`` the batch size
# as a tuple (torch.Size compares equal to a tuple).


def floor_build_flat(src: dict, batch_size: list) -> dict:
    bs = tuple(batch_size)
    n = len(bs)
    out = {}
    for k, v in src.items():
        if type(k) is not str or v.shape[:n] != bs:
            raise RuntimeError(f"shape mismatch at {k!r}")
        out[k] = v
    return out


def _build(src: dict, bs: tuple, n: int) -> dict:
    out = {}
    for k, v in src.items():
        if type(k) is not str:
            raise TypeError(f"bad key {k!r}")
        if type(v) is dict:
            out[k] = _build(v, bs, n)
        else:
            if v.shape[:n] != bs:
                raise RuntimeError(f"shape mismatch at {k!r}")
            out[k] = v
    return out


def floor_build(src: dict, batch_size: list) -> dict:
    bs = tuple(batch_size)
    return _build(src, bs, len(bs))


def floor_index(d: dict, idx: Any) -> dict:
    return {k: floor_index(v, idx) if type(v) is dict else v[idx] for k, v in d.items()}


def _plan_setitem(d: dict, src: dict, rows: tuple, n: int, plan: list) -> None:
    for k, v in src.items():
        t = d[k]
        if type(v) is dict:
            _plan_setitem(t, v, rows, n, plan)
            continue
        want = rows + t.shape[n:]
        if v.shape != want and torch.broadcast_shapes(v.shape, want) != want:
            raise RuntimeError(f"setitem: shape mismatch at {k!r}")
        plan.append((t, v))


def floor_setitem(d: dict, idx: Any, src: dict, rows: tuple, n: int) -> None:
    """``rows`` is the batch shape ``idx`` selects (known to the hand-written loop)."""
    plan: list = []
    _plan_setitem(d, src, rows, n, plan)  # check every leaf first ...
    for t, v in plan:  # ... then write (a bad value leaves d unchanged)
        t[idx] = v


def floor_combine(ds: list, fn: Callable, dim: int) -> dict:
    first = ds[0]
    keys = first.keys()
    for d in ds:
        if d.keys() != keys:
            raise KeyError("different keys")
    out = {}
    for k, v in first.items():
        vals = [d[k] for d in ds]
        out[k] = floor_combine(vals, fn, dim) if type(v) is dict else fn(vals, dim)
    return out


def floor_unbind(d: dict, dim: int) -> list:
    keys = list(d)
    cols = [floor_unbind(v, dim) if type(v) is dict else v.unbind(dim) for v in d.values()]
    return [dict(zip(keys, row)) for row in zip(*cols)]


def floor_split(d: dict, size: int, dim: int) -> list:
    keys = list(d)
    cols = [
        floor_split(v, size, dim) if type(v) is dict else v.split(size, dim) for v in d.values()
    ]
    return [dict(zip(keys, row)) for row in zip(*cols)]


def floor_apply(d: dict, fn: Callable, bs: tuple, n: int) -> dict:
    out = {}
    for k, v in d.items():
        if type(v) is dict:
            out[k] = floor_apply(v, fn, bs, n)
            continue
        r = fn(v)
        if r is None:
            continue
        if r.shape[:n] != bs:
            raise RuntimeError(f"apply: bad shape at {k!r}")
        out[k] = r
    return out


def floor_add(d: dict, x: Any) -> dict:
    return {k: floor_add(v, x) if type(v) is dict else v + x for k, v in d.items()}


def floor_mul(d: dict, d2: dict) -> dict:
    if len(d2) != len(d):
        raise KeyError("different keys")
    return {k: floor_mul(v, d2[k]) if type(v) is dict else v * d2[k] for k, v in d.items()}


def floor_iadd(d: dict, x: Any) -> None:
    for v in d.values():
        if type(v) is dict:
            floor_iadd(v, x)
        else:
            v.add_(x)


def floor_sum(d: dict, dim: int) -> dict:
    return {k: floor_sum(v, dim) if type(v) is dict else v.sum(dim) for k, v in d.items()}


def floor_clone(d: dict) -> dict:
    return {k: floor_clone(v) if type(v) is dict else v.clone() for k, v in d.items()}


def floor_to(d: dict, dtype: torch.dtype) -> dict:
    # keyword form: ``v.to(dtype=...)`` parses ~0.7 us faster than ``v.to(dtype)``
    return {k: floor_to(v, dtype) if type(v) is dict else v.to(dtype=dtype) for k, v in d.items()}


def floor_reshape(d: dict, shape: tuple, n: int) -> dict:
    return {
        k: floor_reshape(v, shape, n) if type(v) is dict else v.reshape(*shape, *v.shape[n:])
        for k, v in d.items()
    }


def floor_permute(d: dict, perm: tuple) -> dict:
    n = len(perm)
    return {
        k: floor_permute(v, perm) if type(v) is dict else v.permute(*perm, *range(n, v.dim()))
        for k, v in d.items()
    }


def floor_expand(d: dict, shape: tuple, n: int) -> dict:
    return {
        k: floor_expand(v, shape, n) if type(v) is dict else v.expand(*shape, *v.shape[n:])
        for k, v in d.items()
    }


def _plan_update(dst: dict, src: dict, bs: tuple, n: int, plan: list) -> None:
    for k, v in src.items():
        cur = dst.get(k)
        if type(v) is dict:
            if type(cur) is dict:
                _plan_update(cur, v, bs, n, plan)
                continue
            v = _build(v, bs, n)
        elif v.shape[:n] != bs:
            raise RuntimeError(f"update: bad shape at {k!r}")
        plan.append((dst, k, v))


def floor_update(dst: dict, src: dict, bs: tuple, n: int) -> dict:
    plan: list = []
    _plan_update(dst, src, bs, n, plan)  # validate everything first ...
    for target, k, v in plan:  # ... then write (a bad value leaves dst unchanged)
        target[k] = v
    return dst


def floor_leaf_items(d: dict, prefix: tuple = (), out: list | None = None) -> list:
    """``(key, leaf)`` depth first: root keys as ``str``, nested ones as tuples."""
    if out is None:
        out = []
    for k, v in d.items():
        if type(v) is dict:
            floor_leaf_items(v, prefix + (k,), out)
        else:
            out.append((prefix + (k,) if prefix else k, v))
    return out


def floor_leaf_keys(d: dict, prefix: tuple = (), out: list | None = None) -> list:
    if out is None:
        out = []
    for k, v in d.items():
        if type(v) is dict:
            floor_leaf_keys(v, prefix + (k,), out)
        else:
            out.append(prefix + (k,) if prefix else k)
    return out


def floor_leaf_values(d: dict, out: list | None = None) -> list:
    if out is None:
        out = []
    for v in d.values():
        if type(v) is dict:
            floor_leaf_values(v, out)
        else:
            out.append(v)
    return out


def floor_all_equal(d: dict, d2: dict) -> bool:
    """Every leaf of ``d`` equals the leaf of ``d2`` with the same key (a missing key
    raises, as in ``td == td2``); no early exit (the tensordict compares every leaf)."""
    if len(d2) != len(d):
        raise KeyError("the dicts have different keys")
    ok = True
    for k, v in d.items():
        if type(v) is dict:
            ok = floor_all_equal(v, d2[k]) and ok
        else:
            ok = bool((v == d2[k]).all()) and ok
    return ok


def floor_select(d: dict, keys: tuple) -> dict:
    out: dict = {}
    for key in keys:
        if type(key) is str:
            out[key] = d[key]
            continue
        src, dst = d, out
        for part in key[:-1]:
            src = src[part]
            dst = dst.setdefault(part, {})
        dst[key[-1]] = src[key[-1]]
    return out


def floor_copy(d: dict) -> dict:
    return {k: floor_copy(v) if type(v) is dict else v for k, v in d.items()}


def floor_exclude(d: dict, keys: tuple) -> dict:
    """A new top level; nested levels copied only on the way to an excluded key (the
    others shared, as ``TensorDict.exclude`` and the reference share them)."""
    out = dict(d)
    copied = {id(out)}
    for key in keys:
        if type(key) is str:
            out.pop(key, None)
            continue
        parent: Any = out
        for part in key[:-1]:
            child = parent.get(part)
            if type(child) is not dict:
                break
            if id(child) not in copied:
                child = parent[part] = dict(child)
                copied.add(id(child))
            parent = child
        else:
            parent.pop(key[-1], None)
    return out


def floor_consolidate(d: dict) -> dict:
    """One uint8 buffer (a single ``torch.cat``) holding every leaf; views rebuilt in place."""
    leaves: list = []

    def walk(x: dict) -> None:
        for v in x.values():
            if type(v) is dict:
                walk(v)
            else:
                leaves.append(v)

    walk(d)
    buf = torch.cat([v.reshape(-1).view(torch.uint8) for v in leaves])
    pos = 0

    def build(x: dict) -> dict:
        nonlocal pos
        out = {}
        for k, v in x.items():
            if type(v) is dict:
                out[k] = build(v)
            else:
                n = v.numel() * v.element_size()
                out[k] = buf[pos : pos + n].view(v.dtype).view(v.shape)
                pos += n
        return out

    return build(d)


def floor_flatten_keys(d: dict, sep: str = ".", prefix: str = "", out: dict | None = None) -> dict:
    if out is None:
        out = {}
    for k, v in d.items():
        name = prefix + k
        if type(v) is dict and v:
            floor_flatten_keys(v, sep, name + sep, out)
        else:
            if name in out:
                raise KeyError(f"flatten_keys: {name!r} already exists")
            out[name] = v
    return out


class FlagDict(dict):
    """A plain dict that can carry a ``locked`` attribute (the lock floor's container)."""


def flag_nest(d: dict) -> FlagDict:
    out = FlagDict((k, flag_nest(v) if type(v) is dict else v) for k, v in d.items())
    out.locked = False
    return out


def floor_set_lock(d: FlagDict, locked: bool) -> None:
    d.locked = locked
    for v in d.values():
        if type(v) is FlagDict:
            floor_set_lock(v, locked)


def _floor_repr(d: dict, bs: tuple, pad: str) -> tuple:
    inner = pad + "        "
    fields = []
    shared = True
    n = 0
    for k in sorted(d):
        v = d[k]
        if type(v) is dict:
            text, sub_shared, sub_n = _floor_repr(v, bs, inner)
            shared = shared and sub_shared
            n += sub_n
            fields.append(f"{k}: {text}")
        else:
            s = v.is_shared()
            shared = shared and (s or v.is_cuda)
            n += 1
            fields.append(
                f"{k}: Tensor(shape={v.shape}, device={v.device}, dtype={v.dtype}, is_shared={s})"
            )
    shared = shared and n > 0
    body = (",\n" + inner).join(fields)
    text = (
        f"TensorDict(\n{pad}    fields={{\n{inner}{body}}},\n{pad}    batch_size={bs},\n"
        f"{pad}    device=None,\n{pad}    is_shared={shared})"
    )
    return text, shared, n


def floor_repr(d: dict, bs: torch.Size) -> str:
    return _floor_repr(d, bs, "")[0]


# ----------------------------------------------------------------------------- setups
def s_flat() -> SimpleNamespace:
    d, td = pair(flat_source())
    return SimpleNamespace(d=d, td=td, bs=tuple(BS), n=1, v=_rand(B, 16))


def s_nest(batch: tuple = (B,)) -> SimpleNamespace:
    d, td = pair(nest_source(batch), torch.Size(batch))
    return SimpleNamespace(d=d, td=td, bs=tuple(batch), n=len(batch), v=_rand(*batch, 3))


def s_construct_flat() -> SimpleNamespace:
    return SimpleNamespace(src=flat_source(), batch=[B])


def s_construct_nest() -> SimpleNamespace:
    return SimpleNamespace(src=nest_source(), batch=[B])


def s_deep_key() -> SimpleNamespace:
    d, td = pair(deep_key_source(20))
    return SimpleNamespace(d=d, td=td, key=tuple(f"k{i}" for i in range(20)))


def s_index(idx: Any) -> Callable[[], SimpleNamespace]:
    def setup() -> SimpleNamespace:
        s = s_nest()
        s.idx = idx() if callable(idx) else idx
        return s

    return setup


def s_setitem(idx: Any, rows: tuple) -> Callable[[], SimpleNamespace]:
    def setup() -> SimpleNamespace:
        s = s_nest()
        s.idx, s.rows = idx, rows
        s.src_d, s.src_td = pair(nest_source(rows), torch.Size(rows))
        return s

    return setup


def s_many() -> SimpleNamespace:
    ds = [nest_source() for _ in range(10)]
    return SimpleNamespace(ds=ds, tds=[TensorDict(clone_nest(d), BS) for d in ds])


def s_lazy() -> SimpleNamespace:
    s = s_many()
    s.lazy = tensordict.lazy_stack(s.tds, 0)
    return s


def s_apply_wide() -> SimpleNamespace:
    d, td = pair({f"x{i}": _rand(B, 4) for i in range(100)})
    return SimpleNamespace(d=d, td=td, bs=tuple(BS), n=1, fn=lambda x: x + 1)


def s_apply_deep() -> SimpleNamespace:
    d, td = pair(chain_source(10, 2))
    return SimpleNamespace(d=d, td=td, bs=tuple(BS), n=1, fn=lambda x: x + 1)


def s_update_wide(from_td: bool) -> Callable[[], SimpleNamespace]:
    def setup() -> SimpleNamespace:
        s = s_apply_wide()
        src = {f"x{i}": _rand(B, 4) for i in range(100)}
        s.src_d = src
        s.src = TensorDict(clone_nest(src), BS) if from_td else src
        return s

    return setup


def s_binary() -> SimpleNamespace:
    s = s_nest()
    s.d2, s.td2 = pair(nest_source())
    return s


def s_update(from_td: bool) -> Callable[[], SimpleNamespace]:
    def setup() -> SimpleNamespace:
        s = s_nest()
        src = {
            "reward": _rand(B, 1),
            "new": _rand(B, 2),
            "next": {"reward": _rand(B, 1), "info": {"a": _rand(B, 3)}},
        }
        s.src_d = src
        s.src = TensorDict(src, BS) if from_td else src
        return s

    return setup


def s_lock() -> SimpleNamespace:
    s = s_nest()
    s.fd = flag_nest(s.d)
    return s


# ----------------------------------------------------------------------------- td/floor fns
def _get_chain(depth: int) -> Callable:
    # d["k0"]["k1"]...["k<depth-1>"], written out (no loop), as a user would.
    return eval("lambda s: s.d" + "".join(f'["k{i}"]' for i in range(depth)))  # noqa: S307


def _plus_one(x: torch.Tensor) -> torch.Tensor:
    return x + 1


def td_set_flat(s: SimpleNamespace) -> None:
    s.td["f0"] = s.v


def floor_set_flat(s: SimpleNamespace) -> None:
    v = s.v
    if v.shape[: s.n] != s.bs:
        raise RuntimeError("shape mismatch")
    s.d["f0"] = v


def td_set_nested(s: SimpleNamespace) -> None:
    s.td["next", "info", "a"] = s.v


def floor_set_nested(s: SimpleNamespace) -> None:
    v = s.v
    if v.shape[: s.n] != s.bs:
        raise RuntimeError("shape mismatch")
    s.d["next"]["info"]["a"] = v


def td_setitem(s: SimpleNamespace) -> None:
    s.td[s.idx] = s.src_td


def td_iadd(s: SimpleNamespace) -> None:
    td = s.td
    td += 1


def td_lock(s: SimpleNamespace) -> None:
    s.td.lock_()
    s.td.unlock_()


def floor_lock(s: SimpleNamespace) -> None:
    floor_set_lock(s.fd, True)
    floor_set_lock(s.fd, False)


SELECT_KEYS = ("obs", "reward", ("next", "obs"))
EXCLUDE_KEYS = ("reward", ("next", "info"))


# ----------------------------------------------------------------------------- op table
@dataclass(frozen=True)
class Op:
    """One benchmarked operation.

    ``setup()`` returns a namespace ``s``; ``td_fn(s)`` and ``floor_fn(s)`` run the op.
    ``check`` says how the two are compared before timing: ``"result"`` compares their
    return values, ``"state"`` runs each once and compares ``s.td`` with ``s.d``, a
    callable ``check(s)`` returns an error string (or ``""``), ``None`` skips.
    """

    name: str
    setup: Callable[[], SimpleNamespace]
    td_fn: Callable[[SimpleNamespace], Any]
    floor_fn: Callable[[SimpleNamespace], Any]
    check: Any = "result"


def _check_lock(s: SimpleNamespace) -> str:
    s.td.lock_()
    floor_set_lock(s.fd, True)
    td_flags = [s.td.is_locked, s.td["next"].is_locked, s.td["next", "info"].is_locked]
    fl_flags = [s.fd.locked, s.fd["next"].locked, s.fd["next"]["info"].locked]
    td_lock(s)
    floor_lock(s)
    td_flags.append(s.td["next", "info"].is_locked)
    fl_flags.append(s.fd["next"]["info"].locked)
    return "" if td_flags == fl_flags == [True, True, True, False] else f"{td_flags} != {fl_flags}"


# fmt: off
OPS: list[Op] = [
    # construction
    Op("construct flat (10 leaves)", s_construct_flat,
       lambda s: TensorDict(s.src, batch_size=s.batch),
       lambda s: floor_build_flat(s.src, s.batch)),
    Op("construct nested (3 lvl, 10 leaves)", s_construct_nest,
       lambda s: TensorDict(s.src, batch_size=s.batch),
       lambda s: floor_build(s.src, s.batch)),
    # get
    Op("get flat td['f0']", s_flat, lambda s: s.td["f0"], lambda s: s.d["f0"]),
    Op("get nested 3 lvl", s_nest,
       lambda s: s.td["next", "info", "a"], lambda s: s.d["next"]["info"]["a"]),
    Op("get nested 20 lvl", s_deep_key, lambda s: s.td[s.key], _get_chain(20)),
    # set
    Op("set flat td['f0'] = v", s_flat, td_set_flat, floor_set_flat, "state"),
    Op("set nested 3 lvl", s_nest, td_set_nested, floor_set_nested, "state"),
    # indexing
    Op("index int td[3]", s_index(3), lambda s: s.td[s.idx], lambda s: floor_index(s.d, s.idx)),
    Op("index slice td[8:40]", s_index(slice(8, 40)),
       lambda s: s.td[s.idx], lambda s: floor_index(s.d, s.idx)),
    Op("index long tensor (32)", s_index(lambda: torch.randint(0, B, (32,))),
       lambda s: s.td[s.idx], lambda s: floor_index(s.d, s.idx)),
    Op("index bool mask", s_index(lambda: torch.rand(B) > 0.5),
       lambda s: s.td[s.idx], lambda s: floor_index(s.d, s.idx)),
    # setitem by index
    Op("setitem int td[3] = td_row", s_setitem(3, ()), td_setitem,
       lambda s: floor_setitem(s.d, s.idx, s.src_d, s.rows, s.n), "state"),
    Op("setitem slice td[0:16] = td16", s_setitem(slice(0, 16), (16,)), td_setitem,
       lambda s: floor_setitem(s.d, s.idx, s.src_d, s.rows, s.n), "state"),
    # stack / cat / unbind / split
    Op("stack 10 tds", s_many, lambda s: torch.stack(s.tds, 0),
       lambda s: floor_combine(s.ds, torch.stack, 0)),
    Op("cat 10 tds", s_many, lambda s: torch.cat(s.tds, 0),
       lambda s: floor_combine(s.ds, torch.cat, 0)),
    Op("lazy stack get (10 tds)", s_lazy, lambda s: s.lazy["obs"],
       lambda s: torch.stack([d["obs"] for d in s.ds], 0)),
    Op("unbind(0) -> 64 tds", s_nest, lambda s: s.td.unbind(0), lambda s: floor_unbind(s.d, 0)),
    Op("split(16) -> 4 tds", s_nest, lambda s: s.td.split(16, 0),
       lambda s: floor_split(s.d, 16, 0)),
    # apply
    Op("apply x+1, 100 leaves", s_apply_wide, lambda s: s.td.apply(s.fn),
       lambda s: floor_apply(s.d, s.fn, s.bs, s.n)),
    Op("apply x+1, 10-lvl nest", s_apply_deep, lambda s: s.td.apply(s.fn),
       lambda s: floor_apply(s.d, s.fn, s.bs, s.n)),
    # arithmetic
    Op("td + 1", s_nest, lambda s: s.td + 1, lambda s: floor_add(s.d, 1)),
    Op("td * td2", s_binary, lambda s: s.td * s.td2, lambda s: floor_mul(s.d, s.d2)),
    Op("td += 1", s_nest, td_iadd, lambda s: floor_iadd(s.d, 1), "state"),
    Op("(td == td2).all()", s_binary, lambda s: (s.td == s.td2).all(),
       lambda s: floor_all_equal(s.d, s.d2)),
    # iteration
    Op("keys() 100 leaves", s_apply_wide, lambda s: list(s.td.keys()), lambda s: list(s.d.keys())),
    Op("values() 100 leaves", s_apply_wide, lambda s: list(s.td.values()),
       lambda s: list(s.d.values())),
    Op("items() 100 leaves", s_apply_wide, lambda s: list(s.td.items()),
       lambda s: list(s.d.items())),
    Op("keys(True, True) nested", s_nest, lambda s: list(s.td.keys(True, True)),
       lambda s: floor_leaf_keys(s.d)),
    Op("values(True, True) nested", s_nest, lambda s: list(s.td.values(True, True)),
       lambda s: floor_leaf_values(s.d)),
    Op("items(True, True) nested", s_nest, lambda s: list(s.td.items(True, True)),
       lambda s: floor_leaf_items(s.d)),
    # reductions
    Op("sum(0) over the batch", s_nest, lambda s: s.td.sum(0), lambda s: floor_sum(s.d, 0)),
    # pytree
    Op("pytree tree_map x+1", s_nest, lambda s: tree_map(_plus_one, s.td),
       lambda s: tree_map(_plus_one, s.d)),
    # copies and casts
    Op("clone", s_nest, lambda s: s.td.clone(), lambda s: floor_clone(s.d)),
    Op("to(float64)", s_nest, lambda s: s.td.to(torch.float64),
       lambda s: floor_to(s.d, torch.float64)),
    # shape ops
    Op("reshape(8, 8)", s_nest, lambda s: s.td.reshape(8, 8),
       lambda s: floor_reshape(s.d, (8, 8), 1)),
    Op("permute(1, 0) [16,4]", lambda: s_nest((16, 4)), lambda s: s.td.permute(1, 0),
       lambda s: floor_permute(s.d, (1, 0))),
    Op("expand(4, 64)", s_nest, lambda s: s.td.expand(4, B),
       lambda s: floor_expand(s.d, (4, B), 1)),
    # dict-like ops
    Op("update(td) 4 leaves", s_update(True), lambda s: s.td.update(s.src),
       lambda s: floor_update(s.d, s.src_d, s.bs, s.n), "state"),
    Op("update(dict) 4 leaves", s_update(False), lambda s: s.td.update(s.src),
       lambda s: floor_update(s.d, s.src_d, s.bs, s.n), "state"),
    Op("update(td) 100 leaves", s_update_wide(True), lambda s: s.td.update(s.src),
       lambda s: floor_update(s.d, s.src_d, s.bs, s.n), "state"),
    Op("update(dict) 100 leaves", s_update_wide(False), lambda s: s.td.update(s.src),
       lambda s: floor_update(s.d, s.src_d, s.bs, s.n), "state"),
    Op("update(itself) 100 leaves", s_apply_wide, lambda s: s.td.update(s.td),
       lambda s: s.d.update(s.d), "state"),
    Op("select 3 keys", s_nest, lambda s: s.td.select(*SELECT_KEYS),
       lambda s: floor_select(s.d, SELECT_KEYS)),
    Op("exclude 2 keys", s_nest, lambda s: s.td.exclude(*EXCLUDE_KEYS),
       lambda s: floor_exclude(s.d, EXCLUDE_KEYS)),
    Op("flatten_keys", s_nest, lambda s: s.td.flatten_keys(), lambda s: floor_flatten_keys(s.d)),
    Op("consolidate (10 leaves)", s_nest, lambda s: s.td.consolidate(),
       lambda s: floor_consolidate(s.d)),
    Op("lock_ + unlock_", s_lock, td_lock, floor_lock, _check_lock),
    Op("repr", s_nest, lambda s: repr(s.td), lambda s: floor_repr(s.d, BS)),
]
# fmt: on


# ----------------------------------------------------------------------------- checking
def plain(x: Any) -> Any:
    """TensorDicts (and sequences of them) as plain nested dicts/lists."""
    if isinstance(x, TensorDictBase):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    return x


def diff(a: Any, b: Any, path: str = "") -> str:
    """First difference between two plain structures, or ``""``."""
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return f"{path or '<root>'}: keys {sorted(a)} != {sorted(b)}"
        for k in a:
            out = diff(a[k], b[k], f"{path}/{k}")
            if out:
                return out
        return ""
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            out = diff(x, y, f"{path}[{i}]")
            if out:
                return out
        return ""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype or not torch.equal(a, b):
            return (
                f"{path}: tensors differ ({tuple(a.shape)} {a.dtype} vs {tuple(b.shape)} {b.dtype})"
            )
        return ""
    if isinstance(a, str) and isinstance(b, str) and a != b:
        i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        return f"{path or '<str>'}: differ at char {i}: {a[i : i + 40]!r} != {b[i : i + 40]!r}"
    if type(a) is not type(b) or a != b:
        return f"{path}: {str(a)[:60]!r} != {str(b)[:60]!r}"
    return ""


def run_check(op: Op) -> str:
    if op.check is None:
        return ""
    s = op.setup()
    if callable(op.check):
        return op.check(s)
    if op.check == "result":  # (plain() also turns the floor's tuples into lists)
        return diff(plain(op.td_fn(s)), plain(op.floor_fn(s)))
    op.td_fn(s)
    op.floor_fn(s)
    return diff(plain(s.td), s.d)


# ----------------------------------------------------------------------------- timing
def _null(s: Any) -> Any:
    return s


CLOCK = time.process_time  # CPU time of this process: preemption by other jobs is not counted


def _timer(fn: Callable, s: Any) -> timeit.Timer:
    return timeit.Timer("f(s)", globals={"f": fn, "s": s}, timer=CLOCK)


def _calibrate(timer: timeit.Timer, sample_s: float) -> int:
    """Calls per sample so that one sample lasts about ``sample_s`` seconds."""
    number = 1
    while True:
        t = timer.timeit(number)
        if t >= sample_s / 5 or number >= 10**7:
            return max(1, round(number * sample_s / max(t, 1e-9)))
        number *= 10 if t < sample_s / 50 else 2


def harness_overhead(sample_s: float, rounds: int) -> float:
    """Seconds per call of an empty ``f(s)`` through the harness (subtracted from results)."""
    timer = _timer(_null, SimpleNamespace())
    number = _calibrate(timer, sample_s)
    return min(timer.timeit(number) / number for _ in range(max(rounds, 25)))


def measure(op: Op, rounds: int, sample_s: float) -> dict:
    s_td, s_fl = op.setup(), op.setup()
    op.td_fn(s_td)  # warm-up (and first-call caches)
    op.floor_fn(s_fl)
    timers = {"td": _timer(op.td_fn, s_td), "floor": _timer(op.floor_fn, s_fl)}
    numbers = {side: _calibrate(t, sample_s) for side, t in timers.items()}
    samples: dict = {"td": [], "floor": []}
    for r in range(rounds):
        order = ("td", "floor") if r % 2 == 0 else ("floor", "td")
        for side in order:
            samples[side].append(timers[side].timeit(numbers[side]) / numbers[side])
    return {"samples": samples, "number": numbers}


def summarize(raw: dict, overhead: float) -> dict:
    samples = raw["samples"]
    eps = 1e-9  # 1 ns floor on the net time, so that ratios stay finite
    td = max(min(samples["td"]) - overhead, eps)
    fl = max(min(samples["floor"]) - overhead, eps)
    pairs = [
        max(a - overhead, eps) / max(b - overhead, eps)
        for a, b in zip(samples["td"], samples["floor"])
    ]
    return {
        "td_us": td * 1e6,
        "floor_us": fl * 1e6,
        "ratio": td / fl,
        "td_median_us": (statistics.median(samples["td"]) - overhead) * 1e6,
        "floor_median_us": (statistics.median(samples["floor"]) - overhead) * 1e6,
        "ratio_paired_median": statistics.median(pairs),
        "td_raw_us": min(samples["td"]) * 1e6,
        "floor_raw_us": min(samples["floor"]) * 1e6,
        "calls_per_sample": raw["number"],
        "rounds": len(samples["td"]),
    }


# ----------------------------------------------------------------------------- report
def git_state() -> str:
    """Commit of the checkout, plus whether the library sources have uncommitted edits."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(
            ["git", "-C", root, "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--", "packages/tensordict-core/src"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head or "unknown") + (" + uncommitted core edits" if dirty else "")


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count()
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "git": git_state(),
        "cpu": cpu,
        "cores": cores,
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "tensordict": getattr(tensordict, "__version__", "?"),
        "platform": platform.platform(),
    }


def _fmt(x: float) -> str:
    return f"{x:10.2f}" if x < 1000 else f"{x:10.0f}"


def print_table(results: list) -> dict:
    width = max(len(r["name"]) for r in results) + 2
    print(f"\n{'op':<{width}}{'tensordict µs':>14}{'plain-dict µs':>15}{'ratio':>8}")
    print("-" * (width + 37))
    ratios = []
    for r in results:
        if "error" in r:
            print(f"{r['name']:<{width}}  ERROR: {r['error']}")
            continue
        ratios.append(r["ratio"])
        flag = f"  > {FLAG:g}x" if r["ratio"] > FLAG else ""
        if r.get("mismatch"):
            flag += f"  MISMATCH: {r['mismatch']}"
        print(
            f"{r['name']:<{width}}{_fmt(r['td_us']):>14}{_fmt(r['floor_us']):>15}{r['ratio']:>7.2f}x{flag}"
        )
    print("-" * (width + 37))
    summary: dict = {"ops": len(results), "failed": sum("error" in r for r in results)}
    if summary["failed"]:
        print(f"ops that raised: {summary['failed']} of {len(results)} (excluded from the summary)")
    if ratios:
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        worst = max((r for r in results if "error" not in r), key=lambda r: r["ratio"])
        above = [r["name"] for r in results if "error" not in r and r["ratio"] > FLAG]
        summary.update(geomean=geo, max_ratio=worst["ratio"], max_op=worst["name"], above_3x=above)
        print(f"geometric mean of ratios: {geo:.2f}x   (target <= {TARGET_GEOMEAN}x)")
        print(f"max ratio:                {worst['ratio']:.2f}x   ({worst['name']})")
        print(
            f"ops above {FLAG:g}x:            {len(above)} of {len(ratios)}"
            + (f": {', '.join(above)}" if above else "")
        )
    return summary


def profile_op(op: Op, seconds: float = 2.0, top: int = 25) -> None:
    s = op.setup()
    op.td_fn(s)
    timer = _timer(op.td_fn, s)
    number = _calibrate(timer, seconds)
    prof = cProfile.Profile()
    fn = op.td_fn
    prof.enable()
    for _ in range(number):
        fn(s)
    prof.disable()
    print(f"cProfile of the TensorDict side of {op.name!r}: {number} calls")
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


def main(argv: list | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="short smoke run (fewer, shorter samples)")
    p.add_argument("--json", metavar="PATH", help="write the results as JSON to PATH")
    p.add_argument("-k", "--filter", metavar="REGEX", help="only ops whose name matches REGEX")
    p.add_argument("--rounds", type=int, help="alternating rounds per op (default 25, quick 5)")
    p.add_argument(
        "--sample-ms", type=float, help="target ms per timeit sample (default 20, quick 5)"
    )
    p.add_argument(
        "--wall",
        action="store_true",
        help="time wall-clock (perf_counter) instead of process CPU time",
    )
    p.add_argument(
        "--strict", action="store_true", help="also exit 1 when a result check mismatches"
    )
    p.add_argument("--list", action="store_true", help="list the ops and exit")
    p.add_argument(
        "--profile", metavar="REGEX", help="cProfile the TensorDict side of matching ops and exit"
    )
    args = p.parse_args(argv)

    torch.manual_seed(0)  # same data (and index tensors) on every run
    ops = OPS
    pattern = args.filter or args.profile
    if pattern:
        ops = [op for op in OPS if re.search(pattern, op.name)]
        if not ops:
            print(f"no op matches {pattern!r}; see --list", file=sys.stderr)
            return 2
    if args.list:
        print("\n".join(op.name for op in ops))
        return 0
    if args.profile:
        for op in ops:
            profile_op(op)
        return 0

    global CLOCK
    if args.wall:
        CLOCK = time.perf_counter
    rounds = args.rounds or (5 if args.quick else 25)
    sample_s = (args.sample_ms or (5.0 if args.quick else 20.0)) / 1000
    meta = machine()
    meta.update(
        mode="quick" if args.quick else "full",
        rounds=rounds,
        sample_ms=sample_s * 1e3,
        clock=CLOCK.__name__,
        command=" ".join([os.path.basename(sys.executable), *sys.argv]),
    )
    overhead = harness_overhead(sample_s, rounds)
    meta["harness_overhead_ns"] = overhead * 1e9
    print(
        f"tensordict {meta['tensordict']} ({meta['git']}) | torch {meta['torch']} | Python {meta['python']} | "
        f"{meta['cores']} cores ({meta['cpu']}), torch threads {meta['torch_threads']}"
    )
    print(
        f"{meta['mode']} run: {rounds} alternating rounds x ~{sample_s * 1e3:g} ms samples per side "
        f"({CLOCK.__name__}); min over rounds, minus harness call overhead {overhead * 1e9:.0f} ns"
    )

    results = []
    for op in ops:
        entry: dict = {"name": op.name}
        try:
            mismatch = run_check(op)
            entry.update(summarize(measure(op, rounds, sample_s), overhead))
            if mismatch:
                entry["mismatch"] = mismatch
        except Exception as err:  # report every failing op, keep going
            entry["error"] = f"{type(err).__name__}: {err}"
            entry["traceback"] = traceback.format_exc()
            print(f"[{op.name}] raised:\n{entry['traceback']}", file=sys.stderr)
        results.append(entry)
        if "error" not in entry:
            print(f"  {op.name:<40} {entry['ratio']:6.2f}x", file=sys.stderr, flush=True)

    summary = print_table(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "summary": summary, "results": results}, f, indent=2)
        print(f"results written to {args.json}")
    failed = summary["failed"] > 0
    mismatched = any(r.get("mismatch") for r in results)
    if mismatched:
        print("WARNING: some floors do not reproduce the TensorDict result (MISMATCH above).")
    return 1 if failed or (args.strict and mismatched) else 0


if __name__ == "__main__":
    sys.exit(main())
