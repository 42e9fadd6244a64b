#!/usr/bin/env python
"""tensordict.nn overhead benchmark: modules and functional calls against hand-written torch.

Same harness as ``run.py`` (alternating rounds, process CPU time, minimum over rounds
minus the harness call overhead, results checked equal before timing), single-threaded
torch. Each op is timed against the plain-torch way of doing the same work:

* a 2-layer MLP as a ``TensorDictModule`` vs the MLP called on a plain dict, get/set by hand;
* a 3-module ``TensorDictSequential`` vs the three modules chained by hand on a dict;
* ``with params.to_module(model): model(x)`` on a 20-parameter model vs
  ``torch.func.functional_call`` (detached values, which ``to_module`` wraps into
  parameters so that the module keeps its ``parameters()``, and values that require
  grad, which it writes as they are);
* a 10-model ensemble forward (``EnsembleModule``, and ``from_modules`` +
  ``vmap(to_module)``) vs ``torch.func.stack_module_state`` + ``vmap(functional_call)``.

Usage::

    python benchmarks/nn.py                  # full run
    python benchmarks/nn.py --quick          # smoke run
    python benchmarks/nn.py --json out.json  # also save the results (compare.py reads them)

The "floor" column of the table is the plain-torch side. Benchmarks never assert timings.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
import traceback
from types import SimpleNamespace

import torch
from torch import nn
from torch.func import functional_call, stack_module_state

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as harness  # noqa: E402  (the shared timing harness)

from tensordict import TensorDict  # noqa: E402
from tensordict.nn import EnsembleModule, TensorDictModule, TensorDictSequential  # noqa: E402

B = 64
OBS, HIDDEN, ACT = 32, 64, 8


def _mlp(n_in: int = OBS, n_hidden: int = HIDDEN, n_out: int = ACT) -> nn.Module:
    return nn.Sequential(nn.Linear(n_in, n_hidden), nn.Tanh(), nn.Linear(n_hidden, n_out))


def _close(a: torch.Tensor, b: torch.Tensor, what: str) -> str:
    if a.shape != b.shape or not torch.allclose(a, b, atol=1e-6, rtol=1e-5):
        return f"{what}: results differ ({tuple(a.shape)} vs {tuple(b.shape)})"
    return ""


# ----------------------------------------------------------------------------- module
def s_module() -> SimpleNamespace:
    torch.manual_seed(0)
    mlp = _mlp()
    obs = torch.randn(B, OBS)
    module = TensorDictModule(mlp, in_keys=["obs"], out_keys=["action"])
    return SimpleNamespace(
        mlp=mlp, module=module, td=TensorDict(obs=obs, batch_size=[B]), d={"obs": obs}
    )


def td_module(s: SimpleNamespace) -> TensorDict:
    return s.module(s.td)


def floor_module(s: SimpleNamespace) -> dict:
    d = s.d
    d["action"] = s.mlp(d["obs"])
    return d


def check_module(s: SimpleNamespace) -> str:
    return _close(td_module(s)["action"], floor_module(s)["action"], "action")


# ----------------------------------------------------------------------------- sequence
def s_sequence() -> SimpleNamespace:
    torch.manual_seed(0)
    m1 = nn.Sequential(nn.Linear(OBS, HIDDEN), nn.Tanh())
    m2 = nn.Sequential(nn.Linear(HIDDEN, HIDDEN), nn.Tanh())
    m3 = nn.Linear(HIDDEN, ACT)
    seq = TensorDictSequential(
        TensorDictModule(m1, in_keys=["obs"], out_keys=["h1"]),
        TensorDictModule(m2, in_keys=["h1"], out_keys=["h2"]),
        TensorDictModule(m3, in_keys=["h2"], out_keys=["action"]),
    )
    obs = torch.randn(B, OBS)
    return SimpleNamespace(
        mods=(m1, m2, m3), seq=seq, td=TensorDict(obs=obs, batch_size=[B]), d={"obs": obs}
    )


def td_sequence(s: SimpleNamespace) -> TensorDict:
    return s.seq(s.td)


def floor_sequence(s: SimpleNamespace) -> dict:
    d = s.d
    m1, m2, m3 = s.mods
    d["h1"] = m1(d["obs"])
    d["h2"] = m2(d["h1"])
    d["action"] = m3(d["h2"])
    return d


def check_sequence(s: SimpleNamespace) -> str:
    return _close(td_sequence(s)["action"], floor_sequence(s)["action"], "action")


# ----------------------------------------------------------------------------- to_module
def s_to_module(requires_grad: bool = False) -> SimpleNamespace:
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(4, 4) for _ in range(10)])  # 20 parameters
    params = TensorDict.from_module(model).detach().clone().requires_grad_(requires_grad)
    named = {k: v for k, v in params.flatten_keys(".").items()}
    return SimpleNamespace(model=model, params=params, named=named, x=torch.randn(2, 4))


def s_to_module_grad() -> SimpleNamespace:
    return s_to_module(requires_grad=True)


def td_to_module(s: SimpleNamespace) -> torch.Tensor:
    with s.params.to_module(s.model):
        return s.model(s.x)


def floor_to_module(s: SimpleNamespace) -> torch.Tensor:
    return functional_call(s.model, s.named, (s.x,))


def check_to_module(s: SimpleNamespace) -> str:
    before = [p for p in s.model.parameters()]
    out = _close(td_to_module(s), floor_to_module(s), "output")
    after = [p for p in s.model.parameters()]
    if any(a is not b for a, b in zip(before, after)) or len(before) != 20:
        return "to_module did not restore the model's parameters"
    return out


# ----------------------------------------------------------------------------- ensembles
N_MODELS = 10


def s_ensemble() -> SimpleNamespace:
    torch.manual_seed(0)
    ensemble = EnsembleModule(
        TensorDictModule(_mlp(), in_keys=["obs"], out_keys=["action"]), num_copies=N_MODELS
    )
    obs = torch.randn(B, OBS)
    # the floor: the same weights, as torch.func wants them
    models = []
    for i in range(N_MODELS):
        mlp = _mlp()
        weights = ensemble.params_td[i].detach().clone()["module"]
        weights.to_module(mlp, inplace=True)
        models.append(mlp)
    stacked, buffers = stack_module_state(models)
    template = copy.deepcopy(models[0]).to("meta")
    from_modules = TensorDict.from_modules(*models)
    return SimpleNamespace(
        ensemble=ensemble,
        td=TensorDict(obs=obs, batch_size=[B]),
        obs=obs,
        stacked=stacked,
        buffers=buffers,
        template=template,
        plain=copy.deepcopy(models[0]),
        params=from_modules,
    )


def td_ensemble(s: SimpleNamespace) -> TensorDict:
    return s.ensemble(s.td)


def _floor_call(template: nn.Module):
    def call(params: dict, buffers: dict, x: torch.Tensor) -> torch.Tensor:
        return functional_call(template, (params, buffers), (x,))

    return call


def floor_ensemble(s: SimpleNamespace) -> torch.Tensor:
    return torch.vmap(_floor_call(s.template), (0, 0, None))(s.stacked, s.buffers, s.obs)


def td_vmap_to_module(s: SimpleNamespace) -> torch.Tensor:
    model = s.plain

    def call(params: TensorDict, x: torch.Tensor) -> torch.Tensor:
        with params.to_module(model):
            return model(x)

    return torch.vmap(call, (0, None))(s.params, s.obs)


def check_ensemble(s: SimpleNamespace) -> str:
    return _close(td_ensemble(s)["action"], floor_ensemble(s), "ensemble") or _close(
        td_vmap_to_module(s), floor_ensemble(s), "vmap(to_module)"
    )


# fmt: off
OPS: list = [
    harness.Op("MLP TensorDictModule", s_module, td_module, floor_module, check_module),
    harness.Op("3-module TensorDictSequential", s_sequence, td_sequence, floor_sequence, check_sequence),
    harness.Op("to_module swap+call+restore (20 params)", s_to_module, td_to_module, floor_to_module, check_to_module),
    harness.Op("to_module, values requiring grad", s_to_module_grad, td_to_module, floor_to_module, check_to_module),
    harness.Op("10-model EnsembleModule", s_ensemble, td_ensemble, floor_ensemble, check_ensemble),
    harness.Op("10-model from_modules + vmap(to_module)", s_ensemble, td_vmap_to_module, floor_ensemble, check_ensemble),
]
# fmt: on


def main(argv: list | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="short smoke run")
    p.add_argument("--json", metavar="PATH", help="write the results as JSON to PATH")
    p.add_argument("--rounds", type=int, help="alternating rounds per op (default 25, quick 5)")
    p.add_argument("--sample-ms", type=float, help="ms per timeit sample (default 20, quick 5)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    rounds = args.rounds or (5 if args.quick else 25)
    sample_s = (args.sample_ms or (5.0 if args.quick else 20.0)) / 1000
    meta = harness.machine()
    meta.update(mode="quick" if args.quick else "full", rounds=rounds, sample_ms=sample_s * 1e3)
    overhead = harness.harness_overhead(sample_s, rounds)
    print(
        f"tensordict {meta['tensordict']} | torch {meta['torch']} | {meta['cores']} cores, "
        f"torch threads {torch.get_num_threads()} | {rounds} rounds x ~{sample_s * 1e3:g} ms "
        f"({harness.CLOCK.__name__}); floor = hand-written torch / torch.func"
    )
    results = []
    for op in OPS:
        entry: dict = {"name": op.name}
        try:
            mismatch = harness.run_check(op)
            entry.update(harness.summarize(harness.measure(op, rounds, sample_s), overhead))
            if mismatch:
                entry["mismatch"] = mismatch
        except Exception as err:
            entry["error"] = f"{type(err).__name__}: {err}"
            print(f"[{op.name}] raised:\n{traceback.format_exc()}", file=sys.stderr)
        results.append(entry)
    summary = harness.print_table(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "summary": summary, "results": results}, f, indent=2)
        print(f"results written to {args.json}")
    return 1 if summary["failed"] else 0


if __name__ == "__main__":
    start = time.time()
    code = main()
    print(f"({time.time() - start:.0f} s)")
    sys.exit(code)
