"""Between lazy and dense: the dense forms of a lazy stack (``contiguous``,
``to_tensordict``, ``densify``, ``to_padded_tensor``), :func:`to_dense` for any tensordict
holding lazy stacks, and the stacking functions :func:`lazy_stack` and
:func:`maybe_dense_stack` (dense when possible).

Entries are stacked key by key; keys only some members hold are dropped (a dense
tensordict cannot represent them). Entries whose shapes differ across the members raise
a clear error, become nested tensors (``densify``) or are padded (``to_padded_tensor``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from tensordict._collection import wrapped
from tensordict._nontensor import NON_TENSOR, NonTensorStack
from tensordict._td import TensorDict
from tensordict.base import NO_DEFAULT, TensorDictBase

_Tensor = torch.Tensor


class LazyDenseOps:
    """Mixin: the dense copies of a ``LazyStackedTensorDict``."""

    tensordicts: list[TensorDictBase]
    stack_dim: int
    _batch_size: torch.Size

    if TYPE_CHECKING:  # pragma: no cover - provided by LazyStackedTensorDict

        def _common_keys(self) -> list[str]: ...
        def _stack_values(self, key: tuple, values: list) -> Any: ...
        def _has_names(self) -> bool: ...
        @property
        def names(self) -> list[str | None]: ...
        @property
        def device(self) -> torch.device | None: ...

    def _dense(self, layout: torch.layout | None) -> TensorDict:
        """A dense copy: entries stacked, nested stacks densified, exclusive keys dropped.

        Heterogeneous entries become nested tensors of ``layout`` (an error without one).
        """
        sd = self.stack_dim
        out: dict[str, Any] = {}
        for key in self._common_keys():
            values = [td._get_str(key, NO_DEFAULT) for td in self.tensordicts]
            first = values[0]
            if (
                layout is not None
                and isinstance(first, _Tensor)
                and any(isinstance(v, _Tensor) and v.shape != first.shape for v in values)
            ):
                if sd != 0:
                    raise RuntimeError(
                        f"densify: entry {key!r} has different shapes across the stack, which "
                        f"needs a nested tensor; nested tensors stack along dimension 0, but "
                        f"this stack is along stack_dim={sd}."
                    )
                out[key] = torch.nested.nested_tensor(values, layout=layout)
                continue
            value = self._stack_values((key,), values)
            if isinstance(value, LazyDenseOps):
                value = value._dense(layout)
            elif isinstance(value, TensorDictBase):
                value = to_dense(value, clone=False)
            out[key] = value
        names = self.names if self._has_names() else None
        return TensorDict._new_unsafe(out, self._batch_size, self.device, names)

    def contiguous(self) -> TensorDict:
        """A dense :class:`~tensordict.TensorDict` copy (keys missing from some members are
        dropped; heterogeneous entries raise — see :meth:`densify`).

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> lazy = lazy_stack([TensorDict({"a": torch.zeros(2)}, [2])] * 3, 1)
        >>> dense = lazy.contiguous()
        >>> type(dense).__name__, dense["a"].shape
        ('TensorDict', torch.Size([2, 3]))
        """
        return self._dense(None)

    def to_tensordict(self, *, retain_none: bool | None = None) -> TensorDict:
        """A dense :class:`~tensordict.TensorDict` copy (same as :meth:`contiguous`).

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> lazy_stack([TensorDict({"a": torch.zeros(2)}, [2])] * 3).to_tensordict().batch_size
        torch.Size([3, 2])
        """
        return self._dense(None)

    def densify(self, layout: torch.layout = torch.strided) -> TensorDict:
        """A dense copy in which heterogeneous entries become nested tensors of ``layout``.

        ``torch.jagged`` gives nested tensors most operations (and
        :meth:`~tensordict.TensorDict.to_padded_tensor`) accept.

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> lazy = lazy_stack([TensorDict({"a": torch.zeros(2, 3)}), TensorDict({"a": torch.ones(4, 3)})])
        >>> dense = lazy.densify(layout=torch.jagged)
        >>> dense["a"].is_nested, dense.to_padded_tensor()["a"].shape
        (True, torch.Size([2, 4, 3]))
        """
        return self._dense(layout)

    def to_padded_tensor(self, padding: float = 0.0, mask_key: Any = None) -> TensorDict:
        """A dense copy where entries of different shapes are padded with ``padding`` to a
        common shape before stacking. With ``mask_key``, a boolean mask of the valid
        elements of each tensor entry is written at ``(mask_key, *entry_key)``.

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> lazy = lazy_stack([TensorDict({"a": torch.ones(1)}), TensorDict({"a": torch.ones(3)})])
        >>> out = lazy.to_padded_tensor(mask_key="mask")
        >>> out["a"].tolist(), out["mask", "a"].tolist()
        ([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]], [[True, False, False], [True, True, True]])
        """
        out = self._padded(padding, mask_key is not None)
        if mask_key is not None:
            masks = out.pop("__masks__")
            out.set(mask_key, masks)
        return out

    def _padded(self, padding: float, with_masks: bool) -> TensorDict:
        sd = self.stack_dim
        out: dict[str, Any] = {}
        masks: dict[str, Any] = {}
        for key in self._common_keys():
            values = [td._get_str(key, NO_DEFAULT) for td in self.tensordicts]
            first = values[0]
            if isinstance(first, _Tensor) and all(isinstance(v, _Tensor) for v in values):
                if any(v.ndim != first.ndim for v in values):
                    raise RuntimeError(
                        f"to_padded_tensor: entry {key!r} has a different number of dimensions "
                        f"across the stack ({[v.ndim for v in values]}); only sizes can differ."
                    )
                shape = [max(s) for s in zip(*(v.shape for v in values), strict=True)]
                padded, valid = [], []
                for v in values:
                    p = v.new_full(shape, padding)
                    region = tuple(slice(0, s) for s in v.shape)
                    p[region] = v
                    padded.append(p)
                    if with_masks:
                        m = torch.zeros(shape, dtype=torch.bool, device=v.device)
                        m[region] = True
                        valid.append(m)
                out[key] = torch.stack(padded, sd)
                if with_masks:
                    masks[key] = torch.stack(valid, sd)
                continue
            value = self._stack_values((key,), values)
            if isinstance(value, LazyDenseOps):
                value = value._padded(padding, with_masks)
                if with_masks:
                    masks[key] = value.pop("__masks__")
            out[key] = value
        if with_masks:
            out["__masks__"] = TensorDict._new_unsafe(masks, self._batch_size, self.device)
        return TensorDict._new_unsafe(out, self._batch_size, self.device)


def to_dense(td: TensorDictBase, *, clone: bool, layout: torch.layout | None = None) -> TensorDict:
    """``td`` as a dense :class:`TensorDict`: nested lazy stacks stacked, tensors copied
    when ``clone``."""
    if isinstance(td, LazyDenseOps):
        return td._dense(layout)
    if not isinstance(td, TensorDict):
        return TensorDict(
            {
                k: to_dense(v, clone=clone, layout=layout) if isinstance(v, TensorDictBase) else v
                for k, v in td.items()
            },
            batch_size=td.batch_size,
        )
    out: dict[str, Any] = {}
    changed = clone
    for key, value in td._tensordict.items():
        if isinstance(value, _Tensor):
            out[key] = value.clone() if clone else value
        elif isinstance(value, TensorDictBase):
            sub = to_dense(value, clone=clone, layout=layout)
            changed = changed or sub is not value
            out[key] = sub
        elif clone and isinstance(value, NON_TENSOR):
            out[key] = value.clone()
        else:
            out[key] = value
    if not changed:
        return td
    return TensorDict._new_unsafe(out, td.batch_size, td.device, td._names and list(td._names))


def lazy_stack(
    input: Sequence[Any], dim: int = 0, *, out: TensorDictBase | None = None, **kwargs: Any
) -> Any:
    """Stack tensordicts lazily: a :class:`LazyStackedTensorDict` that keeps them as they are.

    Members may hold different keys and entries of different shapes. Non-tensor values
    (``NonTensorData``) stack into a :class:`~tensordict.NonTensorStack`.

    >>> import torch
    >>> from tensordict import TensorDict, lazy_stack
    >>> lazy = lazy_stack([TensorDict({"a": torch.zeros(2)}), TensorDict({"a": torch.ones(3)})])
    >>> lazy.batch_size, [td["a"].shape for td in lazy]
    (torch.Size([2]), [torch.Size([2]), torch.Size([3])])
    """
    if kwargs:
        raise TypeError(f"lazy_stack() got unexpected keyword arguments {sorted(kwargs)}.")
    items = list(input)
    if not items:
        raise RuntimeError("lazy_stack expects a non-empty sequence of tensordicts.")
    if all(isinstance(x, NON_TENSOR) for x in items):
        return NonTensorStack(*items, stack_dim=dim)
    from tensordict._lazy import LazyStackedTensorDict

    inner = wrapped(items)
    if inner is not None:  # tensorclasses: a lazy stack of their data, in the same class
        return inner[1](lazy_stack(inner[0], dim, out=getattr(out, "_tensordict", out)))
    result = LazyStackedTensorDict(*items, stack_dim=dim)
    if out is not None:
        out.update_(result)
        return out
    return result


def _same_structure(tds: Sequence[TensorDictBase]) -> bool:
    """Whether dense tensordicts have the same keys, leaf kinds and leaf shapes."""
    first = tds[0]
    if not isinstance(first, TensorDict):
        return False
    ref = [(k, type(v), getattr(v, "shape", None)) for k, v in first.items(True, True)]
    for td in tds[1:]:
        if not isinstance(td, TensorDict):
            return False
        got = [(k, type(v), getattr(v, "shape", None)) for k, v in td.items(True, True)]
        if got != ref:
            return False
    return True


def maybe_dense_stack(
    input: Sequence[TensorDictBase],
    dim: int = 0,
    *,
    out: TensorDictBase | None = None,
    **kwargs: Any,
) -> TensorDictBase:
    """Stack densely when the tensordicts share keys and shapes, lazily otherwise.

    >>> import torch
    >>> from tensordict import TensorDict, maybe_dense_stack
    >>> same = [TensorDict({"a": torch.zeros(2)}, [2])] * 2
    >>> other = [TensorDict({"a": torch.zeros(2)}, [2]), TensorDict({"a": torch.zeros(2, 5)}, [2])]
    >>> type(maybe_dense_stack(same)).__name__, type(maybe_dense_stack(other)).__name__
    ('TensorDict', 'LazyStackedTensorDict')
    """
    from tensordict._functional import _combine_all

    items = list(input)
    inner = wrapped(items)
    if inner is not None:  # tensorclasses: stack their data, in the same class
        target = getattr(out, "_tensordict", out)
        return inner[1](maybe_dense_stack(inner[0], dim, out=target, **kwargs))
    if items and _same_structure(items):
        return _combine_all(items, "stack", dim, out)  # type: ignore[no-any-return]
    return lazy_stack(items, dim, out=out, **kwargs)  # type: ignore[no-any-return]
