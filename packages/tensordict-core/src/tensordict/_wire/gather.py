"""``gather_and_stack``: collect the tensordicts of a process group into rows of one.

Nothing is pickled. The destination's tensordict is the template: its row ``td[0]``
fixes the keys, shapes and dtypes each sender must have. Every rank of the group runs
the same sequence of collectives, then decides, so a mismatch raises on every rank
instead of leaving some of them waiting:

1. ``all_gather`` of a small int64 header per rank: status of the local checks, the
   ``dst`` it was called with, the sizes of its description and data, and the size of
   its error message. A local failure on any rank (wrong batch size on ``dst``, a value
   that cannot be sent) ends the call here on every rank, after one more ``all_gather``
   of the error messages (UTF-8 bytes).
2. ``gather`` to ``dst`` of each sender's description: the JSON metadata of the wire
   codec (:mod:`tensordict._wire.wire`, that is :meth:`~tensordict.TensorDict.consolidate`'s),
   which holds the structure and the non-tensor values.
3. ``gather`` to ``dst`` of each sender's tensor leaves, as one ``uint8`` buffer (the
   consolidated buffer, sent as is when the tensordict is consolidated already). Buffers
   are padded to the largest one: ``gather`` needs equal sizes. ``dst`` rebuilds each
   sender's tensordict with :func:`~tensordict.from_consolidated` (offsets checked,
   nothing unpickled) and compares it with the template, with the codec's own check
   (:func:`tensordict._wire.wire.mismatches`, batch sizes aside), as every receiver does.
4. ``broadcast`` from ``dst`` of a fixed-size (4 kB) ``uint8`` buffer: the outcome and
   the error message, if any. ``dst`` checks every description against the template
   before writing anything, so a mismatch leaves its data unchanged.

Collectives run on CPU tensors, except with the ``nccl`` backend, which gets tensors on
``torch.cuda.current_device()``. Timeouts are the process group's
(``init_process_group(timeout=...)``).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from tensordict._kinds import kinds as _kinds
from tensordict._leaves.nontensor import NonTensorData, NonTensorStack, stack_non_tensor
from tensordict._wire import wire as _wire

if TYPE_CHECKING:  # pragma: no cover
    from torch.distributed import ProcessGroup
    from typing_extensions import Self

_MAX_ERROR_BYTES = 4000  # error messages exchanged between ranks are cut to this size
# Header fields.
_STATUS, _DST, _META, _DATA, _ERR = range(5)


# ---------------------------------------------------------------------- helpers
def _fmt(key: tuple[str, ...]) -> Any:
    """A key as the user writes it: a string for top-level keys, a tuple otherwise."""
    return key[0] if len(key) == 1 else key


def _leaves(td: Any) -> list[tuple[tuple[str, ...], Any]]:
    """``(key tuple, value)`` of every leaf (tensors and non-tensors), keys sorted."""
    out = [
        ((key,) if isinstance(key, str) else tuple(key), value)
        for key, value in td.items(True, True, is_leaf=_kinds.is_leaf_nontensor)
    ]
    out.sort(key=lambda item: item[0])
    return out


def _check_tensor(key: tuple[str, ...], t: torch.Tensor) -> None:
    if t.layout is not torch.strided or t.is_nested or t.is_quantized:
        raise TypeError(
            f"gather_and_stack: the leaf {_fmt(key)!r} is a {t.layout} tensor "
            f"(nested={t.is_nested}, quantized={t.is_quantized}); only dense (strided) "
            "tensors can be sent."
        )


# ---------------------------------------------------------------------- the two roles
class _Sender:
    """A sender's description (JSON bytes) and data (one ``uint8`` buffer), made by the
    wire codec (:mod:`tensordict._wire.wire`: consolidate's buffer and metadata)."""

    def __init__(self, td: Any, device: torch.device) -> None:
        for key, value in _leaves(td):
            if isinstance(value, torch.Tensor):
                _check_tensor(key, value)
            elif isinstance(value, NonTensorStack):
                raise TypeError(
                    f"gather_and_stack: the non-tensor leaf {_fmt(key)!r} holds one value per "
                    "element (a NonTensorStack); each rank sends one value per non-tensor key "
                    "(a NonTensorData)."
                )
            elif not isinstance(value, NonTensorData):
                raise TypeError(
                    f"gather_and_stack: cannot send the leaf {_fmt(key)!r} of type "
                    f"{type(value).__name__}."
                )
        try:
            meta, data = _wire.encode(td, device)
        except TypeError as err:
            raise TypeError(f"gather_and_stack: {err}") from None
        self.meta = _wire.dumps(meta)
        self.data = data


class _Template:
    """What ``dst`` expects from each sender: its row ``td[0]``."""

    def __init__(self, td: Any, n_senders: int, dst_name: str) -> None:
        batch_size = td.batch_size
        if not batch_size or batch_size[0] != n_senders:
            raise ValueError(
                f"gather_and_stack: on the destination ({dst_name}) the tensordict needs one "
                f"row per other rank of the group: a first batch dimension of {n_senders} "
                f"(group size - 1), but its batch_size is {tuple(batch_size)}."
            )
        self.td = td
        self.row_batch_size = batch_size[1:]
        self.entries: list[tuple[tuple[str, ...], bool]] = []  # (key, is a tensor)
        for key, value in _leaves(td):
            if isinstance(value, torch.Tensor):
                _check_tensor(key, value)
            self.entries.append((key, isinstance(value, torch.Tensor)))
        self.row = td[0] if n_senders else None

    def check(self, meta: bytes, data: torch.Tensor) -> tuple[list[str], Any]:
        """The mismatches between a sender's tensordict and the template (empty when it
        matches: the wire codec's check, batch sizes aside), and the sender's tensordict
        (decoded, viewing ``data``)."""
        try:
            received = _wire.decode(_wire.loads(meta), data)
        except (ValueError, TypeError, KeyError) as err:
            return [f"its description could not be read ({err})"], None
        return _wire.mismatches(self.row, received, batch_sizes=False), received

    def write(self, rows: Sequence[Any]) -> None:
        """Write the checked rows (the senders' decoded tensordicts) into the template."""
        if not rows:
            return
        td = self.td
        for key, is_tensor in self.entries:
            if is_tensor:
                td.set_(key, torch.stack([row.get(key) for row in rows]))
            else:
                items = [
                    NonTensorData(
                        row.get_non_tensor(key), batch_size=self.row_batch_size, device=td.device
                    )
                    for row in rows
                ]
                # Replaced rather than written in place: an in-place write of a stack into
                # a NonTensorData would nest the stack inside it.
                td.set(key, stack_non_tensor(items, 0, td.batch_size))


# ---------------------------------------------------------------------- the collectives
def _comm_device(backend: str) -> torch.device:
    """Where the exchanged tensors live: CUDA for nccl, CPU for the others (gloo, mpi)."""
    if backend == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _error_text(err: BaseException) -> bytes:
    text = f"{type(err).__name__}: {err}".encode()
    return text[:_MAX_ERROR_BYTES]


class GatherOps:
    """Mixin of :class:`~tensordict.TensorDictBase`: ``gather_and_stack``."""

    def gather_and_stack(self, dst: int, group: ProcessGroup | None = None) -> Self | None:
        """Gather the tensordicts of the other ranks of ``group`` into the rows of this one
        on rank ``dst``.

        Every rank of the group calls it. On ``dst`` the tensordict needs one row per other
        rank (a first batch dimension of group size - 1): row ``j`` is overwritten in place
        with the tensordict of the ``j``-th other rank, in group rank order; ``dst``'s own
        data is not part of the result. The other ranks send theirs and get ``None``.

        Nothing is pickled. ``dst``'s row ``self[0]`` is the template: each sender must
        have the same leaf keys, with tensors of the same shape and dtype (its batch size
        is not compared) and non-tensor values where the template has non-tensor leaves.
        Non-tensor values travel as JSON, so only JSON values (``None``, ``bool``,
        ``int``, ``float``, ``str``, and lists and str-keyed dicts of those) can be sent;
        others raise ``TypeError`` (drop them with
        :meth:`~tensordict.TensorDictBase.exclude` on every rank). Every rank runs the
        same collectives before raising, so an error on one rank (a mismatch found by
        ``dst``, a wrong batch size on ``dst``, a value that cannot be sent) raises on all
        of them, and ``dst``'s data is left unchanged. Ranks that never call it make the
        others fail after the process group's timeout (``init_process_group(timeout=...)``).

        The exchanged buffers are CPU tensors (leaves on other devices are copied), except
        with the ``nccl`` backend, where they are on ``torch.cuda.current_device()``.

        Args:
            dst: the destination's global rank (as ``dst`` of
                :func:`torch.distributed.gather`); it must belong to ``group``.
            group: the process group (default: the world). Ranks outside it (those to
                which :func:`torch.distributed.new_group` gave
                ``GroupMember.NON_GROUP_MEMBER``) return ``None`` without communicating.

        Returns:
            ``self`` on ``dst``, ``None`` on the other ranks.

        Raises:
            RuntimeError: no process group is initialised, or another rank failed.
            ValueError: ``dst`` is not a rank of the group, the ranks were given different
                ``dst``, the first batch dimension on ``dst`` is not group size - 1, or a
                sender does not match the template.
            TypeError: ``dst`` is not an int, or a leaf cannot be sent (a non-JSON non-tensor
                value, a sparse tensor).

        Example, run by each of 3 processes (``torchrun --nproc-per-node 3``):

        .. code-block:: python

            import torch
            import torch.distributed as dist
            from tensordict import TensorDict

            dist.init_process_group("gloo")
            rank = dist.get_rank()
            if rank == 0:
                td = TensorDict({"obs": torch.zeros(2, 4), "step": torch.zeros(2, dtype=torch.long)}, [2])
            else:
                td = TensorDict({"obs": torch.full((4,), float(rank)), "step": torch.tensor(rank)})
            out = td.gather_and_stack(dst=0)
            if rank == 0:
                assert out is td
                assert td["obs"][:, 0].tolist() == [1.0, 2.0]  # rows from ranks 1 and 2
                assert td["step"].tolist() == [1, 2]
            else:
                assert out is None
        """
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError(
                "gather_and_stack needs an initialised default process group: call "
                "torch.distributed.init_process_group(...) on every rank first."
            )
        non_member: object = dist.GroupMember.NON_GROUP_MEMBER  # new_group's for non-members
        if group is non_member:
            return None
        if isinstance(dst, bool) or not hasattr(dst, "__index__"):
            raise TypeError(f"gather_and_stack: dst must be an int rank, got {dst!r}.")
        dst = operator.index(dst)
        ranks = dist.get_process_group_ranks(group)
        if dst not in ranks:
            raise ValueError(
                f"gather_and_stack: dst={dst!r} is not a rank of the process group (its "
                f"global ranks are {ranks}); dst is a global rank, as for "
                "torch.distributed.gather."
            )
        me = dist.get_rank()
        if me not in ranks:
            return None
        with torch.no_grad():
            _gather_and_stack(self, dst, group, ranks, me)
        return self if me == dst else None


def _gather_and_stack(
    td: Any, dst: int, pg: ProcessGroup | None, ranks: list[int], me: int
) -> None:
    """The protocol described in the module docstring (``me`` is in ``ranks``)."""
    import torch.distributed as dist

    device = _comm_device(dist.get_backend(pg))
    size = len(ranks)
    is_world = size == dist.get_world_size()

    def name(rank: int) -> str:
        return f"rank {rank}" if is_world else f"rank {rank} (group rank {ranks.index(rank)})"

    # 0. Local work: nothing below raises before the header is exchanged.
    template: _Template | None = None
    sender: _Sender | None = None
    local_error: Exception | None = None
    try:
        if me == dst:
            template = _Template(td, size - 1, name(dst))
        else:
            sender = _Sender(td, device)
    except Exception as err:
        local_error = err
    error_text = _error_text(local_error) if local_error is not None else b""
    meta = sender.meta if sender is not None else b""
    data = sender.data if sender is not None else torch.zeros(0, dtype=torch.uint8)
    header = torch.tensor(
        [int(local_error is not None), dst, len(meta), data.numel(), len(error_text)],
        dtype=torch.int64,
        device=device,
    )

    # 1. Headers, everywhere.
    headers = [torch.empty_like(header) for _ in range(size)]
    dist.all_gather(headers, header, group=pg)
    table = torch.stack(headers).cpu().tolist()
    if len({row[_DST] for row in table}) > 1:
        given = ", ".join(f"{name(r)}: {row[_DST]}" for r, row in zip(ranks, table))
        raise ValueError(f"gather_and_stack: the ranks were called with different dst ({given}).")
    failed = [(r, row[_ERR]) for r, row in zip(ranks, table) if row[_STATUS]]
    if failed:
        max_len = max(n for _, n in failed)
        texts = [torch.empty(max_len, dtype=torch.uint8, device=device) for _ in range(size)]
        dist.all_gather(texts, _wire.bytes_tensor(error_text, device, max_len), group=pg)
        if local_error is not None:
            raise local_error
        details = "; ".join(
            f"{name(r)}: " + _wire.tensor_bytes(texts[ranks.index(r)][:n]).decode(errors="replace")
            for r, n in failed
        )
        raise RuntimeError(f"gather_and_stack failed on another rank before sending: {details}")

    # 2-3. Descriptions and data, to dst.
    meta_len = max(row[_META] for row in table)
    data_len = max(row[_DATA] for row in table)
    metas: list[torch.Tensor] = []
    datas: list[torch.Tensor] = []
    for length, own, out in (
        (meta_len, _wire.bytes_tensor(meta, device, meta_len), metas),
        (data_len, _wire.padded(data.to(device), data_len), datas),
    ):
        if length:
            if me == dst:
                out.extend(
                    own if r == dst else torch.empty(length, dtype=torch.uint8, device=device)
                    for r in ranks
                )
            dist.gather(own, out if me == dst else None, dst=dst, group=pg)

    # 4. dst checks, writes, and tells everyone (one fixed-size broadcast: the outcome
    # code, then the error message, if any).
    code = 0
    message = b""
    dst_error: Exception | None = None
    if template is not None:
        try:
            rows: list[Any] = []
            problems: list[str] = []
            for i, r in enumerate(ranks):
                if r == dst:
                    continue
                meta_i = _wire.tensor_bytes(metas[i][: table[i][_META]]) if metas else b""
                data_i = datas[i][: table[i][_DATA]] if datas else torch.zeros(0, dtype=torch.uint8)
                found, received = template.check(meta_i, data_i)
                problems.extend(f"{name(r)} (row {len(rows)}): {p}" for p in found)
                rows.append(received)
            if problems:
                dst_error = ValueError(
                    f"gather_and_stack: the data sent to {name(dst)} does not match its "
                    "tensordict's row td[0] (keys, shapes and dtypes must be the same); "
                    "nothing was written. " + _wire.problems_text(problems)
                )
                code = 1
            else:
                template.write(rows)
        except Exception as err:
            dst_error = err
            code = 2
        if dst_error is not None:
            message = str(dst_error).encode()[:_MAX_ERROR_BYTES]
    outcome = _wire.bytes_tensor(bytes([code]) + message, device, 1 + _MAX_ERROR_BYTES)
    dist.broadcast(outcome, src=dst, group=pg)
    if dst_error is not None:
        raise dst_error
    received = _wire.tensor_bytes(outcome)
    text = received[1:].rstrip(b"\0").decode(errors="replace")
    if received[0] == 1:
        raise ValueError(text)
    if received[0] == 2:
        raise RuntimeError(f"gather_and_stack failed on the destination {name(dst)}: {text}")
