"""The tree-map engine: the one place that walks the leaves of tensordicts.

Every operation that maps over leaves goes through one of these walkers:

* :meth:`TreeMapOps._tree_map` — user functions (``apply``, ``apply_``,
  ``named_apply``), configured by one frozen :class:`~tensordict.base.ApplySpec`;
* :meth:`TreeMapOps._map_batch` — batch-shape operations (new batch size known up front);
* :meth:`TreeMapOps._map_tensors` — shape-preserving maps over tensors (casts, ``clone``);
* :meth:`TreeMapOps._flat_tensors` / :meth:`TreeMapOps._rebuild` — every tensor in one
  list and back, so table-generated ops run one ``torch._foreach_*`` call over all leaves;
* :func:`map_leaves` — leaf results that build one or several tensordicts with a new
  batch size (reductions, ``cummax``, ``new_*``);
* :func:`leaf_items` — ``(key, stored value)`` of every leaf.

**One rule for non-tensor entries** (:func:`carry_non_tensor`): a result never shares a
non-tensor container (``NonTensorData``/``NonTensorStack``) with its input. Each walker
gives the result its own container holding the same value(s), with the result's batch
size and device, so writing into a result's entry leaves the input's untouched. Functions
and tensor operations are not applied to non-tensor values; batch-shape operations
transform a ``NonTensorStack`` like a tensor of the batch shape, and reductions keep a
stack's values only where they agree along the reduced dimensions.

The structural operations, which hand out the input's own entries rearranged by key
(``select``, ``exclude``, ``flatten_keys``, ``unflatten_keys``, ``split_keys``), do not walk
values: their result holds the input's containers, as it holds its tensors.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import torch

from tensordict._base.apply_ops import CHECKED_APPLY, DEFAULT_APPLY, ApplySpec
from tensordict._keys.nested import unravel_key
from tensordict._keys.shape import broadcastable_to, leads_with, parse_batch_size, parse_device
from tensordict._kinds import kinds as _kinds
from tensordict._kinds.kinds import is_nested
from tensordict._kinds.writes import write_inplace
from tensordict._leaves.nontensor import NON_TENSOR, NonTensorData, NonTensorStack
from tensordict._leaves.unbatched import UNBATCHED_TYPES, UnbatchedTensor
from tensordict._util.errors import InplaceWriteError
from tensordict._util.sentinels import NO_DEFAULT
from tensordict.base import TensorDictBase

_Tensor = torch.Tensor


def _result_shape_error(r: torch.Tensor, path: tuple[str, ...], bs: torch.Size) -> RuntimeError:
    return RuntimeError(
        f"apply: the function returned a tensor of shape {tuple(r.shape)} for key "
        f"{unravel_key(path)!r}, whose leading dimensions do not match the result's "
        f"batch_size={tuple(bs)}; pass batch_size= to apply()."
    )


def carry_non_tensor(value: Any, batch_size: torch.Size, device: Any = None) -> Any:
    """The non-tensor rule of every walker: ``value`` (a ``NonTensorData`` or a
    ``NonTensorStack``) as the entry of a result of ``batch_size`` (on ``device``; ``None``
    keeps its own), in a container of its own that shares the value(s).

    >>> import torch
    >>> from tensordict import NonTensorStack
    >>> s = NonTensorStack("a", "b")
    >>> out = carry_non_tensor(s, torch.Size([2]))
    >>> out is s, out.tolist()
    (False, ['a', 'b'])

    A stack holds one value per element: for a result whose batch size is not a prefix of
    its own (``apply`` with a new ``batch_size``) it is left out (``None``), as in the
    reference library.
    """
    if type(value) is NonTensorStack and value.batch_size[: len(batch_size)] != batch_size:
        return None
    return value._with(batch_size, device)


def leaf_items(
    td: Any, prefix: tuple[str, ...] = (), *, members: bool = True
) -> list[tuple[tuple[str, ...], Any]]:
    """``(key tuple, stored value)`` for every leaf of ``td``, depth first: tensors and
    non-tensor leaves as stored (not unwrapped).

    A lazy stack contributes its members' leaves (exclusive keys included), so the tensors
    are the stored ones, not stacked copies; with ``members=False`` it contributes its
    stacked entries instead (the leaves of ``td.items(True, True)``).

    >>> import torch
    >>> from tensordict import TensorDict, lazy_stack
    >>> td = TensorDict({"a": torch.zeros(1), "b": {"c": torch.ones(1)}}, [1])
    >>> [k for k, _ in leaf_items(td)]
    [('a',), ('b', 'c')]
    >>> lazy = lazy_stack([td, td])
    >>> len(leaf_items(lazy)), [v.shape for _, v in leaf_items(lazy, members=False)]
    (4, [torch.Size([2, 1]), torch.Size([2, 1])])
    """
    out: list[tuple[tuple[str, ...], Any]] = []
    _leaf_items_into(td, prefix, out, members)
    return out


def _leaf_items_into(td: Any, prefix: tuple[str, ...], out: list[Any], members: bool) -> None:
    if isinstance(td, _kinds.Dense):
        items: Any = td._tensordict.items()
    elif members and isinstance(td, _kinds.Lazy):
        for member in td.tensordicts:
            _leaf_items_into(member, prefix, out, members)
        return
    else:
        items = td.items()
    for key, value in items:
        if isinstance(value, _Tensor) or not is_nested(value):
            out.append((prefix + (key,), value))
        else:
            _leaf_items_into(value, prefix + (key,), out, members)


class TreeMapOps(_kinds.DenseMixin):
    """Mixin: the leaf-walking primitives of :class:`~tensordict.TensorDict`.

    Only dense tensordicts inherit it (``isinstance(x, _kinds.Dense)`` tells them apart).
    """

    def _map_batch(
        self,
        fn: Callable[[Any], Any],
        batch_size: torch.Size,
        names: list[str | None] | None = None,
        spread: bool = False,
    ) -> _kinds.Dense:
        """Apply a batch-shape operation ``fn`` to every tensor, at any depth.

        ``fn`` touches only the first ``self.batch_dims`` dimensions and carries the rest
        along, so it applies unchanged to the leaves of nested dense tensordicts, whose
        new batch size is ``batch_size`` plus their own extra dimensions. Other tensordict
        types receive ``fn`` themselves (they expose ``.shape`` too); non-tensor values
        only get the new batch size — with ``spread`` (``expand``, ``unsqueeze``, as the
        reference) a ``NonTensorData`` becomes a stack of its value (a ``MetaData`` does not).
        """
        if names is not None and all(n is None for n in names):
            names = None
        nb = len(self._batch_size)
        out: dict[str, Any] = {}
        for key, value in self._tensordict.items():
            if isinstance(value, _Tensor):
                if type(value) in UNBATCHED_TYPES:
                    out[key] = cast(UnbatchedTensor, value)._with(batch_size)  # carried whole
                else:
                    out[key] = fn(value)
            elif isinstance(value, NonTensorData):
                out[key] = value._spread(batch_size) if spread else value._with(batch_size)
            elif isinstance(value, _kinds.Dense):
                sub_bs = value._batch_size
                extra = len(sub_bs) - nb
                sub_names = None
                if names is not None or value._names is not None:
                    own = value._names[nb:] if value._names is not None else [None] * extra
                    sub_names = (names or [None] * len(batch_size)) + own
                new_bs = torch.Size((*batch_size, *sub_bs[nb:])) if extra else batch_size
                out[key] = value._map_batch(fn, new_bs, sub_names, spread)
            else:
                out[key] = fn(value)
        return self._new_unsafe(out, batch_size, self._device, names)

    def _map_tensors(
        self, fn: Callable[[_Tensor], _Tensor], device: Any = NO_DEFAULT
    ) -> _kinds.Dense:
        """Apply a shape-preserving ``fn`` to every tensor leaf (no validation)."""
        out: dict[str, Any] = {}
        for key, value in self._tensordict.items():
            if isinstance(value, _Tensor):
                out[key] = fn(value)
            elif isinstance(value, NON_TENSOR):  # a new wrapper: in-place writes stay local
                out[key] = value._with(value.batch_size, None if device is NO_DEFAULT else device)
            else:
                out[key] = value._map_tensors(fn, device)
        return self._new_unsafe(
            out, self._batch_size, self._device if device is NO_DEFAULT else device, self._names
        )

    def _flat_tensors(self, out: list[Any]) -> list[Any]:
        """Append every tensor leaf, depth first, to ``out`` (see :meth:`_rebuild`)."""
        for value in self._tensordict.values():
            if isinstance(value, _Tensor):
                out.append(value)
            elif isinstance(value, TensorDictBase):  # dense or lazy stack
                value._flat_tensors(out)
        return out

    def _rebuild(self, it: Any) -> _kinds.Dense:
        """Inverse of :meth:`_flat_tensors`: same structure, tensors taken from ``it``."""
        bs = self._batch_size
        out = {}
        for key, value in self._tensordict.items():
            if isinstance(value, _Tensor):
                out[key] = next(it)
            elif isinstance(value, NON_TENSOR):
                out[key] = value._with(bs)  # carry_non_tensor, inlined
            else:
                out[key] = value._rebuild(it)
        return self._new_unsafe(out, bs, self._device, self._names)

    def _write_flat(self, it: Any) -> None:
        """Rebind every tensor leaf to the next tensor of ``it`` (in-place results)."""
        store = self._tensordict
        for key, value in store.items():
            if isinstance(value, _Tensor):
                store[key] = next(it)
            elif isinstance(value, TensorDictBase):
                value._write_flat(it)

    def _aligned_tensors(
        self, other: Any, default: Any, out: list[Any] | None = None, prefix: tuple[str, ...] = ()
    ) -> list[Any]:
        """The entries of ``other`` matching :meth:`_flat_tensors` order, looked up by key."""
        if out is None:
            out = []
        store = other._tensordict if isinstance(other, _kinds.Dense) else None
        if store is None:
            if not isinstance(other, TensorDictBase):
                out.extend([other] * len(self._flat_tensors([])))
                return out
            store = {k: other._get_str(k, NO_DEFAULT) for k in other.keys() if isinstance(k, str)}
        if default is None and len(store) != len(self._tensordict):
            extra = sorted(map(str, set(store) - set(self._tensordict)))
            missing = sorted(map(str, set(self._tensordict) - set(store)))
            raise KeyError(
                f"the tensordicts have different keys{' at ' + repr(unravel_key(prefix)) if prefix else ''}: "
                f"missing from the other: {missing}; only in the other: {extra}."
            )
        for key, value in self._tensordict.items():
            if isinstance(value, _Tensor):
                o = store.get(key, NO_DEFAULT)
                if o is NO_DEFAULT:
                    if default is None:
                        raise KeyError(
                            f"key {unravel_key(prefix + (key,))!r} is missing from the other tensordict."
                        )
                    o = default
                out.append(o)
            elif isinstance(value, TensorDictBase):
                sub = store.get(key, NO_DEFAULT)
                if sub is NO_DEFAULT:
                    if default is None:
                        raise KeyError(
                            f"key {unravel_key(prefix + (key,))!r} is missing from the other tensordict."
                        )
                    sub = default
                value._aligned_tensors(sub, default, out, prefix + (key,))
        return out

    def _apply_simple(self, fn: Callable[..., Any], checked: bool) -> _kinds.Dense:
        """``_tree_map`` for one tensordict, same batch size: the hot path of ``apply``."""
        bs = self._batch_size
        device = self._device
        out = {}
        for key, value in self._tensordict.items():
            if isinstance(value, _Tensor):
                r = fn(value)
                if r is None:
                    continue
                if not checked and isinstance(r, _Tensor):
                    if type(r) in UNBATCHED_TYPES:
                        r = cast(UnbatchedTensor, r)._with(bs)
                    elif not leads_with(r.shape, bs):
                        raise _result_shape_error(r, (key,), bs)
                    if device is not None and r.device != device:
                        device = None
                elif not checked:
                    r = self._validate_value(key, r)
                out[key] = r
            elif isinstance(value, NON_TENSOR):
                out[key] = value._with(bs)  # carry_non_tensor, inlined
            else:
                r = value._tree_map(fn, spec=CHECKED_APPLY if checked else DEFAULT_APPLY)
                if r is not None:
                    out[key] = r
        return self._new_unsafe(out, bs, device, self._names)

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
    ) -> _kinds.Dense | None:
        """Map ``fn`` over the leaves of this tensordict (and the matching entries of
        ``others``), as ``spec`` says.

        The other arguments describe this level: the result's ``batch_size`` and
        ``names`` (``names=NO_DEFAULT`` keeps this one's when the number of batch
        dimensions is unchanged), the key ``prefix`` of this level, the tensordict ``out``
        that receives in-place results, and the ``plan`` of in-place writes shared by
        every level (run once all results are computed and checked).
        """
        if spec is DEFAULT_APPLY or spec is CHECKED_APPLY:
            if not others and batch_size is None and names is NO_DEFAULT:
                return self._apply_simple(fn, spec.checked)
        inplace = spec.inplace
        device = spec.device
        result: _kinds.Dense
        if inplace:
            result = cast("_kinds.Dense", self if out is None else out)
            top = plan is None
            if plan is None:
                plan = []
        else:
            new_bs = self._batch_size if batch_size is None else parse_batch_size(batch_size)
            new_dev = self._device if device is NO_DEFAULT else parse_device(device)
            result = self._new_unsafe({}, new_bs, new_dev)
            if names is NO_DEFAULT:
                if batch_size is None or len(new_bs) == len(self._batch_size):
                    result._names = self._names
            elif names is not None:
                result._names = list(names)
        is_leaf = spec.is_leaf
        named = spec.named
        call_on_nested = spec.call_on_nested
        default = spec.default
        nb = len(self._batch_size)
        any_kept = False
        for key, value in self._tensordict.items():
            if others:
                vals = []
                for other in others:
                    # a missing nested entry was replaced by ``default``: pass it down
                    v = other._get_str(key, default) if isinstance(other, TensorDictBase) else other
                    vals.append(v)
            else:
                vals = []
            if isinstance(value, NON_TENSOR) and (is_leaf is None or not is_leaf(type(value))):
                if not inplace:
                    carried = carry_non_tensor(value, result._batch_size, result._device)
                    if carried is not None:
                        result._tensordict[key] = carried
                        any_kept = True
                continue
            leaf = (
                is_leaf(type(value))
                if is_leaf is not None
                else not isinstance(value, TensorDictBase)
            )
            if leaf or call_on_nested:
                if named:
                    if spec.nested_keys:
                        path = prefix + (key,)
                        name: Any = path[0] if len(path) == 1 else path
                    else:
                        name = key
                    r = fn(name, value, *vals)
                else:
                    r = fn(value, *vals)
            else:
                r = value._tree_map(
                    fn,
                    *vals,
                    spec=spec,
                    batch_size=None
                    if batch_size is None or inplace
                    else list(result._batch_size) + list(value.batch_size[nb:]),
                    prefix=prefix + (key,),
                    out=result._tensordict.get(key) if inplace else None,
                    plan=plan,
                )
                if inplace:
                    continue
                if r is None or (spec.filter_empty and r.is_empty()):
                    continue
            if r is None:
                continue
            any_kept = True
            if inplace:
                current = result._tensordict.get(key)
                if r is not current:
                    if current is None:
                        r = result._validate_value(key, r)
                    elif isinstance(current, _Tensor):
                        if not isinstance(r, _Tensor):  # a number, an array...: a tensor
                            r = _inplace_tensor(r, prefix + (key,))
                        if r.shape != current.shape and not broadcastable_to(
                            r.shape, current.shape
                        ):
                            raise RuntimeError(
                                f"apply_: the function returned a tensor of shape {tuple(r.shape)} "
                                f"for key {unravel_key(prefix + (key,))!r}, which cannot be written "
                                f"in place into the entry of shape {tuple(current.shape)}."
                            )
                    assert plan is not None
                    plan.append((result, key, current, r))
            elif spec.checked:
                result._tensordict[key] = r
            elif isinstance(r, _Tensor):
                rbs = result._batch_size
                if type(r) in UNBATCHED_TYPES:
                    r = cast(UnbatchedTensor, r)._with(rbs)
                elif r.shape[: len(rbs)] != rbs:
                    raise _result_shape_error(r, prefix + (key,), rbs)
                if result._device is not None and r.device != result._device:
                    if device is NO_DEFAULT:
                        result._device = None
                    else:
                        r = r.to(result._device)
                result._tensordict[key] = r
            else:
                result._set_str(key, r, inplace=False, validated=False)
        if inplace:
            if top and plan:
                run_plan(plan)  # every result was computed and checked: now write them all
            return result
        if spec.filter_empty and not any_kept:
            return None
        return result


def map_leaves(
    td: TensorDictBase,
    name: str,
    leaf_fn: Callable[[_Tensor, int], Any],
    shape_fn: Callable[[torch.Size], torch.Size],
    names_fn: Callable[[list[str | None]], list[str | None] | None],
    nested_fn: Callable[[Any], Any],
    non_tensor_fn: Callable[[Any, torch.Size, torch.Size], Any],
    n_out: int = 1,
    prefix: tuple[str, ...] = (),
) -> list[_kinds.Dense]:
    """Build ``n_out`` tensordicts shaped like ``td`` from the results of its leaves.

    ``leaf_fn(x, batch_dims_of_holder)`` returns one tensor (or ``n_out`` of them);
    ``shape_fn``/``names_fn`` map a (nested) batch size / names to the result's;
    ``nested_fn`` handles tensordict types other than the dense one, and
    ``non_tensor_fn(value, old_batch_size, new_batch_size)`` the non-tensor entries: it
    returns the entry for the results (a new container, see :func:`carry_non_tensor`) or
    ``None`` to leave it out. A lazy stack is mapped as its dense copy.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict({"a": torch.arange(6.0).reshape(2, 3)}, [2])
    >>> (out,) = map_leaves(td, "sum", lambda x, nb: x.sum(0), lambda s: s[1:],
    ...     lambda n: n[1:], lambda v: v.sum(0), lambda v, old, new: v._with(new))
    >>> out["a"], out.batch_size
    (tensor([3., 5., 7.]), torch.Size([]))
    """
    if not isinstance(td, _kinds.Dense):  # lazy stacks & co: map a dense copy
        dense = td.contiguous()
        if not isinstance(dense, _kinds.Dense):
            raise TypeError(f"{name}() is not supported for {type(td).__name__}.")
        td = dense
    bs = td._batch_size
    nb = len(bs)
    new_bs = shape_fn(bs)
    names = td._names
    if names is not None:
        names = names_fn(names)
        if names is not None and all(n is None for n in names):
            names = None
    if n_out == 1:  # the common case, in one loop
        one: dict[str, Any] = {}
        for key, value in td._tensordict.items():
            if type(value) in UNBATCHED_TYPES:
                one[key] = value._with(new_bs)  # no batch dimension: carried whole
            elif isinstance(value, _Tensor):
                try:
                    one[key] = leaf_fn(value, nb)
                except (RuntimeError, TypeError, ValueError, IndexError) as err:
                    raise _leaf_error(name, prefix, key, value, err) from None
            elif isinstance(value, _kinds.Dense):
                one[key] = map_leaves(
                    value, name, leaf_fn, shape_fn, names_fn, nested_fn, non_tensor_fn, 1,
                    prefix + (key,),
                )[0]  # fmt: skip
            elif isinstance(value, NON_TENSOR):
                r = non_tensor_fn(value, bs, new_bs)
                if r is not None:
                    one[key] = r
            else:
                one[key] = nested_fn(value)
        return [_kinds.Dense._new_unsafe(one, new_bs, td._device, names)]
    outs: list[dict[str, Any]] = [{} for _ in range(n_out)]
    out = outs[0]
    for key, value in td._tensordict.items():
        if type(value) in UNBATCHED_TYPES:
            r = value._with(new_bs)
            if n_out > 1:
                r = (r,) + tuple(r.copy() for _ in range(n_out - 1))
        elif isinstance(value, _Tensor):
            try:
                r = leaf_fn(value, nb)
            except (RuntimeError, TypeError, ValueError, IndexError) as err:
                raise _leaf_error(name, prefix, key, value, err) from None
        elif isinstance(value, _kinds.Dense):
            r = map_leaves(
                value,
                name,
                leaf_fn,
                shape_fn,
                names_fn,
                nested_fn,
                non_tensor_fn,
                n_out,
                prefix + (key,),
            )
            if n_out == 1:
                r = r[0]
        elif isinstance(value, NON_TENSOR):
            r = non_tensor_fn(value, bs, new_bs)
            if r is None:
                continue
            if n_out > 1:
                r = (r,) + tuple(r._with(new_bs) for _ in range(n_out - 1))
        else:
            r = nested_fn(value)
        if n_out == 1:
            out[key] = r
        else:
            for o, ri in zip(outs, r):
                o[key] = ri
    dev = td._device
    new = _kinds.Dense._new_unsafe
    return [new(o, new_bs, dev, names) for o in outs]


def _leaf_error(
    name: str, prefix: tuple[str, ...], key: str, value: _Tensor, err: Exception
) -> Exception:
    return type(err)(
        f"{name}(): failed for entry {(prefix + (key,)) if prefix else key!r} of shape "
        f"{tuple(value.shape)} and dtype {value.dtype}: {err}"
    )


def _inplace_tensor(value: Any, path: tuple[str, ...]) -> _Tensor:
    """A result of ``apply_`` for a tensor entry, as a tensor; :class:`InplaceWriteError`
    (the tensordict unchanged: nothing is written before every result is checked) for a
    value that is not one and does not become one (a string, a tensordict)."""
    if not isinstance(value, (str, bytes, TensorDictBase)):
        try:
            return torch.as_tensor(value)
        except (TypeError, ValueError, RuntimeError):
            pass
    what = type(value).__name__
    if isinstance(value, (str, bytes)):
        what += f" ({value!r})" if len(value) <= 30 else f" ({value[:27]!r}...)"
    raise InplaceWriteError(
        f"apply_: the function returned a {what} for the tensor "
        f"entry {unravel_key(path)!r}; apply_ writes its results in place, so it needs a "
        "tensor (or a number or array that becomes one) for every tensor entry. Use apply() "
        "for results of another kind. The tensordict was left unchanged."
    )


def run_plan(plan: list[Any]) -> None:
    """Write the results an in-place ``apply_`` computed and checked: ``(target, key,
    current entry, result)`` each."""
    for target, key, current, r in plan:
        if current is None:
            target._set_str(key, r, inplace=False, validated=True)
        else:
            write_inplace(key, current, r, False)
