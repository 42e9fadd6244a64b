#!/usr/bin/env python
"""torch.compile: a tensordict function against the same function on plain nested dicts.

Two workloads, each written twice (tensordict / nested dicts), doing the same torch work:

* ``rl_step``: read nested keys, arithmetic, ``apply``, slicing, ``exclude`` (an RL-style
  step on a rollout batch);
* ``index_stack``: index, stack, reshape, clone.

For each workload and side, in one run: the first call's time (the compile: Dynamo
reset, inductor in a fresh empty cache so that each side builds its own kernels, best of
two tries in flipped order; and again with the kernels already built, "warm kernels"), the
call time of the compiled function once warm (minimum over interleaved rounds, the two sides
alternating), the graph breaks Dynamo reports, and the frames compiled over calls on new
inputs of the same structure (1 means no recompile). The same script runs with the
reference library (it uses the public API only), for the figures beside ours in
``benchmarks/README.md``.

Usage::

    python benchmarks/compile.py                    # inductor, 15 rounds
    python benchmarks/compile.py --quick            # smoke run: aot_eager, 3 rounds
    python benchmarks/compile.py --backend eager --json out.json

Benchmarks never assert timings: the exit status is 1 only when a workload raises or the
compiled result differs from the eager one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import timeit
from collections.abc import Callable
from typing import Any

# every run compiles from scratch: inductor's on-disk caches would make the second side
# (or the second run) look faster
os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "0")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

import torch  # noqa: E402
import torch._dynamo  # noqa: E402
from torch._dynamo.testing import CompileCounterWithBackend  # noqa: E402

try:  # a private helper of inductor: without it both sides share the kernel cache
    from torch._inductor.utils import fresh_cache
except ImportError:  # pragma: no cover - another torch version
    fresh_cache = None

from tensordict import TensorDict  # noqa: E402

BATCH, OBS, ACT = 256, 32, 8


# ------------------------------------------------------------------ workloads
def rl_data(seed: int) -> tuple[TensorDict, dict[str, Any]]:
    g = torch.Generator().manual_seed(seed)
    plain = {
        "obs": torch.randn(BATCH, OBS, generator=g),
        "action": torch.randn(BATCH, ACT, generator=g),
        "next": {
            "obs": torch.randn(BATCH, OBS, generator=g),
            "reward": torch.randn(BATCH, 1, generator=g),
            "done": torch.zeros(BATCH, 1, dtype=torch.bool),
        },
        "info": {"steps": torch.arange(BATCH)},
    }
    td = TensorDict(
        {
            "obs": plain["obs"].clone(),
            "action": plain["action"].clone(),
            "next": {k: v.clone() for k, v in plain["next"].items()},
            "info": {"steps": plain["info"]["steps"].clone()},
        },
        batch_size=[BATCH],
    )
    return td, plain


def rl_step_td(td: TensorDict) -> TensorDict:
    reward = td["next", "reward"]
    advantage = (
        reward + 0.99 * td["next", "obs"].mean(-1, keepdim=True) - td["obs"].mean(-1, keepdim=True)
    )
    out = td.exclude("info").apply(lambda x: x * 2 if x.is_floating_point() else x)
    out["advantage"] = advantage
    return out[: BATCH // 2]


def rl_step_dict(d: dict[str, Any]) -> dict[str, Any]:
    reward = d["next"]["reward"]
    advantage = (
        reward + 0.99 * d["next"]["obs"].mean(-1, keepdim=True) - d["obs"].mean(-1, keepdim=True)
    )

    def double(x: torch.Tensor) -> torch.Tensor:
        return x * 2 if x.is_floating_point() else x

    out = {
        "obs": double(d["obs"]),
        "action": double(d["action"]),
        "next": {k: double(v) for k, v in d["next"].items()},
        "advantage": advantage,
    }
    half = BATCH // 2
    return {
        k: {kk: vv[:half] for kk, vv in v.items()} if isinstance(v, dict) else v[:half]
        for k, v in out.items()
    }


def stack_td(td: TensorDict) -> TensorDict:
    parts = [td[i : i + 16] for i in range(0, 64, 16)]
    return torch.stack(parts, 0).reshape(-1).clone()


def stack_dict(d: dict[str, Any]) -> dict[str, Any]:
    def one(x: torch.Tensor) -> torch.Tensor:
        parts = [x[i : i + 16] for i in range(0, 64, 16)]
        stacked = torch.stack(parts, 0)
        return stacked.reshape(-1, *stacked.shape[2:]).clone()

    return {
        k: {kk: one(vv) for kk, vv in v.items()} if isinstance(v, dict) else one(v)
        for k, v in d.items()
    }


WORKLOADS: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "rl_step": (rl_step_td, rl_step_dict),
    "index_stack": (stack_td, stack_dict),
}


# ------------------------------------------------------------------ measuring
def leaves(out: Any) -> dict[tuple[str, ...], torch.Tensor]:
    """Every tensor of a tensordict or nested dict result, by key path."""
    if isinstance(out, TensorDict):
        return {(k,) if isinstance(k, str) else tuple(k): v for k, v in out.items(True, True)}
    flat: dict[tuple[str, ...], torch.Tensor] = {}
    for k, v in out.items():
        if isinstance(v, dict):
            flat.update({(k, kk): vv for kk, vv in v.items()})
        else:
            flat[(k,)] = v
    return flat


def graph_breaks(fn: Callable[..., Any], arg: Any) -> int:
    torch._dynamo.reset()
    return int(torch._dynamo.explain(fn)(arg).graph_break_count)


def first_call(fn: Callable[..., Any], arg: Any, backend: str, cold: bool) -> float:
    """Seconds of the first call of ``torch.compile(fn)`` (Dynamo's caches reset first).

    ``cold``: inductor works in a fresh, empty cache (in memory and on disk), so the call
    builds its own kernels; otherwise kernels built before (the same source) are reused.
    The two sides of a workload compile to the same kernels, so without a fresh cache the
    side compiled second would skip the kernel build the first one paid for.
    """
    torch._dynamo.reset()
    cfn = torch.compile(fn, backend=backend)
    with fresh_cache() if cold and fresh_cache is not None else contextlib.nullcontext():
        start = time.perf_counter()
        cfn(arg)
        return time.perf_counter() - start


def measure(name: str, backend: str, rounds: int) -> dict[str, Any]:
    fn_td, fn_dict = WORKLOADS[name]
    row: dict[str, Any] = {"workload": name}
    compiled = {}
    sides = (("td", fn_td, 0), ("dict", fn_dict, 1))
    for side, fn, pick in sides:
        torch._dynamo.reset()
        counter = CompileCounterWithBackend(backend)
        cfn = torch.compile(fn, backend=counter)
        arg = rl_data(0)[pick]
        out = cfn(arg)  # also warms what a process pays once, for neither side's figure
        expected = leaves(fn(rl_data(0)[pick]))
        got = leaves(out)
        if set(got) != set(expected) or any(
            not torch.allclose(got[k], expected[k]) for k in expected
        ):
            raise AssertionError(f"{name} ({side}): compiled result differs from eager")
        for seed in (1, 2):  # new inputs, same structure
            cfn(rl_data(seed)[pick])
        row[f"{side}_frames"] = counter.frame_count
        compiled[side] = (cfn, arg)
        row[f"{side}_graph_breaks"] = graph_breaks(fn, arg)
    # first calls: the best of two tries per side, the order flipped on the second
    for cold, label in ((True, "first_call_s"), (False, "first_call_warm_s")):
        for side in ("td", "dict"):
            row[f"{side}_{label}"] = float("inf")
        for order in (sides, sides[::-1]):
            for side, fn, pick in order:
                t = first_call(fn, rl_data(0)[pick], backend, cold)
                row[f"{side}_{label}"] = min(row[f"{side}_{label}"], t)
    for cfn, arg in compiled.values():  # first_call reset Dynamo: compile them again
        cfn(arg)
    # warm call times, the two sides interleaved
    best = {"td": float("inf"), "dict": float("inf")}
    for r in range(rounds):
        order = ("td", "dict") if r % 2 == 0 else ("dict", "td")
        for side in order:
            cfn, arg = compiled[side]
            n = 20
            t = min(timeit.repeat(lambda f=cfn, a=arg: f(a), number=n, repeat=3)) / n
            best[side] = min(best[side], t)
    row["td_call_us"] = best["td"] * 1e6
    row["dict_call_us"] = best["dict"] * 1e6
    row["call_ratio"] = best["td"] / best["dict"]
    row["first_call_ratio"] = row["td_first_call_s"] / row["dict_first_call_s"]
    row["first_call_warm_ratio"] = row["td_first_call_warm_s"] / row["dict_first_call_warm_s"]
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="aot_eager, 3 rounds")
    parser.add_argument("--backend", default=None, help="inductor (default), aot_eager, eager")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--json", default=None, help="write the rows here")
    args = parser.parse_args(argv)
    backend = args.backend or ("aot_eager" if args.quick else "inductor")
    rounds = args.rounds or (3 if args.quick else 15)
    torch.set_num_threads(1)
    import tensordict

    version = getattr(tensordict, "__version__", "?")
    print(f"tensordict {version}, torch {torch.__version__}, backend {backend}, {rounds} rounds")
    header = (
        f"{'workload':<12} {'td µs':>9} {'dict µs':>9} {'ratio':>6}  "
        f"{'td compile s':>12} {'dict compile s':>14} {'ratio':>6}  {'warm kernels':>12}  "
        f"{'breaks td/dict':>14}  "
        f"{'frames td/dict':>14}"
    )
    print(header)
    # the first compile of a process pays for loading the compiler: not either side's
    torch.compile(lambda x: (x + 1).sum(), backend=backend)(torch.zeros(4))
    rows, status = [], 0
    for name in WORKLOADS:
        try:
            row = measure(name, backend, rounds)
        except Exception as err:  # reported, and the exit status says so
            print(f"{name:<12} FAILED: {type(err).__name__}: {err}")
            status = 1
            continue
        rows.append(row)
        print(
            f"{name:<12} {row['td_call_us']:>9.1f} {row['dict_call_us']:>9.1f} "
            f"{row['call_ratio']:>5.2f}x  {row['td_first_call_s']:>12.2f} "
            f"{row['dict_first_call_s']:>14.2f} {row['first_call_ratio']:>5.2f}x  "
            f"{row['first_call_warm_ratio']:>11.2f}x  "
            f"{row['td_graph_breaks']:>6}/{row['dict_graph_breaks']:<7}  "
            f"{row['td_frames']:>6}/{row['dict_frames']:<7}"
        )
    if args.json:
        meta = {"tensordict": version, "torch": torch.__version__, "backend": backend}
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
    return status


if __name__ == "__main__":
    sys.exit(main())
