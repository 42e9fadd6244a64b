"""Collectives: ``broadcast``, ``all_gather`` (whole tensordicts, structure included) and
``reduce``, ``all_reduce`` (leaves combined in place).

``broadcast`` and ``all_gather`` move each tensordict as a header, its JSON description
and one data buffer (three collectives in all, whatever the number of leaves); a rank
that cannot encode its tensordict says so in its header and every rank raises.

``reduce`` and ``all_reduce`` first compare a 32-byte fingerprint of every rank's tensor
leaves (keys, dtypes, numbers of elements) with one small ``all_gather``: ranks whose tensordicts
differ would otherwise hand the backend buffers of different sizes, which gloo answers
by aborting the process. On a mismatch every rank raises ``ValueError`` naming the
differences. Then the leaves go in buckets of one dtype and device, of about 4 MiB
(``bucket_bytes`` sets the size; the buckets depend on dtypes and sizes only, so every
rank launches the same collectives): a bucket whose leaves sit back to back in memory
(a consolidated tensordict, a large leaf) is reduced where it is; others are packed into
one flat tensor, reduced and copied back, packing, reducing and copying overlapping. A
blocking call copies a bucket back once :data:`IN_FLIGHT` later ones are launched, so
that a few pooled buffers, warm in the cache, carry every bucket.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import torch

from tensordict import _wire
from tensordict._kinds import lazy_members as _lazy_members
from tensordict.distributed import _buffers, _message, _peers
from tensordict.distributed._peers import run, wait

_Path = tuple[Any, ...]


def _dist() -> Any:
    import torch.distributed as dist

    return dist


def _is_member(group: Any) -> bool:
    dist = _dist()
    return group is not dist.GroupMember.NON_GROUP_MEMBER


def _check_rank_in(rank: Any, group: Any, name: str, what: str) -> int:
    if isinstance(rank, bool) or not hasattr(rank, "__index__"):
        raise TypeError(f"{what}: {name} must be an int (global) rank, got {rank!r}.")
    rank = int(rank)
    ranks = _peers.group_ranks(group)
    if rank not in ranks:
        raise ValueError(
            f"{what}: {name}={rank} is not a rank of the process group (its global ranks "
            f"are {ranks}); {name} is a global rank, as for torch.distributed."
        )
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

    The other ranks need no template: they get a new tensordict of ``src``'s structure
    (nested, lazy stacks, JSON non-tensor values, tensorclass instances whose module
    they imported), consolidated on ``device`` (default: CPU for gloo, CUDA for nccl).
    Their own tensordict is not used. ``src`` gets its tensordict consolidated (itself
    if it is already). Three collectives whatever the number of leaves.

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
    return _message.unpack(meta, data)


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


# ---------------------------------------------------------------------- reductions
def _tensor_leaves(td: Any, path: _Path = ()) -> Iterator[tuple[_Path, torch.Tensor]]:
    """``(path, tensor)`` of every tensor leaf, keys sorted, lazy-stack members by index
    (the stored tensors themselves, so that reductions write into them)."""
    members = _lazy_members(td)
    if members is not None:
        for i, member in enumerate(members):
            yield from _tensor_leaves(member, path + (i,))
        return
    store = td._tensordict
    for key in sorted(store):
        value = store[key]
        if isinstance(value, torch.Tensor):
            yield path + (key,), value
        elif hasattr(value, "_tensordict") or _lazy_members(value) is not None:
            yield from _tensor_leaves(value, path + (key,))


def _signature(leaves: list[tuple[_Path, torch.Tensor]]) -> list[Any]:
    """What ranks must agree on: each leaf's key, dtype and number of elements (the
    reduction is element-wise in memory order, so shapes may differ, e.g. ``(1, 2)`` and
    ``(2,)``, as with ``torch.distributed`` itself)."""
    return [[list(p), str(t.dtype), t.numel()] for p, t in leaves]


def _check_same_leaves(
    leaves: list[tuple[_Path, torch.Tensor]], group: Any, what: str, limit: Any
) -> None:
    """All ranks hold the same tensor leaves, or every rank raises ``ValueError``."""
    dist = _dist()
    dev = _peers.comm_device(group)
    ranks = _peers.group_ranks(group)
    blob = json.dumps(_signature(leaves), separators=(",", ":")).encode()
    digest = hashlib.sha256(blob).digest()
    mine = torch.frombuffer(bytearray(digest), dtype=torch.int64).to(dev)
    prints = [torch.empty_like(mine) for _ in ranks]
    run(lambda: dist.all_gather(prints, mine, group=group, async_op=True), f"{what} (check)", limit)
    if all(torch.equal(p, prints[0]) for p in prints):
        return
    # Rare path: exchange the signatures themselves to say what differs.
    sizes = [torch.empty(1, dtype=torch.int64, device=dev) for _ in ranks]
    own = torch.tensor([len(blob)], dtype=torch.int64, device=dev)
    run(lambda: dist.all_gather(sizes, own, group=group, async_op=True), f"{what} (check)", limit)
    longest = max(int(s) for s in sizes)
    texts = [torch.empty(longest, dtype=torch.uint8, device=dev) for _ in ranks]
    padded = _wire.bytes_tensor(blob, dev, longest)
    run(
        lambda: dist.all_gather(texts, padded, group=group, async_op=True), f"{what} (check)", limit
    )
    sigs = [
        {tuple(p): (d, s) for p, d, s in json.loads(_wire.tensor_bytes(t[: int(n)]))}
        for t, n in zip(texts, sizes)
    ]
    problems = []
    for r, sig in zip(ranks[1:], sigs[1:]):
        for path in sorted(set(sigs[0]) | set(sig), key=str):
            a, b = sigs[0].get(path), sig.get(path)
            if a != b:
                problems.append(
                    f"{_fmt(path)}: rank {ranks[0]} has {_leaf(a)}, rank {r} {_leaf(b)}"
                )
    raise ValueError(
        f"{what}: the ranks' tensordicts differ (keys, dtypes and sizes of the tensor "
        f"leaves must be the same on every rank); nothing was reduced. {_wire.problems_text(problems)}"
    )


def _fmt(path: _Path) -> str:
    if all(isinstance(p, str) for p in path):
        return repr(path[0] if len(path) == 1 else path)
    return "/".join(p if isinstance(p, str) else f"[{p}]" for p in path)


def _leaf(entry: Any) -> str:
    if entry is None:
        return "no such leaf"
    return f"dtype {entry[0].removeprefix('torch.')} and {entry[1]} elements"


def _span(tensors: list[torch.Tensor]) -> torch.Tensor | None:
    """One flat view covering ``tensors`` when they are contiguous and back to back in
    one storage, in order (a consolidated tensordict), else ``None``."""
    first = tensors[0]
    storage = first.untyped_storage().data_ptr()
    pos = first.storage_offset()
    for t in tensors:
        if (
            not t.is_contiguous()
            or t.untyped_storage().data_ptr() != storage
            or t.storage_offset() != pos
        ):
            return None
        pos += t.numel()
    return first.detach().as_strided((pos - first.storage_offset(),), (1,))


#: The default bucket size: packing one bucket, reducing the previous one and copying
#: back the one before overlap (and stay in cache), where one bucket of everything would
#: do them one after the other.
PIPELINE_BYTES = 4 << 20

#: A blocking reduction has at most this many packed buckets launched and not yet copied
#: back: the next bucket is packed into the buffer the oldest one gave back, so that
#: ``IN_FLIGHT + 1`` pooled buffers (``_buffers.MAX_BUFFERS`` are kept) carry every
#: bucket, instead of one fresh buffer per bucket. 1,000 leaves of 64 KiB on 2 cores:
#: 3 measured best (2 and 4 close; all of them launched before any is copied back: 10%
#: slower).
IN_FLIGHT = 3


def _buckets(leaves: list[torch.Tensor], bucket_bytes: int | None) -> list[list[torch.Tensor]]:
    """The leaves in buckets of one dtype and device, of at most ``bucket_bytes`` (default
    :data:`PIPELINE_BYTES`; a larger leaf is a bucket of its own). The buckets depend only
    on the leaves' dtypes and sizes, which every rank checked are the same, never on their
    memory layout: every rank launches the same collectives."""
    if bucket_bytes is not None and (isinstance(bucket_bytes, bool) or bucket_bytes <= 0):
        raise ValueError(f"bucket_bytes must be a positive number of bytes, got {bucket_bytes!r}.")
    groups: dict[tuple[torch.device, torch.dtype], list[torch.Tensor]] = {}
    for t in leaves:
        if t.layout != torch.strided:
            raise TypeError(f"reductions need strided tensors, got a {t.layout} leaf.")
        groups.setdefault((t.device, t.dtype), []).append(t)
    out = []
    for members in groups.values():
        limit = PIPELINE_BYTES if bucket_bytes is None else bucket_bytes
        bucket: list[torch.Tensor] = []
        size = 0
        for t in members:
            nbytes = t.numel() * t.element_size()
            if bucket and limit is not None and size + nbytes > limit:
                out.append(bucket)
                bucket, size = [], 0
            bucket.append(t)
            size += nbytes
        if bucket:
            out.append(bucket)
    return out


_Launched = tuple[Any, Callable[[], None] | None]


def _reduce_buckets(
    td: Any,
    what: str,
    group: Any,
    bucket_bytes: int | None,
    timeout: Any,
    launch: Callable[[torch.Tensor], Any],
    write_back: bool,
    blocking: bool,
) -> list[_Launched]:
    """Launch the (async) collective on every bucket. ``blocking``: complete each packed
    bucket once :data:`IN_FLIGHT` later ones are launched, and the rest at the end, and
    return ``[]``; else return ``[(work, finish or None)]`` for every bucket."""
    _peers.require_initialised(what, group)
    limit = _peers.as_timedelta(timeout)
    inner, _ = _message.unwrap(td)
    leaves = list(_tensor_leaves(inner))
    _check_same_leaves(leaves, group, what, limit)
    launched: list[_Launched] = []
    with torch.no_grad():
        for bucket in _buckets([t for _, t in leaves], bucket_bytes):
            flat = _span(bucket)
            finish = None
            if flat is None:
                dtype, device = bucket[0].dtype, bucket[0].device
                n = sum(t.numel() for t in bucket)
                raw = _buffers.take(n * bucket[0].element_size(), device)
                flat = raw.view(dtype)
                torch.cat([t.detach().reshape(-1) for t in bucket], out=flat)
                finish = _copier(flat, bucket, raw, write_back)
            try:
                work = launch(flat)
            except RuntimeError as err:
                raise _peers.translate(err, what, limit) from err
            launched.append((work, finish))
            if blocking and sum(f is not None for _, f in launched) > IN_FLIGHT:
                _complete(launched, what, limit, first_packed=True)
    if blocking:
        _complete(launched, what, limit)
    return launched


def _copier(
    flat: torch.Tensor, bucket: list[torch.Tensor], raw: torch.Tensor, write_back: bool
) -> Callable[[], None]:
    """Copy a reduced flat bucket back into its leaves (when ``write_back``) and give
    its buffer back to the pool."""

    def finish() -> None:
        if write_back:
            chunks = flat.split([t.numel() for t in bucket])
            _wire.copy_pairs([(t, c.view(t.shape)) for t, c in zip(bucket, chunks)])
        _buffers.give(raw)

    return finish


def _complete(launched: list[_Launched], what: str, limit: Any, first_packed: bool = False) -> None:
    """Wait for the launched buckets and copy them back, removing them from
    ``launched``: all of them, or (``first_packed``) up to the first packed one. On an
    error, waits for all of them first, then raises the first error."""
    error: Exception | None = None
    while launched:
        work, finish = launched.pop(0)
        try:
            wait(work, what, limit)
            if finish is not None:
                finish()
        except Exception as err:
            error = error or err
            first_packed = False  # wait for every bucket before raising
        if first_packed and finish is not None:
            return
    if error is not None:
        raise error


def _futures(launched: list[_Launched]) -> list[Any]:
    out = []
    for work, finish in launched:
        if finish is None:
            out.append(work)
        else:
            out.append(work.get_future().then(lambda _, finish=finish: finish()))
    return out


def td_all_reduce(
    td: Any,
    op: Any = None,
    *,
    group: Any = None,
    async_op: bool = False,
    bucket_bytes: int | None = None,
    timeout: float | datetime.timedelta | None = None,
) -> list[Any] | None:
    """Combine every rank's tensor leaves with ``op`` (default ``SUM``), in place, on
    every rank. Every rank must hold the same tensor leaves (checked first; non-tensor
    values are left alone).

    One collective per bucket of one dtype and device, of at most ``bucket_bytes``
    (default 4 MiB, so that packing, reducing and copying back overlap); a bucket whose
    leaves are back to back in memory (a consolidated tensordict, a large leaf) is reduced
    where it is, without copies. With ``async_op=True`` returns the works/futures to ``wait()`` on
    (the leaf check before it is synchronous); otherwise returns ``None``.
    """
    dist = _dist()
    what = "TensorDict.all_reduce"
    op = dist.ReduceOp.SUM if op is None else op
    if not _is_member(group):
        return [] if async_op else None
    launched = _reduce_buckets(
        td,
        what,
        group,
        bucket_bytes,
        timeout,
        lambda flat: dist.all_reduce(flat, op=op, group=group, async_op=True),
        True,
        not async_op,
    )
    return _futures(launched) if async_op else None


def td_reduce(
    td: Any,
    dst: int,
    op: Any = None,
    async_op: bool = False,
    return_premature: bool = False,
    group: Any = None,
    *,
    bucket_bytes: int | None = None,
    timeout: float | datetime.timedelta | None = None,
) -> list[Any] | None:
    """Combine every rank's tensor leaves with ``op`` (default ``SUM``) into ``dst``'s
    tensordict, in place (``dst`` is a global rank). Checks and buckets as
    :func:`td_all_reduce`. With ``async_op=True`` and ``return_premature=True`` returns
    the works/futures to ``wait()`` on; otherwise waits and returns ``None``.
    """
    dist = _dist()
    what = "TensorDict.reduce"
    op = dist.ReduceOp.SUM if op is None else op
    if not _is_member(group):
        return None
    _peers.require_initialised(what, group)
    dst = _check_rank_in(dst, group, "dst", what)
    launched = _reduce_buckets(
        td,
        what,
        group,
        bucket_bytes,
        timeout,
        lambda flat: dist.reduce(flat, dst=dst, op=op, group=group, async_op=True),
        dist.get_rank() == dst,
        not (async_op and return_premature),
    )
    return _futures(launched) if async_op and return_premature else None
