"""``TensorDictBase.gather_and_stack`` over gloo, with real processes.

Each multi-process test starts one Python process per rank running this file as a script
(``python test_gather_and_stack.py SCENARIO RANK WORLD PORT OUT_DIR``: the tests are
collected in importlib mode, so a spawned ``multiprocessing`` child could not import a
function of this module). A worker runs a whole scenario, several calls in a row, and
writes what it saw (values as plain lists, errors as type and message) to
``OUT_DIR/rank<r>.json``; the test checks them against values computed by hand. The
workers have a 60 s process-group timeout and the test a join timeout, so a hang fails
the test instead of blocking it.

Every ``gather_and_stack`` call in a worker runs with the object collectives of
``torch.distributed`` and the unpickling functions replaced by ones that raise: nothing
may be unpickled.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import pickle
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.distributed as dist

from tensordict import TensorDict, is_leaf_nontensor

JOIN_TIMEOUT = 120.0  # seconds for a whole multi-process run (each takes a few seconds)


# ---------------------------------------------------------------------- the parent side
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(scenario: str, world: int, tmp_path: Path) -> list[dict[str, Any]]:
    """Run ``scenario`` in ``world`` processes; the results of each rank."""
    port = _free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = []
    logs = []
    for rank in range(world):
        log = open(tmp_path / f"log{rank}.txt", "w")  # closed in the finally below
        logs.append(log)
        cmd = [sys.executable, __file__, scenario, str(rank), str(world), str(port), str(tmp_path)]
        procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env))
    deadline = time.monotonic() + JOIN_TIMEOUT
    try:
        for proc in procs:
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                pytest.fail(f"{scenario}: the workers did not finish in {JOIN_TIMEOUT} s (hang)")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for log in logs:
            log.close()
    for rank, proc in enumerate(procs):
        if proc.returncode != 0:
            output = (tmp_path / f"log{rank}.txt").read_text()
            pytest.fail(f"{scenario}: rank {rank} exited with {proc.returncode}:\n{output}")
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world)]


# ---------------------------------------------------------------------- tensordicts
def _sender(rank: int) -> TensorDict:
    """What ``rank`` sends: values depend on the rank; float32, int64 and bool leaves,
    nested keys and non-tensor values (one JSON dict, one the same on every rank)."""
    td = TensorDict(
        {
            "obs": torch.arange(4, dtype=torch.float32) + 10 * rank,
            "step": torch.tensor(rank),
            "nested": {
                "done": torch.tensor([rank % 2 == 0, True]),
                "deep": {"x": torch.full((2, 3), rank, dtype=torch.int64)},
            },
            "name": f"r{rank}",
            "tag": "same",
        },
        batch_size=[],
    )
    return td.set_non_tensor(("info", "v"), {"rank": rank, "l": [1, 2.5, None, "s"]})


def _template(rows: int) -> TensorDict:
    """A destination with ``rows`` rows shaped like :func:`_sender`'s tensordicts."""
    td = TensorDict(
        {
            "obs": torch.full((rows, 4), -1.0),
            "step": torch.full((rows,), -1),
            "nested": {
                "done": torch.zeros(rows, 2, dtype=torch.bool),
                "deep": {"x": torch.full((rows, 2, 3), -1, dtype=torch.int64)},
            },
            "name": "dst",
            "tag": "dst",
        },
        batch_size=[rows],
    )
    return td.set_non_tensor(("info", "v"), None)


def _dump(td: Any) -> dict[str, Any]:
    """Every leaf as ``"a/b": [dtype or "non_tensor", value as plain data]``."""
    out = {}
    for key, value in td.items(True, True, is_leaf=is_leaf_nontensor):
        name = key if isinstance(key, str) else "/".join(key)
        if isinstance(value, torch.Tensor):
            out[name] = [str(value.dtype), value.tolist()]
        else:
            out[name] = ["non_tensor", td.get_non_tensor(key)]
    return out


def _expected(ranks: list[int]) -> dict[str, Any]:
    """:func:`_dump` of a destination whose rows hold the tensordicts of ``ranks`` (stacked
    non-tensor values read back as one value per row, identical ones included, as
    ``torch.stack`` gives them)."""
    info = [{"rank": r, "l": [1, 2.5, None, "s"]} for r in ranks]
    names = [f"r{r}" for r in ranks]
    return {
        "info/v": ["non_tensor", info],
        "name": ["non_tensor", names],
        "nested/deep/x": ["torch.int64", [[[r] * 3] * 2 for r in ranks]],
        "nested/done": ["torch.bool", [[r % 2 == 0, True] for r in ranks]],
        "obs": ["torch.float32", [[10.0 * r + i for i in range(4)] for r in ranks]],
        "step": ["torch.int64", list(ranks)],
        "tag": ["non_tensor", ["same"] * len(ranks)],
    }


# ---------------------------------------------------------------------- the worker side
_GUARD_HITS: list[str] = []


@contextlib.contextmanager
def _no_pickle() -> Iterator[None]:
    """Replace the object collectives and unpickling functions by ones that raise."""
    from torch.distributed import distributed_c10d as c10d

    targets = [
        (module, name)
        for module in (dist, c10d)
        for name in (
            "gather_object",
            "all_gather_object",
            "broadcast_object_list",
            "scatter_object_list",
            "send_object_list",
            "recv_object_list",
        )
    ]
    targets += [(c10d, "_tensor_to_object"), (c10d, "_object_to_tensor"), (c10d, "_unpickler")]
    targets += [(pickle, "loads"), (pickle, "load"), (pickle, "Unpickler"), (torch, "load")]

    def forbidden(name: str) -> Any:
        def raiser(*args: Any, **kwargs: Any) -> Any:
            _GUARD_HITS.append(name)
            raise AssertionError(f"gather_and_stack must not call {name} (pickling)")

        return raiser

    saved = [(module, name, getattr(module, name)) for module, name in targets]
    for module, name in targets:
        setattr(module, name, forbidden(f"{module.__name__}.{name}"))
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def _call(td: Any, dst: int, group: Any = None) -> Any:
    """``td.gather_and_stack(dst, group)`` as ``("ok", returned self?)`` or
    ``("error", type name, message)``; nothing may be unpickled meanwhile."""
    with _no_pickle():
        try:
            out = td.gather_and_stack(dst, group)
        except Exception as err:
            return ["error", type(err).__name__, str(err)]
    return ["ok", out is td if out is not None else None]


def _scenario_world3(rank: int) -> dict[str, Any]:
    res: dict[str, Any] = {}

    # dst=0; then dst=2 (rows from ranks 0 and 1, in rank order).
    for dst in (0, 2):
        td = _template(2) if rank == dst else _sender(rank)
        res[f"dst{dst}"] = [_call(td, dst), _dump(td) if rank == dst else None]

    # A subgroup: group size 2, dst=2 is group rank 1, its one row comes from rank 0.
    # Rank 1 is not a member and returns None without communicating.
    g02 = dist.new_group([0, 2])
    g12 = dist.new_group([1, 2])
    g1 = dist.new_group([1])
    td = _template(1) if rank == 2 else _sender(rank)
    res["group02"] = [_call(td, 2, g02), _dump(td) if rank == 2 else None]
    td = _template(1) if rank == 1 else _sender(rank)
    res["group12"] = [_call(td, 1, g12), _dump(td) if rank == 1 else None]
    # dst must be a (global) rank of the group: every member raises before communicating.
    res["group12_dst0"] = _call(_sender(rank), 0, g12)
    # A group of one: nothing to gather.
    td = _template(0)
    res["group1"] = _call(td, 1, g1) if rank == 1 else None

    # Mismatches: dst raises before writing, the others raise too, nobody hangs.
    def mismatch(bad_rank: int, edit: Any) -> list[Any]:
        td = _template(2) if rank == 0 else _sender(rank)
        if rank == bad_rank:
            edit(td)
        before = _dump(td)
        return [_call(td, 0), _dump(td) == before]

    res["bad_shape"] = mismatch(1, lambda td: td.set("obs", torch.zeros(5)))
    res["bad_dtype"] = mismatch(2, lambda td: td.set(("nested", "deep", "x"), torch.ones(2, 3)))
    res["bad_keys"] = mismatch(
        2, lambda td: td.del_(("nested", "done")).set("extra", torch.zeros(1))
    )
    res["bad_kind"] = mismatch(1, lambda td: td.set("name", torch.zeros(())))
    # dst's own checks: a wrong number of rows.
    td = _template(3) if rank == 0 else _sender(rank)
    before = _dump(td)
    res["bad_rows"] = [_call(td, 0), _dump(td) == before]
    # A sender's value that JSON cannot carry.
    td = _template(2) if rank == 0 else _sender(rank)
    if rank == 2:
        td.set_non_tensor("name", ("a", "tuple"))
    res["bad_json"] = _call(td, 0)
    # dst out of range, and ranks disagreeing on dst.
    res["dst_range"] = [_call(_sender(rank), 3), _call(_sender(rank), -1)]
    td = _template(2) if rank == 0 else _sender(rank)
    res["dst_disagree"] = _call(td, 0 if rank == 0 else 1)

    # After all those errors the group still works.
    td = _template(2) if rank == 0 else _sender(rank)
    res["again"] = [_call(td, 0), _dump(td) if rank == 0 else None]
    res["guard_hits"] = list(_GUARD_HITS)
    return res


def _scenario_world2(rank: int) -> dict[str, Any]:
    res: dict[str, Any] = {}
    # The reference example: dst's rows get the sender's data; the sender's batch size is
    # not compared (only leaf keys, shapes and dtypes).
    if rank == 0:
        out = TensorDict(
            a=torch.zeros(1, 3), b=torch.zeros(1, 3, 2, dtype=torch.bool), batch_size=[1]
        )
    else:
        out = TensorDict(
            a=torch.full((3,), 1.0), b=torch.ones(3, 2, dtype=torch.bool), batch_size=[3]
        )
    res["example"] = [_call(out, 0), _dump(out)]
    # dst=1 with a full sender, given as a numpy integer.
    td = _template(1) if rank == 1 else _sender(rank)
    res["dst1"] = [_call(td, np.int64(1)), _dump(td) if rank == 1 else None]
    res["dst_type"] = _call(_sender(rank), 1.0)
    res["guard_hits"] = list(_GUARD_HITS)
    # The guard catches pickling collectives (so the calls above really did not use them).
    with _no_pickle():
        try:
            dist.all_gather_object([None, None], {"x": 1})
        except AssertionError:
            res["guard_active"] = True
        else:  # pragma: no cover - the guard is broken
            res["guard_active"] = False
    return res


_SCENARIOS = {"world3": _scenario_world3, "world2": _scenario_world2}


def _worker(scenario: str, rank: int, world: int, port: int, out_dir: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=60),
    )
    try:
        res = _SCENARIOS[scenario](rank)
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(res))
        # Leave together: a rank tearing gloo down while a peer is still finishing its
        # last collective can abort at interpreter exit.
        dist.barrier()
    finally:
        dist.destroy_process_group()


# ---------------------------------------------------------------------- the tests
def _ok(result: list[Any], is_dst: bool) -> None:
    assert result == ["ok", True if is_dst else None], result


def _error(result: list[Any], kind: str, *parts: str) -> str:
    assert result[0] == "error" and result[1] == kind, result
    for part in parts:
        assert part in result[2], (part, result[2])
    return str(result[2])


def test_not_initialised_raises() -> None:
    assert not dist.is_initialized()
    td = TensorDict({"a": torch.zeros(1, 3)}, [1])
    with pytest.raises(RuntimeError, match="init_process_group"):
        td.gather_and_stack(0)


def test_world_of_three(tmp_path: Path) -> None:
    res = _run("world3", 3, tmp_path)
    for rank, r in enumerate(res):
        assert r["guard_hits"] == [], (rank, r["guard_hits"])

    # Values, in rank order, with dst 0 and dst 2 (dst's own data is not a row).
    for dst in (0, 2):
        for rank, r in enumerate(res):
            _ok(r[f"dst{dst}"][0], rank == dst)
        assert res[dst][f"dst{dst}"][1] == _expected([r for r in range(3) if r != dst])
    for name in ("dst0", "again"):
        assert res[0][name][1] == _expected([1, 2])

    # Subgroups: group size 2, rank order within the group; non-members get None.
    _ok(res[0]["group02"][0], False)
    _ok(res[2]["group02"][0], True)
    assert res[1]["group02"][0] == ["ok", None]
    assert res[2]["group02"][1] == _expected([0])
    _ok(res[1]["group12"][0], True)
    _ok(res[2]["group12"][0], False)
    assert res[1]["group12"][1] == _expected([2])
    assert res[0]["group12_dst0"] == ["ok", None]  # not a member: no check, no communication
    for r in res[1:]:
        _error(r["group12_dst0"], "ValueError", "dst=0", "[1, 2]")
    _ok(res[1]["group1"], True)

    # Mismatches: a clear error on dst naming the rank, the key, expected and got; dst's
    # data unchanged; the other ranks fail too instead of waiting.
    cases = {
        "bad_shape": ["rank 1 (row 0)", "'obs'", "shape (4,)", "shape (5,)"],
        "bad_dtype": ["rank 2 (row 1)", "('nested', 'deep', 'x')", "torch.int64", "torch.float32"],
        "bad_keys": ["rank 2 (row 1)", "missing key(s) in 'nested' ['done']", "['extra']"],
        "bad_kind": ["rank 1 (row 0)", "'name'", "a non-tensor value", "got a tensor"],
    }
    for case, parts in cases.items():
        for rank, r in enumerate(res):
            message = _error(r[case][0], "ValueError", "does not match", *parts)
            assert r[case][1] is True, (case, rank)  # data unchanged
            assert "nothing was written" in message
    msg = _error(res[0]["bad_rows"][0], "ValueError", "first batch dimension of 2", "(3,)")
    assert res[0]["bad_rows"][1] is True
    for r in res[1:]:
        _error(r["bad_rows"][0], "RuntimeError", "rank 0: ValueError", msg)
    _error(res[2]["bad_json"], "TypeError", "'name'", "tuple", "JSON", "exclude")
    for r in res[:2]:
        _error(r["bad_json"], "RuntimeError", "rank 2: TypeError", "'name'")
    for r in res:
        _error(r["dst_range"][0], "ValueError", "dst=3", "[0, 1, 2]")
        _error(r["dst_range"][1], "ValueError", "dst=-1")
        _error(r["dst_disagree"], "ValueError", "different dst", "rank 0: 0", "rank 1: 1")


def test_world_of_two(tmp_path: Path) -> None:
    res = _run("world2", 2, tmp_path)
    for r in res:
        assert r["guard_hits"] == [], r["guard_hits"]
        assert r["guard_active"] is True
    _ok(res[0]["example"][0], True)
    _ok(res[1]["example"][0], False)
    assert res[0]["example"][1] == {
        "a": ["torch.float32", [[1.0, 1.0, 1.0]]],
        "b": ["torch.bool", [[[True, True]] * 3]],
    }
    _ok(res[1]["dst1"][0], True)
    _ok(res[0]["dst1"][0], False)
    assert res[1]["dst1"][1] == _expected([0])
    for r in res:
        _error(r["dst_type"], "TypeError", "dst must be an int", "1.0")


if __name__ == "__main__":
    _worker(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
