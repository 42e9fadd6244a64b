#!/usr/bin/env python
"""tensordict-distributed benchmark: each operation against the plain alternative, in one run.

Rows (each ratio = tensordict time / plain time, both measured in the same run, in
alternating rounds, minimum over rounds):

* ``send N leaves``: ``td.send`` / ``td.recv`` of a tensordict of N float32 leaves (64 MiB
  in all, not consolidated beforehand) between 2 gloo processes on 127.0.0.1, against
  ``dist.send`` / ``dist.recv`` of one flat tensor of the same bytes. Timed on the
  receiver, from a common barrier to the data being in place.
* ``send N leaves, consolidated=True, pre-consolidated``: the same with a sender and a
  receiver consolidated beforehand (the reference library's fast path).
* ``all_reduce 1000 leaves``: ``td.all_reduce()`` against ``dist.all_reduce`` of one flat
  tensor of the same bytes (64 MiB), 2 processes.
* ``map 2 workers``: ``td.map(fn, num_workers=2)`` against ``fn(td)`` in one process
  (both with one torch thread), on a CPU-bound ``fn``; the ratio is sequential / map
  (the speed-up).
* ``store set / get 64 MiB``: ``store["x"] = t`` / ``store["x"]`` on a redis-server
  against the raw redis-py ``SET`` / ``GET`` of the same bytes (needs ``redis-server``
  on PATH and the redis client; skipped otherwise).

It uses the public API only, so the same script measures the reference library when run
with its interpreter (``/tmp/refvenv/bin/python benchmarks/distributed.py``).
Benchmarks never assert timings.

Usage::

    python benchmarks/distributed.py            # every row (~2 min on 2 busy cores)
    python benchmarks/distributed.py --quick    # fewer rounds, smaller data
    python benchmarks/distributed.py -k send    # only rows whose name matches
    python benchmarks/distributed.py --rounds 21  # more rounds: steadier minima on a busy machine
    python benchmarks/distributed.py --json out.json
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Any

import torch

MIB = 1 << 20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _leaves(n: int, total_bytes: int, value: float = 1.0) -> Any:
    from tensordict import TensorDict

    per = total_bytes // 4 // n
    return TensorDict({f"k{i:04d}": torch.full((per,), value) for i in range(n)}, [])


# ---------------------------------------------------------------------- 2-process rows
def _p2p_worker(rank: int, port: int, rows: list[str], rounds: int, total: int, out: str) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=2,
        timeout=datetime.timedelta(seconds=300),
    )
    results: dict[str, Any] = {}

    def timed(fn: Any) -> float:
        dist.barrier()
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    flat = torch.ones(total // 4)
    for row in rows:
        m = re.match(r"send (\d+) leaves(, consolidated)?", row)
        if m:
            n, consolidated = int(m.group(1)), bool(m.group(2))
            td = _leaves(n, total, float(rank))
            if consolidated:
                td = td.consolidate(metadata=True)
            plain_t, td_t = [], []
            for r in range(rounds):
                for side in ("plain", "td") if r % 2 == 0 else ("td", "plain"):
                    if side == "plain":
                        fn = (
                            (lambda: dist.send(flat, 1))
                            if rank == 0
                            else (lambda: dist.recv(flat, 0))
                        )
                        plain_t.append(timed(fn))
                    else:
                        method = td.send if rank == 0 else td.recv
                        td_t.append(
                            timed(functools.partial(method, 1 - rank, consolidated=consolidated))
                        )
            results[row] = {"td": min(td_t), "plain": min(plain_t)}
        elif row.startswith("all_reduce"):
            n = int(row.split()[1])
            td = _leaves(n, total)
            plain_t, td_t = [], []
            for r in range(rounds):
                for side in ("plain", "td") if r % 2 == 0 else ("td", "plain"):
                    if side == "plain":
                        plain_t.append(timed(lambda: dist.all_reduce(flat)))
                    else:
                        td_t.append(timed(td.all_reduce))
            results[row] = {"td": min(td_t), "plain": min(plain_t)}
    if rank == 1:
        with open(out, "w") as f:
            json.dump(results, f)
    dist.barrier()
    dist.destroy_process_group()


def run_two_process_rows(rows: list[str], rounds: int, total: int) -> dict[str, Any]:
    if not rows:
        return {}
    import torch.multiprocessing as mp

    port = _free_port()
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "res.json")
        ctx = mp.get_context("spawn")
        procs = [
            ctx.Process(target=_p2p_worker, args=(r, port, rows, rounds, total, out))
            for r in range(2)
        ]
        for p in procs:
            p.start()
        for p in procs:
            p.join(900)
        with open(out) as f:
            return dict(json.load(f))


# ---------------------------------------------------------------------- map
def cpu_bound(td: Any) -> Any:
    x = td["x"]
    for _ in range(40):
        x = torch.sin(x) * 1.0001 + torch.cos(x)
    return td.empty().set("y", x)


def run_map(rounds: int, rows_n: int) -> dict[str, Any]:
    from tensordict import TensorDict

    torch.set_num_threads(1)
    td = TensorDict({"x": torch.rand(rows_n, 256)}, [rows_n])
    seq_t, map_t = [], []
    for r in range(rounds):
        for side in ("seq", "map") if r % 2 == 0 else ("map", "seq"):
            start = time.perf_counter()
            if side == "seq":
                expected = cpu_bound(td)
                seq_t.append(time.perf_counter() - start)
            else:
                got = td.map(cpu_bound, num_workers=2, num_chunks=8, generator=torch.Generator())
                map_t.append(time.perf_counter() - start)
    assert torch.allclose(got["y"], expected["y"])
    return {"map 2 workers (speed-up)": {"td": min(map_t), "plain": min(seq_t)}}


# ---------------------------------------------------------------------- store
def run_store(rounds: int, total: int) -> dict[str, Any]:
    binary = shutil.which("redis-server")
    try:
        import redis
    except ImportError:
        return {"store": {"skipped": "the redis client is not installed"}}
    if binary is None:
        return {"store": {"skipped": "no redis-server on PATH"}}
    from tensordict import TensorDictStore

    port = _free_port()
    folder = tempfile.mkdtemp()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--save", "", "--appendonly", "no", "--dir", folder],
        stdout=subprocess.DEVNULL,
    )
    try:
        client = redis.Redis(port=port)
        for _ in range(200):
            try:
                client.ping()
                break
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
        t = torch.rand(total // 4)
        store = TensorDictStore(port=port, batch_size=[])
        store["x"] = t
        raw_key = "bench:raw"
        times: dict[str, list[float]] = {k: [] for k in ("set", "raw_set", "get", "raw_get")}
        for r in range(rounds):
            for side in ("raw", "td") if r % 2 == 0 else ("td", "raw"):
                if side == "raw":
                    start = time.perf_counter()
                    client.set(raw_key, t.numpy().tobytes())
                    times["raw_set"].append(time.perf_counter() - start)
                    start = time.perf_counter()
                    data = client.get(raw_key)
                    torch.frombuffer(bytearray(data), dtype=torch.float32)
                    times["raw_get"].append(time.perf_counter() - start)
                else:
                    start = time.perf_counter()
                    store["x"] = t
                    times["set"].append(time.perf_counter() - start)
                    start = time.perf_counter()
                    back = store["x"]
                    times["get"].append(time.perf_counter() - start)
        assert torch.equal(back, t)
        store.clear_redis()
        return {
            f"store set {total // MIB} MiB": {
                "td": min(times["set"]),
                "plain": min(times["raw_set"]),
            },
            f"store get {total // MIB} MiB": {
                "td": min(times["get"]),
                "plain": min(times["raw_get"]),
            },
        }
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("-k", default="")
    parser.add_argument("--json")
    parser.add_argument("--rounds", type=int, help="rounds per row (default 7, 3 with --quick)")
    args = parser.parse_args()
    rounds = args.rounds or (3 if args.quick else 7)
    total = 8 * MIB if args.quick else 64 * MIB
    p2p_rows = [
        "send 1000 leaves",
        "send 10 leaves",
        "send 1000 leaves, consolidated=True, pre-consolidated",
        "all_reduce 1000 leaves",
    ]
    p2p_rows = [r for r in p2p_rows if re.search(args.k, r)]
    results: dict[str, Any] = {}
    results.update(run_two_process_rows(p2p_rows, rounds, total))
    if re.search(args.k, "map 2 workers"):
        results.update(run_map(rounds, 2000 if args.quick else 16000))
    if re.search(args.k, "store set get"):
        results.update(run_store(rounds, total))
    import tensordict

    lib = f"tensordict {getattr(tensordict, '__version__', '?')} ({os.path.dirname(tensordict.__file__)})"
    print(
        f"{lib}, torch {torch.__version__}, {os.cpu_count()} CPUs, {rounds} rounds, min over rounds"
    )
    print(f"{'row':58s} {'tensordict ms':>14s} {'plain ms':>10s} {'ratio':>7s}")
    for row, r in results.items():
        if "skipped" in r:
            print(f"{row:58s} skipped: {r['skipped']}")
            continue
        ratio = r["plain"] / r["td"] if "speed-up" in row else r["td"] / r["plain"]
        r["ratio"] = ratio
        print(f"{row:58s} {r['td'] * 1e3:14.1f} {r['plain'] * 1e3:10.1f} {ratio:6.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"library": lib, "rounds": rounds, "bytes": total, "rows": results}, f, indent=1
            )


if __name__ == "__main__":
    main()
