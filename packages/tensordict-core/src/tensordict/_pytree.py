"""Tensordicts and pytrees, both ways.

* :func:`from_pytree` / :func:`to_pytree`: a bijection between pytrees of lists, tuples,
  namedtuples, deques and dicts (any keys) and tensordicts. Every level records what it
  was in a non-tensor entry :data:`PYTREE_KEY` holding a :class:`PytreeNode`.
* :func:`register`: makes a tensordict class a ``torch.utils._pytree`` node, so
  ``tree_map``, ``tree_flatten``/``tree_unflatten`` and the ``torch.func`` transforms see
  through it. Children are the tensors and nested tensordicts; keys, batch size, device,
  names, non-tensor entries and unbatched entries travel in the context (``torch.vmap``
  must not map over an :class:`~tensordict.UnbatchedTensor`: it has no batch dimension).
* Inside a function that ``torch.vmap`` runs, the unbatched entries of a rebuilt
  tensordict are :class:`~tensordict._unbatched.UnbatchedTensorInVmap` objects, a pytree
  node whose one child is a plain alias: when the function returns one bare, ``vmap``
  expands that child along the new dimension, and the node's unflatten turns the
  expanded alias back into an ``UnbatchedTensor`` of the same payload whose batch size
  has the new dimension.
"""

from __future__ import annotations

import collections
import json
import sys
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, cast

import torch
from torch.utils import _pytree as pytree

from tensordict import _kinds
from tensordict._kinds import is_tensor_collection
from tensordict._nontensor import (
    DATA_TYPES,
    NON_TENSOR_TYPES,
    NonTensorData,
    NonTensorStack,
    is_non_tensor,
)
from tensordict._shape import parse_batch_size
from tensordict._unbatched import UNBATCHED_TYPES, UnbatchedTensorInVmap, as_unbatched

if TYPE_CHECKING:  # pragma: no cover
    from tensordict._td import TensorDict

_Tensor = torch.Tensor
_functorch = torch._C._functorch
_VMAP = _functorch.TransformType.Vmap

#: The key of the non-tensor entry recording what each level of a pytree was.
PYTREE_KEY = "_pytree_type"

#: Python scalars a tensordict stores as 0-dim tensors (``vmap``'s ``in_dims`` trees hold them).
_SCALARS = frozenset((bool, int, float, complex))
_INT64 = torch.zeros((), dtype=torch.int64)


def _scalar_tensor(value: Any) -> torch.Tensor:
    """``torch.as_tensor(value)`` for a Python number (an int in a quarter of the time)."""
    if type(value) is int and -(2**63) <= value < 2**63:
        return _INT64.new_full((), value)
    return torch.as_tensor(value)


class PytreeNode:
    """What one level of a pytree was: ``kind`` plus what rebuilding it needs.

    ``kind`` is ``"list"``, ``"tuple"``, ``"deque"``, ``"namedtuple"`` (``cls`` is the
    class), ``"dict"`` (``cls`` the dict class, ``keys`` the original keys when they
    are not all plain strings, ``extra`` a defaultdict's factory) or ``"tensordict"``
    (a tensordict found inside the pytree, stored under ``"0"``).

    >>> from tensordict._pytree import PytreeNode
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
def from_pytree(tree: Any, batch_size: Any, copy_tds: bool) -> TensorDict:
    """The body of ``TensorDict.from_pytree`` (without auto batch-size)."""
    bs = parse_batch_size(batch_size)
    out = _level(tree, bs, copy_tds, ())
    if out is None:
        raise TypeError(
            f"from_pytree expects a list, tuple, namedtuple, deque, dict or tensordict at the "
            f"top level, got {type(tree).__name__}."
        )
    return out


def _level(obj: Any, bs: torch.Size, copy_tds: bool, path: tuple[Any, ...]) -> TensorDict | None:
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


# ---------------------------------------------------------------------- pytree node
def _same_non_tensor(v1: Any, v2: Any) -> bool:
    """Whether two carried entries hold equal data (``==`` between them is elementwise);
    unbatched entries are the same when they share their payload."""
    if v1 is v2:
        return True
    if type(v1) in UNBATCHED_TYPES or type(v2) in UNBATCHED_TYPES:
        return (
            isinstance(v1, _Tensor)
            and isinstance(v2, _Tensor)
            and v1.shape == v2.shape
            and v1.data_ptr() == v2.data_ptr()
        )
    if type(v1) is not type(v2):
        return False
    a, b = (v1.data, v2.data) if type(v1) in DATA_TYPES else (v1.tolist(), v2.tolist())
    if a is b:
        return True
    try:
        return bool(a == b)
    except (ValueError, TypeError, RuntimeError):
        return False


class _NonTensorEntries(tuple[Any, ...]):
    """The non-tensor and unbatched ``(key, value)`` entries of a flattened tensordict.

    Hashable (by keys) and compared safely whatever the values are, so tree specs
    holding it can be hashed and compared.
    """

    __slots__ = ()

    def __hash__(self) -> int:
        return hash(tuple(key for key, _ in self))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, tuple) or len(other) != len(self):
            return False
        for (k1, v1), (k2, v2) in zip(self, other, strict=True):
            if k1 != k2 or not _same_non_tensor(v1, v2):
                return False
        return True

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)


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


def _vmap_level(value: Any) -> int:
    """The ``torch.vmap`` level of a batched tensor, ``-1`` for any other tensor."""
    return _functorch.maybe_get_level(value) if _functorch.is_batchedtensor(value) else -1


def _vmap_depth() -> int:
    """How many ``torch.vmap`` levels the current code runs in."""
    stack = _functorch.get_interpreter_stack()
    return 0 if not stack else sum(1 for interpreter in stack if interpreter.key() == _VMAP)


def _first_leaf(values: Iterable[Any]) -> Any:
    """A (batched) tensor leaf among ``values`` or, failing that, inside the tensordicts
    among them; unbatched entries do not count."""
    nested = []
    for value in values:
        if isinstance(value, _kinds.Base):  # first: isinstance(td, Tensor) is slow
            if type(value) not in NON_TENSOR_TYPES:
                nested.append(value)
        elif isinstance(value, _Tensor):
            if type(value) not in UNBATCHED_TYPES:
                return value
        elif type(value) not in NON_TENSOR_TYPES and hasattr(value, "batch_size"):
            nested.append(value)
    for value in nested:
        store = value._tensordict if isinstance(value, _kinds.Dense) else None
        leaf = _first_leaf(store.values() if type(store) is dict else value.values(True, True))
        if leaf is not None:
            return leaf
    return None


def _flatten(td: Any) -> tuple[list[Any], tuple[Any, ...]]:
    children = []
    non_tensor = None
    level = None
    for key, value in td._tensordict.items():
        if type(value) in NON_TENSOR_TYPES or (
            type(value) in UNBATCHED_TYPES and not _functorch.is_functorch_wrapped_tensor(value)
        ):  # an unbatched result of batched operations is batched: a leaf
            if non_tensor is None:
                non_tensor = []
            non_tensor.append((key, value))
        else:
            if level is None and not isinstance(value, _kinds.Base) and isinstance(value, _Tensor):
                level = _vmap_level(value)
            children.append(value)
    if level is None and children:  # only nested tensordicts: look inside them
        leaf = _first_leaf(children)
        level = None if leaf is None else _vmap_level(leaf)
    names = td._names
    context = (
        tuple(td._tensordict),
        td._batch_size,
        td._device,
        None if names is None else tuple(names),
        None if non_tensor is None else _NonTensorEntries(non_tensor),
        _level_hint(-1 if level is None else level),
    )
    return children, context


def _flatten_with_keys(td: Any) -> tuple[list[tuple[Any, Any]], tuple[Any, ...]]:
    children, context = _flatten(td)
    skip = () if context[4] is None else {key for key, _ in context[4]}
    keys = [key for key in context[0] if key not in skip]
    return [(pytree.MappingKey(k), v) for k, v in zip(keys, children, strict=True)], context


def _make_unflatten(cls: type) -> Any:
    def unflatten(values: Iterable[Any], context: tuple[Any, ...]) -> Any:
        return _unflatten(cls, values, context)

    return unflatten


def _unflatten(cls: Any, values: Iterable[Any], context: tuple[Any, ...]) -> Any:
    out = _rebuild(cls, values, context)
    carried = context[4]
    if carried is not None:
        unbatched = [key for key, value in carried if type(value) in UNBATCHED_TYPES]
        if unbatched:
            _place_unbatched(out, unbatched, context[1])
    return out


def _place_unbatched(out: Any, keys: list[str], old_bs: torch.Size) -> None:
    """Give the unbatched entries ``keys`` of a rebuilt tensordict its batch size, as
    :class:`UnbatchedTensorInVmap` objects when the code goes on inside ``torch.vmap``
    (rebuilt on entering a level, or inside one; not on leaving the last one, where the
    batch size gains the vmapped dimension back)."""
    bs = out._batch_size
    in_vmap = _vmap_depth() - (len(bs) > len(old_bs)) > 0
    store = out._tensordict
    for key in keys:
        store[key] = as_unbatched(store[key], bs, in_vmap)


def _rebuild(cls: Any, values: Iterable[Any], context: tuple[Any, ...]) -> Any:
    keys, bs, device, names, non_tensor, level = context
    level = int(level)  # a _Level compares equal to everything
    children = values if type(values) is list else list(values)
    if non_tensor is None:
        source = dict(zip(keys, children, strict=True))
    else:
        fixed = dict(non_tensor)
        it = iter(children)
        source = {key: fixed[key] if key in fixed else next(it) for key in keys}
    nb = len(bs)
    ok = True
    first = True
    for value in children:
        if isinstance(value, _Tensor):
            if first:
                first = False
                if _vmap_level(value) != level:  # entering or leaving a torch.vmap level
                    ok = False
                    break
            if value.shape[:nb] != bs:
                ok = False
                break
            if device is not None and value.device != device:
                device = None
        elif isinstance(value, _kinds.Base):
            if value.batch_size[:nb] != bs:
                ok = False
                break
            if device is not None and value.device != device:
                device = None
        else:
            ok = False
            break
    if ok and first and children:  # only nested tensordicts: did they cross a vmap level?
        leaf = _first_leaf(children)
        ok = leaf is None or _vmap_level(leaf) == level
    if ok:
        return cls._new_unsafe(source, bs, device, None if names is None else list(names))
    if non_tensor is None and names is None:
        entered = _entered(children, bs, level)
        if entered is not None:  # torch.vmap entering over a batch dim: the common case
            return cls._new_unsafe(source, entered, None, None)
    return _unflatten_reshaped(cls, source, children, bs, names, level)


def _entered(children: list[Any], bs: torch.Size, level: int) -> torch.Size | None:
    """The batch size of a level whose leaves entered a ``torch.vmap`` level over one of
    its batch dims, when every child shows it; ``None`` otherwise.

    The leaves are batched at one new level along one batch dim ``d`` < ``len(bs)``, and
    their unwrapped tensors start with ``bs``: the new batch size is ``bs`` without ``d``.
    """
    nb = len(bs)
    new = None
    lvl = bdim = -1
    nested = False
    for value in children:
        if isinstance(value, _kinds.Base):
            nested = True
        elif isinstance(value, _Tensor):
            if not _functorch.is_batchedtensor(value):
                return None
            if new is None:
                lvl = _functorch.maybe_get_level(value)
                bdim = _functorch.maybe_get_bdim(value)
                if lvl <= level or bdim >= nb:
                    return None
                new = bs[:bdim] + bs[bdim + 1 :]
            elif (
                _functorch.maybe_get_level(value) != lvl or _functorch.maybe_get_bdim(value) != bdim
            ):
                return None
            if _functorch.get_unwrapped(value).shape[:nb] != bs:
                return None
        else:
            return None
    if new is None:  # only nested tensordicts: their leaves tell
        leaf = _first_leaf(children)
        if leaf is None or not _functorch.is_batchedtensor(leaf):
            return None
        bdim = _functorch.maybe_get_bdim(leaf)
        if _functorch.maybe_get_level(leaf) <= level or bdim >= nb:
            return None
        if _functorch.get_unwrapped(leaf).shape[:nb] != bs:
            return None
        new = bs[:bdim] + bs[bdim + 1 :]
    if nested:
        n = nb - 1
        for value in children:
            if isinstance(value, _kinds.Base) and value.batch_size[:n] != new:
                return None
    return new


def _unflatten_reshaped(
    cls: Any,
    source: dict[str, Any],
    children: list[Any],
    bs: torch.Size,
    names: tuple[Any, ...] | None,
    level: int,
) -> Any:
    """Unflatten when the leaves no longer start with the batch size, or crossed a vmap level.

    Entering ``torch.vmap`` (leaves batched at a new level) removes the vmapped batch
    dimension; leaving it (leaves no longer batched) inserts the dimension ``out_dims``
    put back. Otherwise the batch size is kept if the leaves allow it, else it becomes
    the old one with one dimension inserted (as in Jacobians), else the old one without
    some leading dimensions, else the longest prefix of the old one that every leaf still
    has. Python numbers (``vmap`` rebuilds trees of ``in_dims`` this way) become 0-dim
    tensors, so they leave an empty batch size.
    """
    shapes = []
    reps = []  # the tensors telling which vmap level the leaves are at
    others = 0  # children that are neither tensors, tensordicts nor Python numbers
    scalars = False
    for value in children:
        if isinstance(value, _Tensor):
            shapes.append(tuple(value.shape))
            reps.append(value)
        elif isinstance(value, _kinds.Base):
            shapes.append(tuple(value.batch_size))
        elif type(value) in _SCALARS:
            scalars = True
        else:
            others += 1
    # The constructor has nothing left to check when every child is a tensor or a
    # tensordict whose shape fits, no non-tensor entry needs the new batch size and no
    # name needs propagating.
    unchecked = not others and len(source) == len(children) and names is None
    if scalars:
        if unchecked and all(not s for s in shapes):
            items = source.items()
            return cls._new_unsafe(
                {k: _scalar_tensor(v) if type(v) in _SCALARS else v for k, v in items},
                torch.Size(()),
                None,
                None,
            )
        return cls(source, batch_size=[])
    for candidate, cand_names in _batch_candidates(children, shapes, reps, bs, names, level):
        n = len(candidate)
        if all(s[:n] == candidate for s in shapes):
            if unchecked:
                return cls._new_unsafe(source, torch.Size(candidate), None, None)
            try:
                return cls(
                    source,
                    batch_size=candidate,
                    names=cand_names if any(x is not None for x in cand_names) else None,
                )
            except (RuntimeError, ValueError):
                continue
    return cls(source, batch_size=[])


def _batch_candidates(
    children: list[Any],
    shapes: list[tuple[int, ...]],
    reps: list[Any],
    bs: torch.Size,
    names: tuple[Any, ...] | None,
    level: int,
) -> Iterator[tuple[tuple[int, ...], list[Any]]]:
    """The batch sizes (and names) :func:`_unflatten_reshaped` tries, most likely first."""
    if not reps:
        leaf = _first_leaf(children)
        reps = [] if leaf is None else [leaf]
    levels = {_vmap_level(t) for t in reps}
    nb = len(bs)
    old = tuple(bs)
    old_names = list(names) if names is not None else [None] * nb
    if len(levels) == 1 and next(iter(levels)) > level:  # entering a vmap level
        bdims = {_functorch.maybe_get_bdim(t) for t in reps}
        bdim = next(iter(bdims))
        # vmapped over a batch dimension: the unwrapped leaves still start with the batch
        # size (a vmap over something else, e.g. jacfwd's basis, puts a new dim in front).
        if (
            len(bdims) == 1
            and bdim < nb
            and all(tuple(_functorch.get_unwrapped(t).shape[:nb]) == old for t in reps)
        ):
            yield old[:bdim] + old[bdim + 1 :], old_names[:bdim] + old_names[bdim + 1 :]
    inserted = []
    if shapes:
        ref = shapes[0]
        for d in range(min(nb, len(ref) - 1) + 1):
            inserted.append((old[:d] + (ref[d],) + old[d:], old_names[:d] + [None] + old_names[d:]))
    leaving = level >= 0 and levels and max(levels) < level
    if leaving:
        yield from inserted
    yield old, old_names
    if not leaving:
        yield from inserted
    # leading dims dropped (a spec recorded with a vmapped dimension in front, as
    # ``jacfwd`` records its output spec), then the longest prefix the leaves still have
    for k in range(1, nb):
        yield old[k:], old_names[k:]
    for k in range(nb - 1, -1, -1):
        yield old[:k], old_names[:k]


def _to_dumpable_context(context: tuple[Any, ...]) -> str:
    keys, bs, device, names, non_tensor, _ = context
    if non_tensor is not None and any(type(v) in UNBATCHED_TYPES for _, v in non_tensor):
        raise TypeError(
            "cannot serialize the tree spec of a tensordict holding UnbatchedTensor entries "
            f"(keys {[k for k, v in non_tensor if type(v) in UNBATCHED_TYPES]}): they travel "
            "in the spec, not as leaves."
        )
    try:
        data = None
        if non_tensor is not None:
            data = [
                (k, type(v).__name__, v.data if type(v) in DATA_TYPES else v.tolist())
                for k, v in non_tensor
            ]
        return json.dumps(
            {
                "keys": list(keys),
                "batch_size": list(bs),
                "device": None if device is None else str(device),
                "names": None if names is None else list(names),
                "non_tensor": data,
            }
        )
    except TypeError:
        raise TypeError(
            "cannot serialize the tree spec of a tensordict whose non-tensor entries are not "
            f"JSON values (keys {[k for k, _ in non_tensor or ()]})."
        ) from None


def _from_dumpable_context(dumped: str) -> tuple[Any, ...]:
    data = json.loads(dumped)
    bs = torch.Size(data["batch_size"])
    device = None if data["device"] is None else torch.device(data["device"])
    non_tensor = data["non_tensor"]
    if non_tensor is not None:
        kinds: dict[str, Any] = {cls.__name__: cls for cls in NON_TENSOR_TYPES}
        entries = []
        for key, kind, value in non_tensor:
            cls = kinds[kind]
            if cls is NonTensorStack:
                entries.append((key, NonTensorStack.from_list(value, device, ndim=len(bs))))
            else:
                entries.append((key, cls._make(value, bs, device)))
        non_tensor = _NonTensorEntries(entries)
    names = None if data["names"] is None else tuple(data["names"])
    return (tuple(data["keys"]), bs, device, names, non_tensor, -1)


# ---------------------------------------------------------------------- lazy stacks
def _lazy_flatten(lazy: Any) -> tuple[list[Any], tuple[Any, ...]]:
    members = list(lazy.tensordicts)
    leaf = _first_leaf(members)
    member_bs = members[0].batch_size if members else None
    context = (
        lazy.stack_dim,
        lazy._td_dim_name,
        lazy.batch_size,
        member_bs,
        _level_hint(-1 if leaf is None else _vmap_level(leaf)),
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
        leaf = _first_leaf(members)
        new_level = -1 if leaf is None else _vmap_level(leaf)
        if new_level > level:
            raise RuntimeError(
                "torch.vmap over a LazyStackedTensorDict is not supported: its members would be "
                "batched along their own dimensions, not the stack's. Make it dense first "
                "(td.contiguous() or td.densify())."
            )
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

    Its children are the stacked tensordicts. ``torch.vmap`` cannot batch a lazy stack
    along its dimensions through its members, so entering a vmap with one raises.

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


# ---------------------------------------------------------------------- unbatched in vmap
def _unbatched_flatten(value: Any) -> tuple[list[Any], tuple[Any, ...]]:
    return [as_unbatched(value, value.batch_size)], (tuple(value.batch_size), tuple(value.shape))


def _unbatched_flatten_with_keys(value: Any) -> tuple[list[tuple[Any, Any]], tuple[Any, ...]]:
    children, context = _unbatched_flatten(value)
    return [(pytree.SequenceKey(0), children[0])], context


def _unbatched_unflatten(values: Iterable[Any], context: tuple[Any, ...]) -> Any:
    """The child back, or, when ``torch.vmap`` expanded it along a new dimension ``d`` on
    leaving a level (a tensor it did not batch), an ``UnbatchedTensor`` of the payload
    whose batch size has that dimension at ``d``."""
    (leaf,) = values
    bs, shape = context
    if (
        type(leaf) is _Tensor
        and leaf.dim() == len(shape) + 1
        and not _functorch.is_batchedtensor(leaf)
    ):
        size = leaf.shape
        for d in range(min(len(bs), len(shape)) + 1):
            if (leaf.stride(d) == 0 or size[d] == 1) and size[:d] + size[d + 1 :] == shape:
                new_bs = torch.Size(bs[:d] + (size[d],) + bs[d:])
                return as_unbatched(leaf.select(d, 0), new_bs, _vmap_depth() > 1)
    return leaf


def _unbatched_from_dumpable(dumped: str) -> tuple[Any, ...]:
    bs, shape = json.loads(dumped)
    return tuple(bs), tuple(shape)


def register_defaults() -> None:
    """Register ``TensorDict``, ``UnbatchedTensorInVmap`` and, when core has it,
    ``LazyStackedTensorDict``."""
    register(_kinds.Dense)
    if UnbatchedTensorInVmap not in pytree.SUPPORTED_NODES:
        pytree.register_pytree_node(
            UnbatchedTensorInVmap,
            _unbatched_flatten,
            _unbatched_unflatten,
            serialized_type_name="tensordict._unbatched.UnbatchedTensorInVmap",
            to_dumpable_context=json.dumps,
            from_dumpable_context=_unbatched_from_dumpable,
            flatten_with_keys_fn=_unbatched_flatten_with_keys,
        )
    lazy_module = sys.modules.get("tensordict._lazy")
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
        _flatten,
        _make_unflatten(cls if rebuild_as is None else rebuild_as),
        serialized_type_name=f"{cls.__module__}.{cls.__qualname__}",
        to_dumpable_context=_to_dumpable_context,
        from_dumpable_context=_from_dumpable_context,
        flatten_with_keys_fn=_flatten_with_keys,
    )
