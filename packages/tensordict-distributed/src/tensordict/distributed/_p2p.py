"""Point to point: ``send``/``recv``, ``isend``/``irecv``, ``init_remote``/``from_remote_init``.

One transfer is a fixed-size header, the JSON description (core's consolidated
metadata: structure, shapes, dtypes, non-tensor values) and the data of one
consolidated buffer (see :mod:`._peers`), whatever the number of leaves. The data goes
in a few parts (see :mod:`._parts`): large leaves on their own, from and into their own
memory; small leaves packed, in pieces of a few MiB, each filled while the previous ones
travel and copied out on arrival while the next ones travel. A tensordict that is
consolidated already is sent from its own buffer; a receiver that is consolidated with
the same layout receives straight into its own buffer.

The receiver checks the description against its tensordict (keys, shapes, dtypes,
batch sizes, lazy-stack members) before the data arrives; data that does not fit is
received into scratch memory (so that both sides stay in step) and a ``ValueError``
names what differs. Nothing is written, nothing is unpickled. (A transfer cut off
midway, by a timeout or a peer that died, may leave the parts that had arrived written.)
"""

from __future__ import annotations

import datetime
from typing import Any

import torch

from tensordict._plugins.api import wire as _wire
from tensordict.distributed import _buffers, _message, _parts, _peers
from tensordict.distributed._peers import Channel, wait

_SEND_NAMES = ("dst", "group_dst")
_RECV_NAMES = ("src", "group_src")


class Transfer:
    """A transfer in flight, as returned by ``isend(return_early=True)`` and
    ``irecv(return_premature=True)``: call :meth:`wait` (each one) before using the data.

    ``wait(timeout=None)`` accepts seconds or a :class:`datetime.timedelta` (default: the
    process group's timeout) and raises the same clear errors as the blocking calls.
    """

    def __init__(self, finish: Any, what: str, timeout: datetime.timedelta | None) -> None:
        self._finish = finish
        self._what = what
        self._timeout = timeout
        self._done = False

    def wait(self, timeout: float | datetime.timedelta | None = None) -> bool:
        if not self._done:
            limit = _peers.as_timedelta(timeout) or self._timeout
            self._finish(limit)
            self._done = True
        return True

    def is_completed(self) -> bool:
        """Whether :meth:`wait` has returned."""
        return self._done

    def __repr__(self) -> str:
        return f"Transfer({self._what}, completed={self._done})"


# ---------------------------------------------------------------------- sending
def report_error(
    ch: Channel, tags: list[int], err: BaseException, timeout: datetime.timedelta | None
) -> None:
    """Tell the receiver of a transfer that the sender failed (it raises ``RemoteError``
    with ``err``'s message) instead of sending the data."""
    text = _peers.error_bytes(err)
    works = [
        ch.isend(_peers.header(_peers.STATUS_ERROR, len(text), 0, ch.device), tags[0]),
        ch.isend(_wire.bytes_tensor(text, ch.device), tags[1]),
    ]
    try:
        for work in works:
            wait(work, f"{ch.what} to {ch.label} (reporting an error)", timeout)
    except RuntimeError:
        pass  # the receiver may be gone; the original error is what matters


def post_send(obj: Any, dst: int, group: Any, what: str, timeout: datetime.timedelta | None) -> Any:
    """Post a transfer of ``obj`` to the global rank ``dst`` (tags 0-2); return the
    function that waits for it."""
    ch = _peers.peer(dst, None, group, _SEND_NAMES, what)
    return _post_send(obj, ch, _peers.tags(0, False), timeout)


def _post_send(
    obj: Any,
    ch: Channel,
    tags: list[int],
    timeout: datetime.timedelta | None,
    tensorclass_type: str | None = None,
) -> Any:
    """Post the messages of one transfer; return a function waiting for them.

    A tensordict that cannot be encoded (a value that is not JSON, a sparse leaf) is
    reported to the receiver, which raises too, and then raised here.
    """
    try:
        desc, parts, meta, pooled = _message.pack_parts(obj, ch.device, tensorclass_type)
    except Exception as err:
        report_error(ch, tags, err, timeout)
        raise
    head = _peers.header(_peers.STATUS_OK, len(desc), int(meta["nbytes"]), ch.device)
    desc_t = _wire.bytes_tensor(desc, ch.device)
    keep = [head, desc_t, *(data for data, _ in parts)]  # alive until sent
    works = [ch.isend(head, tags[0]), ch.isend(desc_t, tags[1])]
    for data, fill in parts:  # filling a part overlaps sending the previous ones
        if fill is not None:
            fill()
        works.append(ch.isend(data, tags[2]))

    def finish(limit: datetime.timedelta | None) -> None:
        for work in works:
            wait(work, f"{ch.what} to {ch.label}", limit)
        keep.clear()
        if pooled is not None:
            _buffers.give(pooled)

    return finish


def td_send(
    td: Any,
    dst: int | None = None,
    *,
    group: Any = None,
    group_dst: int | None = None,
    init_tag: int = 0,
    pseudo_rand: bool = False,
    consolidated: bool = False,
    timeout: float | datetime.timedelta | None = None,
) -> None:
    """Send ``td`` to ``dst`` (global rank) or ``group_dst`` (rank in ``group``).

    The receiver calls ``recv`` on a tensordict of the same structure, or
    ``TensorDict.from_remote_init`` to get a new one. One transfer is a header, the JSON
    description and one consolidated buffer, whatever the number of leaves (the buffer
    goes in parts: one per large leaf and per few MiB of small ones, see
    :mod:`tensordict.distributed._parts`); ``consolidated`` is accepted for compatibility (every transfer is consolidated).
    Messages use tags ``init_tag`` to ``init_tag + 2`` (pseudo-random ones seeded by
    ``init_tag`` with ``pseudo_rand``); the receiver passes the same values.

    Raises ``DistributedTimeoutError`` when the receiver does not take the data within
    ``timeout`` seconds (default: the process group's timeout), ``PeerClosedError`` when
    it went away.

    .. code-block:: python

        # rank 0                                   # rank 1
        td.send(dst=1)                             out.recv(src=0)
    """
    ch = _peers.peer(dst, group_dst, group, _SEND_NAMES, "TensorDict.send")
    _post_send(td, ch, _peers.tags(init_tag, pseudo_rand), _peers.as_timedelta(timeout))(
        _peers.as_timedelta(timeout)
    )


def td_isend(
    td: Any,
    dst: int | None = None,
    *,
    group: Any = None,
    group_dst: int | None = None,
    init_tag: int = 0,
    pseudo_rand: bool = False,
    return_early: bool = False,
    consolidated: bool = False,
    timeout: float | datetime.timedelta | None = None,
) -> int | list[Transfer]:
    """Send ``td`` without blocking: the messages are posted at once.

    With ``return_early=True`` returns ``[Transfer]``, to ``wait()`` on before ``td`` is
    modified; otherwise waits and returns the last tag used. Arguments as in ``send``.
    """
    ch = _peers.peer(dst, group_dst, group, _SEND_NAMES, "TensorDict.isend")
    limit = _peers.as_timedelta(timeout)
    tag_list = _peers.tags(init_tag, pseudo_rand)
    finish = _post_send(td, ch, tag_list, limit)
    if return_early:
        return [Transfer(finish, f"isend to {ch.label}", limit)]
    finish(limit)
    return tag_list[-1]


# ---------------------------------------------------------------------- receiving
def _post_recv(
    template: Any,
    ch: Channel,
    tags: list[int],
    device: torch.device | None = None,
) -> tuple[Any, Any]:
    """Post the header's receive; return ``(finish, result)``: ``finish(limit)`` receives
    the rest and writes it (into ``template``, or into a new tensordict stored in
    ``result[0]`` when ``template`` is ``None``)."""
    head = _peers.empty_header(ch.device)
    head_work = ch.irecv(head, tags[0])
    result: list[Any] = [None]

    def finish(limit: datetime.timedelta | None) -> None:
        what = f"{ch.what} from {ch.label}"
        wait(head_work, what, limit)
        status, desc_len, data_len = _peers.read_header(head, ch.label)
        desc_t = torch.empty(desc_len, dtype=torch.uint8, device=ch.device)
        if desc_len:
            wait(ch.irecv(desc_t, tags[1]), what, limit)
        desc = _wire.tensor_bytes(desc_t)
        if status == _peers.STATUS_ERROR:
            raise _peers.RemoteError(
                f"{what}: the sender failed before sending: {desc.decode(errors='replace')}"
            )

        def receive(parts: list[tuple[torch.Tensor, list[Any]]]) -> None:
            """Receive every part (all posted at once), copying each one out as soon as
            it has arrived, while the next ones are on the way."""
            works = [ch.irecv(target, tags[2]) for target, _ in parts]
            for work, (_, copies) in zip(works, parts):
                wait(work, what, limit)
                _wire.copy_pairs(copies)

        hit = _message.cached(template, desc, data_len) if template is not None else None
        if hit is not None:  # the same description into the same leaves as last time
            receive(hit.parts)
            return
        try:
            meta = _message.parse(desc, ch.label)
            segments = _parts.segments(meta, data_len)
        except ValueError as err:  # its parts are unknown: the data cannot be taken
            raise ValueError(f"{what}: {err}") from None
        if template is None:
            landing = torch.empty(data_len, dtype=torch.uint8, device=ch.device)
            receive([(landing[a:b], []) for a, b in segments])
            if device is not None and landing.device != device:
                landing = landing.to(device)
            result[0] = _message.unpack(meta, landing)
            return
        plan = _message.Landing(template, meta, data_len, ch.device)
        assert plan.buffer is not None
        try:
            receive(plan.targets(segments))
            if plan.problems:
                raise ValueError(
                    f"{what}: the received tensordict does not fit this one; nothing was "
                    f"written. {_wire.problems_text(plan.problems)}"
                )
        except BaseException:
            plan.discard()
            raise
        plan.finish(template, desc)

    return finish, result


def td_recv(
    td: Any,
    src: int | None = None,
    *,
    group: Any = None,
    group_src: int | None = None,
    init_tag: int = 0,
    pseudo_rand: bool = False,
    consolidated: bool = False,
    timeout: float | datetime.timedelta | None = None,
) -> int:
    """Receive what ``send`` sent into ``td``, in place; returns the last tag used.

    The description is checked first: keys, shapes, dtypes, batch sizes and lazy-stack
    members must be those of ``td`` (non-tensor values are taken from the sender). A
    mismatch raises ``ValueError`` naming each difference and leaves ``td`` unchanged.
    """
    ch = _peers.peer(src, group_src, group, _RECV_NAMES, "TensorDict.recv")
    tag_list = _peers.tags(init_tag, pseudo_rand)
    finish, _ = _post_recv(td, ch, tag_list)
    finish(_peers.as_timedelta(timeout))
    return tag_list[-1]


def td_irecv(
    td: Any,
    src: int | None = None,
    *,
    group: Any = None,
    group_src: int | None = None,
    return_premature: bool = False,
    init_tag: int = 0,
    pseudo_rand: bool = False,
    consolidated: bool = False,
    timeout: float | datetime.timedelta | None = None,
) -> list[Transfer] | None:
    """Receive into ``td`` without blocking: the first receive is posted at once.

    With ``return_premature=True`` returns ``[Transfer]``: ``td`` holds the data once its
    ``wait()`` returned. Otherwise waits and returns ``None``. Checks as in ``recv``.
    """
    ch = _peers.peer(src, group_src, group, _RECV_NAMES, "TensorDict.irecv")
    limit = _peers.as_timedelta(timeout)
    finish, _ = _post_recv(td, ch, _peers.tags(init_tag, pseudo_rand))
    if return_premature:
        return [Transfer(finish, f"irecv from {ch.label}", limit)]
    finish(limit)
    return None


def td_init_remote(
    td: Any,
    dst: int | None = None,
    group: Any = None,
    device: torch.device | None = None,
    use_broadcast: bool = False,
    _tensorclass_type: str | None = None,
    *,
    group_dst: int | None = None,
    init_tag: int = 0,
    timeout: float | datetime.timedelta | None = None,
) -> None:
    """Send ``td`` to a peer that has no tensordict yet: it calls
    ``TensorDict.from_remote_init(src=...)`` and gets one of the same structure, with the
    data. With ``use_broadcast=True`` every other rank of ``group`` receives it (as
    ``broadcast`` from this rank). Nested tensordicts, lazy stacks, non-tensor (JSON)
    values and tensorclass instances are carried."""
    if use_broadcast:
        import torch.distributed as dist

        from tensordict.distributed._collectives import td_broadcast

        td_broadcast(
            td,
            dist.get_rank(),
            group=group,
            device=device,
            timeout=timeout,
            _tensorclass_type=_tensorclass_type,
        )
        return
    ch = _peers.peer(dst, group_dst, group, _SEND_NAMES, "TensorDict.init_remote")
    limit = _peers.as_timedelta(timeout)
    _post_send(td, ch, _peers.tags(init_tag, False), limit, _tensorclass_type)(limit)


def from_remote_init(
    src: int | None = None,
    group: Any = None,
    device: torch.device | str | None = None,
    use_broadcast: bool = False,
    *,
    group_src: int | None = None,
    init_tag: int = 0,
    timeout: float | datetime.timedelta | None = None,
) -> Any:
    """A new tensordict holding what a peer sent with ``init_remote`` (or ``send``).

    The structure comes from the message: no template is needed. The result is
    consolidated (its leaves view one buffer, on ``device``), so later ``recv`` calls of
    the same structure land straight in it. A tensorclass instance comes back as one
    when its class's module is imported in this process (nothing is ever imported or
    unpickled on receipt).
    """
    target = None if device is None else torch.device(device)
    if use_broadcast:
        from tensordict import TensorDict
        from tensordict.distributed._collectives import td_broadcast

        assert src is not None
        return td_broadcast(TensorDict(), src, group=group, device=target, timeout=timeout)
    ch = _peers.peer(src, group_src, group, _RECV_NAMES, "TensorDict.from_remote_init")
    finish, result = _post_recv(None, ch, _peers.tags(init_tag, False), target)
    finish(_peers.as_timedelta(timeout))
    return result[0]


def td_asend(td: Any, dst: Any) -> Any:
    """Not supported: asynchronous transfers through UCXX pipes (``TensorDictPipe``)."""
    raise NotImplementedError(
        "TensorDict.asend: UCXX pipes (TensorDictPipe) are not supported; use isend()."
    )


def td_arecv(td: Any, src: Any, *, device: Any = None) -> Any:
    """Not supported: asynchronous transfers through UCXX pipes (``TensorDictPipe``)."""
    raise NotImplementedError(
        "TensorDict.arecv: UCXX pipes (TensorDictPipe) are not supported; use irecv()."
    )
