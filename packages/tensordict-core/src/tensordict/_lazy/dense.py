"""Between lazy and dense: the dense forms of a lazy stack (``contiguous``,
``to_tensordict``, ``densify``, ``to_padded_tensor``), :func:`to_dense` for any tensordict
holding lazy stacks. (The stacking functions :func:`~tensordict.lazy_stack` and
:func:`~tensordict.maybe_dense_stack` are in :mod:`tensordict._combine.functional`.)

Entries are stacked key by key; keys only some members hold are dropped (a dense
tensordict cannot represent them). Entries whose shapes differ across the members raise
a clear error, become nested tensors (``densify``) or are padded (``to_padded_tensor``).
"""

from __future__ import annotations

from typing import Any

import torch

from tensordict._dense.td import TensorDict
from tensordict._formats.convert import to_dense
from tensordict._kinds import kinds as _kinds
from tensordict._kinds.inplace import check as check_inplace
from tensordict.base import NO_DEFAULT, TensorDictBase

_Tensor = torch.Tensor


class LazyDenseOps(_kinds.LazyMixin):
    """Mixin: the dense copies of a ``LazyStackedTensorDict``."""

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
            if isinstance(value, _kinds.Lazy):
                value = value._dense(layout)
            elif isinstance(value, TensorDictBase):
                value = to_dense(value, clone=False)
            out[key] = value
        names = self.names if self._has_names() else None
        return TensorDict._new_unsafe(out, self._batch_size, self.device, names)

    def contiguous(self, *, canonical: bool = False, inplace: bool = False) -> TensorDict:
        """A dense :class:`~tensordict.TensorDict` copy (keys missing from some members are
        dropped; heterogeneous entries raise — see :meth:`densify`). ``inplace=True`` is
        not supported on a lazy stack; the copy's leaves are canonical already.

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> lazy = lazy_stack([TensorDict({"a": torch.zeros(2)}, [2])] * 3, 1)
        >>> dense = lazy.contiguous()
        >>> type(dense).__name__, dense["a"].shape
        ('TensorDict', torch.Size([2, 3]))
        """
        if inplace:
            check_inplace(self, "contiguous")
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
            if isinstance(value, _kinds.Lazy):
                value = value._padded(padding, with_masks)
                if with_masks:
                    masks[key] = value.pop("__masks__")
            out[key] = value
        if with_masks:
            out["__masks__"] = TensorDict._new_unsafe(masks, self._batch_size, self.device)
        return TensorDict._new_unsafe(out, self._batch_size, self.device)
