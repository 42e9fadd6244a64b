"""Leaves of a tensordict combined into one tensor.

:meth:`~LeafTensorOps.cat_tensors` and :meth:`~LeafTensorOps.stack_tensors` replace some
entries by their concatenation (stack) written under a new key;
:meth:`~LeafTensorOps.cat_from_tensordict` and :meth:`~LeafTensorOps.stack_from_tensordict`
return the concatenation (stack) of every tensor leaf.

Only the public tensordict API is used (``items``, ``get``, ``set``, ``del_``,
``is_locked``), so every tensordict type (dense, lazy stacks) has these methods. The
methods that write check everything before the first write: bad input leaves the
tensordict unchanged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any

import torch

from tensordict._keys.nested import NestedKey, unravel_key
from tensordict._kinds.kinds import is_tensor_collection
from tensordict._kinds.views import _sort_key
from tensordict._leaves.nontensor import is_non_tensor
from tensordict._util.errors import lock_error, missing_key

if TYPE_CHECKING:  # pragma: no cover
    from typing_extensions import Self

_Tensor = torch.Tensor
_Key = str | tuple[str, ...]
_Combine = Callable[[list[_Tensor], int], _Tensor]

#: Sentinel default of ``get``: ``None`` can be a stored value's stand-in elsewhere.
_MISSING: Any = object()


def _is_nested(value: Any) -> bool:
    return is_tensor_collection(value) and not is_non_tensor(value)


def _describe(value: Any) -> str:
    if _is_nested(value):
        return f"a nested {type(value).__name__}"
    if is_non_tensor(value):
        return f"a non-tensor {type(value).__name__}"
    return f"a non-tensor value of type {type(value).__name__}"


def _shapes(keys: Sequence[_Key], tensors: Sequence[_Tensor]) -> str:
    return ", ".join(f"{key!r}: {tuple(t.shape)}" for key, t in zip(keys, tensors))


# ---------------------------------------------------------------------- entries -> entry
def _locked_writer(td: Any, path: tuple[str, ...]) -> Any:
    """The tensordict a new entry at ``path`` would be added to (its deepest existing
    ancestor), or ``None`` when that is not a tensordict (``set`` reports it)."""
    for depth in range(len(path) - 1, 0, -1):
        parent = td.get(path[:depth], _MISSING)
        if parent is not _MISSING:
            return parent if _is_nested(parent) else None
    return td


def _combine_entries(
    td: Any,
    what: str,
    combine: _Combine,
    keys: tuple[NestedKey, ...],
    out_key: NestedKey,
    dim: int,
    keep_entries: bool,
) -> None:
    """The body of ``cat_tensors``/``stack_tensors``: check, combine, write, delete."""
    if not keys:
        raise TypeError(f"{what}() needs at least one key to combine.")
    sources = [unravel_key(key) for key in keys]
    target = unravel_key(out_key)
    tensors: list[_Tensor] = []
    for key in sources:
        value = td.get(key, _MISSING)
        if value is _MISSING:
            raise missing_key(key, td)
        if not isinstance(value, _Tensor):
            raise TypeError(
                f"{what}: the entry at {key!r} is {_describe(value)}; only tensor entries "
                "can be combined."
            )
        tensors.append(value)
    try:
        result = combine(tensors, dim)
    except (RuntimeError, IndexError) as err:
        raise type(err)(
            f"{what}: cannot combine the entries along dim={dim} ({_shapes(sources, tensors)}): "
            f"{err}"
        ) from err

    # Every write the lock forbids is refused here, before anything changes.
    removed = [] if keep_entries else [k for k in dict.fromkeys(sources) if k != target]
    for key in removed:
        parent = td if isinstance(key, str) else td.get(key[:-1])
        if parent.is_locked:
            raise lock_error(key, "delete")
    previous = td.get(target, _MISSING)
    if previous is _MISSING:
        writer = _locked_writer(td, (target,) if isinstance(target, str) else target)
        if writer is not None and writer.is_locked:
            raise lock_error(target)

    originals = dict(zip(sources, tensors))
    deleted: list[_Key] = []
    written = False
    try:
        td.set(target, result)
        written = True
        for key in removed:
            td.del_(key)
            deleted.append(key)
    except BaseException:
        # Only reached when a member of a lazy stack refuses a write the checks above
        # allowed (mixed lock states): put back what was changed, then re-raise.
        for key in deleted:
            with suppress(Exception):
                td.set(key, originals[key])
        if written:
            with suppress(Exception):
                if previous is _MISSING:
                    td.del_(target)
                else:
                    td.set(target, previous)
        raise


# ---------------------------------------------------------------------- leaves -> tensor
def _tensor_leaves(td: Any, prefix: tuple[str, ...], out: list[tuple[_Key, _Tensor]]) -> None:
    """Append ``(key, tensor)`` for every tensor leaf of ``td``, depth first."""
    for key, value in td.items():
        path = prefix + (key,)
        if isinstance(value, _Tensor):
            out.append((path if prefix else key, value))
        elif _is_nested(value):
            _tensor_leaves(value, path, out)


def _ordered_leaves(
    td: Any, what: str, order: bool | Sequence[NestedKey] | None
) -> tuple[list[_Key], list[_Tensor]]:
    """The tensor leaves of ``td`` in the order ``sorted=`` asks for."""
    leaves: list[tuple[_Key, _Tensor]] = []
    _tensor_leaves(td, (), leaves)
    if order is None or isinstance(order, bool):
        if order:
            leaves.sort(key=lambda item: _sort_key(item[0]))
        keys = [key for key, _ in leaves]
        tensors = [t for _, t in leaves]
    elif isinstance(order, Sequence) and not isinstance(order, str):
        wanted = [unravel_key(key) for key in order]
        found = dict(leaves)
        missing = [key for key in found if key not in set(wanted)]
        extra = [key for key in wanted if key not in found]
        repeated = [key for key, n in Counter(wanted).items() if n > 1]
        if missing or extra or repeated:
            problems = []
            if missing:
                problems.append(f"missing tensor leaves {missing}")
            if extra:
                problems.append(f"keys that are not tensor leaves {extra}")
            if repeated:
                problems.append(f"repeated keys {repeated}")
            raise RuntimeError(
                f"{what}: sorted= must list every tensor leaf key exactly once; got "
                f"{'; '.join(problems)} (tensor leaves: {list(found)})."
            )
        keys = wanted
        tensors = [found[key] for key in wanted]
    else:
        raise TypeError(
            f"{what}: sorted= takes a bool, None or a list of keys, got {type(order).__name__}."
        )
    if not tensors:
        raise RuntimeError(f"{what}: the tensordict holds no tensor leaves.")
    return keys, tensors


class LeafTensorOps:
    """Mixin of :class:`~tensordict.TensorDictBase`: ``cat_tensors``, ``stack_tensors``,
    ``cat_from_tensordict``, ``stack_from_tensordict``."""

    def cat_tensors(
        self,
        *keys: NestedKey,
        out_key: NestedKey,
        dim: int = 0,
        keep_entries: bool = False,
    ) -> Self:
        """Concatenate the tensor entries at ``keys`` with :func:`torch.cat` into ``out_key``.

        The source entries are removed unless ``keep_entries=True`` (an entry that is also
        ``out_key`` is overwritten). ``dim`` counts in the entries' dimensions, batch
        dimensions included, so the result must still start with the batch size. If
        anything fails (a missing or non-tensor key, shapes that do not concatenate, a
        result that does not fit the batch size, a locked tensordict) an error is raised
        and every entry keeps its value.

        Args:
            *keys: the (nested) keys of the tensors to concatenate, in order.

        Keyword Args:
            out_key: where the result is written.
            dim: the dimension to concatenate along.
            keep_entries: keep the source entries.

        Returns:
            ``self``.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(1), b=torch.ones(1))
        >>> td.cat_tensors("a", "b", out_key="c")["c"]
        tensor([0., 1.])
        >>> "a" in td.keys()
        False
        """
        td: Any = self
        _combine_entries(td, "cat_tensors", torch.cat, keys, out_key, dim, keep_entries)
        return self

    def stack_tensors(
        self,
        *keys: NestedKey,
        out_key: NestedKey,
        dim: int = 0,
        keep_entries: bool = False,
    ) -> Self:
        """Stack the tensor entries at ``keys`` with :func:`torch.stack` into ``out_key``.

        Same as :meth:`cat_tensors` with :func:`torch.stack`: the entries must share one
        shape and ``dim`` counts in the result's dimensions.

        Args:
            *keys: the (nested) keys of the tensors to stack, in order.

        Keyword Args:
            out_key: where the result is written.
            dim: the new dimension of the result.
            keep_entries: keep the source entries.

        Returns:
            ``self``.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(()), b=torch.ones(()))
        >>> td.stack_tensors("a", "b", out_key="c")["c"]
        tensor([0., 1.])
        >>> td = TensorDict(a=torch.zeros(2), b=torch.ones(2), batch_size=[2])
        >>> td.stack_tensors("a", "b", out_key="c", dim=1, keep_entries=True)["c"]
        tensor([[0., 1.],
                [0., 1.]])
        """
        td: Any = self
        _combine_entries(td, "stack_tensors", torch.stack, keys, out_key, dim, keep_entries)
        return self

    def cat_from_tensordict(
        self,
        dim: int = 0,
        *,
        sorted: bool | list[NestedKey] | None = None,
        out: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """:func:`torch.cat` of every tensor leaf (nested ones included).

        Non-tensor leaves are skipped. ``dim`` counts in the leaves' dimensions.

        Args:
            dim: the dimension to concatenate along.

        Keyword Args:
            sorted: the order of the leaves. ``None``/``False``: insertion order, depth
                first; ``True``: sorted by key, as ``keys(..., sort=True)`` sorts them
                (nested keys joined with ``"."``); a list of keys: that order, which must
                name every tensor leaf exactly once (else :class:`RuntimeError`).
            out: the output tensor, passed to :func:`torch.cat`.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(2, 1), b=torch.ones(2, 2), batch_size=[2])
        >>> td.cat_from_tensordict(dim=1)
        tensor([[0., 1., 1.],
                [0., 1., 1.]])
        >>> td.cat_from_tensordict(dim=1, sorted=["b", "a"])
        tensor([[1., 1., 0.],
                [1., 1., 0.]])
        """
        what = "cat_from_tensordict"
        keys, tensors = _ordered_leaves(self, what, sorted)
        try:
            return torch.cat(tensors, dim, out=out)
        except (RuntimeError, IndexError) as err:
            raise type(err)(
                f"{what}: cannot concatenate the leaves along dim={dim} "
                f"({_shapes(keys, tensors)}): {err}"
            ) from err

    def stack_from_tensordict(
        self,
        dim: int = 0,
        *,
        sorted: bool | list[NestedKey] | None = None,
        out: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """:func:`torch.stack` of every tensor leaf (nested ones included).

        The leaves must share one shape; non-tensor leaves are skipped. ``dim`` counts in
        the result's dimensions. ``sorted`` and ``out`` are as in
        :meth:`cat_from_tensordict`.

        Args:
            dim: the new dimension of the result.

        Keyword Args:
            sorted: the order of the leaves (see :meth:`cat_from_tensordict`).
            out: the output tensor, passed to :func:`torch.stack`.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(2), b=torch.ones(2), batch_size=[2])
        >>> td.stack_from_tensordict(dim=1)
        tensor([[0., 1.],
                [0., 1.]])
        """
        what = "stack_from_tensordict"
        keys, tensors = _ordered_leaves(self, what, sorted)
        shape = tensors[0].shape
        if any(t.shape != shape for t in tensors):
            raise RuntimeError(
                f"{what}: the tensor leaves must share one shape to be stacked; got "
                f"{_shapes(keys, tensors)}."
            )
        try:
            return torch.stack(tensors, dim, out=out)
        except (RuntimeError, IndexError) as err:
            raise type(err)(f"{what}: cannot stack the leaves along dim={dim}: {err}") from err
