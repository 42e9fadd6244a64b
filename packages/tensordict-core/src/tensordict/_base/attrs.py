"""Per-leaf tensor attributes: :class:`TensorAttrs` and ``TensorDictBase.attrs``.

``td.attrs()`` describes every tensor leaf of ``td`` (its device, dtype and shape) by a
:class:`TensorAttrs` value, in a tensordict of the same nested structure. Passing such a
tensordict to :meth:`TensorDict.to <tensordict.TensorDict.to>` casts each leaf to the
device and dtype recorded for it (:func:`to_tensor_attrs`), which restores the layout of
a tensordict after it was moved or cast as a whole.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch

from tensordict._kinds import kinds as _kinds
from tensordict._kinds.kinds import is_tensor_collection
from tensordict._leaves.nontensor import NonTensorData, is_non_tensor

_Tensor = torch.Tensor

#: The attributes ``attrs(fields=...)`` can record.
ATTR_FIELDS: tuple[str, ...] = ("device", "dtype", "shape")

__all__ = ["ATTR_FIELDS", "AttrsOps", "TensorAttrs", "holds_tensor_attrs", "to_tensor_attrs"]


@dataclasses.dataclass(frozen=True, slots=True)
class TensorAttrs:
    """The device, dtype and shape of one tensor (``None`` where not recorded).

    A frozen, hashable value: the leaves of the tensordict :meth:`AttrsOps.attrs` returns.

    >>> import torch
    >>> from tensordict._base.attrs import TensorAttrs
    >>> spec = TensorAttrs(tgt_device=torch.device("cpu"), tgt_dtype=torch.float16)
    >>> spec
    TensorAttrs(tgt_device=device(type='cpu'), tgt_dtype=torch.float16, tgt_shape=None)
    >>> spec == TensorAttrs(torch.device("cpu"), torch.float16), len({spec, spec})
    (True, 1)
    """

    tgt_device: torch.device | None = None
    tgt_dtype: torch.dtype | None = None
    tgt_shape: torch.Size | None = None
    # The reference's TensorAttrs is a tensorclass; these keywords of its constructor are
    # accepted (and kept) but take no part in comparisons.
    batch_size: Any = dataclasses.field(default=(), kw_only=True, compare=False, repr=False)
    device: Any = dataclasses.field(default=None, kw_only=True, compare=False, repr=False)
    names: Any = dataclasses.field(default=None, kw_only=True, compare=False, repr=False)

    def __post_init__(self) -> None:
        checks: tuple[tuple[str, object, type], ...] = (
            ("tgt_device", self.tgt_device, torch.device),
            ("tgt_dtype", self.tgt_dtype, torch.dtype),
            ("tgt_shape", self.tgt_shape, torch.Size),
        )
        for name, value, cls in checks:
            if value is not None and not isinstance(value, cls):
                raise TypeError(
                    f"TensorAttrs.{name} must be a {cls.__module__}.{cls.__name__} or None, "
                    f"got {value!r} ({type(value).__name__})."
                )

    @classmethod
    def of(cls, tensor: torch.Tensor, fields: Sequence[str] = ATTR_FIELDS) -> TensorAttrs:
        """The attributes of ``tensor`` named in ``fields`` (the others ``None``).

        >>> import torch
        >>> from tensordict._base.attrs import TensorAttrs
        >>> TensorAttrs.of(torch.zeros(2, dtype=torch.int8), fields=("dtype",))
        TensorAttrs(tgt_device=None, tgt_dtype=torch.int8, tgt_shape=None)
        """
        return cls(
            tensor.device if "device" in fields else None,
            tensor.dtype if "dtype" in fields else None,
            tensor.shape if "shape" in fields else None,
        )

    def apply_to(self, tensor: torch.Tensor, *, non_blocking: bool = False) -> torch.Tensor:
        """``tensor`` moved to :attr:`tgt_device` and cast to :attr:`tgt_dtype` (``None``
        leaves that aspect unchanged; the shape is not changed). Returns ``tensor`` itself
        when nothing changes.

        >>> import torch
        >>> from tensordict._base.attrs import TensorAttrs
        >>> TensorAttrs(tgt_dtype=torch.int64).apply_to(torch.ones(2))
        tensor([1, 1])
        """
        return tensor.to(device=self.tgt_device, dtype=self.tgt_dtype, non_blocking=non_blocking)


def _is_nested(value: Any) -> bool:
    return is_tensor_collection(value) and not is_non_tensor(value)


def _attrs_of(td: Any, fields: tuple[str, ...]) -> _kinds.Dense:
    """A ``TensorDict`` (batch ``[]``, no device) of :class:`TensorAttrs` for ``td``."""
    out: dict[str, Any] = {}
    scalar = torch.Size([])
    for key, value in td.items():
        if isinstance(value, _Tensor):
            out[key] = NonTensorData._make(TensorAttrs.of(value, fields), scalar, None)
        elif _is_nested(value):
            out[key] = _attrs_of(value, fields)
    return _kinds.Dense._new_unsafe(out, scalar)


def holds_tensor_attrs(td: Any) -> bool:
    """Whether ``td`` (a tensordict) has a :class:`TensorAttrs` leaf, at any depth.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict._base.attrs import holds_tensor_attrs
    >>> td = TensorDict(a=torch.zeros(2), batch_size=[2])
    >>> holds_tensor_attrs(td), holds_tensor_attrs(td.attrs())
    (False, True)
    """
    for value in td.values():
        if isinstance(value, NonTensorData):
            if isinstance(value.data, TensorAttrs):
                return True
        elif _is_nested(value) and holds_tensor_attrs(value):
            return True
    return False


def to_tensor_attrs(td: _kinds.Dense, attrs: _kinds.Base, *, non_blocking: bool = False) -> Any:
    """``td`` with each tensor leaf cast to the device and dtype of the matching
    :class:`TensorAttrs` of ``attrs`` (the body of ``TensorDict.to(attrs)``).

    Leaves with no matching entry, and aspects recorded as ``None``, are unchanged. The
    result keeps ``td``'s device when every leaf is still on it, else has none. Returns
    ``td`` itself when nothing changes.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict._base.attrs import to_tensor_attrs
    >>> td = TensorDict(a=torch.zeros(2), b=torch.zeros(2), batch_size=[2])
    >>> spec = TensorDict(a=torch.zeros(2, dtype=torch.int32)).attrs(fields=("dtype",))
    >>> out = to_tensor_attrs(td, spec)
    >>> out["a"].dtype, out["b"].dtype
    (torch.int32, torch.float32)
    """
    store: dict[str, Any] = {}
    changed = False
    for key, value in td._tensordict.items():
        spec = attrs.get_non_tensor(key, None)
        new = value
        if isinstance(value, _Tensor):
            if isinstance(spec, TensorAttrs):
                new = spec.apply_to(value, non_blocking=non_blocking)
        elif _is_nested(value) and _is_nested(spec):
            new = value.to(spec, non_blocking=non_blocking)  # a lazy stack forwards it
        changed = changed or new is not value
        store[key] = new
    if not changed:
        return td
    device = td.device
    if device is not None:
        result = td._new_unsafe(store, td.batch_size, None, td._names)
        if any(t.device != device for t in result._flat_tensors([])):
            device = None
    for key, value in store.items():
        if is_non_tensor(value):  # a new wrapper, so in-place writes stay local
            store[key] = value._with(value.batch_size, device)
    return td._new_unsafe(store, td.batch_size, device, td._names)


class AttrsOps:
    """Mixin of :class:`~tensordict.TensorDictBase`: ``attrs``."""

    def attrs(
        self,
        *,
        fields: Sequence[str] = ATTR_FIELDS,
        num_threads: int | None = None,
    ) -> _kinds.Dense:
        """A tensordict describing every tensor leaf by a :class:`TensorAttrs`.

        The result has the same nested structure, batch size ``[]`` and no device; each
        tensor leaf is replaced by a :class:`TensorAttrs` recording the attributes named in
        ``fields`` (the others ``None``), stored as non-tensor data (``out[key]`` returns
        the :class:`TensorAttrs`). Non-tensor leaves are left out. Passing the result to
        :meth:`~tensordict.TensorDict.to` casts the leaves of a tensordict with the same
        keys to the recorded devices and dtypes.

        Keyword Args:
            fields: which of ``"device"``, ``"dtype"`` and ``"shape"`` to record (a
                single name may be given as a string). Other names raise
                :class:`ValueError`.
            num_threads: accepted for compatibility with the reference API and ignored
                (reading the attributes needs no work worth spreading over threads).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(3), "b": torch.zeros(3, dtype=torch.int32)}, [3])
        >>> attrs = td.attrs(fields=("device", "dtype"))
        >>> attrs["a"].tgt_device, attrs["a"].tgt_dtype
        (device(type='cpu'), torch.float32)
        >>> target = TensorDict(a=torch.zeros(3), b=torch.zeros(3), batch_size=[3])
        >>> target.to(attrs)["b"].dtype
        torch.int32
        """
        chosen = (fields,) if isinstance(fields, str) else tuple(fields)
        unknown = [name for name in chosen if name not in ATTR_FIELDS]
        if unknown:
            raise ValueError(
                f"attrs: unknown field(s) {unknown}; the allowed fields are {list(ATTR_FIELDS)}."
            )
        return _attrs_of(self, chosen)
