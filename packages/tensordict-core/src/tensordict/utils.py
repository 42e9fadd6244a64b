"""Public helpers of ``tensordict.utils``."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from typing import Any, Literal, overload

import numpy as np
import torch
from torch.nn.parameter import Buffer

from tensordict._base.client_compat import (  # noqa: F401 - kept for clients (docs: compatibility)
    _getitem_batch_size,
    _is_non_tensor,
    _is_tensorclass,
    _maybe_correct_neg_dim,
    _shape,
    _unravel_key_to_tuple,
    _zip_strict,
    is_seq_of_nested_key,
    timeit,
)
from tensordict._formats.repr_parse import parse_tensor_dict_string
from tensordict._functions.testing import assert_allclose_td, assert_close
from tensordict._keys.index import _dims_consumed
from tensordict._keys.nested import NestedKey, is_nested_key, unravel_key_to_tuple
from tensordict._keys.nested import unravel_key as _unravel_key
from tensordict._kinds.kinds import is_tensorclass
from tensordict._leaves.nontensor import is_non_tensor
from tensordict._util.errors import EllipsisError, NotAKeyError
from tensordict._util.futures import TensorDictFuture
from tensordict._util.legacy import lazy_legacy, set_lazy_legacy
from tensordict._util.linked_list import LinkedList
from tensordict._util.modes import (
    capture_non_tensor_stack,
    list_to_stack,
    set_capture_non_tensor_stack,
    set_list_to_stack,
)
from tensordict._util.printoptions import get_printoptions, set_printoptions
from tensordict.base import TensorDictBase, is_tensor_collection

__all__ = [
    "Buffer",
    "DeviceType",
    "IndexType",
    "KEY_SEPARATOR",
    "NUMPY_TO_TORCH_DTYPE_DICT",
    "TORCH_TO_NUMPY_DTYPE_DICT",
    "LinkedList",
    "NestedKey",
    "TensorDictFuture",
    "assert_allclose_td",
    "assert_close",
    "capture_non_tensor_stack",
    "convert_ellipsis_to_idx",
    "expand_as_right",
    "expand_right",
    "get_printoptions",
    "is_batchedtensor",
    "is_bool",
    "is_floating",
    "is_inexact",
    "is_integer",
    "is_non_tensor",
    "is_seq_of_nested_key",
    "is_tensor_collection",
    "is_tensorclass",
    "isin",
    "lazy_legacy",
    "list_to_stack",
    "logger",
    "parse_tensor_dict_string",
    "print_directory_tree",
    "remove_duplicates",
    "set_capture_non_tensor_stack",
    "set_lazy_legacy",
    "set_list_to_stack",
    "set_printoptions",
    "timeit",
    "unravel_key",
    "unravel_key_list",
    "unravel_key_to_tuple",
]

#: The separator of the string form of nested keys (``flatten_keys`` and friends).
KEY_SEPARATOR = "."

#: What indexes a tensordict along its batch dims (for annotations).
IndexType = None | int | slice | str | torch.Tensor | list[Any] | tuple[Any, ...]

#: What names a device (for annotations).
DeviceType = torch.device | str | int

_DTYPE_PAIRS = [
    (np.dtype(name), getattr(torch, name))
    for name in (
        "bool", "complex128", "complex64", "float16", "float32", "float64", "int16",
        "int32", "int64", "int8", "uint8", "uint16", "uint32", "uint64",
    )
]  # fmt: skip

#: numpy dtype -> torch dtype, for the dtypes both libraries have.
NUMPY_TO_TORCH_DTYPE_DICT: dict[np.dtype[Any], torch.dtype] = dict(_DTYPE_PAIRS)

#: torch dtype -> numpy dtype (the reverse of :data:`NUMPY_TO_TORCH_DTYPE_DICT`).
TORCH_TO_NUMPY_DTYPE_DICT: dict[torch.dtype, np.dtype[Any]] = {t: n for n, t in _DTYPE_PAIRS}


def _make_logger() -> logging.Logger:
    log = logging.getLogger("tensordict")
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s [%(name)s][%(levelname)s] %(message)s"))
        log.addHandler(handler)
        log.setLevel(os.environ.get("TD_LOGGING_LEVEL", "INFO").upper())
        log.propagate = False
    return log


#: The library's logger (``"tensordict"``, level ``INFO`` or ``$TD_LOGGING_LEVEL``).
logger = _make_logger()


def unravel_key(key: NestedKey) -> str | tuple[str, ...]:
    """Flatten a nested key: a string stays a string, a tuple becomes a flat tuple of
    strings (one string when it holds one). A tuple that is not a valid key (holding
    something else than strings, or empty) gives ``()``, as in the reference.

    >>> unravel_key(("a", ("b", ("c",)))), unravel_key(("a",)), unravel_key("a")
    (('a', 'b', 'c'), 'a', 'a')
    >>> unravel_key((0,)), unravel_key(())
    ((), ())
    """
    if type(key) is str:
        return key
    if isinstance(key, tuple):
        flat = unravel_key_to_tuple(key)
        return flat[0] if len(flat) == 1 else flat
    if isinstance(key, str):
        return str(key)
    # "key should be a Sequence<NestedKey>": the reference's wording, which clients match
    raise NotAKeyError(
        f"key should be a Sequence<NestedKey>: unravel_key takes a string or a tuple of "
        f"strings; got {key!r} (type {type(key).__name__})."
    )


def unravel_key_list(keys: Iterable[NestedKey]) -> list[str | tuple[str, ...]]:
    """Unravel every key of a list or tuple (see :func:`unravel_key`); any entry that is
    not a valid key raises ``RuntimeError``, anything but a list or tuple ``TypeError``.

    >>> unravel_key_list(["a", ("b", ("c",)), ("d",)])
    ['a', ('b', 'c'), 'd']
    """
    if not isinstance(keys, (list, tuple)):
        # the wording of the reference's once-compiled function, which clients match
        raise TypeError(
            "unravel_key_list(): incompatible function arguments: expected a list or a tuple "
            f"of keys, got {type(keys).__name__} {keys!r}."
        )
    out = []
    for key in keys:
        if not is_nested_key(key):
            raise NotAKeyError(
                f"unravel_key_list: {key!r} is not a key (a string or a non-empty tuple of strings)."
            )
        out.append(_unravel_key(key))
    return out


def _dtype_of(args: tuple[Any, ...]) -> torch.dtype | None:
    if not args:
        raise TypeError("the dtype predicates take the value to test as last argument.")
    return getattr(args[-1], "dtype", None) if isinstance(args[-1], torch.Tensor) else None


def is_floating(*args: Any) -> bool:
    """Whether the last argument is a tensor of a floating-point dtype.

    Only the last argument is looked at, so the predicate works as ``fn(value)`` (in
    :meth:`~tensordict.TensorDictBase.apply`) and as ``fn(key, value)`` (a ``cast_filter``).

    >>> import torch
    >>> is_floating(torch.zeros(2)), is_floating("k", torch.zeros(2, dtype=torch.cfloat))
    (True, False)
    """
    dtype = _dtype_of(args)
    return dtype is not None and dtype.is_floating_point


def is_inexact(*args: Any) -> bool:
    """Whether the last argument is a tensor of a floating-point or complex dtype.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict(x=torch.zeros(2), i=torch.zeros(2, dtype=torch.long))
    >>> half = td.half(cast_filter=is_inexact)
    >>> half["x"].dtype, half["i"].dtype
    (torch.float16, torch.int64)
    """
    dtype = _dtype_of(args)
    return dtype is not None and (dtype.is_floating_point or dtype.is_complex)


def is_bool(*args: Any) -> bool:
    """Whether the last argument is a boolean tensor.

    >>> import torch
    >>> is_bool(torch.ones(1, dtype=torch.bool)), is_bool("k", torch.ones(1))
    (True, False)
    """
    return _dtype_of(args) is torch.bool


def is_integer(*args: Any) -> bool:
    """Whether the last argument is a tensor of an integer dtype (``bool`` excluded).

    >>> import torch
    >>> is_integer(torch.ones(1, dtype=torch.uint8)), is_integer(torch.ones(1, dtype=torch.bool))
    (True, False)
    """
    dtype = _dtype_of(args)
    return (
        dtype is not None
        and dtype is not torch.bool
        and not dtype.is_floating_point
        and not dtype.is_complex
    )


def _human_size(size: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1024 or unit == "TB":
            return f"{size:.2f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def print_directory_tree(
    path: str | os.PathLike[str], indent: str = "", display_metadata: bool = True
) -> str:
    """Log (at ``INFO``, with :data:`logger`) and return the tree of files under ``path``.

    Directories end with ``/`` and each level is indented by four more spaces after
    ``indent``; with ``display_metadata`` the first line gives the total size.

    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = (pathlib.Path(d) / "x.bin").write_bytes(b"1234")
    ...     print(print_directory_tree(d)[:20])
    Directory size: 4.00
    """
    path = os.fspath(path)
    lines: list[str] = []
    if display_metadata:
        total = 0
        if os.path.isdir(path):
            for root, _, files in os.walk(path):
                total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
        else:
            total = os.path.getsize(path)
        lines.append(f"Directory size: {_human_size(total)}")

    def walk(current: str, depth: int) -> None:
        name = os.path.basename(os.path.normpath(current))
        pad = indent + " " * (4 * depth)
        if os.path.isdir(current):
            lines.append(f"{pad}{name}/")
            for child in os.listdir(current):
                walk(os.path.join(current, child), depth + 1)
        else:
            lines.append(f"{pad}{name}")

    walk(path, 0)
    for line in lines:
        logger.info(line)
    return "\n".join(lines)


@overload
def expand_as_right(tensor: torch.Tensor, dest: torch.Tensor | TensorDictBase) -> torch.Tensor: ...
@overload
def expand_as_right(
    tensor: TensorDictBase, dest: torch.Tensor | TensorDictBase
) -> TensorDictBase: ...
def expand_as_right(tensor: Any, dest: Any) -> Any:
    """Expand ``tensor`` to ``dest``'s shape by adding trailing singleton dimensions.

    >>> import torch
    >>> expand_as_right(torch.tensor([1, 2]), torch.zeros(2, 3)).tolist()
    [[1, 1, 1], [2, 2, 2]]
    >>> expand_as_right(torch.ones(1), torch.zeros(2, 3)).shape  # size-1 dims broadcast
    torch.Size([2, 3])
    """
    if dest.ndim < tensor.ndim:
        raise RuntimeError(
            f"expand_as_right: tensor of shape {tuple(tensor.shape)} has more dimensions than "
            f"the destination shape {tuple(dest.shape)}."
        )
    if any(t != d and t != 1 for t, d in zip(tensor.shape, dest.shape)):
        raise RuntimeError(
            f"expand_as_right: the leading dimensions of the destination {tuple(dest.shape)} "
            f"must equal the tensor's shape {tuple(tensor.shape)} (or be broadcast from 1)."
        )
    for _ in range(dest.ndim - tensor.ndim):
        tensor = tensor.unsqueeze(-1)
    return tensor.expand(dest.shape)


def expand_right(tensor: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    """Expand ``tensor`` to ``shape`` by adding trailing singleton dimensions.

    >>> import torch
    >>> expand_right(torch.tensor([1, 2]), (2, 2)).tolist()
    [[1, 1], [2, 2]]
    """
    size = torch.Size(shape)
    tensor = tensor.reshape(tensor.shape + (1,) * (len(size) - tensor.ndim))
    return tensor.expand(size)


def isin(
    input: TensorDictBase, reference: TensorDictBase, key: NestedKey, dim: int = 0
) -> torch.Tensor:
    """Which elements of ``input`` (along ``dim``) have their ``key`` entry in ``reference``.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> a = TensorDict({"k": torch.tensor([1, 2, 3])}, [3])
    >>> b = TensorDict({"k": torch.tensor([3, 1])}, [2])
    >>> isin(a, b, "k").tolist()
    [True, False, True]
    """
    x: torch.Tensor = input.get(key)
    ref: torch.Tensor = reference.get(key)
    x = x.movedim(dim, 0).reshape(x.shape[dim], -1)
    ref = ref.movedim(dim, 0).reshape(ref.shape[dim], -1)
    return (x.unsqueeze(1) == ref.unsqueeze(0)).all(-1).any(-1)


@overload
def remove_duplicates(
    input: TensorDictBase, key: NestedKey, dim: int = 0, *, return_indices: Literal[False] = False
) -> TensorDictBase: ...
@overload
def remove_duplicates(
    input: TensorDictBase, key: NestedKey, dim: int = 0, *, return_indices: Literal[True]
) -> tuple[TensorDictBase, torch.Tensor]: ...
@overload
def remove_duplicates(
    input: TensorDictBase, key: NestedKey, dim: int = 0, *, return_indices: bool
) -> TensorDictBase | tuple[TensorDictBase, torch.Tensor]: ...
def remove_duplicates(
    input: TensorDictBase, key: NestedKey, dim: int = 0, *, return_indices: bool = False
) -> TensorDictBase | tuple[TensorDictBase, torch.Tensor]:
    """Keep the first element of each group sharing the same ``key`` value along ``dim``.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict({"k": torch.tensor([1, 2, 1, 3])}, [4])
    >>> remove_duplicates(td, "k")["k"].tolist()
    [1, 2, 3]
    """
    values = input.get(key)
    flat = values.movedim(dim, 0).reshape(values.shape[dim], -1)
    _, inverse = torch.unique(flat, dim=0, return_inverse=True)
    first = torch.full(
        (int(inverse.max()) + 1 if inverse.numel() else 0,), flat.shape[0], dtype=torch.long
    )
    first = first.scatter_reduce(0, inverse, torch.arange(flat.shape[0]), reduce="amin")
    keep = first.sort().values
    index = (slice(None),) * dim + (keep,)
    out = input[index]
    return (out, keep) if return_indices else out


def convert_ellipsis_to_idx(
    idx: tuple[Any, ...] | Any, batch_size: Sequence[int]
) -> tuple[Any, ...]:
    """``idx`` as a tuple with its ellipsis replaced by the full slices it stands for.

    The other elements are kept as they are. An index with more than one ellipsis raises
    an error that is both a ``RuntimeError`` and an ``IndexError``.

    >>> convert_ellipsis_to_idx((0, ..., 0), [3, 4, 5, 6])
    (0, slice(None, None, None), slice(None, None, None), 0)
    >>> convert_ellipsis_to_idx(..., [2])
    (slice(None, None, None),)
    """
    items = idx if isinstance(idx, tuple) else (idx,)
    at = [i for i, item in enumerate(items) if item is Ellipsis]
    if len(at) > 1:
        raise EllipsisError(f"an index can only have a single ellipsis ('...'), got {idx!r}.")
    if not at:
        return items
    elided = max(len(batch_size) - sum(map(_dims_consumed, items)), 0)
    return items[: at[0]] + (slice(None),) * elided + items[at[0] + 1 :]


def is_batchedtensor(tensor: object) -> bool:
    """Whether ``tensor`` is a functorch batched tensor (inside ``torch.vmap``).

    >>> import torch
    >>> is_batchedtensor(torch.zeros(1))
    False
    """
    if not isinstance(tensor, torch.Tensor):
        return False
    return bool(torch._C._functorch.is_batchedtensor(tensor))
