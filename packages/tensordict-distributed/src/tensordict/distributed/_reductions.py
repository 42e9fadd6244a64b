"""Reductions: ``reduce`` and ``all_reduce`` combine every rank's tensor leaves in place.

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
that a few pooled buffers carry every bucket.

What a reduction works out about a tensordict's leaves (their signature, buckets and
flat views) is kept for the next reduction of the same leaves (:class:`_Plan`), so that
a repeated one (gradients at every step) only checks the leaves and copies.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import torch

from tensordict._plugins.api import lazy_members as _lazy_members
from tensordict._plugins.api import wire as _wire
from tensordict.distributed import _buffers, _message, _peers
from tensordict.distributed._collectives import _check_rank_in, _dist, _is_member
from tensordict.distributed._kept import Kept, layout_of
from tensordict.distributed._peers import run, wait

_Path = tuple[Any, ...]


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


def _check_same_leaves(plan: _Plan, group: Any, what: str, limit: Any) -> None:
    """All ranks hold the same tensor leaves (``plan``'s signature), or every rank raises
    ``ValueError``."""
    dist = _dist()
    dev = _peers.comm_device(group)
    ranks = _peers.group_ranks(group)
    blob, digest = plan.signature, plan.digest
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


class _Bucket:
    """Leaves reduced by one collective: in place when they are back to back in memory
    (``span``: one flat view of them), else packed into a pooled buffer, reduced and
    copied back. Flat views of contiguous leaves are made once, here."""

    __slots__ = ("leaves", "span", "sizes", "nbytes", "dtype", "device", "flat_leaves")

    def __init__(self, leaves: list[torch.Tensor]) -> None:
        first = leaves[0]
        self.leaves = leaves
        self.span = _span(leaves)
        self.sizes = [t.numel() for t in leaves]
        self.nbytes = sum(self.sizes) * first.element_size()
        self.dtype, self.device = first.dtype, first.device
        contiguous = all(t.is_contiguous() for t in leaves)
        self.flat_leaves = [t.detach().view(-1) for t in leaves] if contiguous else None

    def pack(self, flat: torch.Tensor) -> None:
        """Copy the leaves into ``flat`` (``numel`` of them all, of their dtype)."""
        sources = self.flat_leaves or [t.detach().reshape(-1) for t in self.leaves]
        torch.cat(sources, out=flat)

    def unpack(self, flat: torch.Tensor) -> None:
        """Copy ``flat`` back into the leaves."""
        chunks = flat.split(self.sizes)
        if self.flat_leaves is not None:
            _wire.copy_pairs(list(zip(self.flat_leaves, chunks)))
        else:
            _wire.copy_pairs([(t, c.view(t.shape)) for t, c in zip(self.leaves, chunks)])


class _Plan:
    """How a tensordict's leaves are reduced: their signature (what the ranks compare)
    and buckets. Kept for the next reduction of the same tensordict while its leaves are
    the same objects, under the same keys, with the same layouts (see :mod:`._kept`)."""

    __slots__ = ("paths", "tensors", "layouts", "bucket_bytes", "signature", "digest", "buckets")

    def __init__(self, leaves: list[tuple[_Path, torch.Tensor]], bucket_bytes: int | None):
        self.paths = [p for p, _ in leaves]
        self.tensors = [t for _, t in leaves]
        self.layouts = [layout_of(t) for t in self.tensors]
        self.bucket_bytes = bucket_bytes
        self.signature = json.dumps(_signature(leaves), separators=(",", ":")).encode()
        self.digest = hashlib.sha256(self.signature).digest()
        self.buckets = [_Bucket(b) for b in _buckets(self.tensors, bucket_bytes)]

    def fits(self, leaves: list[tuple[_Path, torch.Tensor]], bucket_bytes: int | None) -> bool:
        if bucket_bytes != self.bucket_bytes or len(leaves) != len(self.tensors):
            return False
        for (path, t), then_path, then, layout in zip(
            leaves, self.paths, self.tensors, self.layouts
        ):
            if t is not then or path != then_path or layout_of(t) != layout:
                return False
        return True


_PLANS: Kept[_Plan] = Kept()


def _plan_for(td: Any, bucket_bytes: int | None) -> _Plan:
    """The :class:`_Plan` of reducing ``td``'s leaves (the kept one when it still fits)."""
    leaves = list(_tensor_leaves(td))
    plan = _PLANS.get(td)
    if plan is None or not plan.fits(leaves, bucket_bytes):
        plan = _Plan(leaves, bucket_bytes)
        _PLANS.put(td, plan)
    return plan


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
    plan = _plan_for(_message.unwrap(td)[0], bucket_bytes)
    _check_same_leaves(plan, group, what, limit)
    launched: list[_Launched] = []
    with torch.no_grad():
        for bucket in plan.buckets:
            flat, finish = bucket.span, None
            if flat is None:
                raw = _buffers.take(bucket.nbytes, bucket.device)
                flat = raw.view(bucket.dtype)
                bucket.pack(flat)
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
    flat: torch.Tensor, bucket: _Bucket, raw: torch.Tensor, write_back: bool
) -> Callable[[], None]:
    """Copy a reduced flat bucket back into its leaves (when ``write_back``) and give
    its buffer back to the pool."""

    def finish() -> None:
        if write_back:
            bucket.unpack(flat)
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
