"""Crash safety of saves: kill -9 a process overwriting a saved tensordict, then load it.

Each trial saves a tensordict whose leaves all hold 0 ("old") to a folder, starts a
second process that overwrites it with leaves holding 1 ("new") through
``td.memmap(prefix)`` (or ``td.save(prefix)``), kills it with SIGKILL at a random
instant during the save, and loads the folder in a fresh process. A load is
``old``, ``new``, ``error`` (it raises: acceptable, nothing wrong is returned) or
``wrong`` (it returns a mix of old and new leaves, or anything else).

    python benchmarks/crash_save.py --trials 100                       # this project
    python benchmarks/crash_save.py --trials 100 --python /work/refvenv/bin/python
    python benchmarks/crash_save.py --trials 10 --json out.json        # quick, machine-readable

``--python`` runs the children with another interpreter (for instance one where the
reference ``tensordict`` is installed): only public API is used, so both run the same
code. Sizes are configurable (``--leaves``, ``--leaf-mb``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WRITER = r"""
import sys, time, torch
from tensordict import TensorDict
prefix, value, leaves, numel, op = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
td = TensorDict({f"leaf{i:03d}": torch.full((numel,), value) for i in range(leaves)}, batch_size=[])
print("ready", flush=True)
sys.stdin.readline()
start = time.perf_counter()
getattr(td, op)(prefix)
print("done", time.perf_counter() - start, flush=True)
"""

READER = r"""
import sys, json, torch
from tensordict import TensorDict
prefix, leaves, numel = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
try:
    td = TensorDict.load_memmap(prefix)
except Exception as err:
    print(json.dumps({"result": "error", "why": f"{type(err).__name__}: {err}"[:300]}))
    sys.exit(0)
seen = set()
ok = True
for i in range(leaves):
    key = f"leaf{i:03d}"
    if key not in td.keys():
        ok = False
        break
    t = td.get(key)
    if t.shape != torch.Size([numel]):
        ok = False
        break
    values = torch.unique(torch.as_tensor(t)).tolist()
    if len(values) != 1:
        ok = False
        break
    seen.add(values[0])
if not ok or len(seen) != 1 or len(td.keys()) != leaves:
    print(json.dumps({"result": "wrong", "values": sorted(seen)}))
else:
    print(json.dumps({"result": {0.0: "old", 1.0: "new"}.get(seen.pop(), "wrong")}))
"""


def run_writer(python: str, prefix: Path, value: float, leaves: int, numel: int, op: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [python, "-c", WRITER, str(prefix), str(value), str(leaves), str(numel), op],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def save_complete(python: str, prefix: Path, value: float, leaves: int, numel: int, op: str) -> float:
    proc = run_writer(python, prefix, value, leaves, numel, op)
    start = time.perf_counter()
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    proc.wait()
    if proc.returncode != 0 or not line or line[0] != "done":
        raise RuntimeError(f"the writer failed (exit code {proc.returncode})")
    del start
    return float(line[1])


def load_result(python: str, prefix: Path, leaves: int, numel: int) -> dict:
    out = subprocess.run(
        [python, "-c", READER, str(prefix), str(leaves), str(numel)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--python", default=sys.executable, help="interpreter running the children")
    parser.add_argument("--leaves", type=int, default=16)
    parser.add_argument("--leaf-mb", type=float, default=4.0)
    parser.add_argument("--op", default="memmap", choices=["memmap", "save"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dir", default=None, help="where to write (default: a temporary folder)")
    parser.add_argument("--json", default=None, help="also write the counts to this file")
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    numel = max(1, int(args.leaf_mb * (1 << 20) / 4))
    root = Path(tempfile.mkdtemp(prefix="crash-save-", dir=args.dir))
    counts = {"old": 0, "new": 0, "error": 0, "wrong": 0}
    examples: list[dict] = []
    try:
        base = root / "base"
        save_complete(args.python, base, 0.0, args.leaves, numel, args.op)
        shutil.copytree(base, root / "timing")  # time an overwrite, as in the trials
        duration = save_complete(args.python, root / "timing", 1.0, args.leaves, numel, args.op)
        shutil.rmtree(root / "timing", ignore_errors=True)
        for trial in range(args.trials):
            prefix = root / f"trial{trial}"
            shutil.copytree(base, prefix)
            proc = run_writer(args.python, prefix, 1.0, args.leaves, numel, args.op)
            delay = rng.uniform(0.0, duration * 1.1)
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
            time.sleep(delay)
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            result = load_result(args.python, prefix, args.leaves, numel)
            counts[result["result"]] += 1
            if result["result"] in ("wrong", "error") and len(examples) < 5:
                examples.append(result)
            shutil.rmtree(prefix, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report = {
        "python": args.python,
        "op": args.op,
        "trials": args.trials,
        "leaves": args.leaves,
        "leaf_mb": args.leaf_mb,
        "save_seconds": round(duration, 3),
        **counts,
        "examples": examples,
    }
    print(json.dumps(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
