"""On-disk compatibility of tensordict-memmap with the reference library, both directions.

Each scenario builds the same tensordict in a "writer" interpreter, saves it with the
public API (``td.memmap(prefix)`` or ``td.save("x.tdz")``), and loads it in a "reader"
interpreter (with ``allow_pickle=True`` for the scenario of values JSON cannot hold);
both print a JSON description (keys, dtypes, shapes, values, batch sizes, non-tensor
values) that must match. Every (writer, reader) pair of {ours, reference} runs.
Used by ``nox -s compat``; the test suite never imports the reference.

    python tools/compat_memmap.py --ours .nox/compat/ours/bin/python --reference .nox/compat/bin/python
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

COMMON = r"""
import json, sys, torch
from tensordict import TensorDict, LazyStackedTensorDict, NonTensorData, NonTensorStack

def build(kind):
    td = TensorDict(
        {
            "f32": torch.arange(12, dtype=torch.float32).view(3, 4),
            "i64": torch.arange(3),
            "u8": torch.tensor([1, 2, 3], dtype=torch.uint8),
            "flag": torch.tensor([True, False, True]),
            "bf16": torch.ones(3, 2, dtype=torch.bfloat16),
            "nested": {"x": torch.full((3, 2), 7.0), "deeper": {"y": torch.tensor([4, 5, 6])}},
            "text": "hello",
            "labels": NonTensorStack("a", "b", "c"),
            "a/b": torch.zeros(3),
            "sp ace": torch.ones(3),
            "ünï": torch.full((3,), 2.0),
            "..": torch.full((3,), 3.0),
        },
        batch_size=[3],
        names=["batch"],
    )
    if kind == "pickled":  # values JSON cannot hold: pickled by both (no flag at save)
        return TensorDict(
            {"x": torch.arange(2.0), "c": NonTensorData(1 + 2j), "t": NonTensorData((1, "a"))},
            batch_size=[],
        )
    if kind == "lazy":
        return LazyStackedTensorDict(
            TensorDict({"a": torch.zeros(2, 3), "b": {"c": torch.ones(2)}}, [2]),
            TensorDict({"a": torch.ones(2, 5), "b": {"c": torch.zeros(2)}}, [2]),
            stack_dim=0,
        )
    return td

def describe(td):
    if isinstance(td, LazyStackedTensorDict):
        return {"lazy": [describe(t) for t in td.tensordicts], "stack_dim": td.stack_dim}
    out = {"batch_size": list(td.batch_size), "entries": {}}
    leaf = lambda cls: issubclass(cls, torch.Tensor) or cls.__name__ in ("NonTensorData", "NonTensorStack", "MetaData")
    for key in td.keys(True, True, is_leaf=leaf):
        parts = [key] if isinstance(key, str) else list(key)
        value = td.get(key)
        if isinstance(value, torch.Tensor):
            value = torch.as_tensor(value).as_subclass(torch.Tensor)
            desc = {"dtype": str(value.dtype), "shape": list(value.shape),
                    "values": value.float().flatten().tolist()}
        else:
            desc = {"value": td[key]}
            try:
                json.dumps(desc)
            except TypeError:  # a pickled value (complex, tuple): compare its repr
                desc = {"repr": repr(td[key])}
        out["entries"][json.dumps(parts)] = desc
    return out
"""

WRITE = (
    COMMON
    + r"""
kind, target = sys.argv[1], sys.argv[2]
td = build(kind)
if kind == "archive":
    td.save(target)
else:
    td.memmap(target)
print(json.dumps(describe(td)))
"""
)

READ = (
    COMMON
    + r"""
target = sys.argv[1]
print(json.dumps(describe(TensorDict.load_memmap(target, allow_pickle="pickled" in target))))
"""
)

SCENARIOS = ("dense", "lazy", "archive", "pickled")


def run(python: str, code: str, *args: str) -> dict:
    out = subprocess.run([python, "-c", code, *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{python} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ours", required=True, help="python with tensordict-core + memmap")
    parser.add_argument("--reference", required=True, help="python with tensordict==0.15.3")
    parser.add_argument("--fixture", default=None, help="a folder written by the reference")
    args = parser.parse_args(argv)
    pythons = {"ours": args.ours, "reference": args.reference}
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for scenario in SCENARIOS:
            for writer in pythons:
                target = str(Path(tmp) / f"{scenario}-{writer}") + (
                    ".tdz" if scenario == "archive" else ""
                )
                expected = run(pythons[writer], WRITE, scenario, target)
                for reader in pythons:
                    try:
                        got = run(pythons[reader], READ, target)
                        ok = got == expected
                        why = "" if ok else "loaded content differs"
                    except RuntimeError as err:
                        ok, why = False, str(err).splitlines()[-1]
                    failures += not ok
                    print(
                        f"{scenario:8s} written by {writer:9s} read by {reader:9s} {'ok' if ok else 'FAIL ' + why}"
                    )
        if args.fixture:
            descriptions = {name: run(py, READ, args.fixture) for name, py in pythons.items()}
            ok = descriptions["ours"] == descriptions["reference"]
            failures += not ok
            print(f"fixture  {args.fixture} read by both: {'ok' if ok else 'FAIL'}")
    print("compat:", "all directions match" if not failures else f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
