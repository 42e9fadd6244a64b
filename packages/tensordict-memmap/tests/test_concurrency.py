"""Several processes on one dataset, growing a dataset, and kill -9 during saves."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest
import torch
import torch.multiprocessing as mp
from memmap_helpers import ROOT

from tensordict import NonTensorStack, TensorDict, append_memmap
from tensordict.memmap import _fs

WRITERS = 4
ROWS_EACH = 25


def _fill_rows(prefix, writer):
    td = TensorDict.load_memmap(prefix)
    rows = slice(writer * ROWS_EACH, (writer + 1) * ROWS_EACH)
    td[rows] = TensorDict(
        {
            "obs": torch.full((ROWS_EACH, 3), float(writer)),
            "info": {"id": torch.full((ROWS_EACH,), writer)},
        },
        [ROWS_EACH],
    )


@pytest.mark.slow
def test_four_processes_fill_disjoint_rows_of_a_memmap_like_dataset(tmp_path):
    template = TensorDict(
        {"obs": torch.zeros(3), "info": {"id": torch.zeros((), dtype=torch.int64)}}, []
    ).expand(WRITERS * ROWS_EACH)
    dataset = template.memmap_like(tmp_path / "ds")
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_fill_rows, args=(str(tmp_path / "ds"), w)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
        assert p.exitcode == 0
    for ds in (
        dataset,
        TensorDict.load_memmap(tmp_path / "ds"),
    ):  # the parent's mapping sees them too
        for w in range(WRITERS):
            rows = slice(w * ROWS_EACH, (w + 1) * ROWS_EACH)
            assert (ds["obs"][rows] == w).all() and (ds["info", "id"][rows] == w).all()


def test_append_memmap_grows_along_dim_zero(tmp_path):
    td = TensorDict(
        {
            "x": torch.arange(6.0).view(2, 3),
            "n": {"y": torch.zeros(2, dtype=torch.int8)},
            "tag": "run",
            "lab": NonTensorStack("a", "b"),
        },
        [2],
    )
    td.memmap(tmp_path)
    size_before = (tmp_path / "x.memmap").stat().st_size
    rows = TensorDict(
        {
            "x": torch.ones(3, 3),
            "n": {"y": torch.ones(3, dtype=torch.int8)},
            "tag": "run",
            "lab": NonTensorStack("c", "d", "e"),
        },
        [3],
    )
    append_memmap(tmp_path, rows)
    assert (tmp_path / "x.memmap").stat().st_size == size_before + 3 * 3 * 4
    grown = TensorDict.load_memmap(tmp_path)
    assert grown.batch_size == (5,) and grown["n"].batch_size == (5,)
    assert torch.equal(grown["x"][:2], td["x"]) and (grown["x"][2:] == 1).all()
    assert grown.get("lab").tolist() == ["a", "b", "c", "d", "e"] and grown["tag"] == "run"


@pytest.mark.parametrize(
    "rows, match",
    [
        (TensorDict({"x": torch.ones(1, 4)}, [1]), "shape"),
        (TensorDict({"x": torch.ones(1, 3, dtype=torch.int64)}, [1]), "dtype"),
        (TensorDict({"z": torch.ones(1, 3)}, [1]), "keys"),
        (TensorDict({"x": torch.ones(3)}, []), "batch size"),
    ],
)
def test_append_memmap_refuses_rows_that_do_not_fit(tmp_path, rows, match):
    TensorDict({"x": torch.zeros(2, 3)}, [2]).memmap(tmp_path)
    before = (tmp_path / "x.memmap").read_bytes(), (tmp_path / "meta.json").read_bytes()
    with pytest.raises(ValueError, match=match):
        append_memmap(tmp_path, rows)
    assert ((tmp_path / "x.memmap").read_bytes(), (tmp_path / "meta.json").read_bytes()) == before


def test_append_memmap_needs_a_folder(tmp_path):
    TensorDict({"x": torch.zeros(2)}, [2]).save(tmp_path / "a.tdz")
    with pytest.raises(ValueError, match="unpack"):
        append_memmap(tmp_path / "a.tdz", TensorDict({"x": torch.zeros(1)}, [1]))


def _crash_script():
    spec = importlib.util.spec_from_file_location(
        "crash_save", ROOT / "benchmarks" / "crash_save.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.parametrize(
    ("leaves", "leaf_mb"),
    # per-file fsyncs; files freed in the background (1 MiB or more); one syncfs (256+ files)
    [(8, "0.5"), (4, "2"), (300, "0.004")],
)
def test_kill_9_during_an_overwrite_never_loads_wrong_data(tmp_path, leaves, leaf_mb):
    """A quick version of benchmarks/crash_save.py (100 trials there, README figures)."""
    report = _crash_script().main(
        [
            "--trials",
            "10",
            "--leaves",
            str(leaves),
            "--leaf-mb",
            leaf_mb,
            "--dir",
            str(tmp_path),
            "--json",
            str(tmp_path / "r.json"),
        ]
    )
    assert report["wrong"] == 0, report["examples"]
    assert report["old"] + report["new"] + report["error"] == 10
    assert json.loads((tmp_path / "r.json").read_text())["trials"] == 10


def _deleted_files_held_open() -> list[str]:
    """Files this process holds open that are no longer in any folder (Linux)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.endswith(" (deleted)") and _fs.OLD_MARK in target:
            found.append(target)
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc (Linux)")
def test_an_overwrite_leaves_no_name_behind_and_frees_the_old_files_in_the_background(
    tmp_path,
):
    big = 1 << 19  # float32: 2 MiB per leaf, past the size whose freeing is deferred
    TensorDict({f"k{i}": torch.zeros(big) for i in range(3)}, []).memmap(tmp_path / "data")
    new = TensorDict({f"k{i}": torch.full((big,), float(i)) for i in range(3)}, [])
    new.memmap(tmp_path / "data")
    # the names are gone when the save returns: a listing or an rmtree cannot race it
    assert sorted(os.listdir(tmp_path)) == ["data"]
    loaded = TensorDict.load_memmap(tmp_path / "data")
    for i in range(3):
        assert torch.equal(loaded[f"k{i}"], torch.full((big,), float(i)))
    _fs.wait_for_removals()
    assert _deleted_files_held_open() == []


def test_a_previous_content_left_by_a_killed_save_is_removed_by_the_next_one(tmp_path):
    TensorDict({"a": torch.zeros(2)}, [2]).memmap(tmp_path / "data")
    # what a process killed between the exchange and the deletion leaves next to the target
    leftover = tmp_path / f"{_fs.OLD_MARK}data-{'0' * 12}"
    (leftover / "sub").mkdir(parents=True)
    (leftover / "sub" / "a.memmap").write_bytes(b"\0" * 8)
    # not previous contents of "data": another target's, and a save still writing
    other = tmp_path / f"{_fs.OLD_MARK}data2-{'0' * 12}"
    staging = tmp_path / f"{_fs.TMP_MARK}data-{'0' * 12}"
    other.mkdir()
    staging.mkdir()
    TensorDict({"a": torch.ones(2)}, [2]).memmap(tmp_path / "data")
    assert sorted(os.listdir(tmp_path)) == sorted(["data", other.name, staging.name])
    assert torch.equal(TensorDict.load_memmap(tmp_path / "data")["a"], torch.ones(2))


def test_deleting_an_old_content_never_follows_a_link_out_of_it(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "big.bin").write_bytes(b"\1" * (2 << 20))
    old = tmp_path / "old"
    (old / "level").mkdir(parents=True)
    (old / "level" / "link").symlink_to(outside, target_is_directory=True)
    (old / "file-link").symlink_to(outside / "big.bin")
    (old / "level" / "own.bin").write_bytes(b"\2" * (2 << 20))
    _fs.discard_tree(old)
    _fs.wait_for_removals()
    assert not old.exists()
    assert (outside / "big.bin").read_bytes() == b"\1" * (2 << 20)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_old_files_are_held_does_not_keep_them(tmp_path):
    import threading

    path = tmp_path / "old.memmap"
    path.write_bytes(b"\0" * (2 << 20))
    fd = os.open(path, os.O_RDONLY)
    os.unlink(path)
    pending = threading.Thread(target=lambda: None)  # a removal that has not closed yet
    with _fs._removals_lock:
        _fs._removals[pending] = [fd]
    try:
        pid = os.fork()
        if pid == 0:  # the child: its copy of the descriptor is closed by the fork hook
            try:
                os.fstat(fd)
                code = 1
            except OSError:
                code = 0 if not _fs._removals else 2
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert os.fstat(fd).st_nlink == 0  # the parent's is still open, for its thread
    finally:
        with _fs._removals_lock:
            _fs._removals.pop(pending, None)
        os.close(fd)
