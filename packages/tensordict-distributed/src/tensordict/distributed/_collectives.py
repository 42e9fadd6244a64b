"""Collectives that move whole tensordicts, structure included: ``broadcast``,
``all_gather`` and ``scatter`` (``reduce``/``all_reduce`` are in :mod:`._reductions`).

``broadcast`` and ``all_gather`` move each tensordict as a header, its JSON description
and one data buffer (three collectives in all, whatever the number of leaves); a rank
that cannot encode its tensordict says so in its header and every rank raises.
"""

from __future__ import annotations

import datetime
import warnings
from typing import Any

import torch

from tensordict._plugins.api import wire as _wire
from tensordict.distributed import _message, _peers
from tensordict.distributed._peers import run


def _dist() -> Any:
    import torch.distributed as dist

    return dist


def _is_member(group: Any) -> bool:
    dist = _dist()
    return group is not dist.GroupMember.NON_GROUP_MEMBER


def _check_rank_in(rank: Any, group: Any, name: str, what: str) -> int:
    """``rank`` as an int, after checking that it is a global rank of ``group``."""
    rank = _peers.rank_arg(rank, name, what)
    _peers.check_rank_in(rank, group, name, what)
    return rank


# ---------------------------------------------------------------------- broadcast
def td_broadcast(
    td: Any,
    src: int,
    *,
    group: Any = None,
    device: torch.device | str | None = None,
    timeout: float | datetime.timedelta | None = None,
    _tensorclass_type: str | None = None,
) -> Any:
    """Send ``src``'s tensordict to every rank of ``group``; every rank calls it.

    The other ranks need no template: called on an empty tensordict, they get a new
    tensordict of ``src``'s structure (nested, lazy stacks, JSON non-tensor values,
    tensorclass instances whose module they imported), consolidated on ``device``
    (default: CPU for gloo, CUDA for nccl). Called on a tensordict with entries (a
    template, as for ``recv``), they receive into it in place and return it when its keys,
    shapes, dtypes and batch sizes are ``src``'s (the reference library leaves it as it
    was, so code that ignores the result reads stale values); when they are not, a
    ``UserWarning`` names each difference, the template is left unchanged and a new
    tensordict is returned, as in the reference. ``src`` gets its tensordict consolidated
    (itself if it is already). Three collectives whatever the number of leaves.

    .. code-block:: python

        td = TensorDict(a=torch.ones(3)) if rank == 0 else TensorDict()
        td = td.broadcast(src=0)  # every rank now holds a == [1, 1, 1]
    """
    what = "TensorDict.broadcast"
    _peers.require_initialised(what, group)
    dist = _dist()
    if not _is_member(group):
        return None
    src = _check_rank_in(src, group, "src", what)
    limit = _peers.as_timedelta(timeout)
    dev = _peers.comm_device(group)
    target = None if device is None else torch.device(device)
    me = dist.get_rank()

    def bcast(t: torch.Tensor, part: str) -> None:
        run(
            lambda: dist.broadcast(t, src=src, group=group, async_op=True),
            f"{what} ({part})",
            limit,
        )

    if me == src:
        try:
            desc, data, meta = _message.pack(td, target or dev, _tensorclass_type)
        except Exception as err:
            text = _peers.error_bytes(err)
            bcast(_peers.header(_peers.STATUS_ERROR, len(text), 0, dev), "header")
            bcast(_wire.bytes_tensor(text, dev), "error")
            raise
        on_wire = data if data.device == dev else data.to(dev)
        bcast(_peers.header(_peers.STATUS_OK, len(desc), data.numel(), dev), "header")
        bcast(_wire.bytes_tensor(desc, dev), "description")
        if data.numel():
            bcast(on_wire, "data")
        return _message.unpack(meta, data)
    head = _peers.empty_header(dev)
    bcast(head, "header")
    status, desc_len, data_len = _peers.read_header(head, f"rank {src}")
    desc_t = torch.empty(desc_len, dtype=torch.uint8, device=dev)
    bcast(desc_t, "description")
    desc = _wire.tensor_bytes(desc_t)
    if status == _peers.STATUS_ERROR:
        raise _peers.RemoteError(
            f"{what}: the source rank {src} failed before sending: {desc.decode(errors='replace')}"
        )
    data = torch.empty(data_len, dtype=torch.uint8, device=dev)
    if data_len:
        bcast(data, "data")
    meta = _message.parse(desc, f"rank {src}")
    if target is not None and data.device != target:
        data = data.to(target)
    received = _message.unpack(meta, data)
    template, _ = _message.unwrap(td)
    if template is None or template.is_empty():
        return received
    return _into_template(td, template, received, f"{what} from rank {src}")


def _into_template(td: Any, template: Any, received: Any, what: str) -> Any:
    """Write ``received`` into ``template`` (``td``'s tensordict) in place when it fits
    and return ``td``; otherwise warn, leave ``template`` unchanged and return
    ``received`` (the reference library's result: a new tensordict)."""
    got, _ = _message.unwrap(received)
    problems = _wire.mismatches(template, got)
    if problems:
        warnings.warn(
            f"{what}: the received tensordict does not fit this rank's tensordict, which is "
            f"left unchanged; use the returned tensordict. {_wire.problems_text(problems)}",
            UserWarning,
            stacklevel=4,
        )
        return received
    _wire.write_into(template, got)
    return td


# ---------------------------------------------------------------------- scatter
def td_scatter(
    td: Any,
    src: int,
    tensordicts: list[Any] | None = None,
    *,
    group: Any = None,
    device: torch.device | str | None = None,
    timeout: float | datetime.timedelta | None = None,
) -> Any:
    """Give each rank of ``group`` its own tensordict from ``src``; every rank calls it.

    On ``src``, ``tensordicts`` holds one tensordict (or tensorclass instance) per rank of
    the group, in group rank order; each may have its own structure. Every rank returns
    its own: ``src`` the one at its position, the others a new tensordict received as
    with :meth:`~tensordict.TensorDict.from_remote_init` (consolidated on ``device``;
    no template needed, ``td`` itself is not used). Tensorclass instances come back as
    their tensordicts, as in the reference library. A bad ``tensordicts`` on ``src``
    raises there, and ``RemoteError`` on the other ranks.

    .. code-block:: python

        tds = [TensorDict(a=torch.full((3,), float(r))) for r in range(world)]
        mine = TensorDict().scatter(src=0, tensordicts=tds if rank == 0 else None)
        # mine["a"] == [rank, rank, rank] on every rank
    """
    from tensordict.distributed import _p2p

    what = "TensorDict.scatter"
    _peers.require_initialised(what, group)
    dist = _dist()
    if not _is_member(group):
        return None
    src = _check_rank_in(src, group, "src", what)
    limit = _peers.as_timedelta(timeout)
    ranks = _peers.group_ranks(group)
    me = dist.get_rank()
    if me != src:
        return _p2p.from_remote_init(src, group=group, device=device, timeout=timeout)
    others = [r for r in ranks if r != src]
    if tensordicts is None or len(tensordicts) != len(ranks):
        err = ValueError(
            f"{what}: on the source rank {src}, tensordicts must hold one tensordict per "
            f"rank of the group ({len(ranks)}), got "
            f"{'None' if tensordicts is None else len(tensordicts)}."
        )
        for r in others:
            ch = _peers.peer(r, None, group, ("dst", "group_dst"), what)
            _p2p.report_error(ch, _peers.tags(0, False), err, limit)
        raise err
    finishes = []
    failure: Exception | None = None
    for r in others:
        try:
            part = _message.unwrap(tensordicts[ranks.index(r)])[0]
            finishes.append(_p2p.post_send(part, r, group, what, limit))
        except Exception as err:  # reported to that rank; the others still get theirs
            failure = failure or err
    for finish in finishes:
        finish(limit)
    if failure is not None:
        raise failure
    return _message.unwrap(tensordicts[ranks.index(src)])[0]


# ---------------------------------------------------------------------- all_gather
def td_all_gather(
    td: Any, *, group: Any = None, timeout: float | datetime.timedelta | None = None
) -> list[Any]:
    """Every rank's tensordict, on every rank, in group rank order (own one included).

    The tensordicts may differ in structure. Each comes back consolidated and rebuilt
    from its description (no template, nothing unpickled); a tensorclass instance comes
    back as its tensordict, as in the reference library. Three ``all_gather`` calls
    whatever the number of leaves; buffers are padded to the largest.
    """
    what = "TensorDict.all_gather"
    _peers.require_initialised(what, group)
    dist = _dist()
    if not _is_member(group):
        return []
    limit = _peers.as_timedelta(timeout)
    dev = _peers.comm_device(group)
    ranks = _peers.group_ranks(group)
    size = len(ranks)

    def gather(t: torch.Tensor, part: str) -> list[torch.Tensor]:
        out = [torch.empty_like(t) for _ in range(size)]
        run(lambda: dist.all_gather(out, t, group=group, async_op=True), f"{what} ({part})", limit)
        return out

    local_error: Exception | None = None
    try:
        desc, data, _ = _message.pack(_message.unwrap(td)[0], dev)
    except Exception as err:
        local_error = err
        desc, data = _peers.error_bytes(err), torch.zeros(0, dtype=torch.uint8, device=dev)
    status = _peers.STATUS_OK if local_error is None else _peers.STATUS_ERROR
    heads = gather(_peers.header(status, len(desc), data.numel(), dev), "header")
    table = [_peers.read_header(h, f"rank {r}") for h, r in zip(heads, ranks)]
    desc_max = max(row[1] for row in table)
    descs = gather(_wire.bytes_tensor(desc, dev, desc_max), "description")
    failed = [(r, row[1]) for r, row in zip(ranks, table) if row[0] == _peers.STATUS_ERROR]
    if failed:
        if local_error is not None:
            raise local_error
        details = "; ".join(
            f"rank {r}: " + _wire.tensor_bytes(descs[ranks.index(r)][:n]).decode(errors="replace")
            for r, n in failed
        )
        raise _peers.RemoteError(f"{what}: other ranks failed before sending: {details}")
    data_max = max(row[2] for row in table)
    datas = gather(_wire.padded(data.to(dev), data_max), "data") if data_max else []
    out = []
    for i, (r, (_, n_desc, n_data)) in enumerate(zip(ranks, table)):
        meta = _message.parse(_wire.tensor_bytes(descs[i][:n_desc]), f"rank {r}")
        buffer = datas[i][:n_data] if datas else torch.zeros(0, dtype=torch.uint8, device=dev)
        out.append(_message.unpack(meta, buffer))
    return out
