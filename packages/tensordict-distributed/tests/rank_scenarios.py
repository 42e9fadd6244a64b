"""One rank of a multi-process test: ``python rank_scenarios.py SCENARIO RANK WORLD PORT OUT``.

The ``run_ranks`` fixture (conftest.py) starts one such process per rank. Each scenario
runs several calls in a row and writes what it saw (values as plain data, errors as
type name and message, timings) to ``OUT/SCENARIO-rank<r>.json``; the tests compare them
with values computed by hand. While a scenario runs, the unpickling functions raise:
nothing received may be unpickled.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import pickle
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from tensordict import LazyStackedTensorDict, TensorDict

PG_TIMEOUT = 60


# ---------------------------------------------------------------------- helpers
def dump(td: Any) -> dict[str, Any]:
    """Every leaf as ``"a/b": [dtype or "non_tensor", value]`` plus the batch size."""
    out: dict[str, Any] = {"__batch__": list(td.batch_size), "__type__": type(td).__name__}
    if isinstance(td, LazyStackedTensorDict):
        out["__members__"] = [dump(m) for m in td.tensordicts]
        return out
    for key, value in td.items():
        if isinstance(value, torch.Tensor):
            out[key] = [str(value.dtype), value.float().tolist()]
        elif isinstance(value, (TensorDict, LazyStackedTensorDict)):
            out[key] = dump(value)
        else:
            out[key] = ["non_tensor", td.get_non_tensor(key)]
    return out


def call(fn: Callable[[], Any]) -> list[Any]:
    """``["ok", value]`` or ``["error", type name, message, seconds taken]``."""
    start = time.monotonic()
    try:
        return ["ok", fn()]
    except Exception as err:
        return ["error", type(err).__name__, str(err), time.monotonic() - start]


@contextlib.contextmanager
def no_unpickling() -> Iterator[list[str]]:
    hits: list[str] = []
    targets = [(pickle, "loads"), (pickle, "load"), (pickle, "Unpickler"), (torch, "load")]
    saved = [(m, n, getattr(m, n)) for m, n in targets]

    def forbidden(name: str) -> Any:
        def raiser(*args: Any, **kwargs: Any) -> Any:
            hits.append(name)
            raise AssertionError(f"{name} must not be called")

        return raiser

    for m, n in targets:
        setattr(m, n, forbidden(f"{m.__name__}.{n}"))
    try:
        yield hits
    finally:
        for m, n, v in saved:
            setattr(m, n, v)


@contextlib.contextmanager
def count_messages(*names: str) -> Iterator[list[int]]:
    """Counts the calls of the ``torch.distributed`` functions ``names`` (default: the
    point-to-point ones, send/recv and isend/irecv)."""
    count = [0]
    names = names or ("send", "recv", "isend", "irecv")
    saved = {n: getattr(dist, n) for n in names}

    def counted(fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            count[0] += 1
            return fn(*args, **kwargs)

        return run

    for n in names:
        setattr(dist, n, counted(saved[n]))
    try:
        yield count
    finally:
        for n, fn in saved.items():
            setattr(dist, n, fn)


def nested(value: float, rows: int = 2) -> TensorDict:
    """A nested tensordict with several dtypes and a non-tensor value."""
    return TensorDict(
        {
            "obs": torch.full((rows, 3), value),
            "n": {
                "step": torch.full((rows,), int(value), dtype=torch.int64),
                "done": torch.full((rows, 1), bool(int(value) % 2)),
                "half": torch.full((rows, 2), value, dtype=torch.bfloat16),
            },
            "label": f"v{value}",
        },
        [rows],
    )


def lazy(value: float) -> LazyStackedTensorDict:
    """A lazy stack whose members differ in shape and keys."""
    a = TensorDict({"x": torch.full((2, 3), value), "y": torch.full((2,), value)}, [2])
    b = TensorDict({"x": torch.full((2, 5), value), "y": torch.full((2,), value)}, [2])
    return LazyStackedTensorDict(a, b, stack_dim=0)


def wide_leaves(value: float) -> TensorDict:
    """Two leaves of 2 MiB (above the size that travels on its own) around a small one."""
    return TensorDict(
        {
            "a": torch.full((1 << 19,), value),
            "s": torch.full((3,), value + 1),
            "b": torch.full((1 << 18,), value + 2, dtype=torch.float64),
        }
    )


def dump_sums(td: TensorDict) -> dict[str, float]:
    return {k: float(v.sum()) for k, v in td.items()}


def many_leaves(n: int, value: float, size: int = 4) -> TensorDict:
    return TensorDict({f"k{i}": torch.full((size,), value + i) for i in range(n)}, [])


#: What changes in a tensordict between its repeated reductions (scenario_collectives).
KEPT_CHANGES = ("none", "again", "replace", "memory", "rename")


# ---------------------------------------------------------------------- scenarios
def scenario_p2p(rank: int, world: int) -> dict[str, Any]:
    res: dict[str, Any] = {}
    peer = 1 - rank
    if rank == 0:
        nested(1.0).send(1)
        lazy(2.0).send(1)
        TensorDict({"ls": lazy(3.0)}, [2, 2]).send(1)
        res["isend_tag"] = nested(4.0).isend(1, init_tag=10)
        works = nested(5.0).isend(1, init_tag=20, pseudo_rand=True, return_early=True)
        for w in works:
            w.wait()
        nested(6.0).init_remote(dst=1)
        nested(7.0).send(1)  # lands straight into the remote-initialised tensordict
        lazy(8.0).init_remote(dst=1)
        # Mismatches on the receiver: each one raises there, then the next transfer works.
        for value in (9.0, 10.0, 11.0, 12.0):
            nested(value).send(1)
        nested(13.0).send(1)
        # A value that cannot be sent: raises here and on the receiver.
        bad = nested(14.0)
        bad.set_non_tensor("label", ("a", "tuple"))
        res["bad_send"] = call(lambda: bad.send(1))
        nested(15.0).send(1)
        with count_messages() as sent:
            many_leaves(1000, 0.0).send(1)
        res["many_messages"] = sent[0]
        with count_messages() as sent:
            wide_leaves(1.0).send(1)  # large leaves go as messages of their own
        res["wide_messages"] = sent[0]
        with count_messages() as sent:  # 8 MiB of small leaves: in pieces of a few MiB
            many_leaves(512, 0.0, size=4096).send(1)
        res["pieces_messages"] = sent[0]
        wide_leaves(2.0).init_remote(dst=1)
        sub = dist.new_group([0, 1])
        nested(16.0).send(group=sub, group_dst=1)
        nested(17.0).send(1, group=sub)
        time.sleep(3)  # rank 1 waits for a message that does not come: timeout
    else:
        with no_unpickling() as hits:
            td = nested(0.0)
            res["recv_tag"] = td.recv(0)
            res["nested"] = dump(td)
            ls = lazy(0.0)
            ls.recv(0)
            res["lazy_root"] = dump(ls)
            ln = TensorDict({"ls": lazy(0.0)}, [2, 2])
            ln.recv(0)
            res["lazy_nested"] = dump(ln)
            td = nested(0.0)
            td.irecv(0, init_tag=10)
            res["irecv"] = dump(td)
            td = nested(0.0)
            futures = td.irecv(0, init_tag=20, pseudo_rand=True, return_premature=True)
            res["premature_before"] = dump(td)
            for f in futures:
                f.wait()
            res["premature_after"] = dump(td)
            remote = TensorDict.from_remote_init(src=0)
            res["remote"] = [dump(remote), remote.is_consolidated()]
            ptr = remote["obs"].data_ptr()
            remote.recv(0)
            res["remote_again"] = [dump(remote), remote["obs"].data_ptr() == ptr]
            remote_lazy = TensorDict.from_remote_init(src=0)
            res["remote_lazy"] = dump(remote_lazy)
            templates = {
                "bad_shape": nested(0.0, rows=3),
                "bad_dtype": nested(0.0).set("obs", torch.zeros(2, 3, dtype=torch.float64)),
                "bad_keys": nested(0.0).exclude(("n", "done")).set("extra", torch.zeros(2)),
                "bad_kind": nested(0.0).set("label", torch.zeros(2)),
            }
            for name, template in templates.items():
                before = dump(template)
                res[name] = [call(lambda t=template: t.recv(0)), dump(template) == before]
            td = nested(0.0)
            td.recv(0)
            res["after_mismatch"] = dump(td)
            res["bad_recv"] = call(lambda: nested(0.0).recv(0))
            td = nested(0.0)
            td.recv(0)
            res["after_bad"] = dump(td)
            big = many_leaves(1000, -1.0)
            with count_messages() as received:
                big.recv(0)
            res["many_messages"] = received[0]
            wide = wide_leaves(0.0)
            leaf_a = wide["a"]
            with count_messages() as received:
                wide.recv(0)
            res["wide"] = [received[0], dump_sums(wide), wide["a"] is leaf_a]
            pieces = many_leaves(512, -1.0, size=4096)
            with count_messages() as received:
                pieces.recv(0)
            res["pieces_messages"] = received[0]
            res["pieces"] = all(pieces[f"k{i}"].eq(float(i)).all().item() for i in range(512))
            res["wide_remote"] = dump_sums(TensorDict.from_remote_init(src=0))
            res["many"] = all(big[f"k{i}"].eq(float(i)).all().item() for i in range(1000))
            sub = dist.new_group([0, 1])
            td = nested(0.0)
            td.recv(group=sub, group_src=0)
            res["group_src"] = dump(td)
            td = nested(0.0)
            td.recv(0, group=sub)
            res["group_global"] = dump(td)
            res["timeout"] = call(lambda: nested(0.0).recv(0, timeout=1.0))
            # gloo closes the connection to a peer after a timeout: later calls say so.
            res["after_timeout"] = call(lambda: nested(0.0).recv(0, timeout=5.0))
        res["unpickled"] = hits
    res["peer"] = peer
    return res


def scenario_raw_group(rank: int, world: int) -> dict[str, Any]:
    """group_dst/group_src over a ProcessGroupGloo never registered with c10d."""
    port = int(os.environ["TD_RAW_PORT"])
    store = dist.TCPStore("127.0.0.1", port, 2, rank == 0, timeout=datetime.timedelta(seconds=30))
    pg = dist.ProcessGroupGloo(
        dist.PrefixStore("raw", store), rank, 2, datetime.timedelta(seconds=PG_TIMEOUT)
    )
    res: dict[str, Any] = {}
    if rank == 1:
        nested(1.0).send(group=pg, group_dst=0)
        nested(2.0).isend(group=pg, group_dst=0)
        nested(3.0).init_remote(group=pg, group_dst=0)
    else:
        td = nested(0.0)
        td.recv(group=pg, group_src=1)
        res["recv"] = dump(td)
        td = nested(0.0)
        for f in td.irecv(group=pg, group_src=1, return_premature=True):
            f.wait()
        res["irecv"] = dump(td)
        res["remote"] = dump(TensorDict.from_remote_init(group=pg, group_src=1))
    pg.barrier().wait()
    return res


def scenario_dead_peer(rank: int, world: int) -> dict[str, Any]:
    if rank == 1:
        time.sleep(1.0)
        os._exit(3)  # dies without sending
    res = {"recv": call(lambda: nested(0.0).recv(1))}
    res["collective"] = call(lambda: nested(0.0).all_reduce())
    return res


def scenario_collectives(rank: int, world: int) -> dict[str, Any]:
    res: dict[str, Any] = {}
    with no_unpickling() as hits:
        # broadcast from the last rank (dst != 0), no template on the receivers
        src = world - 1
        out = (nested(5.0) if rank == src else TensorDict()).broadcast(src=src)
        res["broadcast"] = [dump(out), out.is_consolidated()]
        out = (lazy(6.0) if rank == src else TensorDict()).broadcast(src)
        res["broadcast_lazy"] = dump(out)
        # scatter from the last rank: each rank gets its own tensordict, of its own shape
        from tensordict.distributed import td_scatter

        parts = [nested(float(10 + r), rows=r + 1) for r in range(world)] if rank == src else None
        out = td_scatter(TensorDict(), src, parts)
        res["scatter"] = [dump(out), out.is_consolidated() or rank == src]
        res["scatter_bad"] = call(
            lambda: td_scatter(TensorDict(), src, [] if rank == src else None)
        )
        # the same through the reference's method form: TensorDict.scatter(src, tensordicts)
        out = TensorDict().scatter(src=src, tensordicts=parts)
        res["scatter_method"] = dump(out)
        # all_gather of tensordicts of different structures
        mine = nested(float(rank), rows=rank + 1)
        res["all_gather"] = [dump(t) for t in mine.all_gather()]
        # all_reduce: default buckets, small buckets, async, several ops
        td = nested(float(rank + 1)).exclude(("n", "done"))
        td.all_reduce()
        res["all_reduce_sum"] = dump(td)
        td = nested(float(rank + 1)).exclude(("n", "done"))
        td.all_reduce(op=dist.ReduceOp.MAX, bucket_bytes=8)
        res["all_reduce_max_small_buckets"] = dump(td)
        td = nested(float(rank + 1)).exclude(("n", "done")).consolidate()
        ptr = td["obs"].data_ptr()
        futures = td.all_reduce(op=dist.ReduceOp.PRODUCT, async_op=True)
        for f in futures:
            f.wait()
        res["all_reduce_async"] = [dump(td), td["obs"].data_ptr() == ptr]
        ls = lazy(float(rank + 1))
        ls.all_reduce()
        res["all_reduce_lazy"] = dump(ls)
        # reduce onto a rank other than 0, sync and async
        dst = 1
        td = nested(float(rank + 1)).exclude(("n", "done"))
        td.reduce(dst)
        res["reduce"] = dump(td)
        td = nested(float(rank + 1)).exclude(("n", "done"))
        futures = td.reduce(dst, async_op=True, return_premature=True, bucket_bytes=16)
        for f in futures:
            f.wait()
        res["reduce_async"] = dump(td)
        # a mismatch: every rank raises, nothing hangs, nothing changes
        td = nested(1.0).exclude(("n", "done"))
        if rank == world - 1:
            td["obs"] = torch.ones(2, 4)
        before = dump(td)
        res["reduce_mismatch"] = [call(lambda: td.all_reduce()), dump(td) == before]
        # a rank that cannot encode its tensordict: everybody raises
        bad = nested(0.0)
        if rank == 0:
            bad.set_non_tensor("label", {1, 2})
        res["gather_bad"] = call(lambda: bad.all_gather())
        res["bcast_bad"] = call(lambda: (bad if rank == 0 else TensorDict()).broadcast(0))
        # subgroups: members only; the others skip
        members = [0, world - 1]
        sub = dist.new_group(members)
        if rank in members:
            out = (nested(9.0) if rank == world - 1 else TensorDict()).broadcast(
                world - 1, group=sub
            )
            res["sub_broadcast"] = dump(out)
            td = nested(float(rank + 1)).exclude(("n", "done"))
            td.all_reduce(group=sub)
            res["sub_all_reduce"] = dump(td)
            res["sub_gather"] = [dump(t) for t in nested(float(rank)).all_gather(group=sub)]
            if rank == 0:
                nested(4.0).send(world - 1, group=sub)
            else:
                t = nested(0.0)
                t.recv(0, group=sub)
                res["sub_send"] = dump(t)
        # the group still works after the errors
        td = nested(float(rank + 1)).exclude(("n", "done"))
        td.all_reduce()
        res["again"] = dump(td)
        odd = (
            TensorDict({"x": torch.ones(1, 2)}, [1, 2])
            if rank == 0
            else TensorDict({"x": torch.ones(2)}, [2])
        )
        odd.all_reduce()
        res["same_numel"] = odd["x"].flatten().tolist()
        big = many_leaves(1000, float(rank))
        collectives = ("all_reduce", "all_gather", "all_gather_into_tensor", "broadcast")
        with count_messages(*collectives) as calls:
            big.all_reduce()
        res["many_calls"] = calls[0]
        # leaves to pack, 9 MiB in all: reduced in buckets of about 4 MiB
        wide = TensorDict({k: torch.full((3 << 18,), float(rank + i)) for i, k in enumerate("abc")})
        with count_messages(*collectives) as calls:
            wide.all_reduce()
        res["wide"] = [calls[0], [wide[k].unique().tolist() for k in "abc"]]
        # the same leaves consolidated on one rank only: the same buckets everywhere
        mixed = TensorDict({k: torch.full((3 << 18,), float(rank + i)) for i, k in enumerate("ab")})
        if rank == 0:
            mixed = mixed.consolidate()
        mixed.all_reduce()
        res["mixed"] = [mixed[k].unique().tolist() for k in "ab"]
        total = sum(range(world))
        res["many"] = all(big[f"k{i}"].eq(total + world * i).all().item() for i in range(1000))
        # the same tensordict again (6 packed buckets of 2 leaves): what the first call
        # worked out is reused, and worked out again when a leaf is replaced, given
        # other memory in place, or moved to another key
        kept = many_leaves(12, float(rank), size=1024)
        steps = []
        for change in KEPT_CHANGES:
            if change == "replace":
                kept["k1"] = torch.full((1024,), float(rank))
            elif change == "memory":
                kept["k2"].data = torch.full((1024,), float(rank))
            elif change == "rename":
                kept.rename_key_("k3", "z3")
            kept.all_reduce(bucket_bytes=8 << 10)
            steps.append({k: v.unique().tolist() for k, v in kept.items()})
        res["kept"] = steps
    res["unpickled"] = hits
    return res


def scenario_tensorclass(rank: int, world: int) -> dict[str, Any]:
    from tensordict import tensorclass

    @tensorclass
    class Pair:
        a: torch.Tensor
        b: torch.Tensor

    globals()["Pair"] = Pair
    Pair.__module__ = __name__
    Pair.__qualname__ = "Pair"
    res: dict[str, Any] = {}
    if rank == 0:
        Pair(a=torch.ones(3), b=torch.zeros(3, 2), batch_size=[3]).init_remote(dst=1)
    else:
        got = TensorDict.from_remote_init(src=0)
        res["type"] = type(got).__name__
        res["a"] = got.a.tolist()
    out = (
        Pair(a=torch.ones(2), b=torch.ones(2), batch_size=[2]) if rank == 0 else TensorDict()
    ).broadcast(0)
    res["broadcast_type"] = type(out).__name__
    # the all_gather and scatter hooks give tensordicts back (as the reference does)
    from tensordict.distributed import td_all_gather, td_scatter

    mine = Pair(a=torch.full((2,), float(rank)), b=torch.zeros(2), batch_size=[2])
    res["all_gather"] = [[type(t).__name__, t["a"].tolist()] for t in td_all_gather(mine)]

    parts = [Pair(a=torch.full((1,), float(r)), b=torch.zeros(1), batch_size=[1]) for r in (0, 1)]
    got = td_scatter(mine, 0, parts if rank == 0 else None)
    res["scatter"] = [type(got).__name__, got["a"].tolist()]
    return res


def scenario_nccl(rank: int, world: int) -> dict[str, Any]:
    """The same calls over nccl, one CUDA device per rank (buffers on the device)."""
    device = torch.device("cuda", rank)
    res: dict[str, Any] = {}
    if rank == 0:
        nested(1.0).to(device).send(1)
        nested(2.0).to(device).init_remote(dst=1)
    else:
        td = nested(0.0).to(device)
        td.recv(0)
        res["recv"] = dump(td.cpu())
        remote = TensorDict.from_remote_init(src=0, device=device)
        res["remote"] = [dump(remote.cpu()), remote["obs"].device.type]
    td = nested(float(rank + 1)).exclude(("n", "done")).to(device)
    td.all_reduce()
    res["all_reduce"] = dump(td.cpu())
    return res


def scenario_bad_peers(rank: int, world: int) -> dict[str, Any]:
    """Peers that cannot answer (outside the group, this rank itself) and broadcast into
    templates (one that does not fit, one that does, an empty one)."""
    res: dict[str, Any] = {}
    td = nested(1.0)
    before = dump(td)
    res["send_outside"] = call(lambda: td.send(world + 3))
    res["isend_outside"] = call(lambda: td.isend(-1))
    res["recv_outside"] = call(lambda: td.recv(world))
    res["send_self"] = call(lambda: td.send(rank))
    res["recv_self"] = call(lambda: td.recv(rank))
    res["remote_self"] = call(lambda: td.init_remote(dst=rank))
    sub = dist.new_group(list(range(world)))
    res["group_outside"] = call(lambda: td.send(group=sub, group_dst=world))
    res["group_self"] = call(lambda: td.recv(group=sub, group_src=rank))
    res["unchanged"] = dump(td) == before
    # broadcast from rank 0 into templates on the others
    templates = [
        nested(-1.0, rows=3),
        nested(-1.0).set("obs", torch.zeros(2, 3, dtype=torch.int64)),
    ]
    for name, template in zip(("bcast_bad_shape", "bcast_bad_dtype"), templates):
        mine = nested(2.0) if rank == 0 else template
        kept = dump(mine)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            result = call(lambda m=mine: dump(m.broadcast(0)))
        res[name] = [result, dump(mine) == kept, [str(w.message) for w in seen]]
    mine = nested(3.0) if rank == 0 else nested(-1.0)
    obs = mine["obs"]
    out = mine.broadcast(0)
    res["bcast_template"] = [dump(mine), out is mine, mine["obs"] is obs]
    res["bcast_empty"] = dump((nested(4.0) if rank == 0 else TensorDict()).broadcast(0))
    return res


SCENARIOS = {
    "bad_peers": scenario_bad_peers,
    "nccl": scenario_nccl,
    "p2p": scenario_p2p,
    "raw_group": scenario_raw_group,
    "dead_peer": scenario_dead_peer,
    "collectives": scenario_collectives,
    "tensorclass": scenario_tensorclass,
}


def main(scenario: str, rank: int, world: int, port: int, out_dir: str) -> None:
    torch.set_num_threads(1)
    if scenario == "raw_group":
        os.environ["TD_RAW_PORT"] = str(port)
        res = SCENARIOS[scenario](rank, world)
        Path(out_dir, f"{scenario}-rank{rank}.json").write_text(json.dumps(res))
        return
    if scenario == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl" if scenario == "nccl" else "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=PG_TIMEOUT),
    )
    res = SCENARIOS[scenario](rank, world)
    Path(out_dir, f"{scenario}-rank{rank}.json").write_text(json.dumps(res))
    if scenario in ("dead_peer", "p2p"):
        os._exit(0)  # the connection is broken (dead rank, timeout): do not wait
    dist.barrier()  # leave together
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
