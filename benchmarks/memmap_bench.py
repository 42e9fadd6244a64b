#!/usr/bin/env python
"""Save/load speed of tensordict-memmap against torch.save, safetensors and raw I/O.

Two datasets (sizes configurable): ``--total-mb`` MiB split into ``--leaves`` float32
tensors (default 1 GiB in 64 leaves), and ``--small-leaves`` tiny tensors (default
10,000 of 100 floats). For each, in one run and in the same folder, best of
``--repeat`` interleaved rounds:

* ``raw write``: one ``write()`` per leaf of the same bytes into one file (the limit),
  and the same followed by ``fsync`` (the limit for a durable save); ``raw write, one
  file per leaf``: a new file per leaf with bare ``os`` calls (the floor of the
  reference's folder layout);
* ``td.memmap(prefix)``: the default save, atomic and durable (staging folder, fsync,
  rename); ``atomic=False``: writes in place, no fsync (the reference's default);
  ``td.save("x.tdz")``: the single-file archive (and its ``load_memmap``);
* ``torch.save`` of the same tensors (a dict) and ``safetensors.torch.save_file``;
* ``load_memmap`` (maps the files: reads nothing), ``load_memmap`` + reading every byte
  (summing every leaf), ``torch.load``, ``safetensors.torch.load_file``, the raw
  ``read()`` of the file, and that read followed by the same summing.

A third case, ``durable save`` (``--durable-repeat`` rounds, default 7; ``0`` skips it),
measures the default save against the physical floor of a durable write: the same
``--leaves`` tensors written to one new file each and ``fsync``-ed, then the folder. The
contestants run alternately, each round starting with the next one, medians and minima
reported; ``td.memmap`` into a new folder and
over the previous save (the checkpoint loop), beside ``torch.save`` (no fsync) and
``atomic=False`` (in place, no fsync). Every contestant's setup (not timed) deletes what it
replaces, waits for the deletions the saves left to a background thread, and flushes the
disk (``sync``), so that no round pays for another's writeback.

Reads run on files that are in the page cache (they were just written), for every
contestant alike. Ratios (``x`` = time / reference time) are printed against the named
reference in the same run. Rounds are interleaved (each round runs every contestant once)
and the best round counts. Timings vary with the machine's load: run twice and compare.

    python benchmarks/memmap_bench.py                     # 1 GiB / 64 leaves, 10k leaves
    python benchmarks/memmap_bench.py --total-mb 256 --small-leaves 2000 --repeat 2
    python benchmarks/memmap_bench.py --json out.json --dir /some/disk
    python benchmarks/memmap_bench.py --small-leaves 0 --repeat 0   # durable save only
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from tensordict import TensorDict
from tensordict.memmap._fs import wait_for_removals


def interleaved(
    contestants: list[tuple[str, Callable[[], Any], Callable[[], Any] | None]], rounds: int
) -> dict[str, float]:
    """Best time of each contestant over ``rounds`` rounds, each round running every
    contestant once in turn (so that a slow spell of the machine hits them all alike)."""
    times: dict[str, list[float]] = {name: [] for name, _, _ in contestants}
    for _ in range(rounds):
        for name, fn, setup in contestants:
            if setup is not None:
                setup()
            gc.collect()
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: min(values) for name, values in times.items()}


def raw_write(path: Path, tensors: list[torch.Tensor], fsync: bool) -> None:
    with open(path, "wb", buffering=0) as f:
        for t in tensors:
            f.write(memoryview(t.view(torch.uint8).numpy()))
        if fsync:
            os.fsync(f.fileno())


def raw_files(folder: Path, tensors: list[torch.Tensor], fsync: bool = False) -> None:
    """One new file per leaf, created and written with bare ``os`` calls: the floor of any
    one-file-per-leaf layout (the reference's folder format) on this filesystem. With
    ``fsync``, every file and then the folder are ``fsync``-ed once all are written: the
    floor of a durable one-file-per-leaf save."""
    os.mkdir(folder)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    kept = []  # (fsync: the files stay open until all are written)
    try:
        for i, t in enumerate(tensors):
            fd = os.open(folder / f"{i}.bin", flags, 0o644)
            try:
                os.write(fd, memoryview(t.view(torch.uint8).numpy()))
            finally:
                if fsync:
                    kept.append(fd)
                else:
                    os.close(fd)
        for fd in kept:
            os.fsync(fd)
    finally:
        for fd in kept:
            os.close(fd)
    if fsync:
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


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


def touch_raw(path: Path, nbytes: int) -> float:
    """``raw read`` followed by the same summing as :func:`touch_all` (float32 data)."""
    buf = bytearray(nbytes)
    with open(path, "rb", buffering=0) as f:
        f.readinto(buf)
    return float(torch.frombuffer(buf, dtype=torch.float32).sum())


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
    raw, pt, st, folder = work / "raw.bin", work / "data.pt", work / "data.safetensors", work / "td"
    files = work / "files"
    archive = work / "data.tdz"

    def fresh(path: Path) -> Callable[[], None]:
        def clean() -> None:
            shutil.rmtree(path, ignore_errors=True)
            if path.exists():
                path.unlink()

        return clean

    try:
        from safetensors.torch import load_file, save_file
    except ModuleNotFoundError:
        save_file = load_file = None  # type: ignore[assignment]
    # (what, function, setup, reference): writes first, then the reads of what they wrote
    plan: list[tuple[str, Callable[[], Any], Callable[[], Any] | None, str | None]] = [
        ("raw write", lambda: raw_write(raw, tensors, False), fresh(raw), None),
        ("raw write + fsync", lambda: raw_write(raw, tensors, True), fresh(raw), None),
        ("raw write, one file per leaf", lambda: raw_files(files, tensors), fresh(files), None),
        ("torch.save", lambda: torch.save(as_dict, pt), fresh(pt), "raw write"),
    ]
    if save_file is not None:
        plan.append(
            ("safetensors save_file", lambda: save_file(as_dict, str(st)), fresh(st), "raw write")
        )
    plan += [
        (
            "td.memmap (atomic, fsync)",
            lambda: td.memmap(folder),
            fresh(folder),
            "raw write + fsync",
        ),
        (
            "td.memmap (atomic=False)",
            lambda: td.memmap(folder, atomic=False),
            fresh(folder),
            "raw write, one file per leaf",
        ),
        ("td.save(.tdz archive)", lambda: td.save(archive), fresh(archive), "raw write + fsync"),
        ("raw read", lambda: raw_read(raw, nbytes), None, None),
        ("torch.load", lambda: torch.load(pt), None, "raw read"),
    ]
    if load_file is not None:
        plan.append(("safetensors load_file", lambda: load_file(str(st)), None, "raw read"))
    plan += [
        ("load_memmap (map only)", lambda: TensorDict.load_memmap(folder), None, "raw read"),
        (
            "load_memmap + read every byte",
            lambda: touch_all(TensorDict.load_memmap(folder)),
            None,
            "raw read",
        ),
        ("raw read + read every byte", lambda: touch_raw(raw, nbytes), None, None),
        ("load_memmap(.tdz archive)", lambda: TensorDict.load_memmap(archive), None, "raw read"),
    ]
    best = interleaved([(what, fn, setup) for what, fn, setup, _ in plan], repeat)
    for path in (folder, raw, pt, st, archive, files):
        fresh(path)()
    return [
        {"case": name, "what": what, "seconds": best[what], "ref": ref} for what, _, _, ref in plan
    ]


def durable_case(td: TensorDict, work: Path, repeat: int) -> list[dict]:
    """The default (durable) save against a raw write + fsync of the same bytes, rounds
    alternating, medians and minima (see the module doc)."""
    tensors = [t.contiguous() for t in td.values(True, True)]
    as_dict = {str(k): v for k, v in td.items(True, True)}
    raw, new, over, inplace, pt = (
        work / "raw",
        work / "new",
        work / "over",
        work / "inplace",
        work / "data.pt",
    )
    floor = "raw write + fsync, one file per leaf"

    def removing(path: Path | None) -> Callable[[], None]:
        def setup() -> None:
            if path is not None:
                shutil.rmtree(path, ignore_errors=True)
                if path.exists():
                    path.unlink()
            wait_for_removals()
            gc.collect()
            os.sync()

        return setup

    plan: list[tuple[str, Callable[[], Any], Callable[[], Any], str | None]] = [
        (floor, lambda: raw_files(raw, tensors, fsync=True), removing(raw), None),
        ("td.memmap (default) into a new folder", lambda: td.memmap(new), removing(new), floor),
        ("td.memmap (default) over the last save", lambda: td.memmap(over), removing(None), floor),
        ("torch.save (no fsync)", lambda: torch.save(as_dict, pt), removing(pt), floor),
        (
            "td.memmap (atomic=False) over the last save",
            lambda: td.memmap(inplace, atomic=False),
            removing(None),
            "torch.save (no fsync)",
        ),
    ]
    td.memmap(over)
    td.memmap(inplace, atomic=False)
    times: dict[str, list[float]] = {what: [] for what, _, _, _ in plan}
    for round_ in range(repeat):
        shift = round_ % len(plan)  # each round starts with the next contestant
        for what, fn, setup, _ in plan[shift:] + plan[:shift]:
            setup()
            start = time.perf_counter()
            fn()
            times[what].append(time.perf_counter() - start)
    for path in (raw, new, over, inplace, pt):
        removing(path)()
    return [
        {
            "case": "durable save",
            "what": what,
            "seconds": statistics.median(times[what]),
            "min": min(times[what]),
            "rounds": [round(t, 4) for t in times[what]],
            "ref": ref,
        }
        for what, _, _, ref in plan
    ]


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--total-mb", type=float, default=1024)
    parser.add_argument("--leaves", type=int, default=64)
    parser.add_argument("--small-leaves", type=int, default=10_000)
    parser.add_argument("--small-numel", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--durable-repeat", type=int, default=7, help="rounds of the durable-save case (0: skip)"
    )
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
        if args.repeat:
            name = f"{args.total_mb:g} MiB in {args.leaves} leaves"
            rows += run_case(name, big, work, args.repeat)
            if args.small_leaves:
                rows += run_case(f"{args.small_leaves} small leaves", small, work, args.repeat)
        if args.durable_repeat:
            rows += durable_case(big, work, args.durable_repeat)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    by_key = {(r["case"], r["what"]): r["seconds"] for r in rows}
    min_by_key = {(r["case"], r["what"]): r.get("min") for r in rows}
    print(f"torch {torch.__version__}, python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    case = None
    for r in rows:
        if r["case"] != case:
            case = r["case"]
            print(f"\n{case}")
            column = "median (min)" if "min" in r else "best"
            print(f"  {'':44s} {column:>16s}  vs reference")
        ref = r["ref"]
        text = ""
        if ref is not None and (case, ref) in by_key:
            text = f"{r['seconds'] / by_key[(case, ref)]:6.2f}x {ref}"
            ref_min = min_by_key[(case, ref)]
            if r.get("min") is not None and ref_min:
                text += f" (min {r['min'] / ref_min:.2f}x)"
        if r["what"].startswith("td.") and (case, "torch.save") in by_key:
            text += f"; torch.save / this = {by_key[(case, 'torch.save')] / r['seconds']:.2f}"
        seconds = f"{r['seconds']:.4f}" + (f" ({r['min']:.3f})" if "min" in r else "")
        print(f"  {r['what']:44s} {seconds:>16s}  {text}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
