"""Names the reference library keeps private that real clients import anyway.

TorchRL (the largest user of the reference) imports ``tensordict.utils._zip_strict``,
``tensordict.base._is_leaf_nontensor``, ``tensordict.base._NESTED_TENSORS_AS_LISTS`` and a
few more. They are part of the drop-in promise, so they live here, each with the
reference's meaning, and :mod:`tensordict.utils` and :mod:`tensordict.base` re-export
them. New code should use the public names given in each docstring. The docs'
compatibility page lists them.

>>> import torch
>>> _maybe_correct_neg_dim(-1, torch.Size([3, 4]))
1
>>> list(_zip_strict([1, 2], "ab"))
[(1, 'a'), (2, 'b')]
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch.nn.parameter import UninitializedTensorMixin  # type: ignore[attr-defined]

from tensordict._keys.index import indexed_batch_size, normalize_index
from tensordict._keys.nested import is_nested_key, unravel_key_to_tuple
from tensordict._kinds import kinds as _kinds
from tensordict._kinds.kinds import default_is_leaf, is_leaf_nontensor
from tensordict._leaves.collection import TensorCollection
from tensordict._leaves.nontensor import NON_TENSOR

__all__ = [
    "_ACCEPTED_CLASSES",
    "_NESTED_TENSORS_AS_LISTS",
    "_NESTED_TENSORS_AS_LISTS_NONTENSOR",
    "_default_is_leaf",
    "_getitem_batch_size",
    "_is_leaf_nontensor",
    "_is_non_tensor",
    "_is_tensorclass",
    "_maybe_correct_neg_dim",
    "_shape",
    "_unravel_key_to_tuple",
    "_zip_strict",
    "is_seq_of_nested_key",
    "timeit",
]

#: ``zip(..., strict=True)``: raises ``ValueError`` when the iterables differ in length.
_zip_strict = functools.partial(zip, strict=True)

#: :func:`tensordict.unravel_key_to_tuple` (``()`` for anything that is not a key).
_unravel_key_to_tuple = unravel_key_to_tuple

#: :func:`tensordict.default_is_leaf`.
_default_is_leaf = default_is_leaf

#: :func:`tensordict.is_leaf_nontensor`.
_is_leaf_nontensor = is_leaf_nontensor

#: What ``TensorDict`` accepts as a value without conversion (read by clients' checks).
_ACCEPTED_CLASSES: tuple[type, ...] = (torch.Tensor, TensorCollection)


def _is_non_tensor(cls: type) -> bool:
    """Whether the class ``cls`` is a non-tensor leaf type (see
    :func:`tensordict.is_non_tensor`, which also takes instances).

    >>> from tensordict import NonTensorData
    >>> _is_non_tensor(NonTensorData), _is_non_tensor(int)
    (True, False)
    """
    return isinstance(cls, type) and issubclass(cls, NON_TENSOR)


def _is_tensorclass(cls: type) -> bool:
    """Whether the class ``cls`` is a tensorclass (see :func:`tensordict.is_tensorclass`).

    >>> from tensordict import TensorDict
    >>> _is_tensorclass(TensorDict)
    False
    """
    return _kinds.is_tensorclass(cls)


def _shape(tensor: Any, nested_shape: bool = False) -> torch.Size:
    """The shape of ``tensor``; a nested tensor's ragged dims read ``-1`` (or, with
    ``nested_shape=True``, the tensor of its members' sizes).

    >>> import torch
    >>> _shape(torch.zeros(2, 3))
    torch.Size([2, 3])
    >>> nt = torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)])
    >>> _shape(nt)
    torch.Size([2, -1])
    """
    if isinstance(tensor, UninitializedTensorMixin):
        return torch.Size([*getattr(tensor, "batch_size", ()), -1])
    if not isinstance(tensor, torch.Tensor) or not tensor.is_nested:
        return tensor.shape  # type: ignore[no-any-return]
    if nested_shape:
        sizes: Any = tensor._nested_tensor_size()  # a tensor of the members' sizes
        return sizes  # type: ignore[no-any-return]
    sizes = []
    for dim in range(tensor.ndim):
        try:
            sizes.append(tensor.size(dim))
        except RuntimeError:  # a ragged dim
            sizes.append(-1)
    return torch.Size(sizes)


def _getitem_batch_size(batch_size: Sequence[int], index: Any) -> torch.Size:
    """The batch size that indexing a tensordict of ``batch_size`` with ``index`` gives.

    >>> import torch
    >>> _getitem_batch_size(torch.Size([3, 4]), (slice(None), 0))
    torch.Size([3])
    >>> _getitem_batch_size(torch.Size([3, 4]), torch.tensor([0, 2]))
    torch.Size([2, 4])
    """
    size = torch.Size(batch_size)
    return indexed_batch_size(normalize_index(index, size), size)


def _maybe_correct_neg_dim(dim: int, shape: Sequence[int] | None, ndim: int | None = None) -> int:
    """``dim`` as a non-negative dim of ``shape`` (or of ``ndim`` dims); ``IndexError``
    when it is out of range.

    >>> _maybe_correct_neg_dim(-2, None, ndim=3)
    1
    """
    if ndim is None:
        if shape is None:
            raise TypeError("_maybe_correct_neg_dim needs a shape or ndim.")
        ndim = len(shape)
    new_dim = dim + ndim if dim < 0 else dim
    if not 0 <= new_dim < ndim:
        what = f"shape {torch.Size(shape)}" if shape is not None else f"{ndim} batch dims"
        raise IndexError(f"dim {dim} is out of range for a tensordict with {what}.")
    return new_dim


def is_seq_of_nested_key(seq: Any) -> bool:
    """Whether ``seq`` is a sequence (lists included) of nested keys; an empty sequence
    counts.

    >>> is_seq_of_nested_key(["a", ("b", "c")]), is_seq_of_nested_key([]), is_seq_of_nested_key("a")
    (True, True, True)
    >>> is_seq_of_nested_key([0])
    False
    """
    if not isinstance(seq, Sequence):
        return False
    return all(_is_nested_key_or_list(key) for key in seq)


def _is_nested_key_or_list(key: Any) -> bool:
    # the reference's rule here: a string, or a non-empty list/tuple of strings
    if isinstance(key, str):
        return True
    if isinstance(key, list) and key:
        return all(isinstance(part, str) for part in key)
    return is_nested_key(key)


class _NestedTensorsAsLists:
    """The ``is_leaf`` rule that lists a lazy stack's members one by one.

    Passed as ``is_leaf`` to ``items``/``values`` (include_nested), a lazy stack is not
    stacked: each member's entries are listed under the member's index (``("n", "0",
    "x")``, ``("n", "1", "x")`` …), so members of different shapes can be walked.
    ``keys`` lists the stack's common keys as usual. Falsy, as in the reference, so
    code that tests ``is_leaf or default`` treats it as the default rule.
    """

    _instance: Any = None
    _leaf_rule: Callable[[type], bool] = staticmethod(default_is_leaf)

    def __new__(cls) -> Any:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __call__(self, cls: type) -> bool:
        return self._leaf_rule(cls)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class _NestedTensorsAsListsNonTensor(_NestedTensorsAsLists):
    """:class:`_NestedTensorsAsLists` with non-tensor entries counted as leaves."""

    _instance: Any = None
    _leaf_rule: Callable[[type], bool] = staticmethod(is_leaf_nontensor)


_NESTED_TENSORS_AS_LISTS = _NestedTensorsAsLists()
_NESTED_TENSORS_AS_LISTS_NONTENSOR = _NestedTensorsAsListsNonTensor()


def items_as_lists(
    td: Any, include_nested: bool, leaves_only: bool, is_leaf: Callable[[type], bool]
) -> Iterator[tuple[Any, Any]]:
    """``td.items(include_nested, leaves_only, is_leaf=_NESTED_TENSORS_AS_LISTS)``: the
    members of every lazy stack listed one by one under their index.

    >>> import torch
    >>> from tensordict import TensorDict, lazy_stack
    >>> stack = lazy_stack([TensorDict(x=torch.zeros(2)), TensorDict(x=torch.zeros(3))])
    >>> [(k, v.shape) for k, v in items_as_lists(stack, True, True, _NESTED_TENSORS_AS_LISTS)]
    [(('0', 'x'), torch.Size([2])), (('1', 'x'), torch.Size([3]))]
    """
    yield from _walk_as_lists(td, (), include_nested, leaves_only, is_leaf)


def _walk_as_lists(
    td: Any, prefix: tuple[str, ...], include_nested: bool, leaves_only: bool, is_leaf: Any
) -> Iterator[tuple[Any, Any]]:
    members = _kinds.lazy_members(td)
    if members is not None:
        for i, member in enumerate(members):
            yield from _walk_as_lists(
                member, (*prefix, str(i)), include_nested, leaves_only, is_leaf
            )
        return
    for key in td.keys():
        value = td._get_str(key, None)
        full = (*prefix, key)
        name: Any = full if len(full) > 1 else key
        if is_leaf(type(value)):
            yield name, value
            continue
        if not leaves_only:
            yield name, value
        if include_nested and _kinds.is_tensor_collection(type(value)):
            yield from _walk_as_lists(value, full, include_nested, leaves_only, is_leaf)


def is_as_lists(is_leaf: Any) -> bool:
    """Whether ``is_leaf`` is one of the rules that list lazy-stack members one by one.

    >>> is_as_lists(_NESTED_TENSORS_AS_LISTS), is_as_lists(None)
    (True, False)
    """
    return isinstance(is_leaf, _NestedTensorsAsLists)


class timeit:
    """Time a function or a block of code under a name; :meth:`print` logs each name's
    mean and total time, :meth:`erase` resets them.

    >>> @timeit("step")
    ... def step():
    ...     return 1
    >>> with timeit("block"):
    ...     _ = step()
    >>> sorted(timeit.todict())
    ['block', 'step']
    >>> timeit.erase()
    """

    _REG: dict[str, list[float]] = {}

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return timed

    def __enter__(self) -> timeit:
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        elapsed = time.perf_counter() - self._t0
        record = self._REG.setdefault(self.name, [0.0, 0.0, 0])
        count = int(record[2]) + 1
        record[0] += (elapsed - record[0]) / count  # running mean
        record[1] += elapsed
        record[2] = count

    @staticmethod
    def print(prefix: str | None = None) -> str:
        """Log (at ``INFO``) and return one line per name: its mean time and total."""
        lines = []
        for name in sorted(timeit._REG):
            mean, total, _ = timeit._REG[name]
            line = f"{name} took {mean * 1000:.4g} msec (total = {total:.4g} sec)"
            lines.append(f"{prefix} -- {line}" if prefix else line)
        log = logging.getLogger("tensordict")  # tensordict.utils.logger
        for line in lines:
            log.info(line)
        return "\n".join(lines)

    @staticmethod
    def todict(percall: bool = True, prefix: str | None = None) -> dict[str, float]:
        """Each name's mean time per call (``percall=True``) or total time, in seconds."""
        at = 0 if percall else 1
        head = f"{prefix}/" if prefix else ""
        return {f"{head}{name}": record[at] for name, record in timeit._REG.items()}

    @staticmethod
    def erase() -> None:
        """Reset every name's count and times to zero."""
        for name in timeit._REG:
            timeit._REG[name] = [0.0, 0.0, 0]
