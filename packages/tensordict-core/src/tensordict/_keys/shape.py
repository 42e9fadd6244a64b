"""Batch-size, device and dimension helpers shared by every tensordict type."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from tensordict._util.errors import BadShapeError, DimsError

_Size = torch.Size
_EMPTY = torch.Size([])


def parse_batch_size(batch_size: Sequence[int] | torch.Size | int | None) -> torch.Size:
    """Normalise a user batch size (``None``, an int, a sequence) to ``torch.Size``.

    >>> parse_batch_size(None), parse_batch_size(3), parse_batch_size([2, 3])
    (torch.Size([]), torch.Size([3]), torch.Size([2, 3]))
    """
    if batch_size is None:
        return _EMPTY
    if type(batch_size) is _Size:
        return batch_size
    if isinstance(batch_size, int):
        if batch_size < 0:
            raise ValueError(f"batch_size must be non-negative, got {batch_size}.")
        return _Size([batch_size])
    try:
        out = _Size(batch_size)
    except (TypeError, ValueError):
        raise TypeError(
            f"batch_size must be an int or a sequence of ints, got {batch_size!r}."
        ) from None
    if any(s < -1 for s in out):
        raise ValueError(
            f"batch_size must be non-negative (or -1 for a ragged dim of nested tensors), got "
            f"{list(out)}."
        )
    return out


def leads_with(shape: torch.Size, batch_size: torch.Size) -> bool:
    """Whether ``shape`` starts with ``batch_size``: ``shape[:n] == batch_size``, without
    building the slice (a ``torch.Size`` slice costs several integer reads).

    >>> leads_with(torch.Size([4, 3]), torch.Size([4])), leads_with(torch.Size([]), torch.Size([4]))
    (True, False)
    """
    nb = len(batch_size)
    if nb == 1:
        return len(shape) > 0 and shape[0] == batch_size[0]
    return nb == 0 or shape[:nb] == batch_size


def nested_fits(value: torch.Tensor, batch_size: Sequence[int]) -> bool:
    """Whether a strided nested tensor (which has no ``shape``) starts with ``batch_size``:
    its regular dims match, ``-1`` stands for a ragged one.

    >>> import torch
    >>> nt = torch.nested.nested_tensor([torch.ones(3, 4), torch.ones(3, 6)])
    >>> nested_fits(nt, [2, 3, -1]), nested_fits(nt, [2, 4])
    (True, False)
    """
    if value.dim() < len(batch_size):
        return False
    for d, s in enumerate(batch_size):
        try:
            size = value.size(d)
        except RuntimeError:  # a ragged dimension
            size = -1
        if size != s:
            return False
    return True


def parse_device(device: torch.device | str | int | None) -> torch.device | None:
    """Normalise a device spec; ``"cuda"`` becomes the current CUDA device.

    >>> parse_device(None), parse_device("cpu")
    (None, device(type='cpu'))
    """
    if device is None:
        return None
    if isinstance(device, torch.device):
        out = device
    elif isinstance(device, int):
        out = torch.device("cuda", device)
    else:
        out = torch.device(device)
    if out.type == "cuda":
        # torch's stubs declare ``device.index`` as ``int``; it is ``None`` when not given.
        index: int | None = out.index
        if index is None and torch.cuda.is_available():
            out = torch.device("cuda", torch.cuda.current_device())
    return out


def normalize_dim(dim: int, ndim: int, what: str = "dim", extra: int = 0) -> int:
    """Turn a possibly negative batch dimension into a positive one, with a clear error.

    ``extra`` widens the valid range (1 for ``unsqueeze``/``stack`` positions).

    >>> normalize_dim(-1, 3), normalize_dim(-1, 3, extra=1)
    (2, 3)
    """
    span = ndim + extra
    if not -span <= dim < span:
        raise IndexError(
            f"Incompatible dim: {what}={dim} is out of range for a tensordict with {ndim} "
            f"batch dimension(s) (expected a value in [{-span}, {span - 1}])."
        )
    return dim + span if dim < 0 else dim


def infer_shape(shape: Sequence[int], numel: int) -> torch.Size:
    """Resolve one ``-1`` in a target batch shape, as ``view`` would.

    >>> infer_shape([-1, 2], 6)
    torch.Size([3, 2])
    """
    shape = list(shape)
    if shape.count(-1) > 1:
        raise RuntimeError(f"only one dimension can be inferred, got shape {shape}.")
    if -1 in shape:
        rest = 1
        for s in shape:
            if s != -1:
                rest *= s
        if rest == 0 or numel % rest:
            raise RuntimeError(f"shape {shape} is invalid for a batch of {numel} elements.")
        shape[shape.index(-1)] = numel // rest
    out = _Size(shape)
    if out.numel() != numel:
        raise RuntimeError(f"shape {list(out)} is invalid for a batch of {numel} elements.")
    return out


def unpack_shape(args: tuple[Any, ...]) -> tuple[int, ...]:
    """Accept both ``f(2, 3)`` and ``f((2, 3))`` / ``f(torch.Size([2, 3]))``.

    >>> unpack_shape((2, 3)), unpack_shape(([2, 3],))
    ((2, 3), (2, 3))
    """
    if len(args) == 1 and not isinstance(args[0], int):
        if not hasattr(args[0], "__iter__"):
            raise BadShapeError(f"invalid shape {args[0]!r}: expected ints or a sequence of ints.")
        args = tuple(args[0])
    for size in args:
        if not isinstance(size, int) and not hasattr(type(size), "__index__"):
            raise BadShapeError(
                f"invalid shape {tuple(args)}: every size must be an int, got "
                f"{type(size).__name__} {size!r}."
            )
    return args


def flip_dims(args: tuple[Any, ...], ndim: int) -> list[int]:
    """The batch dimensions ``flip(*args)`` reverses, normalised; a repeated one raises
    (a ``TypeError`` that is also the ``RuntimeError`` torch raises).

    >>> flip_dims((0, -1), 3), flip_dims(([1, 2],), 3)
    ([0, 2], [1, 2])
    """
    dims = [normalize_dim(d, ndim) for d in unpack_shape(args)]
    if len(set(dims)) != len(dims):
        raise BadShapeError(
            f"flip(): dimension(s) {dims} repeat a dimension; each is flipped once."
        )
    return dims


def narrow_slice(size: int, start: int, length: int) -> slice:
    """The slice ``narrow(dim, start, length)`` takes along a dimension of ``size``, with
    torch's checks (``IndexError`` for a start out of range, ``RuntimeError`` for a
    length that runs past the end).

    >>> narrow_slice(5, 1, 2), narrow_slice(5, -2, 2)
    (slice(1, 3, None), slice(3, 5, None))
    """
    if not -size <= start <= size:
        raise IndexError(
            f"narrow(): start {start} is out of range for a dimension of size {size} "
            f"(expected -{size} <= start <= {size})."
        )
    if length < 0:
        raise RuntimeError(f"narrow(): length must be non-negative, got {length}.")
    if start < 0:
        start += size
    if start + length > size:
        raise RuntimeError(
            f"narrow(): start ({start}) + length ({length}) exceeds the dimension's size ({size})."
        )
    return slice(start, start + length)


def movedim_order(source: Any, destination: Any, ndim: int) -> list[int]:
    """The permutation of ``ndim`` dimensions that :func:`torch.movedim` applies.

    >>> movedim_order(0, 2, 3), movedim_order((0, 1), (2, 0), 3)
    ([1, 2, 0], [1, 2, 0])
    """
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise DimsError(
            f"movedim(): source {src} and destination {dst} must have the same number of elements."
        )
    src = [normalize_dim(s, ndim) for s in src]
    dst = [normalize_dim(d, ndim) for d in dst]
    if len(set(src)) != len(src):
        raise RuntimeError(f"movedim(): repeated dim in source {src}.")
    if len(set(dst)) != len(dst):
        raise RuntimeError(f"movedim(): repeated dim in destination {dst}.")
    order: list[int | None] = [None] * ndim
    for s, d in zip(src, dst, strict=True):
        order[d] = s
    rest = iter(i for i in range(ndim) if i not in src)
    return [next(rest) if o is None else o for o in order]


def broadcastable_to(src: Sequence[int], dst: Sequence[int]) -> bool:
    """Whether a tensor of shape ``src`` can be copied into one of shape ``dst``.

    (The check ``Tensor.copy_`` makes, in plain Python: much cheaper than
    ``torch.broadcast_shapes``.)

    >>> broadcastable_to((3, 1), (2, 3, 4)), broadcastable_to((2,), (3,))
    (True, False)
    """
    if len(src) > len(dst):
        return all(s == 1 for s in src[: len(src) - len(dst)]) and broadcastable_to(
            src[len(src) - len(dst) :], dst
        )
    offset = len(dst) - len(src)
    for i, s in enumerate(src):
        if s != 1 and s != dst[offset + i]:
            return False
    return True


def common_shape(shapes: Sequence[Sequence[int]]) -> list[int] | None:
    """The sizes shared by ``shapes``, ``-1`` where they differ; ``None`` if the numbers of
    dimensions differ.

    >>> common_shape([(2, 3), (2, 4)]), common_shape([(2,), (2, 1)])
    ([2, -1], None)
    """
    shape = list(shapes[0])
    for other in shapes[1:]:
        if len(other) != len(shape):
            return None
        shape = [s if s == t else -1 for s, t in zip(shape, other, strict=True)]
    return shape
