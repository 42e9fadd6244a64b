"""How the data of one point-to-point transfer is cut into messages, on both sides.

The data is one buffer, laid out by core's ``consolidate`` (:class:`~tensordict.
_consolidate.Packing`); it travels as a few parts, each one message:

* a leaf of at least :data:`LARGE_BYTES` is a part of its own, sent from its own memory
  and received straight into the receiver's leaf when that leaf can take it (no copy on
  either side);
* the other leaves are packed into the buffer, whose runs between large leaves are cut,
  at leaf boundaries, into pieces of about :data:`CHUNK_BYTES`. The sender fills each
  piece just before sending it, so that packing a piece overlaps the transfer of the
  previous ones; the receiver copies the leaves of each piece out as soon as it has
  arrived, while the next pieces are still on the way. One piece of everything would
  do the packing, the transfer and the copying out one after the other.

So the number of messages grows with the number of large leaves and with the number of
bytes (one per :data:`CHUNK_BYTES`), never with the number of small leaves. The
description lists each part's byte range (``"segments"``) unless the data is one part,
the whole buffer; the receiver checks the ranges (:func:`segments`) and that every leaf
lies inside one of them (:func:`by_segment`) before it writes anything.
"""

from __future__ import annotations

import bisect
from typing import Any, NamedTuple

import torch

#: Leaves of at least this many bytes travel as messages of their own, from their own
#: memory (no copy), and land straight in the receiver's leaf when it can take them; the
#: other leaves are packed into one buffer. A large leaf costs one message (tens of
#: microseconds) instead of two copies of its bytes.
LARGE_BYTES = 1 << 20

#: Packed bytes go in pieces of at most this size (cut at leaf boundaries), so that
#: packing and copying out overlap the transfer piece by piece. What is not overlapped
#: is packing the first piece and copying out the last one: smaller pieces shorten that
#: but cost more messages (on 2 cores, 2-16 MiB pieces measured alike, 1 MiB and less
#: slower; see benchmarks/README.md).
CHUNK_BYTES = 4 << 20

_Pair = tuple[torch.Tensor, torch.Tensor]


class Piece(NamedTuple):
    """One part of the data: the bytes ``[start, stop)`` of the buffer, which hold either
    one large leaf (``view``: its own memory, as ``uint8``) or the packed leaves
    ``leaves = (first, stop)`` (indices into the packing's leaves; ``None``: all of them,
    the whole buffer)."""

    start: int
    stop: int
    view: torch.Tensor | None
    leaves: tuple[int, int] | None


def cut(packing: Any, large: int | None, chunk: int | None) -> list[Piece]:
    """The parts of the buffer ``packing`` describes, in order: leaves of at least
    ``large`` bytes on their own, the others in pieces of at most ``chunk`` bytes (a
    leaf is never split; ``None``: no limit). One part of everything is the whole
    buffer (``leaves=None``).

    >>> from tensordict import TensorDict
    >>> from tensordict._wire.consolidate import Packing
    >>> td = TensorDict({k: torch.zeros(4) for k in "abcd"}, [])  # 16 bytes each
    >>> [(p.start, p.stop, p.leaves) for p in cut(Packing(td), None, 32)]
    [(0, 32, (0, 2)), (32, 64, (2, 4))]
    >>> [(p.start, p.stop, p.leaves) for p in cut(Packing(td), None, None)]
    [(0, 64, None)]
    """
    leaves = packing.plan.leaves
    big = {i for i, _, _ in packing.large_leaves(large)} if large is not None else set()
    out: list[Piece] = []
    run: list[int] = []  # [first, stop, start byte, stop byte] of the piece being built

    def flush() -> None:
        if run:
            out.append(Piece(run[2], run[3], None, (run[0], run[1])))
            run.clear()

    for i, (leaf, start) in enumerate(zip(leaves, packing.offsets())):
        stop = start + leaf.numel() * leaf.element_size()
        if i in big:
            flush()
            out.append(Piece(start, stop, leaf.detach().reshape(-1).view(torch.uint8), None))
        elif stop > start:
            if run and chunk is not None and stop - run[2] > chunk:
                flush()
            if run:
                run[1], run[3] = i + 1, stop
            else:
                run.extend((i, i + 1, start, stop))
    flush()
    if len(out) <= 1 and not big:  # one part: the whole buffer, gaps and tail included
        return [Piece(0, packing.nbytes, None, None)] if packing.nbytes else []
    return out


def described(pieces: list[Piece]) -> list[list[int]] | None:
    """The description's ``"segments"`` for ``pieces``: each part's byte range, or
    ``None`` when the data is one part, the whole buffer (or nothing)."""
    if not pieces or len(pieces) == 1 and pieces[0].view is None and pieces[0].leaves is None:
        return None
    return [[piece.start, piece.stop] for piece in pieces]


def segments(meta: dict[str, Any] | None, data_len: int) -> list[tuple[int, int]]:
    """The byte ranges of the parts the data arrives in: the description's
    ``"segments"``, checked, or the whole buffer.

    >>> segments({"segments": [[0, 16], [32, 48]]}, 48), segments({}, 8), segments(None, 0)
    ([(0, 16), (32, 48)], [(0, 8)], [])
    """
    raw = None if meta is None else meta.get("segments")
    if raw is None:
        return [(0, data_len)] if data_len else []
    out: list[tuple[int, int]] = []
    end = 0
    for item in raw if isinstance(raw, list) else [None]:
        ok = (
            isinstance(item, list)
            and len(item) == 2
            and all(type(v) is int for v in item)
            and end <= item[0] < item[1] <= data_len
        )
        if not ok:
            raise ValueError(
                f"the description's data segments {raw!r} do not fit {data_len} bytes "
                "(increasing [start, stop) byte ranges are expected)."
            )
        out.append((item[0], item[1]))
        end = item[1]
    return out


def by_segment(
    pairs: list[_Pair], ranges: list[tuple[int, int]], buffer: torch.Tensor
) -> list[list[_Pair]] | None:
    """The copies ``(destination, source)`` out of ``buffer`` grouped by the part that
    holds their source bytes (one list per range of ``ranges``), so that each part is
    copied out as soon as it has arrived; ``None`` when a source does not lie inside one
    part (the description places a leaf where no data arrives). Empty copies are dropped.

    >>> buf = torch.zeros(64, dtype=torch.uint8)
    >>> a, b = buf[0:16].view(torch.float32), buf[32:48].view(torch.float32)
    >>> groups = by_segment([(a, a), (b, b)], [(0, 16), (32, 64)], buf)
    >>> [len(g) for g in groups], by_segment([(b, b)], [(0, 16)], buf)
    ([1, 1], None)
    """
    starts = [a for a, _ in ranges]
    base = buffer.data_ptr()
    groups: list[list[_Pair]] = [[] for _ in ranges]
    for pair in pairs:
        src = pair[1]
        nbytes = src.numel() * src.element_size()
        if nbytes == 0:
            continue
        start = src.data_ptr() - base
        i = bisect.bisect_right(starts, start) - 1
        if i < 0 or start + nbytes > ranges[i][1]:
            return None
        groups[i].append(pair)
    return groups
