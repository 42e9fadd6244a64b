#!/usr/bin/env python
"""Save/load speed of tensordict-memmap against torch.save, safetensors and raw I/O.

Two datasets (sizes configurable): ``--total-mb`` MiB split into ``--leaves`` float32
tensors (default 1 GiB in 64 leaves), and ``--small-leaves`` tiny tensors (default
10,000 of 100 floats). For each, in one run and in the same folder, best of
``--repeat`` runs:

* ``raw write``: one ``write()`` per leaf of the same bytes into one file (the limit),
  and the same followed by ``fsync`` (the limit for a durable save);
* ``td.memmap(prefix)``: the default save, atomic and durable (staging folder, fsync,
  rename); ``atomic=False``: writes in place, no fsync (the reference's default);
* ``torch.save`` of the same tensors (a dict) and ``safetensors.torch.save_file``;
* ``load_memmap`` (maps the files: reads nothing), ``load_memmap`` + reading every byte,
  ``torch.load``, ``safetensors.torch.load_file`` and the raw ``read()`` of the file.

Reads run on files that are in the page cache (they were just written), for every
contestant alike. Ratios (``x`` = time / reference time) are printed against the named
reference in the same run. Timings vary with the machine's load: run twice and compare.

    python benchmarks/memmap_bench.py                     # 1 GiB / 64 leaves, 10k leaves
    python benchmarks/memmap_bench.py --total-mb 256 --small-leaves 2000 --repeat 2
    python benchmarks/memmap_bench.py --json out.json --dir /some/disk
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from tensordict import TensorDict


def best(fn: Callable[[int], Any], repeat: int, setup: Callable[[int], Any] | None = None) -> float:
    times = []
    for i in range(repeat):
        if setup is not None:
            setup(i)
        gc.collect()
        start = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - start)
    return min(times)


def raw_write(path: Path, tensors: list[torch.Tensor], fsync: bool) -> None:
    with open(path, "wb", buffering=0) as f:
        for t in tensors:
            f.write(memoryview(t.view(torch.uint8).numpy()))
        if fsync:
            os.fsync(f.fileno())


def raw_read(path: Path, nbytes: int) -> int:
    buf = bytearray(nbytes)
    with open(path, "rb", buffering=0) as f:
        view = memoryview(buf)
        done = 0
        while done < nbytes:
            n = f.readinto(view[done:])
            if not n:
                break
            done += n
    return done


def touch_all(td: TensorDict) -> float:
    total = 0.0
    for value in td.values(True, True):
        if isinstance(value, torch.Tensor):
            total += float(value.as_subclass(torch.Tensor).sum())
    return total


def run_case(name: str, td: TensorDict, work: Path, repeat: int) -> list[dict]:
    tensors = [t.contiguous() for t in td.values(True, True)]
    nbytes = sum(t.numel() * t.element_size() for t in tensors)
    as_dict = {str(k): v for k, v in td.items(True, True)}
    rows: list[dict] = []

    def row(what: str, seconds: float, ref: str | None = None) -> None:
        rows.append({"case": name, "what": what, "seconds": seconds, "ref": ref})

    def fresh(path: Path) -> Callable[[int], None]:
        def clean(_: int) -> None:
            shutil.rmtree(path, ignore_errors=True)
            if path.exists():
                path.unlink()

        return clean

    raw = work / "raw.bin"
    row("raw write", best(lambda i: raw_write(raw, tensors, False), repeat, fresh(raw)))
    row("raw write + fsync", best(lambda i: raw_write(raw, tensors, True), repeat, fresh(raw)))
    row("raw read", best(lambda i: raw_read(raw, nbytes), repeat))
    pt = work / "data.pt"
    row("torch.save", best(lambda i: torch.save(as_dict, pt), repeat, fresh(pt)), "raw write")
    row("torch.load", best(lambda i: torch.load(pt), repeat), "raw read")
    try:
        from safetensors.torch import load_file, save_file

        st = work / "data.safetensors"
        row(
            "safetensors save_file",
            best(lambda i: save_file(as_dict, str(st)), repeat, fresh(st)),
            "raw write",
        )
        row("safetensors load_file", best(lambda i: load_file(str(st)), repeat), "raw read")
    except ModuleNotFoundError:
        pass
    folder = work / "td"
    row(
        "td.memmap (atomic, fsync)",
        best(lambda i: td.memmap(folder), repeat, fresh(folder)),
        "raw write + fsync",
    )
    row(
        "td.memmap (atomic=False)",
        best(lambda i: td.memmap(folder, atomic=False), repeat, fresh(folder)),
        "raw write",
    )
    row(
        "load_memmap (map only)", best(lambda i: TensorDict.load_memmap(folder), repeat), "raw read"
    )
    row(
        "load_memmap + read every byte",
        best(lambda i: touch_all(TensorDict.load_memmap(folder)), repeat),
        "raw read",
    )
    shutil.rmtree(folder, ignore_errors=True)
    for path in (raw, pt, work / "data.safetensors"):
        if path.exists():
            path.unlink()
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--total-mb", type=float, default=1024)
    parser.add_argument("--leaves", type=int, default=64)
    parser.add_argument("--small-leaves", type=int, default=10_000)
    parser.add_argument("--small-numel", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where to write (default: a temporary folder)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="memmap-bench-", dir=args.dir))
    numel = int(args.total_mb * (1 << 20) / 4 / args.leaves)
    big = TensorDict({f"leaf{i:02d}": torch.rand(numel) for i in range(args.leaves)}, [])
    small = TensorDict(
        {f"k{i:05d}": torch.rand(args.small_numel) for i in range(args.small_leaves)}, []
    )
    rows: list[dict] = []
    try:
        rows += run_case(f"{args.total_mb:g} MiB in {args.leaves} leaves", big, work, args.repeat)
        rows += run_case(f"{args.small_leaves} small leaves", small, work, args.repeat)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    by_key = {(r["case"], r["what"]): r["seconds"] for r in rows}
    print(f"torch {torch.__version__}, python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    case = None
    for r in rows:
        if r["case"] != case:
            case = r["case"]
            print(f"\n{case}")
            print(f"  {'':34s} {'seconds':>9s}  vs reference")
        ref = r["ref"]
        text = ""
        if ref is not None and (case, ref) in by_key:
            text = f"{r['seconds'] / by_key[(case, ref)]:6.2f}x {ref}"
        if r["what"].startswith("td.memmap") and (case, "torch.save") in by_key:
            text += f"; torch.save / this = {by_key[(case, 'torch.save')] / r['seconds']:.2f}"
        print(f"  {r['what']:34s} {r['seconds']:9.4f}  {text}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
