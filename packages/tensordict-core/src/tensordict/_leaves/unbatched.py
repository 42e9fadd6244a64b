"""``UnbatchedTensor``: a tensor entry that the batch operations of a tensordict leave whole.

An entry of a tensordict must start with the batch dimensions; an :class:`UnbatchedTensor`
has none and may have any shape (a lookup table, parameters shared by every element). The
batch-shape operations of the tensordict (indexing, ``reshape``, ``unsqueeze``, ``unbind``,
``stack``, ``cat``, reductions…) carry it over as it is: the same storage, with the new
batch size in :attr:`UnbatchedTensor.batch_size` — the rule the walkers apply to the entries
of :func:`is_carried`, which one-value non-tensor leaves share. Every other operation (arithmetic,
casts, ``clone``, ``to``…) applies to it as to any tensor and gives an
``UnbatchedTensor`` back.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import torch

from tensordict._keys.nested import unravel_key
from tensordict._keys.shape import parse_batch_size
from tensordict._leaves.nontensor import NonTensorDataBase

_Tensor = torch.Tensor
_DisableSubclass = torch._C.DisableTorchFunctionSubclass

_NO_BATCH = torch.Size([])
#: torch functions whose result is returned as it is (not wrapped back). ``_base`` gives
#: the plain tensor viewed (wrapped, it would be a view of itself again, and Dynamo, which
#: follows ``_base`` from views, would never stop)
_BASE_GETTER: Any = vars(torch._C.TensorBase)["_base"].__get__
_UNWRAPPED = frozenset({_Tensor.as_subclass, _BASE_GETTER})


def _plain(tensor: _Tensor) -> Any:
    """``tensor`` seen as a plain ``torch.Tensor`` (same storage, same autograd graph)."""
    with _DisableSubclass():
        return _Tensor.as_subclass(tensor, _Tensor)


class UnbatchedTensor(_Tensor):
    """A tensor entry with no batch dimension, which batch operations leave unchanged.

    Use it for an entry that belongs to the whole batch: a lookup table, the parameters
    of a model, a mask shared by every element. It may have any shape. The shape
    operations of its tensordict (indexing, ``reshape``, ``unsqueeze``, ``squeeze``,
    ``transpose``, ``unbind``, ``stack``, ``cat``, reductions…) return it with its data
    and shape unchanged (the same storage); other operations (arithmetic, ``clone``,
    ``to``…) apply to it as to any tensor and return an ``UnbatchedTensor``.

    Stacking tensordicts whose unbatched entries hold different storage keeps the first
    one and warns. ``auto_batch_size_`` ignores unbatched entries. An indexed write
    (``td[idx] = other``) writes ``other``'s payload whole, or leaves the entry as it is
    when ``other`` does not have the key.

    Args:
        data: the payload (converted with :func:`torch.as_tensor` if not a tensor).
        batch_size: the batch size of the tensordict holding it (a tensordict sets it
            when it stores the entry); it does not change the payload's shape.

    >>> import torch
    >>> from tensordict import TensorDict, UnbatchedTensor
    >>> td = TensorDict(a=UnbatchedTensor(torch.zeros(3, 4)), b=torch.zeros(2, 3), batch_size=[2])
    >>> td[0]["a"].shape, td.reshape(1, 2)["a"].batch_size
    (torch.Size([3, 4]), torch.Size([1, 2]))
    >>> td.reshape(1, 2)["a"].data_ptr() == td["a"].data_ptr()
    True
    """

    _batch_size: torch.Size

    def __new__(
        cls, data: Any, batch_size: Sequence[int] | torch.Size | None = None
    ) -> UnbatchedTensor:
        if not isinstance(data, _Tensor):
            data = torch.as_tensor(data)
        with _DisableSubclass():  # a detached alias, as the reference
            out = _Tensor.as_subclass(data.detach(), cls)
        out._batch_size = parse_batch_size(batch_size)
        return out

    @property
    def batch_size(self) -> torch.Size:
        """The batch size of the tensordict holding the tensor."""
        size: torch.Size = getattr(self, "_batch_size", _NO_BATCH)
        return size

    @batch_size.setter
    def batch_size(self, value: Sequence[int] | torch.Size) -> None:
        self._batch_size = parse_batch_size(value)

    def _with(self, batch_size: torch.Size, device: Any = None) -> UnbatchedTensor:
        """The same storage for a tensordict of ``batch_size`` (a new tensor object)."""
        if batch_size == self.batch_size:
            return self
        with _DisableSubclass():
            out = _Tensor.as_subclass(self, UnbatchedTensor)
        out._batch_size = batch_size
        return out

    def copy(self) -> UnbatchedTensor:
        """A new tensor object on the same storage, with the same batch size.

        >>> from tensordict import UnbatchedTensor
        >>> u = UnbatchedTensor([1, 2])
        >>> u.copy().data_ptr() == u.data_ptr(), u.copy() is u
        (True, False)
        """
        with _DisableSubclass():
            out = _Tensor.as_subclass(self, UnbatchedTensor)
        out._batch_size = self.batch_size
        return out

    @classmethod
    def __torch_function__(
        cls,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        with _DisableSubclass():
            result = func(*args, **(kwargs or {}))
        if func in _UNWRAPPED:
            return result
        return _wrap_result(result, args)

    # Python conversions: exactly those of the plain tensor (same results, same errors).
    def __str__(self) -> str:
        return str(_plain(self))

    def __repr__(self, *, tensor_contents: Any = None) -> str:  # type: ignore[override]
        return f"UnbatchedTensor({_plain(self)!r})"

    def __format__(self, spec: str) -> str:
        return format(_plain(self), spec)

    def __bool__(self) -> bool:
        return bool(_plain(self))

    def __int__(self) -> int:
        return int(_plain(self))

    def __float__(self) -> float:
        return float(_plain(self))

    def __complex__(self) -> complex:
        return complex(_plain(self))

    def __index__(self) -> int:
        index: int = _plain(self).__index__()
        return index

    def __round__(self, *args: Any) -> Any:
        return round(_plain(self), *args)

    def __trunc__(self) -> Any:
        return math.trunc(_plain(self))

    def __floor__(self) -> Any:
        return math.floor(_plain(self))

    def __ceil__(self) -> Any:
        return math.ceil(_plain(self))

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        return _plain(self).__array__(*args, **kwargs)

    def item(self) -> Any:
        return _plain(self).item()

    def tolist(self) -> Any:
        return _plain(self).tolist()

    def numpy(self, *args: Any, **kwargs: Any) -> Any:
        return _plain(self).numpy(*args, **kwargs)

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return (_rebuild, (_plain(self).detach(), tuple(self.batch_size)))


class UnbatchedTensorInVmap(UnbatchedTensor):
    """What an :class:`UnbatchedTensor` entry is inside a function that ``torch.vmap`` runs.

    The same storage and the same behaviour; only its pytree node differs, so that the
    function may return it bare and ``torch.vmap`` still gives back an
    ``UnbatchedTensor`` with the same payload (see ``tensordict._torch.pytree``). Operations
    on it return plain :class:`UnbatchedTensor` objects.
    """


#: The classes of unbatched entries (``type(value) in UNBATCHED_TYPES``).
UNBATCHED_TYPES = frozenset((UnbatchedTensor, UnbatchedTensorInVmap))


def as_unbatched(tensor: _Tensor, batch_size: torch.Size, in_vmap: bool = False) -> UnbatchedTensor:
    """An unbatched alias of ``tensor`` (same storage) for a tensordict of ``batch_size``:
    an :class:`UnbatchedTensorInVmap` when ``in_vmap``, else an :class:`UnbatchedTensor`.
    """
    cls = UnbatchedTensorInVmap if in_vmap else UnbatchedTensor
    if type(tensor) is cls and tensor.batch_size == batch_size:
        return tensor
    with _DisableSubclass():
        out = _Tensor.as_subclass(tensor, cls)
    out._batch_size = batch_size
    return out


def _rebuild(data: _Tensor, batch_size: Sequence[int]) -> UnbatchedTensor:
    return UnbatchedTensor(data, batch_size)


def _first_batch_size(args: Any) -> torch.Size | None:
    for arg in args:
        if isinstance(arg, UnbatchedTensor):
            return arg.batch_size
        if isinstance(arg, (list, tuple)):
            found = _first_batch_size(arg)
            if found is not None:
                return found
    return None


def _wrap_result(result: Any, args: tuple[Any, ...]) -> Any:
    """``result`` with its plain tensors made ``UnbatchedTensor``: all of them, except for a
    list computed element-wise from a list argument (``torch._foreach_*``), where only the
    positions holding an ``UnbatchedTensor`` in that argument are."""
    if type(result) is _Tensor:
        out = _Tensor.as_subclass(result, UnbatchedTensor)
        out._batch_size = _first_batch_size(args) or torch.Size([])
        return out
    if isinstance(result, (list, tuple)) and result:
        for arg in args:
            if isinstance(arg, (list, tuple)) and len(arg) == len(result):
                marks = [isinstance(a, UnbatchedTensor) for a in arg]
                if any(marks):
                    wrapped = [
                        _wrap_result(r, (a,)) if m else r
                        for r, a, m in zip(result, arg, marks, strict=True)
                    ]
                    return type(result)(wrapped) if isinstance(result, tuple) else wrapped
        wrapped = [_wrap_result(r, args) for r in result]
        return type(result)(wrapped) if isinstance(result, tuple) else wrapped
    return result


def combine_unbatched(
    values: Sequence[UnbatchedTensor], batch_size: torch.Size, key: Any
) -> UnbatchedTensor:
    """The entry of a stack or a concatenation of unbatched entries: the first one, with
    the new batch size; a warning when the others hold different storage.

    >>> import torch
    >>> u = UnbatchedTensor(torch.zeros(2))
    >>> combine_unbatched([u, u], torch.Size([2]), "a").batch_size
    torch.Size([2])
    """
    first = values[0]
    ptr = first.data_ptr()
    if any(v.data_ptr() != ptr or v.shape != first.shape for v in values[1:]):
        warnings.warn(
            f"stacking the UnbatchedTensor entries {unravel_key(key)!r} of different data storage: only "
            "the first one's data is kept (an UnbatchedTensor is shared by the whole "
            "batch; use a regular tensor for one value per element).",
            UserWarning,
            stacklevel=3,
        )
    return first._with(batch_size)


def is_carried(value: Any) -> bool:
    """Whether batch-shape operations carry ``value`` over whole, with the new batch size
    (``value._with(new_batch_size)``): a one-value non-tensor leaf or an unbatched tensor.

    >>> import torch
    >>> from tensordict import NonTensorData
    >>> is_carried(UnbatchedTensor(torch.zeros(2))), is_carried(NonTensorData("a"))
    (True, True)
    >>> is_carried(torch.zeros(2))
    False
    """
    return type(value) in UNBATCHED_TYPES or isinstance(value, NonTensorDataBase)
