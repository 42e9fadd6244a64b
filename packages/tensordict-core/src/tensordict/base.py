"""``TensorDictBase``: the interface every tensordict type implements.

Concrete containers (:class:`~tensordict.TensorDict`, lazy stacks, tensorclasses,
parameter containers) implement a handful of primitives; this class adds what is
generic: the dict protocol built on them, the context-manager protocol, the
``torch.*`` function dispatch, the forwarders to sibling distributions, and (installed
from tables by :mod:`tensordict._engine.ops`) the families of tensor methods.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator, MutableMapping, Sequence
from types import FunctionType, GenericAlias
from typing import TYPE_CHECKING, Any, TypeVar, overload

import torch
from torch._ops import HigherOrderOperator

from tensordict._base import kind_methods
from tensordict._base.apply_ops import (
    DEFAULT_APPLY,
    ApplyOps,
    ApplySpec,
)
from tensordict._base.attrs import AttrsOps
from tensordict._base.client_compat import is_as_lists, items_as_lists
from tensordict._base.compat_ops import CompatOps
from tensordict._base.installed import (
    BatchMethods,
    ElementwiseMethods,
    ReductionMethods,
    SharedMethods,
    SiblingMethods,
)
from tensordict._base.leaf_tensors import LeafTensorOps
from tensordict._formats.convert import ConversionOps, to_dense
from tensordict._formats.pandas import PandasOps
from tensordict._keys.nested import NestedKey, has_empty_part, unravel_key
from tensordict._kinds import kinds as _kinds
from tensordict._kinds.kinds import is_tensor_collection as is_tensor_collection
from tensordict._kinds.views import TensorDictKeysView
from tensordict._leaves.collection import TensorCollection
from tensordict._leaves.nontensor import NON_TENSOR, NonTensorData, unwrap_non_tensor
from tensordict._plugins import forwarders as _forwarders
from tensordict._util.errors import InvalidKeyError, KeyThroughLeafError, lock_error
from tensordict._util.sentinels import NO_DEFAULT
from tensordict._wire.gather import GatherOps

if TYPE_CHECKING:  # pragma: no cover
    from typing_extensions import Self

    from tensordict._table_api import TableMethods as _TableMethods
else:
    # The methods installed from tables (tensordict._engine.ops, tensordict._plugins.forwarders) are
    # declared for type checkers in the generated stub _table_api.pyi.
    _TableMethods = object

_F = TypeVar("_F", bound=Callable[..., Any])


#: The keyword options of a lazy stack's ``get`` (ignored by other tensordicts).
_RAGGED_OPTIONS = frozenset(
    {"as_list", "as_padded_tensor", "as_nested_tensor", "layout", "padding_side", "padding_value"}
)

_GET_DEFAULTS_TO_NONE = os.environ.get("TD_GET_DEFAULTS_TO_NONE", "1").strip().lower() not in (
    "0",
    "false",
    "no",
)


#: ``torch`` function -> tensordict implementation, filled by the modules that own them.
TD_HANDLED_FUNCTIONS: dict[Callable[..., Any], Callable[..., Any]] = {}

#: The same, by ``__name__``, for the ``Tensor`` operators written in Python
#: (``Tensor.__rsub__``, ``Tensor.__rpow__`` ...): under ``torch.compile`` dynamo passes them
#: to ``__torch_function__`` as values its dict lookup does not match, so those are looked
#: up by name first.
TD_HANDLED_BY_NAME: dict[str, Callable[..., Any]] = {}


def implements_for_td(torch_function: Callable[..., Any]) -> Callable[[_F], _F]:
    """Register a tensordict implementation of a ``torch`` function."""

    def decorator(func: _F) -> _F:
        TD_HANDLED_FUNCTIONS[torch_function] = func
        return func

    return decorator


def _abstract(td: Any) -> str:
    caller = sys._getframe(1).f_code.co_name
    return f"{type(td).__name__} does not implement {caller}()"


class TensorDictBase(
    SharedMethods,
    ElementwiseMethods,
    ReductionMethods,
    BatchMethods,
    SiblingMethods,
    ApplyOps,
    ConversionOps,
    LeafTensorOps,
    AttrsOps,
    GatherOps,
    CompatOps,
    PandasOps,
    TensorCollection,
    _TableMethods,
):
    """Abstract base of every tensordict: a dict of tensors with a common batch shape.

    >>> import torch
    >>> from tensordict import TensorDict, TensorDictBase
    >>> isinstance(TensorDict({"a": torch.zeros(2)}, [2]), TensorDictBase)
    True
    """

    _is_locked: bool = False
    _last_op: Any = None
    # Bookkeeping that few tensordicts carry, read as class defaults and written on the
    # instance (never through ``__dict__``: reading an object's ``__dict__`` turns its
    # attribute storage into a plain dict, which makes every later attribute read slower)
    _consolidated: Any = None  # {"storage", "metadata"} of a consolidated tensordict
    _consolidate_lock: bool = False  # locked by consolidate(), not by the user
    _lock_holds: Any = None  # (watcher, held) of a locked parent (see _kinds.lock)
    _ctx_ops: Any = None  # the undo stack of ``with td.op():`` blocks
    _legacy_origin: Any = None  # the shape op a legacy view came from
    # ``TensorDict[str, torch.Tensor]`` in annotations, as for other mappings
    __class_getitem__: Any = classmethod(GenericAlias)
    __array_priority__ = 1000  # numpy defers binary operators to us

    # ------------------------------------------------------------------ primitives
    # Implemented by every concrete type. (Not an ``abc.ABC``: ABC isinstance checks
    # cost ~0.1 µs each, and ``isinstance(x, TensorDictBase)`` sits on hot paths.)
    @property
    def batch_size(self) -> torch.Size:
        raise NotImplementedError(_abstract(self))

    @batch_size.setter
    def batch_size(self, value: Sequence[int] | torch.Size) -> None:
        raise NotImplementedError(_abstract(self))

    @property
    def device(self) -> torch.device | None:
        raise NotImplementedError(_abstract(self))

    def _get_str(self, key: str, default: Any) -> Any:
        raise NotImplementedError(_abstract(self))

    def _get_tuple(self, key: tuple[str, ...], default: Any) -> Any:
        raise NotImplementedError(_abstract(self))

    def _set_str(
        self, key: str, value: Any, *, inplace: bool, validated: bool, non_blocking: bool = False
    ) -> Self:
        raise NotImplementedError(_abstract(self))

    def _set_tuple(
        self,
        key: tuple[str, ...],
        value: Any,
        *,
        inplace: bool,
        validated: bool,
        non_blocking: bool = False,
    ) -> Self:
        raise NotImplementedError(_abstract(self))

    def keys(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Callable[[type], bool] | None = None,
        *,
        sort: bool = False,
    ) -> TensorDictKeysView:
        raise NotImplementedError(_abstract(self))

    def _tree_map(
        self,
        fn: Callable[..., Any],
        *others: Any,
        spec: ApplySpec = DEFAULT_APPLY,
        batch_size: Sequence[int] | None = None,
        names: Any = NO_DEFAULT,
        prefix: tuple[str, ...] = (),
        out: TensorDictBase | None = None,
        plan: list[Any] | None = None,
    ) -> Self | None:
        """Map ``fn`` over the leaves (and the matching entries of ``others``) as ``spec``
        says; ``batch_size``/``names`` describe this level's result, ``prefix`` its key,
        ``out`` the tensordict receiving in-place results and ``plan`` the in-place writes
        shared by every level. The primitive behind :meth:`apply`."""
        raise NotImplementedError(_abstract(self))

    # engine primitives (see tensordict._engine.tree): every tensor leaf in one flat list, depth
    # first, and back; maps that build a new tensordict of the same structure.
    def _flat_tensors(self, out: list[Any]) -> list[Any]:
        """Append every tensor leaf, depth first, to ``out`` and return it."""
        raise NotImplementedError(_abstract(self))

    def _rebuild(self, it: Iterator[Any]) -> Self:
        """The same structure with the tensors taken from ``it`` (``_flat_tensors`` order)."""
        raise NotImplementedError(_abstract(self))

    def _write_flat(self, it: Iterator[Any]) -> None:
        """Rebind every tensor leaf to the next tensor of ``it``, in place."""
        raise NotImplementedError(_abstract(self))

    def _aligned_tensors(
        self, other: Any, default: Any, out: list[Any] | None = None, prefix: tuple[str, ...] = ()
    ) -> list[Any]:
        """The entries of ``other`` matching ``_flat_tensors`` order (looked up by key)."""
        raise NotImplementedError(_abstract(self))

    def _map_tensors(
        self, fn: Callable[[torch.Tensor], torch.Tensor], device: Any = NO_DEFAULT
    ) -> Self:
        """A tensordict of the same structure with ``fn`` applied to every tensor leaf."""
        raise NotImplementedError(_abstract(self))

    def _map_batch(
        self,
        fn: Callable[[Any], Any],
        batch_size: torch.Size,
        names: list[str | None] | None = None,
    ) -> TensorDictBase:
        """The batch-shape operation ``fn`` applied to every tensor (new ``batch_size``)."""
        raise NotImplementedError(_abstract(self))

    # ------------------------------------------------------------------ shape info
    @property
    def shape(self) -> torch.Size:
        """Alias of :attr:`batch_size` (settable too)."""
        return self.batch_size

    @shape.setter
    def shape(self, value: Sequence[int]) -> None:
        self.batch_size = value

    @property
    def batch_dims(self) -> int:
        """Number of batch dimensions.

        >>> from tensordict import TensorDict
        >>> TensorDict(batch_size=[2, 3]).batch_dims
        2
        """
        return len(self.batch_size)

    ndim = batch_dims

    def ndimension(self) -> int:
        """Number of batch dimensions (as :meth:`torch.Tensor.ndimension`)."""
        return len(self.batch_size)

    def dim(self) -> int:
        """Number of batch dimensions (as :meth:`torch.Tensor.dim`)."""
        return len(self.batch_size)

    def numel(self) -> int:
        """Number of elements in the batch (the product of the batch size).

        >>> from tensordict import TensorDict
        >>> TensorDict(batch_size=[2, 3]).numel()
        6
        """
        return self.batch_size.numel()

    @overload
    def size(self, dim: None = None) -> torch.Size: ...
    @overload
    def size(self, dim: int) -> int: ...
    def size(self, dim: int | None = None) -> torch.Size | int:
        """The batch size, or its ``dim``-th entry.

        >>> from tensordict import TensorDict
        >>> TensorDict(batch_size=[2, 3]).size(-1)
        3
        """
        if dim is None:
            return self.batch_size
        return self.batch_size[dim]

    @property
    def is_cuda(self) -> bool:
        """Whether the tensordict has a CUDA device."""
        device = self.device
        return device is not None and device.type == "cuda"

    @property
    def is_cpu(self) -> bool:
        """Whether the tensordict has the CPU device."""
        device = self.device
        return device is not None and device.type == "cpu"

    def __len__(self) -> int:
        """Size of the first batch dimension (0 when there is none)."""
        batch_size = self.batch_size
        return batch_size[0] if batch_size else 0

    def __iter__(self) -> Iterator[Self]:
        """Iterate over the first batch dimension, like a tensor."""
        if not self.batch_dims:
            raise TypeError(
                "iteration over a tensordict with no batch dimension (batch_size=torch.Size([]))."
            )
        return iter(self.unbind(0))

    def __bool__(self) -> bool:
        raise RuntimeError(
            "Converting a tensordict to boolean value is not permitted: it is ambiguous; use "
            ".all() or .any(), or .is_empty() to test for entries."
        )

    def __contains__(self, key: Any) -> bool:
        """``key in td`` is ``key in td.keys(include_nested=True)``; a key that is neither
        a string nor a tuple raises ``RuntimeError`` (as the reference)."""
        if type(key) is not str and not isinstance(key, tuple):
            raise RuntimeError(
                f"`key in tensordict` needs a NestedKey (a string or a tuple of strings), got "
                f"{type(key).__name__} {key!r}."
            )
        return key in self.keys(include_nested=True)

    # ------------------------------------------------------------------ dict protocol
    def get(self, key: NestedKey, *args: Any, **kwargs: Any) -> Any:
        """Return the value at ``key``; ``default`` is returned when it is missing.

        Without a default a missing key gives ``None`` (as in the reference; see
        :func:`~tensordict.set_get_defaults_to_none` to raise ``KeyError`` instead), but a
        nested key that runs through a leaf raises (a ``KeyError`` that is also a
        ``ValueError``). Non-tensor values come back as the stored Python object. The
        ragged options of a lazy stack's ``get`` (``as_list`` …) reach the lazy stack that
        holds a nested key, and are ignored elsewhere.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": {"b": torch.zeros(2)}}, [2])
        >>> td.get(("a", "b"))
        tensor([0., 0.])
        >>> td.get("missing", None) is None
        True
        """
        if type(key) is not str and has_empty_part(key):  # raised whatever the default
            raise KeyError(
                f"get(): {key!r} is not a valid key: a key is a string or a non-empty "
                "(possibly nested) tuple of strings, with no empty tuple inside."
            )
        if args:
            if len(args) > 1 or "default" in kwargs:
                raise TypeError("get() takes a key and at most one default.")
            default = args[0]
        elif not kwargs:
            if _GET_DEFAULTS_TO_NONE:  # missing: None; through a leaf: raise
                try:
                    if type(key) is str:
                        return self._get_str(key, NO_DEFAULT)
                    return self._get_tuple(_key_tuple(key), NO_DEFAULT)
                except (KeyThroughLeafError, InvalidKeyError):
                    raise
                except KeyError:
                    return None
            default = NO_DEFAULT
        if kwargs:
            unknown = [k for k in kwargs if k != "default" and k not in _RAGGED_OPTIONS]
            if unknown:
                raise TypeError(f"get() got unexpected keyword(s) {unknown}.")
            if not args:
                default = kwargs.get("default", None if _GET_DEFAULTS_TO_NONE else NO_DEFAULT)
            keys = _key_tuple(key)
            if len(keys) > 1 and any(kwargs.get(k) for k in _RAGGED_OPTIONS):
                try:  # the ragged options are the holder's (a lazy stack's) to apply
                    holder = self._get_tuple(keys[:-1], NO_DEFAULT)
                except KeyError:
                    holder = None
                if isinstance(holder, TensorDictBase):
                    ragged = {k: v for k, v in kwargs.items() if k != "default"}
                    return holder.get(keys[-1], default, **ragged)
        if type(key) is str:
            value = self._get_str(key, default)
        else:
            value = self._get_tuple(_key_tuple(key), default)
        return value

    def set(
        self,
        key: NestedKey,
        item: Any,
        inplace: bool = False,
        *,
        non_blocking: bool = False,
        **kwargs: Any,
    ) -> Self:
        """Write ``item`` at ``key`` and return the tensordict.

        The value's leading dimensions must match the batch size; it is cast to the
        tensordict's device. With ``inplace=True`` an existing entry is overwritten in
        place (its storage kept); a missing one is created.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(batch_size=[2]).set(("a", "b"), torch.ones(2, 3))
        >>> td["a", "b"].shape
        torch.Size([2, 3])
        """
        if type(key) is str:
            return self._set_str(
                key, item, inplace=inplace, validated=False, non_blocking=non_blocking
            )
        return self._set_tuple(
            _key_tuple(key), item, inplace=inplace, validated=False, non_blocking=non_blocking
        )

    def set_(self, key: NestedKey, item: Any, *, non_blocking: bool = False) -> Self:
        """Overwrite the existing entry ``key`` in place; a missing key raises ``KeyError``.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> a = torch.zeros(2)
        >>> td = TensorDict({"a": a}, [2]).set_("a", torch.ones(2))
        >>> a
        tensor([1., 1.])
        """
        key = _key_tuple(key)
        if self._get_tuple(key, None) is None:
            raise KeyError(
                f"set_() writes in place into an existing entry, but key {unravel_key(key)!r} "
                f"was not found in {type(self).__name__} with keys "
                f"{sorted(map(str, self.keys()))}."
            )
        return self._set_tuple(key, item, inplace=True, validated=False, non_blocking=non_blocking)

    def __getitem__(self, index: Any) -> Any:
        raise NotImplementedError  # pragma: no cover

    def __setitem__(self, index: Any, value: Any) -> None:
        raise NotImplementedError(_abstract(self))

    def is_shared(self) -> bool:
        """Whether every tensor leaf is in shared memory (or on CUDA)."""
        raise NotImplementedError(_abstract(self))

    def get_non_tensor(self, key: NestedKey, default: Any = NO_DEFAULT) -> Any:
        """The Python value stored at ``key`` (non-tensor entries are unwrapped).

        >>> from tensordict import TensorDict
        >>> TensorDict({"label": "cat"}, [2]).get_non_tensor("label")
        'cat'
        """
        value = self._get_tuple(_key_tuple(key), default)
        return unwrap_non_tensor(value)

    def set_non_tensor(self, key: NestedKey, value: Any) -> Self:
        """Store ``value`` at ``key`` as non-tensor data, whatever its type.

        >>> from tensordict import TensorDict
        >>> td = TensorDict(batch_size=[2]).set_non_tensor("n", 3)
        >>> td["n"], td.get_non_tensor("n")
        (3, 3)
        """
        self.set(key, NonTensorData(value, batch_size=self.batch_size, device=self.device))
        return self

    def items(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Callable[[type], bool] | None = None,
        *,
        sort: bool = False,
    ) -> Iterable[tuple[str | tuple[str, ...], Any]]:
        """Iterate over ``(key, value)`` pairs (see :meth:`keys` for the options).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(1), "b": {"c": torch.ones(1)}}, [1])
        >>> [k for k, _ in td.items(include_nested=True, leaves_only=True)]
        ['a', ('b', 'c')]
        """
        if is_leaf is not None and is_as_lists(is_leaf):
            yield from items_as_lists(self, include_nested, leaves_only, is_leaf)
            return
        for key in self.keys(include_nested, leaves_only, is_leaf, sort=sort):
            if isinstance(key, str):
                yield key, self._get_str(key, NO_DEFAULT)
            else:
                yield key, self._get_tuple(key, NO_DEFAULT)

    def values(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Callable[[type], bool] | None = None,
        *,
        sort: bool = False,
    ) -> Iterable[Any]:
        """Iterate over the values (see :meth:`keys` for the options).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(1), "b": torch.ones(1)}, [1])
        >>> [v.item() for v in td.values()]
        [0.0, 1.0]
        """
        for _, value in self.items(include_nested, leaves_only, is_leaf, sort=sort):
            yield value

    def setdefault(self, key: NestedKey, default: Any, inplace: bool = False) -> Any:
        """Return ``td[key]``, first writing ``default`` there when the key is missing.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(batch_size=[])
        >>> td.setdefault("a", torch.zeros(())) is td["a"]
        True
        """
        if key not in self.keys(include_nested=isinstance(key, tuple)):
            self.set(key, default, inplace=inplace)
        return self.get(key)

    def pop(self, key: NestedKey, default: Any = NO_DEFAULT) -> Any:
        """Remove ``key`` and return its value (or ``default`` when missing).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(())})
        >>> td.pop("a"), "a" in td.keys()
        (tensor(0.), False)
        """
        key = _key_tuple(key)
        value = self._get_tuple(key, None)
        if value is None:
            if default is NO_DEFAULT:
                raise KeyError(
                    f"You are trying to pop key {unravel_key(key)!r} which is not in "
                    f"{type(self).__name__} (keys: {sorted(map(str, self.keys()))}) and no "
                    "default was given."
                )
            return default
        self.del_(key)
        return value.data if isinstance(value, NonTensorData) else value

    def popitem(self) -> tuple[str | tuple[str, ...], Any]:
        """Remove and return the last inserted top-level ``(key, value)`` pair.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.zeros(()), "b": torch.ones(())}).popitem()
        ('b', tensor(1.))
        """
        keys = list(self.keys())
        if not keys:
            raise KeyError("popitem(): the tensordict is empty.")
        key = keys[-1]
        return key, self.pop(key)

    @classmethod
    def fromkeys(cls, keys: Any, value: Any = 0) -> _kinds.Dense:
        """A new tensordict with ``keys`` all set to ``value`` (batch size ``[]``).

        >>> from tensordict import TensorDict
        >>> td = TensorDict.fromkeys(["a", ("b", "c")], 1)
        >>> td["b", "c"]
        tensor(1)
        """
        out = _kinds.Dense()
        for key in keys:
            out.set(key, value)
        return out

    # ------------------------------------------------------------------ stacks, non-tensors
    @classmethod
    def stack(
        cls, input: Sequence[TensorDictBase], dim: int = 0, *, out: TensorDictBase | None = None
    ) -> TensorDictBase:
        """Stack tensordicts along a new batch dimension ``dim`` (as :func:`torch.stack`).

        The tensordicts must share one batch size and the same keys; use
        :meth:`lazy_stack` for tensordicts whose keys or shapes differ.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> a, b = TensorDict(x=torch.zeros(3), batch_size=[3]), TensorDict(x=torch.ones(3), batch_size=[3])
        >>> TensorDict.stack([a, b], 1).batch_size
        torch.Size([3, 2])
        """
        from tensordict._combine.functional import stack

        return stack(input, dim, out=out)

    @classmethod
    def cat(
        cls, input: Sequence[TensorDictBase], dim: int = 0, *, out: TensorDictBase | None = None
    ) -> TensorDictBase:
        """Concatenate tensordicts along an existing batch dimension ``dim`` (as
        :func:`torch.cat`).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> a, b = TensorDict(x=torch.zeros(3), batch_size=[3]), TensorDict(x=torch.ones(2), batch_size=[2])
        >>> TensorDict.cat([a, b])["x"]
        tensor([0., 0., 0., 1., 1.])
        """
        from tensordict._combine.functional import cat

        return cat(input, dim, out=out)

    @classmethod
    def lazy_stack(
        cls,
        input: Sequence[TensorDictBase],
        dim: int = 0,
        *,
        out: TensorDictBase | None = None,
        **kwargs: Any,
    ) -> _kinds.Lazy:
        """Stack ``input`` lazily (see :func:`tensordict.lazy_stack`).

        >>> from tensordict import TensorDict
        >>> TensorDict.lazy_stack([TensorDict(), TensorDict()]).batch_size
        torch.Size([2])
        """
        from tensordict._combine.functional import lazy_stack

        return lazy_stack(input, dim, out=out, **kwargs)  # type: ignore[no-any-return]

    @classmethod
    def maybe_dense_stack(
        cls,
        input: Sequence[TensorDictBase],
        dim: int = 0,
        *,
        out: TensorDictBase | None = None,
        **kwargs: Any,
    ) -> TensorDictBase:
        """Stack densely if possible, lazily otherwise (see :func:`tensordict.maybe_dense_stack`).

        >>> from tensordict import TensorDict
        >>> type(TensorDict.maybe_dense_stack([TensorDict(a=0), TensorDict(b=0)])).__name__
        'LazyStackedTensorDict'
        """
        from tensordict._combine.functional import maybe_dense_stack

        return maybe_dense_stack(input, dim, out=out, **kwargs)

    def to_lazystack(self, dim: int = 0) -> _kinds.Lazy:
        """A lazy stack along ``dim`` of views of this tensordict (writes go through).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2, 3)}, [2, 3])
        >>> lazy = td.to_lazystack(1)
        >>> _ = lazy.set_("a", torch.ones(2, 3))
        >>> len(lazy.tensordicts), td["a"].sum().item()
        (3, 6.0)
        """
        return _kinds.Lazy(*self.unbind(dim), stack_dim=dim)

    def densify(self, layout: torch.layout = torch.strided) -> TensorDictBase:
        """This tensordict with every nested lazy stack made dense (see
        :meth:`LazyStackedTensorDict.densify`); ``self`` when there is none.

        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=0)
        >>> td.densify() is td
        True
        """
        return to_dense(self, clone=False, layout=layout)

    def to_tensordict(self, *, retain_none: bool | None = None) -> _kinds.Dense:
        """A dense :class:`~tensordict.TensorDict` copy (lazy stacks are stacked).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2)}, [2])
        >>> td.to_tensordict()["a"] is td["a"]
        False
        """
        return to_dense(self, clone=True)

    def non_tensor_items(self, include_nested: bool = False) -> tuple[tuple[Any, Any], ...]:
        """The ``(key, value)`` pairs of the non-tensor leaves (values unwrapped; a stack
        gives a list).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(()), "s": "x", "n": {"t": 1, "u": "y"}})
        >>> td.non_tensor_items(include_nested=True)
        (('s', 'x'), (('n', 'u'), 'y'))
        """
        return tuple(
            (key, unwrap_non_tensor(value))
            for key, value in self.items(include_nested, True, is_leaf=_kinds.is_leaf_nontensor)
            if isinstance(value, NON_TENSOR)
        )

    def filter_non_tensor_data(self) -> Self:
        """A tensordict without its non-tensor leaves (nested ones included).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(()), "s": "x", "n": {"u": "y"}})
        >>> list(td.filter_non_tensor_data().keys(True))
        ['a', 'n']
        """
        # keys only: reading the values would stack a nested lazy stack's ragged entries
        keys = list(self.keys(True, True, is_leaf=_is_non_tensor_type))
        return self.exclude(*keys) if keys else self.copy()

    def is_non_tensor(self, key: NestedKey) -> bool:
        """Whether the entry at ``key`` is non-tensor data (a
        :class:`~tensordict.NonTensorData` or :class:`~tensordict.NonTensorStack`).

        Unlike the function :func:`tensordict.is_non_tensor`, which looks at a value, this
        looks at the stored entry. A missing key raises ``KeyError``.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"obs": torch.zeros(4), "label": "cat"})
        >>> td.is_non_tensor("label"), td.is_non_tensor("obs")
        (True, False)
        """
        return isinstance(self._get_tuple(_key_tuple(key), NO_DEFAULT), NON_TENSOR)

    def filter_empty_(self) -> Self:
        """Remove, in place, every nested tensordict that holds no leaf (one that holds
        only empty tensordicts included); return ``self``.

        On a locked tensordict with something to remove it raises and changes nothing.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(3), b={}, c={"d": {}, "e": torch.ones(3)}, batch_size=[3])
        >>> list(td.filter_empty_().keys(include_nested=True))
        ['a', 'c', ('c', 'e')]
        """
        doomed: list[tuple[str, ...]] = []
        _collect_empty(self, (), doomed)
        if doomed:
            for path in doomed:  # check every level first: all or nothing
                owner = self._get_tuple(path[:-1], NO_DEFAULT) if len(path) > 1 else self
                if owner.is_locked:
                    raise lock_error(unravel_key(path), "remove")
            for path in doomed:
                self.del_(path)
        return self

    # ------------------------------------------------------------------ context manager
    def __enter__(self) -> Self:
        stack = self._ctx_ops
        if stack is None:
            stack = []
            object.__setattr__(self, "_ctx_ops", stack)  # (past a subclass's __setattr__)
        stack.append(self._last_op)
        self._last_op = None
        return self

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        op = self._ctx_ops.pop()
        if op is None:
            return
        op[1](*op[2:])  # (name, undo, *undo_args)

    # ------------------------------------------------------------------ torch integration
    @classmethod
    def __torch_function__(
        cls,
        func: Callable[..., Any],
        types: tuple[type, ...],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        if type(func) is FunctionType:  # see TD_HANDLED_BY_NAME
            impl = TD_HANDLED_BY_NAME.get(func.__name__) or TD_HANDLED_FUNCTIONS.get(func)
        else:
            impl = TD_HANDLED_FUNCTIONS.get(func)
        if impl is None:
            if isinstance(func, HigherOrderOperator):  # invoke_subgraph & co.: they
                with torch._C.DisableTorchFunctionSubclass():  # flatten tensordicts
                    return func(*args, **(kwargs or {}))  # as pytrees themselves
            return NotImplemented
        return impl(*args, **(kwargs or {}))

    def is_memmap(self) -> bool:
        """Whether every leaf is memory-mapped; ``False`` when ``tensordict-memmap`` is absent.

        >>> from tensordict import TensorDict
        >>> import torch
        >>> TensorDict({"a": torch.zeros(2)}, [2]).is_memmap()
        False
        """
        return _forwarders.is_memmap(self)


_kinds.bind(Base=TensorDictBase)
_forwarders.install(SiblingMethods)
# Tensordicts are mappings, as in the reference (``isinstance(td, Mapping)``): this is what
# lets ``torch.testing.assert_close`` compare two of them key by key. Registration leaves
# ``isinstance(x, TensorDictBase)`` a plain (fast) class check.
MutableMapping.register(TensorDictBase)


def _collect_empty(td: TensorDictBase, prefix: tuple[str, ...], out: list[tuple[str, ...]]) -> None:
    """Append the paths of ``td``'s nested tensordicts that have no leaf (the topmost of
    each empty subtree) to ``out``."""
    for key in [k for k in td.keys() if isinstance(k, str)]:
        value = td._get_str(key, NO_DEFAULT)
        if isinstance(value, TensorDictBase):
            if value.is_empty():
                out.append((*prefix, key))
            else:
                _collect_empty(value, (*prefix, key), out)


def _key_tuple(key: Any) -> tuple[str, ...]:
    """A nested key as a flat tuple (fast path for the common flat-tuple case)."""
    if type(key) is tuple:
        for part in key:
            if type(part) is not str:
                break
        else:
            if key:
                return key
    elif type(key) is str:
        return (key,)
    key = unravel_key(key)
    return (key,) if type(key) is str else key


def _is_non_tensor_type(cls: type) -> bool:
    return issubclass(cls, NON_TENSOR)


kind_methods.declare(TensorDictBase)


def set_get_defaults_to_none(set_to_none: bool = True) -> None:
    """Choose what ``td.get(missing_key)`` does: return ``None`` (``True``, the default
    since the reference's 0.7) or raise ``KeyError`` (``False``). The initial mode comes
    from ``$TD_GET_DEFAULTS_TO_NONE`` (``0`` for the old behaviour).

    >>> from tensordict import TensorDict, get_defaults_to_none
    >>> set_get_defaults_to_none(True); TensorDict().get("x") is None
    True
    >>> set_get_defaults_to_none(False); get_defaults_to_none()
    False
    >>> set_get_defaults_to_none(True)
    """
    global _GET_DEFAULTS_TO_NONE
    _GET_DEFAULTS_TO_NONE = bool(set_to_none)


def get_defaults_to_none(set_to_none: bool = True) -> bool:
    """Whether ``td.get(missing_key)`` returns ``None`` (see :func:`set_get_defaults_to_none`;
    the argument is accepted for compatibility and ignored)."""
    return _GET_DEFAULTS_TO_NONE


# Names the reference keeps private in this module that clients import (docs: compatibility).
from tensordict._base.client_compat import (  # noqa: E402, F401
    _ACCEPTED_CLASSES,
    _NESTED_TENSORS_AS_LISTS,
    _NESTED_TENSORS_AS_LISTS_NONTENSOR,
    _default_is_leaf,
    _is_leaf_nontensor,
)

#: The reference's ``tensordict.base`` also exports the top-level readers.
_TOP_LEVEL_READERS = frozenset(
    {
        "from_any",
        "from_csv",
        "from_dict",
        "from_h5",
        "from_json",
        "from_namedtuple",
        "from_pandas",
        "from_parquet",
        "from_struct_array",
        "from_tuple",
        "from_zarr",
    }
)

__all__ = [
    "NO_DEFAULT",
    "TensorDictBase",
    "get_defaults_to_none",
    "is_tensor_collection",
    "set_get_defaults_to_none",
    *sorted(_TOP_LEVEL_READERS),
]


def __getattr__(name: str) -> Any:
    # ``from tensordict.base import from_dict``: the readers are defined (or forwarded to a
    # sibling) at the top level, which imports this module; read them there on demand.
    if name in _TOP_LEVEL_READERS:
        import tensordict

        return getattr(tensordict, name)
    raise AttributeError(f"module 'tensordict.base' has no attribute {name!r}")
