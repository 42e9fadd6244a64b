"""A dense tensordict as one ``torch.utils._pytree`` node.

One node covers a tensordict *and* the plain ``TensorDict`` values nested in it: its
children are every tensor leaf of that tree (depth first, in key order) and the other
nested collections (tensorclasses, lazy stacks, other tensordict classes), which are
nodes of their own. Keys, batch sizes, devices, names, non-tensor entries and unbatched
entries travel in the spec (:class:`LevelSpec`, one per level). ``torch.vmap`` walks
its arguments several times per call (flatten, the ``in_dims`` tree of zeros rebuilt and
flattened again, the batched arguments rebuilt); one node instead of one per level
spares ``torch.utils._pytree``'s work per node on each of those walks.

Rebuilding goes level by level, the deepest first, as ``tree_unflatten`` would over
nodes of each level: a level keeps its batch size when its leaves still start with it,
loses the vmapped dimension when its leaves entered a ``torch.vmap`` level, and
otherwise takes the batch size its leaves allow (:func:`_reshaped`). A nested level
without any leaf follows its parent.

:class:`~tensordict.UnbatchedTensor` entries are not leaves (``torch.vmap`` must not
map over them, they have no batch dimension); inside a function that ``torch.vmap``
runs they are :class:`~tensordict._leaves.unbatched.UnbatchedTensorInVmap` objects, a pytree
node whose one child is a plain alias: when the function returns one bare, ``vmap``
expands that child along the new dimension, and the node's unflatten turns the
expanded alias back into an ``UnbatchedTensor`` of the same payload whose batch size
has the new dimension.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Iterator
from typing import Any

import torch
from torch.utils import _pytree as pytree

from tensordict._kinds import kinds as _kinds
from tensordict._leaves.nontensor import DATA_TYPES, NON_TENSOR_TYPES, NonTensorData, NonTensorStack
from tensordict._leaves.unbatched import UNBATCHED_TYPES, UnbatchedTensorInVmap, as_unbatched
from tensordict._torch.traced import compiled_tree, symbolic, traced_level

_Tensor = torch.Tensor
_functorch = torch._C._functorch
_VMAP = _functorch.TransformType.Vmap
_is_batched = _functorch.is_batchedtensor
_is_wrapped = _functorch.is_functorch_wrapped_tensor

#: Python scalars a tensordict stores as 0-dim tensors (``vmap``'s ``in_dims`` trees hold them).
_SCALARS = frozenset((bool, int, float, complex))
_INT64 = torch.zeros((), dtype=torch.int64)
#: Dynamo does not trace ``Tensor.new_full`` on a module-level tensor: compiled code takes
#: the ``torch.as_tensor`` path
_compiling = torch.compiler.is_compiling


def _scalar_tensor(value: Any) -> torch.Tensor:
    """``torch.as_tensor(value)`` for a Python number (an int in a quarter of the time)."""
    if type(value) is int and -(2**63) <= value < 2**63 and not _compiling():
        return _INT64.new_full((), value)
    return torch.as_tensor(value)


def vmap_level(value: Any) -> int:
    """The ``torch.vmap`` level of a batched tensor, ``-1`` for any other tensor."""
    return _functorch.maybe_get_level(value) if _is_batched(value) else -1


def vmap_depth() -> int:
    """How many ``torch.vmap`` levels the current code runs in."""
    stack = _functorch.get_interpreter_stack()
    return 0 if not stack else sum(1 for interpreter in stack if interpreter.key() == _VMAP)


def first_leaf(values: Iterable[Any]) -> Any:
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
        leaf = first_leaf(store.values() if type(store) is dict else value.values(True, True))
        if leaf is not None:
            return leaf
    return None


# ---------------------------------------------------------------------- the spec
def _same_carried(v1: Any, v2: Any) -> bool:
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


def _field(index: int) -> Any:
    """A field of :class:`LevelSpec` read by name (a Python getter: Dynamo traces it where
    a spec is read inside compiled code, as in ``nested_compile_region``; it cannot wrap
    ``operator.itemgetter``)."""
    return property(lambda spec: tuple.__getitem__(spec, index))


class LevelSpec(tuple):  # type: ignore[type-arg]
    """What one level of a flattened tensordict was, beside its leaves.

    ``layout`` has one ``(key, sub)`` pair per child, in order: ``sub`` is ``None`` for
    a child taken as it is (a tensor or a collection that is a node of its own) and the
    :class:`LevelSpec` of a nested ``TensorDict`` merged into the node; it is ``None``
    itself when every entry is a tensor child (the common level, rebuilt with
    ``dict(zip(keys, children))``; :meth:`pairs` gives the pairs either way). ``carried``
    holds the ``(key, value)`` non-tensor and unbatched entries, which are no
    children. ``level`` is the ``torch.vmap`` level of the level's first leaf (``-1``:
    none or not batched): a hint for rebuilding, ignored by ``==``, so that specs made
    inside and outside ``torch.vmap`` match (``jacrev`` compares them). ``==`` counts the
    batch dims without comparing their sizes: like a tensor leaf's shape, the batch size
    is not structure (an exported module takes inputs of another size along a dim exported
    as dynamic, and checks that their spec equals the example's).
    """

    __slots__ = ()

    # A tuple (made in one C call: flattening makes one per level, on every torch.vmap
    # call) whose fields are read by name.
    keys: tuple[str, ...] = _field(0)
    layout: tuple[tuple[str, LevelSpec | None], ...] | None = _field(1)
    batch_size: torch.Size = _field(2)
    device: torch.device | None = _field(3)
    names: tuple[Any, ...] | None = _field(4)
    carried: tuple[tuple[str, Any], ...] | None = _field(5)
    level: int = _field(6)
    #: how many children the level and its merged levels take
    size: int = _field(7)
    #: tensors and merged levels only, none without children, no names, nothing
    #: carried, here and below: the whole tree can be rebuilt in one go
    plain: bool = _field(8)
    #: the level was locked: rebuilt locked when its leaves cross a ``torch.vmap`` level
    #: (writes inside the function raise as outside); a hint, ignored by ``==``
    locked: bool = _field(9)

    def __eq__(self, other: object) -> bool:
        if type(other) is tuple and len(other) == 10:  # made in compiled code
            other = level_spec(other)
        if not isinstance(other, LevelSpec):
            return NotImplemented
        if (
            self.keys != other.keys
            or self.layout != other.layout
            or len(self.batch_size) != len(other.batch_size)
            or self.device != other.device
            or self.names != other.names
        ):
            return False
        c1, c2 = self.carried, other.carried
        if c1 is None or c2 is None:
            return c1 is c2
        return len(c1) == len(c2) and all(
            k1 == k2 and _same_carried(v1, v2) for (k1, v1), (k2, v2) in zip(c1, c2, strict=True)
        )

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash((self[0], len(self[2]), self[1]))

    def __repr__(self) -> str:
        carried = None if self.carried is None else [k for k, _ in self.carried]
        return (
            f"LevelSpec(keys={list(self.keys)}, batch_size={list(self.batch_size)}, "
            f"device={self.device}, names={self.names}, carried={carried}, "
            f"nested={[k for k, sub in self.pairs() if sub is not None]})"
        )

    def pairs(self) -> tuple[tuple[str, LevelSpec | None], ...]:
        """The ``(key, sub)`` pairs of the children (see ``layout``)."""
        layout = self.layout
        return tuple((key, None) for key in self.keys) if layout is None else layout

    def unbatched_keys(self) -> list[str]:
        """The keys of the carried unbatched entries."""
        if self.carried is None:
            return []
        return [key for key, value in self.carried if type(value) in UNBATCHED_TYPES]


_spec = functools.partial(tuple.__new__, LevelSpec)


#: marks a ``NonTensorData`` carried as ``(_NON_TENSOR, data, batch_size)`` in compiled code
_NON_TENSOR = "tensordict.NonTensorData"


def level_spec(spec: Any) -> Any:
    """``spec`` as a :class:`LevelSpec`: compiled code makes specs as plain tuples (Dynamo
    rebuilds a tree spec's context only from constants), nested levels included, with a
    carried ``NonTensorData`` as ``(_NON_TENSOR, data, batch_size)``."""
    if type(spec) is not tuple or len(spec) != 10:
        return spec
    layout, carried = spec[1], spec[5]
    if layout is not None:
        layout = tuple((key, None if sub is None else level_spec(sub)) for key, sub in layout)
    if carried is not None:
        carried = tuple((key, _carried_value(value)) for key, value in carried)
    return _spec((spec[0], layout, *spec[2:5], carried, *spec[6:]))


def _carried_value(value: Any) -> Any:
    if type(value) is tuple and len(value) == 3 and value[0] == _NON_TENSOR:
        return NonTensorData(value[1], batch_size=value[2])
    return value


class NestedKey(pytree.MappingKey):  # type: ignore[type-arg]
    """The key path entry of a leaf of a merged nested level: a mapping key whose key is
    the nested key tuple (``td[("a", "b")]`` reads the leaf, so ``torch.export`` finds
    it), rendered ``['a']['b']`` as the mapping keys of one node per level were."""

    @property
    def keys(self) -> tuple[str, ...]:
        return self.key  # type: ignore[no-any-return]

    def __str__(self) -> str:
        return "".join(f"[{key!r}]" for key in self.key)

    def get(self, parent: Any) -> Any:
        for key in self.key:
            parent = parent[key]
        return parent


# ---------------------------------------------------------------------- flatten
def flatten(td: Any) -> tuple[list[Any], LevelSpec]:
    """The children of ``td`` (tensor leaves of every merged level, other collections)
    and its spec."""
    children: list[Any] = []
    if _compiling():  # plain tuples: constants Dynamo can rebuild (nested_compile_region)
        return children, _flatten_level(td, children, tuple)
    return children, _flatten_level(td, children)


#: How :func:`_flatten_level` takes a value, by type (see :func:`_kind`).
_TENSOR, _DENSE, _CARRIED, _UNBATCHED, _OTHER = range(5)
_KINDS: dict[type, int] = {}
#: The types taken as tensor children (a subset of ``_KINDS``, for one ``<=`` test).
_TENSOR_TYPES: set[type] = set()


def _kind(cls: type) -> int:
    """How a value of type ``cls`` is taken: a tensor child, a merged ``TensorDict``, a
    carried entry, an unbatched tensor (carried unless transformed) or another child.
    Cached per type, but not in compiled code: a cache filled while tracing would change
    what the guards saw and recompile (:func:`prime_kinds` fills it for the usual types)."""
    kind = _KINDS.get(cls)
    if kind is None:
        kind = _kind_of(cls)
        if not _compiling():
            _KINDS[cls] = kind
            if kind == _TENSOR:
                _TENSOR_TYPES.add(cls)
    return kind


def _kind_of(cls: type) -> int:
    if cls is _kinds.Dense:
        return _DENSE
    if cls in NON_TENSOR_TYPES:
        return _CARRIED
    if cls in UNBATCHED_TYPES:
        return _UNBATCHED
    return _TENSOR if issubclass(cls, _Tensor) else _OTHER


def prime_kinds(*classes: type) -> None:
    """Fill the kind cache for ``classes`` (done at registration for the usual types)."""
    for cls in classes:
        _kind(cls)


def _flatten_level(td: Any, children: list[Any], make: Any = _spec) -> LevelSpec:
    store = td._tensordict
    names = td._names
    values = store.values()
    if set(map(type, values)) <= _TENSOR_TYPES:  # tensors only: the common level
        n = len(store)
        first_level = -1
        if n:
            first = next(iter(values))
            if _is_batched(first):
                first_level = _functorch.maybe_get_level(first)
            children.extend(values)
        return make(  # type: ignore[no-any-return]
            (
                tuple(store),
                None,
                td._batch_size,
                td._device,
                None if names is None else tuple(names),
                None,
                first_level,
                n,
                n > 0 and names is None,
                td._is_locked,
            )
        )
    start = len(children)
    layout: list[tuple[str, LevelSpec | None]] = []
    carried: list[tuple[str, Any]] | None = None
    level: int | None = None  # of the first tensor child of this level
    nested_level: int | None = None  # of the first leaf found below, if none here
    plain = names is None
    only_tensors = True  # the layout is then None, as on the fast path above
    kinds = _KINDS
    for key, value in store.items():
        kind = kinds.get(type(value))
        if kind is None:
            kind = _kind(type(value))
        if kind == 0:  # _TENSOR
            children.append(value)
            layout.append((key, None))
            if level is None:
                level = vmap_level(value)
        elif kind == 1:  # _DENSE
            only_tensors = False
            sub = _flatten_level(value, children, make)
            layout.append((key, sub))
            if sub[7]:  # size
                if nested_level is None:
                    nested_level = sub[6]  # level
                plain = plain and sub[8]
            else:
                plain = False
        elif kind == 2 or (kind == 3 and not _is_wrapped(value)):  # _CARRIED, _UNBATCHED
            if carried is None:  # an unbatched result of batched operations is a leaf
                carried = []
            if make is tuple and type(value) is NonTensorData:  # compiled: a constant
                value = (_NON_TENSOR, value.data, tuple(value.batch_size))
            carried.append((key, value))
            plain = only_tensors = False
        else:
            children.append(value)
            layout.append((key, None))
            plain = only_tensors = False  # a collection: a node of its own
            if kind == _UNBATCHED:
                if level is None:
                    level = vmap_level(value)
            elif level is None and nested_level is None:
                leaf = first_leaf((value,))
                if leaf is not None:
                    nested_level = vmap_level(leaf)
    return make(  # type: ignore[no-any-return]
        (
            tuple(store),
            None if only_tensors else tuple(layout),
            td._batch_size,
            td._device,
            None if names is None else tuple(names),
            None if carried is None else tuple(carried),
            level if level is not None else -1 if nested_level is None else nested_level,
            len(children) - start,
            plain,
            td._is_locked,
        )
    )


def flatten_with_keys(td: Any) -> tuple[list[tuple[Any, Any]], LevelSpec]:
    children, spec = flatten(td)
    return list(zip(_key_entries(level_spec(spec), ()), children, strict=True)), spec


def _key_entries(spec: LevelSpec, prefix: tuple[str, ...]) -> Iterator[Any]:
    for key, sub in spec.pairs():
        if sub is None:
            yield NestedKey(prefix + (key,)) if prefix else pytree.MappingKey(key)
        else:
            yield from _key_entries(sub, prefix + (key,))


# ---------------------------------------------------------------------- unflatten
def make_unflatten(cls: type) -> Any:
    def unflatten(values: Iterable[Any], spec: LevelSpec) -> Any:
        children = values if type(values) is list else list(values)
        if spec[8] and children and _compiling():
            out = compiled_tree(cls, spec, children)
            if out is not None:
                return out
        if type(spec) is tuple:
            spec = level_spec(spec)
        if spec[8] and children:  # plain: the two rebuilds of every vmap call, in one go
            first = children[0]
            out = None
            if type(first) in _SCALARS:
                out = _scalar_tree(cls, spec, children)
            elif isinstance(first, _Tensor):
                if _is_batched(first):
                    out = _entered_tree(cls, spec, children)
                elif symbolic(first, spec):
                    out = traced_level(cls, spec, children, 0)
                if out is None:
                    out = _same_level(cls, spec, children, 0)
            if out is not None:
                return _relocked(out, spec, children) if spec[9] else out
        out = _build(cls, spec, children, 0)
        return _relocked(out, spec, children) if spec[9] else out

    return unflatten


def _relocked(out: Any, spec: LevelSpec, children: list[Any]) -> Any:
    """``out`` locked, as the tensordict it was flattened from, when its leaves crossed a
    ``torch.vmap`` level (entering or leaving one); ``tree_map`` & co. give it unlocked."""
    leaf = first_leaf(children)
    if leaf is not None and vmap_level(leaf) != spec.level and not out._is_locked:
        out.lock_()
    return out


_EMPTY = torch.Size(())


def _scalar_tree(cls: Any, spec: LevelSpec, children: list[Any]) -> Any:
    """A plain tree whose children are all Python numbers (``vmap``'s ``in_dims`` tree):
    every level holds 0-dim tensors, with an empty batch size (as level by level)."""
    kinds = set(map(type, children))
    if not kinds <= _SCALARS:
        return None
    tensors = None
    if kinds == _INT and not _compiling():  # in one C loop; out of the int64 range raises
        try:
            tensors = list(map(_new_int64, children))
        except (RuntimeError, OverflowError):
            pass
    if tensors is None:
        tensors = list(map(_scalar_tensor, children))
    return _tensor_level(cls, spec, tensors, 0, _EMPTY)


_INT = frozenset((int,))
_new_int64 = functools.partial(_INT64.new_full, ())


def _tensor_level(cls: Any, spec: LevelSpec, tensors: list[Any], pos: int, bs: torch.Size) -> Any:
    """A plain level (and its merged levels) around ``tensors``, with batch size ``bs``
    (nested levels: ``bs`` too) and no device."""
    keys, layout, _, _, _, _, _, size, _, _ = spec
    if layout is None:
        store = dict(zip(keys, tensors[pos : pos + size], strict=True))
    else:
        store = {}
        for key, sub in layout:
            if sub is None:
                store[key] = tensors[pos]
                pos += 1
            else:
                store[key] = _tensor_level(_kinds.Dense, sub, tensors, pos, bs)
                pos += sub.size
    return cls._new_unsafe(store, bs, None, None)


def _entered_tree(cls: Any, spec: LevelSpec, children: list[Any]) -> Any:
    """A plain tree whose tensors all entered one new ``torch.vmap`` level over the same
    batch dimension ``d`` (their unwrapped tensors start with their level's batch
    size): every level loses ``d``, as level by level; ``None`` when any leaf differs."""
    first = children[0]
    lvl = _functorch.maybe_get_level(first)
    bdim = _functorch.maybe_get_bdim(first)
    bs = spec[2]  # batch_size
    if bdim >= len(bs) or not _starts_with(_functorch.get_unwrapped(first).shape, bs, bdim):
        return None
    try:  # every child batched at this level along ``bdim`` (a non-tensor raises)
        if set(map(_functorch.maybe_get_level, children)) != {lvl}:
            return None
        if set(map(_functorch.maybe_get_bdim, children)) != {bdim}:
            return None
    except TypeError:
        return None
    # The children batched at this level have the same size at ``bdim``: their shapes
    # without it tell the rest.
    return _entered_level(cls, spec, children, 0, lvl, bdim)


def _entered_level(
    cls: Any, spec: LevelSpec, children: list[Any], pos: int, lvl: int, bdim: int
) -> Any:
    keys, layout, bs, _, _, _, level, size, _, _ = spec
    if lvl <= level:
        return None
    new = bs[1:] if bdim == 0 else bs[:bdim] + bs[bdim + 1 :]
    n = len(new)
    if layout is None:
        values = children[pos : pos + size]
        if n:
            for value in values:
                if value.shape[:n] != new:
                    return None
        store = dict(zip(keys, values, strict=True))
    else:
        store = {}
        for key, sub in layout:
            if sub is None:
                value = children[pos]
                pos += 1
                if n and value.shape[:n] != new:
                    return None
            else:
                value = _entered_level(_kinds.Dense, sub, children, pos, lvl, bdim)
                if value is None:
                    return None
                pos += sub.size
            store[key] = value
    return cls._new_unsafe(store, new, None, None)


def _same_level(cls: Any, spec: LevelSpec, children: list[Any], pos: int) -> Any:
    """A plain level (and its merged levels) whose tensors still start with its batch
    size at the same ``torch.vmap`` level (``tree_map``, ``grad``…): the same batch size;
    the device kept when every child is on it, as level by level; ``None`` otherwise."""
    keys, layout, bs, device, _, _, level, size, _, _ = spec
    nb = len(bs)
    tensor = _Tensor
    if layout is None:
        values = children[pos : pos + size]
        if not isinstance(values[0], tensor) or vmap_level(values[0]) != level:
            return None
        for value in values:
            if not isinstance(value, tensor) or value.shape[:nb] != bs:
                return None
            if device is not None and value.device != device:
                device = None
        store = dict(zip(keys, values, strict=True))
    else:
        store = {}
        first = True
        for key, sub in layout:
            if sub is None:
                value = children[pos]
                pos += 1
                if not isinstance(value, tensor):
                    return None
                if first:
                    first = False
                    if vmap_level(value) != level:
                        return None
                if value.shape[:nb] != bs:
                    return None
            else:
                value = _same_level(_kinds.Dense, sub, children, pos)
                if value is None:
                    return None
                pos += sub[7]  # size
            if device is not None and value.device != device:
                device = None
            store[key] = value
        if first:  # nested levels only: their leaves tell the level
            leaf = first_leaf(store.values())
            if leaf is not None and vmap_level(leaf) != level:
                return None
    return cls._new_unsafe(store, bs, device, None)


def _build(cls: Any, spec: LevelSpec, children: list[Any], start: int) -> Any:
    """The tensordict of one level from ``children[start:start + spec.size]``."""
    values = []
    leafless = None
    pos = start
    for key, sub in spec.pairs():
        if sub is None:
            values.append(children[pos])
            pos += 1
        elif sub.size:
            values.append(_build(_kinds.Dense, sub, children, pos))
            pos += sub.size
        else:  # no leaf below: it follows this level's batch size
            if leafless is None:
                leafless = []
            leafless.append((key, sub))
    out = _rebuild(cls, spec, values, leafless)
    if spec.carried is not None or leafless is not None:
        _place_carried(out, spec, leafless)
    return out


def _place_carried(out: Any, spec: LevelSpec, leafless: list[Any] | None) -> None:
    """Give the unbatched entries and the leafless nested levels of a rebuilt level its
    batch size; unbatched entries are :class:`UnbatchedTensorInVmap` objects when the
    code goes on inside ``torch.vmap`` (rebuilt on entering a level, or inside one; not
    on leaving the last one, where the batch size gains the vmapped dimension back)."""
    unbatched = spec.unbatched_keys()
    if not unbatched and leafless is None:
        return
    bs = out._batch_size
    in_vmap = vmap_depth() - (len(bs) > len(spec.batch_size)) > 0
    store = out._tensordict
    for key in unbatched:
        store[key] = as_unbatched(store[key], bs, in_vmap)
    if leafless is not None:
        built = {key: _leafless(sub, bs, len(spec.batch_size), in_vmap) for key, sub in leafless}
        out._tensordict = {key: built[key] if key in built else store[key] for key in spec.keys}


def _leafless(spec: LevelSpec, parent_bs: torch.Size, parent_nb: int, in_vmap: bool) -> Any:
    """A nested level without leaves, under a parent now of batch size ``parent_bs``."""
    bs = parent_bs + spec.batch_size[parent_nb:]
    store: dict[str, Any] = {}
    carried = dict(spec.carried or ())
    subs = {key: sub for key, sub in spec.pairs() if sub is not None}
    for key in spec.keys:
        if key in subs:
            store[key] = _leafless(subs[key], bs, len(spec.batch_size), in_vmap)
        else:
            value = carried[key]
            store[key] = (
                as_unbatched(value, bs, in_vmap)
                if type(value) in UNBATCHED_TYPES
                else value._with(bs)
            )
    names = None
    if spec.names is not None and len(spec.names) == len(spec.batch_size):
        kept = (None,) * len(parent_bs) + spec.names[parent_nb:]
        names = list(kept) if any(n is not None for n in kept) else None
    return _kinds.Dense._new_unsafe(store, bs, spec.device, names)


def _rebuild(cls: Any, spec: LevelSpec, children: list[Any], leafless: list[Any] | None) -> Any:
    """One level around its rebuilt children (leafless nested levels left out)."""
    keys, bs, device, names, carried, level = (
        spec.keys,
        spec.batch_size,
        spec.device,
        spec.names,
        spec.carried,
        spec.level,
    )
    if carried is None and leafless is None:
        source = dict(zip(keys, children, strict=True))
    else:
        # a rebuilt tensordict is a new value: its non-tensor entries get containers of
        # their own (the rule of every value map), the carried ones stay the input's
        fixed = {
            key: value._with(value.batch_size) if type(value) in NON_TENSOR_TYPES else value
            for key, value in carried or ()
        }
        skip = {key for key, _ in leafless or ()}
        it = iter(children)
        source = {key: fixed[key] if key in fixed else next(it) for key in keys if key not in skip}
    nb = len(bs)
    ok = True
    first = True
    for value in children:
        if isinstance(value, _Tensor):
            if first:
                first = False
                if vmap_level(value) != level:  # entering or leaving a torch.vmap level
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
        leaf = first_leaf(children)
        ok = leaf is None or vmap_level(leaf) == level
    if ok:
        return cls._new_unsafe(source, bs, device, None if names is None else list(names))
    if carried is None and names is None:
        entered = _entered(children, bs, level)
        if entered is not None:  # torch.vmap entering over a batch dim: the common case
            return cls._new_unsafe(source, entered, None, None)
    return _reshaped(cls, source, children, bs, names, level)


def _starts_with(shape: torch.Size, bs: torch.Size, bdim: int) -> bool:
    """Whether ``shape`` starts with the batch size ``bs``, but for the size of the dim
    ``bdim`` that ``torch.vmap`` maps (a chunk of it with ``chunk_size``)."""
    nb = len(bs)
    if len(shape) < nb:
        return False
    return shape[:bdim] == bs[:bdim] and shape[bdim + 1 : nb] == bs[bdim + 1 :]


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
            if not _is_batched(value):
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
            if not _starts_with(_functorch.get_unwrapped(value).shape, bs, bdim):
                return None
        else:
            return None
    if new is None:  # only nested tensordicts: their leaves tell
        leaf = first_leaf(children)
        if leaf is None or not _is_batched(leaf):
            return None
        bdim = _functorch.maybe_get_bdim(leaf)
        if _functorch.maybe_get_level(leaf) <= level or bdim >= nb:
            return None
        if not _starts_with(_functorch.get_unwrapped(leaf).shape, bs, bdim):
            return None
        new = bs[:bdim] + bs[bdim + 1 :]
    if nested:
        n = nb - 1
        for value in children:
            if isinstance(value, _kinds.Base) and value.batch_size[:n] != new:
                return None
    return new


def _reshaped(
    cls: Any,
    source: dict[str, Any],
    children: list[Any],
    bs: torch.Size,
    names: tuple[Any, ...] | None,
    level: int,
) -> Any:
    """Rebuild when the leaves no longer start with the batch size, or crossed a vmap level.

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
    """The batch sizes (and names) :func:`_reshaped` tries, most likely first."""
    if not reps:
        leaf = first_leaf(children)
        reps = [] if leaf is None else [leaf]
    levels = {vmap_level(t) for t in reps}
    nb = len(bs)
    old = tuple(bs)
    old_names = list(names) if names is not None else [None] * nb
    entering = len(levels) == 1 and next(iter(levels)) > level
    if entering:  # entering a vmap level
        bdims = {_functorch.maybe_get_bdim(t) for t in reps}
        bdim = next(iter(bdims))
        # vmapped over a batch dimension: the unwrapped leaves still start with the batch
        # size (a vmap over something else, e.g. jacfwd's basis, puts a new dim in front).
        if (
            len(bdims) == 1
            and bdim < nb
            and all(_starts_with(_functorch.get_unwrapped(t).shape, bs, bdim) for t in reps)
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
    if entering:
        # a leaf of a lazy stack counts its dims from its member: the children's shapes
        # tell which batch dim went
        for d in range(nb):
            yield old[:d] + old[d + 1 :], old_names[:d] + old_names[d + 1 :]
    if not leaving:
        yield from inserted
    if shapes and len(shapes[0]) >= nb:  # one batch dim resized (vmap's chunks joined)
        resized = shapes[0][:nb]
        if sum(a != b for a, b in zip(resized, old, strict=True)) == 1:
            yield resized, old_names
    # leading dims dropped (a spec recorded with a vmapped dimension in front, as
    # ``jacfwd`` records its output spec), then the longest prefix the leaves still have
    for k in range(1, nb):
        yield old[k:], old_names[k:]
    for k in range(nb - 1, -1, -1):
        yield old[:k], old_names[:k]


# ---------------------------------------------------------------------- serialized specs
def _dumpable(spec: LevelSpec) -> dict[str, Any]:
    carried = None
    if spec.carried is not None:
        unbatched = spec.unbatched_keys()
        if unbatched:
            raise TypeError(
                "cannot serialize the tree spec of a tensordict holding UnbatchedTensor "
                f"entries (keys {unbatched}): they travel in the spec, not as leaves."
            )
        carried = [
            (k, type(v).__name__, v.data if type(v) in DATA_TYPES else v.tolist())
            for k, v in spec.carried
        ]
    return {
        "keys": list(spec.keys),
        "layout": None
        if spec.layout is None
        else [[key, None if sub is None else _dumpable(sub)] for key, sub in spec.layout],
        # a size traced as dynamic (a SymInt) is saved as -1: read from the leaves
        "batch_size": [d if type(d) is int else -1 for d in spec.batch_size],
        "device": None if spec.device is None else str(spec.device),
        "names": None if spec.names is None else list(spec.names),
        "non_tensor": carried,
    }


def to_dumpable_context(spec: LevelSpec) -> str:
    try:
        return json.dumps(_dumpable(level_spec(spec)))
    except TypeError as err:
        if "UnbatchedTensor" in str(err):
            raise
        raise TypeError(
            "cannot serialize the tree spec of a tensordict whose non-tensor entries are not "
            f"JSON values ({err})."
        ) from None


def _loaded(data: dict[str, Any]) -> LevelSpec:
    bs = torch.Size(data["batch_size"])
    device = None if data["device"] is None else torch.device(data["device"])
    carried = data["non_tensor"]
    if carried is not None:
        kinds: dict[str, Any] = {cls.__name__: cls for cls in NON_TENSOR_TYPES}
        entries = []
        for key, kind, value in carried:
            cls = kinds[kind]
            if cls is NonTensorStack:
                entries.append((key, NonTensorStack.from_list(value, device, ndim=len(bs))))
            else:
                entries.append((key, cls._make(value, bs, device)))
        carried = tuple(entries)
    names = None if data["names"] is None else tuple(data["names"])
    if data["layout"] is None:
        layout = None
        size = len(data["keys"])
        plain = bool(size) and names is None
    else:
        layout = tuple((key, None if sub is None else _loaded(sub)) for key, sub in data["layout"])
        size = sum(1 if sub is None else sub.size for _, sub in layout)
        plain = (
            carried is None
            and names is None
            and all(sub is None or (sub.size and sub.plain) for _, sub in layout)
        )
    return _spec((tuple(data["keys"]), layout, bs, device, names, carried, -1, size, plain, False))


def from_dumpable_context(dumped: str) -> LevelSpec:
    return _loaded(json.loads(dumped))


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
    if type(leaf) is _Tensor and leaf.dim() == len(shape) + 1 and not _is_batched(leaf):
        size = leaf.shape
        for d in range(min(len(bs), len(shape)) + 1):
            if (leaf.stride(d) == 0 or size[d] == 1) and size[:d] + size[d + 1 :] == shape:
                new_bs = torch.Size(bs[:d] + (size[d],) + bs[d:])
                return as_unbatched(leaf.select(d, 0), new_bs, vmap_depth() > 1)
    return leaf


def _unbatched_from_dumpable(dumped: str) -> tuple[Any, ...]:
    bs, shape = json.loads(dumped)
    return tuple(bs), tuple(shape)


def register_unbatched_in_vmap() -> None:
    """Make :class:`UnbatchedTensorInVmap` a pytree node (one child, a plain alias)."""
    if UnbatchedTensorInVmap in pytree.SUPPORTED_NODES:
        return
    pytree.register_pytree_node(
        UnbatchedTensorInVmap,
        _unbatched_flatten,
        _unbatched_unflatten,
        serialized_type_name="tensordict._leaves.unbatched.UnbatchedTensorInVmap",
        to_dumpable_context=json.dumps,
        from_dumpable_context=_unbatched_from_dumpable,
        flatten_with_keys_fn=_unbatched_flatten_with_keys,
    )
