"""The tree-map engine of the dense ``TensorDict``: one place that walks the leaves.

``_apply_nest`` carries every user-facing map (``apply``, ``apply_``, ``named_apply``);
``_map_batch`` carries batch-shape operations (new batch size known up front);
``_flat_tensors``/``_rebuild`` flatten leaves to one list and back, so table-generated
ops can run one ``torch._foreach_*`` call over all leaves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from tensordict._dict_ops import write_inplace
from tensordict._keys import unravel_key
from tensordict._nontensor import NON_TENSOR, NonTensorData
from tensordict._shape import broadcastable_to, parse_batch_size, parse_device
from tensordict.base import NO_DEFAULT, TensorDictBase

if TYPE_CHECKING:  # pragma: no cover
    from tensordict._td import TensorDict

_Tensor = torch.Tensor


def _result_shape_error(r: torch.Tensor, path: tuple[str, ...], bs: torch.Size) -> RuntimeError:
    return RuntimeError(
        f"apply: the function returned a tensor of shape {tuple(r.shape)} for key "
        f"{unravel_key(path)!r}, whose leading dimensions do not match the result's "
        f"batch_size={tuple(bs)}; pass batch_size= to apply()."
    )


class TreeMapOps:
    """Mixin: the leaf-walking primitives of :class:`~tensordict.TensorDict`.

    Only dense tensordicts inherit it, so ``isinstance(x, TreeMapOps)`` means "a dense
    tensordict whose private storage can be walked directly".
    """

    def _map_batch(
        self, fn: Callable[[Any], Any], batch_size: torch.Size, names: list | None = None
    ) -> TensorDict:
        """Apply a batch-shape operation ``fn`` to every tensor, at any depth.

        ``fn`` touches only the first ``self.batch_dims`` dimensions and carries the rest
        along, so it applies unchanged to the leaves of nested dense tensordicts, whose
        new batch size is ``batch_size`` plus their own extra dimensions. Other tensordict
        types receive ``fn`` themselves (they expose ``.shape`` too); non-tensor values
        only get the new batch size.
        """
        if names is not None and all(n is None for n in names):
            names = None
        nb = len(self._batch_size)
        out = {}
        for key, value in self._tensordict.items():
            if isinstance(value, _Tensor):
                out[key] = fn(value)
            elif isinstance(value, NonTensorData):
                out[key] = value._with(batch_size)
            elif isinstance(value, TreeMapOps):
                sub_bs = value._batch_size
                extra = len(sub_bs) - nb
                sub_names = None
                if names is not None or value._names is not None:
                    own = value._names[nb:] if value._names is not None else [None] * extra
                    sub_names = (names or [None] * len(batch_size)) + own
                new_bs = torch.Size((*batch_size, *sub_bs[nb:])) if extra else batch_size
                out[key] = value._map_batch(fn, new_bs, sub_names)
            else:
                out[key] = fn(value)
        return self._new_unsafe(out, batch_size, self._device, names)

    def _map_tensors(
        self, fn: Callable[[_Tensor], _Tensor], device: Any = NO_DEFAULT
    ) -> TensorDict:
        """Apply a shape-preserving ``fn`` to every tensor leaf (no validation)."""
        out = {}
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

    def _flat_tensors(self, out: list) -> list:
        """Append every tensor leaf, depth first, to ``out`` (see :meth:`_rebuild`)."""
        for value in self._tensordict.values():
            if isinstance(value, _Tensor):
                out.append(value)
            elif isinstance(value, TensorDictBase):  # dense or lazy stack
                value._flat_tensors(out)
        return out

    def _rebuild(self, it: Any) -> TensorDict:
        """Inverse of :meth:`_flat_tensors`: same structure, tensors taken from ``it``."""
        out = {}
        for key, value in self._tensordict.items():
            if isinstance(value, _Tensor):
                out[key] = next(it)
            elif isinstance(value, TensorDictBase):
                out[key] = value._rebuild(it)
            else:
                out[key] = value
        return self._new_unsafe(out, self._batch_size, self._device, self._names)

    def _write_flat(self, it: Any) -> None:
        """Rebind every tensor leaf to the next tensor of ``it`` (in-place results)."""
        store = self._tensordict
        for key, value in store.items():
            if isinstance(value, _Tensor):
                store[key] = next(it)
            elif isinstance(value, TensorDictBase):
                value._write_flat(it)

    def _aligned_tensors(
        self, other: Any, default: Any, out: list | None = None, prefix: tuple = ()
    ) -> list:
        """The entries of ``other`` matching :meth:`_flat_tensors` order, looked up by key."""
        if out is None:
            out = []
        store = other._tensordict if isinstance(other, TreeMapOps) else None
        if store is None:
            if not isinstance(other, TensorDictBase):
                out.extend([other] * len(self._flat_tensors([])))
                return out
            store = {k: other._get_str(k, NO_DEFAULT) for k in other.keys()}
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

    def _apply_simple(self, fn: Callable, checked: bool) -> TensorDict:
        """``_apply_nest`` for one tensordict, same batch size: the hot path of ``apply``."""
        bs = self._batch_size
        nb = len(bs)
        device = self._device
        out = {}
        for key, value in self._tensordict.items():
            if isinstance(value, _Tensor):
                r = fn(value)
                if r is None:
                    continue
                if not checked and isinstance(r, _Tensor):
                    if r.shape[:nb] != bs:
                        raise _result_shape_error(r, (key,), bs)
                    if device is not None and r.device != device:
                        device = None
                elif not checked:
                    r = self._validate_value(key, r)
                out[key] = r
            elif isinstance(value, NON_TENSOR):
                out[key] = value
            else:
                r = value._apply_nest(fn, checked=checked)
                if r is not None:
                    out[key] = r
        return self._new_unsafe(out, bs, device, self._names)

    def _apply_nest(
        self,
        fn: Callable,
        *others: TensorDictBase,
        batch_size: Sequence[int] | None = None,
        device: Any = NO_DEFAULT,
        names: Any = NO_DEFAULT,
        inplace: bool = False,
        checked: bool = False,
        call_on_nested: bool = False,
        default: Any = NO_DEFAULT,
        named: bool = False,
        nested_keys: bool = False,
        prefix: tuple = (),
        filter_empty: bool | None = None,
        is_leaf: Callable | None = None,
        out: TensorDictBase | None = None,
        _plan: list[Any] | None = None,
    ) -> TensorDict | None:
        if not (others or inplace or named or call_on_nested or is_leaf or filter_empty) and (
            batch_size is None and device is NO_DEFAULT and names is NO_DEFAULT
        ):
            return self._apply_simple(fn, checked)
        plan = _plan
        if inplace:
            result = self if out is None else out
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
                vals = ()
            leaf = (
                is_leaf(type(value))
                if is_leaf is not None
                else not isinstance(value, TensorDictBase)
            )
            if isinstance(value, NON_TENSOR):
                if not inplace:
                    result._tensordict[key] = value._with(result._batch_size, result._device)
                    any_kept = True
                continue
            if leaf or call_on_nested:
                if named:
                    name = prefix + (key,) if nested_keys else key
                    if nested_keys and len(name) == 1:
                        name = name[0]
                    r = fn(name, value, *vals)
                else:
                    r = fn(value, *vals)
            else:
                sub_out = result._tensordict.get(key) if inplace else None
                r = value._apply_nest(
                    fn,
                    *vals,
                    batch_size=None
                    if batch_size is None or inplace
                    else list(result._batch_size) + list(value.batch_size[nb:]),
                    device=device,
                    names=NO_DEFAULT,
                    inplace=inplace,
                    checked=checked,
                    call_on_nested=call_on_nested,
                    default=default,
                    named=named,
                    nested_keys=nested_keys,
                    prefix=prefix + (key,),
                    filter_empty=filter_empty,
                    is_leaf=is_leaf,
                    out=sub_out,
                    _plan=plan,
                )
                if inplace:
                    continue
                if r is None or (filter_empty and r.is_empty()):
                    continue
            if r is None:
                continue
            any_kept = True
            if inplace:
                current = result._tensordict.get(key)
                if r is not current:
                    if current is None:
                        r = result._validate_value(key, r)
                    elif isinstance(current, _Tensor) and isinstance(r, _Tensor):
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
            elif checked:
                result._tensordict[key] = r
            elif isinstance(r, _Tensor):
                rbs = result._batch_size
                if r.shape[: len(rbs)] != rbs:
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
            if _plan is None and plan:
                # every result was computed and checked: now write them all
                for target, key, current, r in plan:
                    if current is None:
                        target._set_str(key, r, inplace=False, validated=True)
                    else:
                        write_inplace(key, current, r, False)
            return self if out is None else out
        if filter_empty and not any_kept and prefix:
            return None
        return result

    def apply(
        self,
        fn: Callable,
        *others: TensorDictBase,
        batch_size: Sequence[int] | None = None,
        device: Any = NO_DEFAULT,
        names: Any = NO_DEFAULT,
        inplace: bool = False,
        default: Any = NO_DEFAULT,
        filter_empty: bool | None = None,
        call_on_nested: bool = False,
        out: TensorDictBase | None = None,
        **constructor_kwargs: Any,
    ) -> TensorDict:
        """Apply ``fn`` to every leaf (and the matching leaves of ``others``).

        Entries for which ``fn`` returns ``None`` are dropped. ``batch_size``/``names``
        describe the result when ``fn`` changes the batch shape; ``default`` fills keys
        missing from ``others``; ``call_on_nested`` passes nested tensordicts to ``fn``
        instead of recursing.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.ones(2), "b": torch.ones(2, dtype=torch.int64)}, [2])
        >>> td.apply(lambda x: x * 2)["a"]
        tensor([2., 2.])
        >>> list(td.apply(lambda x: x if x.is_floating_point() else None).keys())
        ['a']
        >>> td.apply(lambda x, y: x + y, td)["b"]
        tensor([2, 2])
        """
        if constructor_kwargs:
            raise TypeError(
                f"apply() got unexpected keyword arguments {sorted(constructor_kwargs)}."
            )
        return self._apply_nest(
            fn,
            *others,
            batch_size=batch_size,
            device=device,
            names=names,
            inplace=inplace,
            default=default,
            filter_empty=filter_empty,
            call_on_nested=call_on_nested,
            out=out,
        )

    def apply_(self, fn: Callable, *others: TensorDictBase, **kwargs: Any) -> TensorDict:
        """Apply ``fn`` to every leaf and write the results in place.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> a = torch.ones(2)
        >>> _ = TensorDict({"a": a}, [2]).apply_(lambda x: x * 3)
        >>> a
        tensor([3., 3.])
        """
        return self._apply_nest(fn, *others, inplace=True, **kwargs)

    def named_apply(
        self,
        fn: Callable,
        *others: TensorDictBase,
        nested_keys: bool = False,
        batch_size: Sequence[int] | None = None,
        device: Any = NO_DEFAULT,
        names: Any = NO_DEFAULT,
        inplace: bool = False,
        default: Any = NO_DEFAULT,
        filter_empty: bool | None = None,
        call_on_nested: bool = False,
        out: TensorDictBase | None = None,
        prefix: tuple = (),
    ) -> TensorDict | None:
        """Like :meth:`apply`, but ``fn(key, value, *other_values)`` also gets the key.

        With ``nested_keys=True`` the key is the full nested key.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(()), "b": {"c": torch.zeros(())}})
        >>> out = td.named_apply(lambda k, v: v + len(k), nested_keys=True)
        >>> out["a"], out["b", "c"]
        (tensor(1.), tensor(2.))
        """
        return self._apply_nest(
            fn,
            *others,
            named=True,
            nested_keys=nested_keys,
            batch_size=batch_size,
            device=device,
            names=names,
            inplace=inplace,
            default=default,
            filter_empty=filter_empty,
            call_on_nested=call_on_nested,
            out=out,
            prefix=prefix,
        )

    # ------------------------------------------------------------------ dict-like ops
