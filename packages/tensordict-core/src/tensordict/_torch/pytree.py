"""Tensordicts and pytrees, both ways.

* :func:`from_pytree` / :func:`to_pytree`: a bijection between pytrees of lists, tuples,
  namedtuples, deques and dicts (any keys) and tensordicts. Every level records what it
  was in a non-tensor entry :data:`PYTREE_KEY` holding a :class:`PytreeNode`.
* :func:`register`: makes a tensordict class a ``torch.utils._pytree`` node, so
  ``tree_map``, ``tree_flatten``/``tree_unflatten`` and the ``torch.func`` transforms see
  through it: one node for a tensordict and the plain tensordicts nested in it, whose
  children are their tensors (see :mod:`tensordict._torch.pytree_td`).
  :func:`register_lazy_stack` does it for lazy stacks, whose children are their members.
"""

from __future__ import annotations

import collections
import sys
from collections.abc import Iterable
from typing import Any, cast

import torch
from torch._C import _functorch
from torch.utils import _pytree as pytree

from tensordict._keys.shape import parse_batch_size
from tensordict._kinds import kinds as _kinds
from tensordict._kinds.kinds import is_tensor_collection
from tensordict._leaves.nontensor import (
    DATA_TYPES,
    NON_TENSOR_TYPES,
    NonTensorData,
    is_non_tensor,
)
from tensordict._torch import vmap_dims
from tensordict._torch.pytree_td import (
    first_leaf,
    flatten,
    flatten_with_keys,
    from_dumpable_context,
    make_unflatten,
    prime_kinds,
    register_unbatched_in_vmap,
    to_dumpable_context,
    vmap_level,
)

_Tensor = torch.Tensor

#: The key of the non-tensor entry recording what each level of a pytree was.
PYTREE_KEY = "_pytree_type"


#: Python scalars a tensordict stores as 0-dim tensors (``vmap``'s ``in_dims`` trees hold them).
class PytreeNode:
    """What one level of a pytree was: ``kind`` plus what rebuilding it needs.

    ``kind`` is ``"list"``, ``"tuple"``, ``"deque"``, ``"namedtuple"`` (``cls`` is the
    class), ``"dict"`` (``cls`` the dict class, ``keys`` the original keys when they
    are not all plain strings, ``extra`` a defaultdict's factory) or ``"tensordict"``
    (a tensordict found inside the pytree, stored under ``"0"``).

    >>> from tensordict._torch.pytree import PytreeNode
    >>> PytreeNode("dict", dict, (1, "a"))
    PytreeNode('dict', keys=(1, 'a'))
    """

    __slots__ = ("kind", "cls", "keys", "extra")

    def __init__(
        self,
        kind: str,
        cls: type | None = None,
        keys: tuple[Any, ...] | None = None,
        extra: Any = None,
    ) -> None:
        self.kind = kind
        self.cls = cls
        self.keys = keys
        self.extra = extra

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PytreeNode):
            return NotImplemented
        return (self.kind, self.cls, self.keys, self.extra) == (
            other.kind,
            other.cls,
            other.keys,
            other.extra,
        )

    def __hash__(self) -> int:
        return hash((self.kind, self.keys))

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.kind, self.cls, self.keys, self.extra)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.kind, self.cls, self.keys, self.extra = state

    def __repr__(self) -> str:
        detail = ""
        if self.kind == "namedtuple" and self.cls is not None:
            detail = f", cls={self.cls.__name__}"
        elif self.cls not in (None, dict, list, tuple):
            detail = f", cls={self.cls.__name__}"
        if self.keys is not None:
            detail += f", keys={self.keys!r}"
        return f"PytreeNode({self.kind!r}{detail})"


# ---------------------------------------------------------------------- pytree -> td
def from_pytree(tree: Any, batch_size: Any, copy_tds: bool) -> _kinds.Dense:
    """The body of ``TensorDict.from_pytree`` (without auto batch-size)."""
    bs = parse_batch_size(batch_size)
    out = _level(tree, bs, copy_tds, ())
    if out is None:
        raise TypeError(
            f"from_pytree expects a list, tuple, namedtuple, deque, dict or tensordict at the "
            f"top level, got {type(tree).__name__}."
        )
    return out


def _level(obj: Any, bs: torch.Size, copy_tds: bool, path: tuple[Any, ...]) -> _kinds.Dense | None:
    """The tensordict for one pytree node, or ``None`` when ``obj`` is a leaf."""
    if isinstance(obj, _Tensor):
        return None
    cls = type(obj)
    if is_tensor_collection(obj) and not is_non_tensor(obj):
        node = PytreeNode("tensordict")
        items: Any = {"0": obj.copy() if copy_tds and cls is _kinds.Dense else obj}
        copy_tds = False
    elif cls is list or cls is tuple or cls is collections.deque:
        node = PytreeNode(cls.__name__, extra=obj.maxlen if cls is collections.deque else None)
        items = {str(i): v for i, v in enumerate(obj)}
    elif isinstance(obj, tuple) and hasattr(cls, "_fields"):
        node = PytreeNode("namedtuple", cls)
        items = cast(Any, obj)._asdict()
    elif cls is dict or cls is collections.OrderedDict or cls is collections.defaultdict:
        factory = obj.default_factory if cls is collections.defaultdict else None
        if all(type(k) is str and k != PYTREE_KEY for k in obj):
            node = PytreeNode("dict", cls, None, factory)
            items = obj
        else:
            node = PytreeNode("dict", cls, tuple(obj), factory)
            items = {str(i): v for i, v in enumerate(obj.values())}
    else:
        return None
    source = {}
    for key, value in items.items():
        sub = None if node.kind == "tensordict" else _level(value, bs, copy_tds, path + (key,))
        source[key] = value if sub is None else sub
    source[PYTREE_KEY] = NonTensorData._make(node, bs, None)
    try:
        return _kinds.Dense(source, batch_size=bs)
    except (RuntimeError, ValueError, TypeError) as err:
        if not path:
            raise
        raise type(err)(f"{err} (in the pytree node at {path!r})") from None


# ---------------------------------------------------------------------- td -> pytree
def _entries(td: Any) -> dict[str, Any]:
    store = td._tensordict if isinstance(td, _kinds.Dense) else None
    return store if type(store) is dict else dict(td.items())


def _leaf(value: Any) -> Any:
    if isinstance(value, _Tensor):
        return value
    if type(value) in DATA_TYPES:
        return value.data
    if is_non_tensor(value):
        return value.tolist()
    if isinstance(value, _kinds.Base):
        return to_pytree(value)
    return value


def to_pytree(td: Any) -> Any:
    """The body of ``TensorDictBase.to_pytree``."""
    store = _entries(td)
    record = store.get(PYTREE_KEY)
    node = getattr(record, "data", None) if type(record) in DATA_TYPES else None
    if not isinstance(node, PytreeNode):
        return {key: _leaf(value) for key, value in store.items()}
    kind = node.kind
    if kind == "tensordict":
        return store["0"]
    if kind == "dict":
        cls: Any = node.cls or dict
        if node.keys is None:
            items = [(k, _leaf(v)) for k, v in store.items() if k != PYTREE_KEY]
        else:
            items = [(k, _leaf(store[str(i)])) for i, k in enumerate(node.keys)]
        if cls is collections.defaultdict:
            return collections.defaultdict(node.extra, items)
        return cls(items)
    values = [_leaf(store[str(i)]) for i in range(len(store) - 1)] if kind != "namedtuple" else None
    if kind == "list":
        return values
    if kind == "tuple":
        return tuple(values)  # type: ignore[arg-type]
    if kind == "deque":
        return collections.deque(values, node.extra)  # type: ignore[arg-type]
    assert node.cls is not None
    fields: tuple[str, ...] = cast(Any, node.cls)._fields
    return node.cls(*(_leaf(store[f]) for f in fields))


# ---------------------------------------------------------------------- lazy stacks
class _Level(int):
    """The vmap level recorded in a tree spec: a hint for unflattening, not structure.

    It compares equal to any other level, so that specs of the same tensordict structure
    made inside and outside ``torch.vmap`` match (``jacrev`` compares the spec of the
    cotangents, built under vmap, with that of the outputs).
    """

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, int)

    def __ne__(self, other: object) -> bool:
        return not isinstance(other, int)

    def __hash__(self) -> int:
        return 0


_LEVELS: dict[int, _Level] = {}


def _level_hint(value: int) -> _Level:
    """The (shared) :class:`_Level` for ``value``."""
    level = _LEVELS.get(value)
    if level is None:
        level = _LEVELS[value] = _Level(value)
    return level


def _lazy_flatten(lazy: Any) -> tuple[list[Any], tuple[Any, ...]]:
    vmap_dims.LAZY_FLATTENED[0] += 1
    members = list(lazy.tensordicts)
    leaf = first_leaf(members)
    member_bs = members[0].batch_size if members else None
    context = (
        lazy.stack_dim,
        lazy._td_dim_name,
        lazy.batch_size,
        member_bs,
        _level_hint(-1 if leaf is None else vmap_level(leaf)),
    )
    return members, context


def _lazy_flatten_with_keys(lazy: Any) -> tuple[list[tuple[Any, Any]], tuple[Any, ...]]:
    members, context = _lazy_flatten(lazy)
    return [(pytree.SequenceKey(i), td) for i, td in enumerate(members)], context


def _make_lazy_unflatten(cls: Any) -> Any:
    def unflatten(values: Iterable[Any], context: tuple[Any, ...]) -> Any:
        stack_dim, dim_name, batch_size, member_bs, level = context
        level = int(level)
        members = list(values)
        if not members:
            return cls._new([], stack_dim, dim_name, batch_size)
        leaf = first_leaf(members)
        new_level = -1 if leaf is None else vmap_level(leaf)
        if new_level > level and len(members[0].batch_size) < len(member_bs):
            # entering torch.vmap along a member dim (vmap_dims turned the stack's batch
            # dim into it): the stack loses that dim
            if _functorch.maybe_get_bdim(leaf) < stack_dim:
                stack_dim -= 1
            return cls._new(members, stack_dim, dim_name)
        new_bs = members[0].batch_size
        for i, td in enumerate(members[1:], 1):
            if td.batch_size != new_bs:
                raise RuntimeError(
                    f"cannot rebuild a lazy stack from tensordicts of different batch sizes "
                    f"({tuple(new_bs)} for member 0, {tuple(td.batch_size)} for member {i})."
                )
        if new_level < level and len(new_bs) == len(member_bs) + 1:
            # leaving torch.vmap: the members got the vmapped dimension back; find where
            d = next(
                (j for j in range(len(member_bs)) if new_bs[j] != member_bs[j]), len(member_bs)
            )
            if d <= stack_dim:
                stack_dim += 1
        return cls._new(members, min(stack_dim, len(new_bs)), dim_name)

    return unflatten


def register_lazy_stack(cls: type) -> None:
    """Register a lazy-stack class (``tensordicts``/``stack_dim``) as a pytree node.

    Its children are the stacked tensordicts. ``torch.vmap`` maps a lazy stack along
    one of its batch dims through its members (:mod:`tensordict._torch.vmap_dims` turns
    the dim into theirs, or makes the stack dense when it is the stack dim).

    >>> import torch
    >>> from torch.utils._pytree import tree_map
    >>> from tensordict import TensorDict, lazy_stack
    >>> lazy = lazy_stack([TensorDict({"a": torch.zeros(2)}, [2]), TensorDict({"a": torch.ones(2)}, [2])])
    >>> out = tree_map(lambda x: x + 1, lazy)
    >>> type(out).__name__, out.batch_size, out["a"][1]
    ('LazyStackedTensorDict', torch.Size([2, 2]), tensor([2., 2.]))
    """
    if cls in pytree.SUPPORTED_NODES:
        return
    pytree.register_pytree_node(
        cls,
        _lazy_flatten,
        _make_lazy_unflatten(cls),
        serialized_type_name=f"{cls.__module__}.{cls.__qualname__}",
        flatten_with_keys_fn=_lazy_flatten_with_keys,
    )


def register_defaults() -> None:
    """Register ``TensorDict``, ``UnbatchedTensorInVmap`` and, when core has it,
    ``LazyStackedTensorDict``."""
    register(_kinds.Dense)
    register_unbatched_in_vmap()
    # the types a tensordict usually holds, cached before any compiled code reads the cache
    prime_kinds(torch.Tensor, torch.nn.Parameter, torch.nn.Buffer, _kinds.Dense, *NON_TENSOR_TYPES)
    vmap_dims.install()
    lazy_module = sys.modules.get("tensordict._lazy.stack")
    lazy_cls = getattr(lazy_module, "LazyStackedTensorDict", None)
    if lazy_cls is not None:
        register_lazy_stack(lazy_cls)


def register(cls: type, rebuild_as: type | None = None) -> None:
    """Register a dense tensordict class (``_tensordict`` storage) as a pytree node.

    ``rebuild_as`` is the class the node is rebuilt as (default: ``cls``): a subclass whose
    constructor must not see batched or traced values (e.g. one that turns tensors into
    parameters) is rebuilt as a plain ``TensorDict``.

    >>> import torch
    >>> from torch.utils._pytree import tree_map
    >>> from tensordict import TensorDict
    >>> td = TensorDict({"a": torch.ones(2), "b": {"c": torch.ones(2)}}, [2])
    >>> out = tree_map(lambda x: x * 2, td)
    >>> type(out).__name__, out["b", "c"], out.batch_size
    ('TensorDict', tensor([2., 2.]), torch.Size([2]))
    """
    if cls in pytree.SUPPORTED_NODES:
        return
    pytree.register_pytree_node(
        cls,
        flatten,
        make_unflatten(cls if rebuild_as is None else rebuild_as),
        serialized_type_name=f"{cls.__module__}.{cls.__qualname__}",
        to_dumpable_context=to_dumpable_context,
        from_dumpable_context=from_dumpable_context,
        flatten_with_keys_fn=flatten_with_keys,
    )
