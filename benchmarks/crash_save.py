"""Crash safety of saves: kill -9 a process overwriting a saved tensordict, then load it.

Each trial copies a saved tensordict whose leaves all hold 0 ("old"), starts a process
that overwrites it with leaves holding 1 ("new") through ``td.memmap(prefix)`` (or
``td.save(prefix)``), kills it with SIGKILL at a random instant during the save, and
loads the folder in another process. A load is ``old``, ``new``, ``error`` (it raises:
acceptable, nothing wrong is returned) or ``wrong`` (a mix of old and new leaves, a
missing or mis-shaped leaf, or any other value).

    python benchmarks/crash_save.py --trials 100                       # this project
    python benchmarks/crash_save.py --trials 100 --python /work/refvenv/bin/python
    python benchmarks/crash_save.py --trials 10 --json out.json        # quick, machine-readable

``--python`` runs the children with another interpreter (for instance one where the
reference ``tensordict`` is installed): only public API is used, so both run the same
code. A server process imports torch and tensordict once and forks a fresh writer (and
reader) per trial, so trials cost the save itself, not interpreter start-up. Sizes are
configurable (``--leaves``, ``--leaf-mb``).
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

SERVER = r"""
import json, os, sys, time, torch
from tensordict import TensorDict
leaves, numel, op = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

def make(value):
    return TensorDict({f"leaf{i:03d}": torch.full((numel,), value) for i in range(leaves)}, batch_size=[])

def writer(prefix, value, go):
    td = make(value)
    os.write(go, b"r")
    start = time.perf_counter()
    getattr(td, op)(prefix)
    os.write(go, f"{time.perf_counter() - start}\n".encode())
    os._exit(0)

def reader(prefix):
    try:
        td = TensorDict.load_memmap(prefix)
    except Exception as err:
        return {"result": "error", "why": f"{type(err).__name__}: {err}"[:300]}
    seen = set()
    for i in range(leaves):
        key = f"leaf{i:03d}"
        if key not in td.keys():
            return {"result": "wrong", "why": f"{key} missing"}
        t = torch.as_tensor(td.get(key))
        if t.shape != torch.Size([numel]):
            return {"result": "wrong", "why": f"{key} has shape {list(t.shape)}"}
        values = torch.unique(t).tolist()
        if len(values) != 1:
            return {"result": "wrong", "why": f"{key} holds {values[:4]}"}
        seen.add(values[0])
    if len(seen) != 1 or len(td.keys()) != leaves:
        return {"result": "wrong", "why": f"leaves hold {sorted(seen)}"}
    return {"result": {0.0: "old", 1.0: "new"}.get(seen.pop(), "wrong")}

def fork_then(fn, *args):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            fn(*args, w)
        finally:
            os._exit(1)
    os.close(w)
    return pid, r

def run_reader(prefix, out):
    os.write(out, json.dumps(reader(prefix)).encode())
    os._exit(0)

print("ready", flush=True)
for line in sys.stdin:
    cmd, *rest = line.split()
    if cmd == "write":  # fork a writer; report its pid once its data is built
        prefix, value = rest[0], float(rest[1])
        pid, r = fork_then(writer, prefix, value)
        os.read(r, 1)
        print(pid, flush=True)
        pending = (pid, r)
    elif cmd == "wait":  # reap the writer; report its save time (or "killed")
        pid, r = pending
        data = b""
        while chunk := os.read(r, 64):
            data += chunk
        os.close(r)
        os.waitpid(pid, 0)
        print(data.decode().strip() or "killed", flush=True)
    elif cmd == "read":
        pid, r = fork_then(run_reader, rest[0])
        data = b""
        while chunk := os.read(r, 4096):
            data += chunk
        os.close(r)
        os.waitpid(pid, 0)
        print(data.decode() or json.dumps({"result": "error", "why": "reader died"}), flush=True)
"""


class Server:
    """The process that forks writers and readers (one interpreter start for all trials)."""

    def __init__(self, python: str, leaves: int, numel: int, op: str) -> None:
        self.proc = subprocess.Popen(
            [python, "-c", SERVER, str(leaves), str(numel), op],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        if self._line() != "ready":
            raise RuntimeError("the crash-test server did not start")

    def _line(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def _send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def start_writer(self, prefix: Path, value: float) -> int:
        self._send(f"write {prefix} {value}")
        return int(self._line())

    def wait_writer(self) -> float | None:
        self._send("wait")
        line = self._line()
        return None if line == "killed" else float(line)

    def read(self, prefix: Path) -> dict:
        self._send(f"read {prefix}")
        return json.loads(self._line())

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


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
    server = Server(args.python, args.leaves, numel, args.op)
    try:
        base = root / "base"
        server.start_writer(base, 0.0)
        server.wait_writer()
        durations = []
        for i in range(2):  # time complete overwrites, as in the trials
            shutil.copytree(base, root / f"timing{i}")
            server.start_writer(root / f"timing{i}", 1.0)
            durations.append(server.wait_writer() or 0.0)
            shutil.rmtree(root / f"timing{i}", ignore_errors=True)
        duration = max(durations)
        for trial in range(args.trials):
            prefix = root / f"trial{trial}"
            shutil.copytree(base, prefix)
            pid = server.start_writer(prefix, 1.0)
            time.sleep(rng.uniform(0.0, duration * 1.5))
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            server.wait_writer()
            result = server.read(prefix)
            counts[result["result"]] += 1
            if result["result"] in ("wrong", "error") and len(examples) < 5:
                examples.append(result)
            shutil.rmtree(prefix, ignore_errors=True)
    finally:
        server.close()
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
