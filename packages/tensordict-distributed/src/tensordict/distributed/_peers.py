"""Who talks to whom, with what tensors, and for how long: the plumbing under every call.

* :func:`peer` checks the ``dst``/``group_dst`` (or ``src``/``group_src``) pair and
  returns a :class:`Channel`: non-blocking ``isend``/``irecv`` of one tensor to or from
  the peer, through ``torch.distributed`` (global rank) or straight through the group's
  backend (group rank, which also works on a raw, unregistered ``ProcessGroupGloo``).
* :func:`wait` waits for a ``torch.distributed`` work with a timeout and turns the
  backend's errors into clear ones: :class:`DistributedTimeoutError` when the peer did
  not answer in time, :class:`PeerClosedError` when it went away.
* The message header: every tensordict travels as a fixed-size ``int64`` header (a magic
  number, the protocol version, a status, the lengths of the two others), the JSON
  description and the data buffer (omitted when empty; point to point, in a few parts:
  see :mod:`._parts`), whatever its number of leaves. A sender that fails before sending (a value that cannot be sent) sends a
  header with an error status and its error message instead, so the receiver raises at
  once instead of waiting for the timeout.
"""

from __future__ import annotations

import datetime
import operator
from collections.abc import Sequence
from typing import Any

import torch

#: First header field of every message of this protocol ("TDWIRE" in ASCII).
MAGIC = 0x544457495245
VERSION = 1
STATUS_OK, STATUS_ERROR = 0, 1
#: Header fields: magic, version, status, description length, data length.
HEADER_LEN = 5
#: Error messages sent between ranks are cut to this many bytes.
MAX_ERROR_BYTES = 4000


class DistributedTimeoutError(RuntimeError, TimeoutError):
    """A peer did not answer within the timeout (a ``RuntimeError``, as the backends raise,
    and a ``TimeoutError``)."""


class PeerClosedError(RuntimeError, ConnectionError):
    """A peer closed its connection (it exited or crashed) before the transfer ended."""


class RemoteError(RuntimeError):
    """The other side of a transfer failed and said why (its message is included)."""


# ---------------------------------------------------------------------- timeouts
def as_timedelta(timeout: float | datetime.timedelta | None) -> datetime.timedelta | None:
    """``timeout`` (seconds or a timedelta) as a timedelta; ``None`` stays ``None``.

    >>> as_timedelta(1.5)
    datetime.timedelta(seconds=1, microseconds=500000)
    """
    if timeout is None or isinstance(timeout, datetime.timedelta):
        return timeout
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}.")
    return datetime.timedelta(seconds=float(timeout))


def wait(work: Any, what: str, timeout: datetime.timedelta | None) -> None:
    """Wait for ``work``; a timeout or a vanished peer raises a clear error naming ``what``.

    ``timeout=None`` waits as long as the process group's timeout
    (``init_process_group(timeout=...)``).
    """
    try:
        if timeout is None:
            work.wait()
        else:
            work.wait(timeout=timeout)
    except RuntimeError as err:
        raise translate(err, what, timeout) from err


def run(post: Any, what: str, timeout: datetime.timedelta | None) -> None:
    """Post a work (``post()`` returns it) and :func:`wait` for it; errors raised while
    posting (a connection closed already) are made clear too."""
    try:
        work = post()
    except RuntimeError as err:
        raise translate(err, what, timeout) from err
    wait(work, what, timeout)


def translate(err: BaseException, what: str, timeout: datetime.timedelta | None) -> Exception:
    """The clear error for a backend error ``err`` raised while doing ``what``."""
    text = str(err)
    low = text.lower()
    limit = (
        "the process group's timeout"
        if timeout is None
        else f"the timeout of {timeout.total_seconds():g} s"
    )
    if "pair closure" in low:
        return PeerClosedError(
            f"{what}: the connection to the peer was closed by an earlier timeout (gloo closes "
            "it then); re-create the process group to talk to that peer again. "
            f"(backend: {_first_line(text)})"
        )
    if "timed out" in low or "timeout" in low:
        return DistributedTimeoutError(
            f"{what}: no answer within {limit}. The peer is slow, stuck, dead, or not making "
            f"the matching call. (backend: {_first_line(text)})"
        )
    if "closed" in low or "reset by peer" in low or "broken pipe" in low:
        return PeerClosedError(
            f"{what}: the peer closed its connection: it exited or crashed. Check its logs. "
            f"(backend: {_first_line(text)})"
        )
    return RuntimeError(f"{what} failed: {_first_line(text)}")


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


# ---------------------------------------------------------------------- groups
def backend_name(group: Any) -> str:
    """The backend of ``group`` (``None``: the default group), registered or raw."""
    import torch.distributed as dist

    if group is None or _is_registered(group):
        return str(dist.get_backend(group))
    name = getattr(group, "name", None)
    return str(name()) if callable(name) else "gloo"


def _is_registered(group: Any) -> bool:
    import torch.distributed as dist

    try:
        dist.get_process_group_ranks(group)
    except (ValueError, RuntimeError, KeyError, TypeError, AttributeError):
        return False
    return True


def comm_device(group: Any) -> torch.device:
    """Where exchanged tensors live: CUDA for nccl, CPU for the other backends."""
    if backend_name(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def require_initialised(what: str, group: Any = None) -> None:
    """Raise ``RuntimeError`` unless ``group`` is given or the default group exists."""
    import torch.distributed as dist

    if group is None and not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError(
            f"{what} needs an initialised process group: call "
            "torch.distributed.init_process_group(...) on every rank first (or pass a group)."
        )


def rank_arg(value: Any, name: str, what: str) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{what}: {name} must be an int rank, got {value!r}.")
    return operator.index(value)


def check_peer(peer: Any, group_peer: Any, group: Any, names: tuple[str, str], what: str) -> None:
    """Argument checks shared by send/recv: exactly one of ``peer`` and ``group_peer``,
    and ``group_peer`` only with a ``group``."""
    name, group_name = names
    if group_peer is not None and group is None:
        raise ValueError(
            f"{what}: `{group_name}` (a rank within `group`) requires `group` to be given."
        )
    if peer is not None and group_peer is not None:
        raise ValueError(
            f"{what}: `{name}` (a global rank) and `{group_name}` (a rank in `group`) are "
            "mutually exclusive; pass one of them."
        )
    if peer is None and group_peer is None:
        raise ValueError(f"{what}: Exactly one of `{name}` and `{group_name}` must be given.")


class Channel:
    """Point-to-point transfers with one peer.

    Built by :func:`peer`: either through ``torch.distributed`` with the peer's global rank
    (``group`` optional), or through the group's backend with the peer's rank in ``group``.
    """

    def __init__(self, group: Any, rank: int, global_rank: bool, what: str) -> None:
        self.group = group
        self.rank = rank
        self.global_rank = global_rank
        self.what = what
        self.device = comm_device(group)
        self.label = f"rank {rank}" if global_rank else f"group rank {rank}"

    def isend(self, tensor: torch.Tensor, tag: int) -> Any:
        import torch.distributed as dist

        try:
            if self.global_rank:
                return dist.isend(tensor, dst=self.rank, group=self.group, tag=tag)
            return self.group.send([tensor], self.rank, tag)
        except RuntimeError as err:
            raise translate(err, f"{self.what} to {self.label}", None) from err

    def irecv(self, tensor: torch.Tensor, tag: int) -> Any:
        import torch.distributed as dist

        try:
            if self.global_rank:
                return dist.irecv(tensor, src=self.rank, group=self.group, tag=tag)
            return self.group.recv([tensor], self.rank, tag)
        except RuntimeError as err:
            raise translate(err, f"{self.what} from {self.label}", None) from err


def peer(peer: Any, group_peer: Any, group: Any, names: tuple[str, str], what: str) -> Channel:
    """The :class:`Channel` to ``peer`` (global rank) or ``group_peer`` (rank in ``group``)."""
    check_peer(peer, group_peer, group, names, what)
    if group_peer is not None:
        rank = rank_arg(group_peer, names[1], what)
        _check_group_rank(rank, group, names[1], what)
        return Channel(group, rank, False, what)
    rank = rank_arg(peer, names[0], what)
    require_initialised(what, group)
    _check_global_rank(rank, group, names[0], what)
    return Channel(group, rank, True, what)


def _not_self(what: str, name: str, rank: int) -> ValueError:
    return ValueError(
        f"{what}: {name}={rank} is this process's own rank; a process cannot send to or "
        "receive from itself (torch.distributed refuses it too)."
    )


def _check_global_rank(rank: int, group: Any, name: str, what: str) -> None:
    """``rank`` must be another rank of ``group`` (the world when ``None``): a rank outside
    it would make the call wait forever."""
    import torch.distributed as dist

    if group is not None and not _is_registered(group):
        return  # a raw group: it knows no global ranks; its backend checks
    check_rank_in(rank, group, name, what)
    if rank == dist.get_rank():
        raise _not_self(what, name, rank)


def check_rank_in(rank: int, group: Any, name: str, what: str) -> None:
    """``ValueError`` unless the global ``rank`` belongs to ``group`` (the world when
    ``None``)."""
    ranks = group_ranks(group)
    if rank not in ranks:
        where = "the world" if group is None else "the group"
        raise ValueError(
            f"{what}: {name}={rank} is not a rank of {where} (size {len(ranks)}, global "
            f"ranks {_ranks_text(ranks)}); {name} is a global rank, as for torch.distributed."
        )


def _check_group_rank(rank: int, group: Any, name: str, what: str) -> None:
    """``rank`` must be another rank within ``group`` (``0 <= rank < group size``)."""
    size_of, rank_of = getattr(group, "size", None), getattr(group, "rank", None)
    if not (callable(size_of) and callable(rank_of)):
        return
    size, own = int(size_of()), int(rank_of())
    if not 0 <= rank < size:
        raise ValueError(
            f"{what}: {name}={rank} is not a rank within the group (its ranks are 0 to "
            f"{size - 1}, size {size})."
        )
    if rank == own:
        raise _not_self(what, name, rank)


def _ranks_text(ranks: Sequence[int]) -> str:
    if list(ranks) == list(range(len(ranks))):
        return f"0 to {len(ranks) - 1}"
    return str(list(ranks))


def tags(init_tag: int, pseudo_rand: bool, count: int = 3) -> list[int]:
    """The tags of the ``count`` messages of one transfer: ``init_tag``, ``init_tag + 1``…,
    or, with ``pseudo_rand``, numbers drawn from a generator seeded by ``init_tag`` (both
    sides compute the same ones).

    >>> tags(5, False)
    [5, 6, 7]
    >>> tags(5, True) == tags(5, True) != tags(6, True)
    True
    """
    if isinstance(init_tag, bool) or not isinstance(init_tag, int) or init_tag < 0:
        raise ValueError(f"init_tag must be a non-negative int, got {init_tag!r}.")
    if not pseudo_rand:
        return [init_tag + i for i in range(count)]
    gen = torch.Generator().manual_seed(init_tag)
    return [int(t) for t in torch.randint(0, 2**30, (count,), generator=gen)]


# ---------------------------------------------------------------------- headers
def header(status: int, desc_len: int, data_len: int, device: torch.device) -> torch.Tensor:
    return torch.tensor(
        [MAGIC, VERSION, status, desc_len, data_len], dtype=torch.int64, device=device
    )


def empty_header(device: torch.device) -> torch.Tensor:
    return torch.zeros(HEADER_LEN, dtype=torch.int64, device=device)


def read_header(t: torch.Tensor, source: str) -> tuple[int, int, int]:
    """``(status, description length, data length)`` of a received header."""
    magic, version, status, desc_len, data_len = (int(v) for v in t.cpu().tolist())
    if magic != MAGIC:
        raise RuntimeError(
            f"the message from {source} is not a tensordict transfer (bad magic number); "
            "both sides must use tensordict.distributed with the same tags."
        )
    if version != VERSION or status not in (STATUS_OK, STATUS_ERROR):
        raise RuntimeError(
            f"the message from {source} uses protocol version {version} (status {status}); "
            f"this side speaks version {VERSION}."
        )
    if desc_len < 0 or data_len < 0:
        raise RuntimeError(f"the header from {source} has negative lengths.")
    return status, desc_len, data_len


def error_bytes(err: BaseException) -> bytes:
    return f"{type(err).__name__}: {err}".encode()[:MAX_ERROR_BYTES]


def group_ranks(group: Any) -> Sequence[int]:
    """The global ranks of ``group`` (the world when ``None``)."""
    import torch.distributed as dist

    return (
        list(dist.get_process_group_ranks(group))
        if group is not None
        else list(range(dist.get_world_size()))
    )
