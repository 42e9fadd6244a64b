"""``apply`` and its family (``apply_``, ``named_apply``, the reference's private
``_apply_nest``/``_fast_apply``): the public forms of the one tree map, ``_tree_map``, which
each kind implements. :class:`ApplySpec` says how it maps.

A mixin of ``TensorDictBase`` of its own: ``torch.compile`` guards a traced method
through its defining class's dictionary, at a cost that grows with that dictionary.

>>> import torch
>>> from tensordict import TensorDict
>>> TensorDict(a=torch.ones(2), batch_size=[2]).apply(lambda x: x + 1)["a"]
tensor([2., 2.])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from tensordict._kinds import kinds as _kinds
from tensordict._util.sentinels import NO_DEFAULT

if TYPE_CHECKING:  # pragma: no cover
    from typing_extensions import Self

#: Keywords of the reference's multithreaded ``apply`` (accepted; one thread maps here).
_APPLY_THREAD_KWARGS = frozenset({"num_threads", "checked", "pool", "call_on_unbatched"})

#: Keywords the reference's ``apply`` passes on to its tree map (``_apply_nest``).
_APPLY_NEST_KWARGS = frozenset({"named", "nested_keys", "prefix", "checked"})


@dataclass(frozen=True)
class ApplySpec:
    """How ``_tree_map`` maps a function over the leaves (the same at every level).

    ``device``: the result's device (``NO_DEFAULT``: the input's); ``inplace``: write the
    results into the leaves (all checked first); ``checked``: trust the results' shapes;
    ``call_on_nested``: pass nested tensordicts to the function instead of recursing;
    ``default``: the value of keys missing from the other tensordicts; ``named``: call
    ``fn(key, value, ...)`` (``nested_keys``: with the full nested key);
    ``filter_empty``: drop nested results without leaves; ``is_leaf``: a callable on a
    value's type deciding what is a leaf.

    >>> ApplySpec(inplace=True).inplace, DEFAULT_APPLY.inplace
    (True, False)
    """

    device: Any = NO_DEFAULT
    inplace: bool = False
    checked: bool = False
    call_on_nested: bool = False
    default: Any = NO_DEFAULT
    named: bool = False
    nested_keys: bool = False
    filter_empty: bool | None = None
    is_leaf: Callable[[type], bool] | None = None


#: The spec of a plain ``apply(fn)``: the hot path of the dense tree map.
DEFAULT_APPLY = ApplySpec()
#: The same, trusting the results' shapes (internal maps).
CHECKED_APPLY = ApplySpec(checked=True)


class ApplyOps:
    """``apply`` and its family, in terms of ``_tree_map``."""

    if TYPE_CHECKING:  # what this mixin uses of the tensordict it is part of (besides
        # is_locked, which the generated stub declares)
        def _tree_map(
            self,
            fn: Callable[..., Any],
            *others: Any,
            spec: ApplySpec,
            batch_size: Sequence[int] | None = None,
            names: Any = NO_DEFAULT,
            prefix: tuple[str, ...] = (),
            out: Any = None,
        ) -> Any: ...

    def apply(
        self,
        fn: Callable[..., Any],
        *others: _kinds.Base,
        batch_size: Sequence[int] | None = None,
        device: Any = NO_DEFAULT,
        names: Any = NO_DEFAULT,
        inplace: bool = False,
        default: Any = NO_DEFAULT,
        filter_empty: bool | None = None,
        propagate_lock: bool = False,
        call_on_nested: bool = False,
        is_leaf: Callable[[type], bool] | None = None,
        out: _kinds.Base | None = None,
        **constructor_kwargs: Any,
    ) -> Self:
        """Apply ``fn`` to every leaf (and the matching leaves of ``others``).

        Entries for which ``fn`` returns ``None`` are dropped. ``batch_size``/``names``
        describe the result when ``fn`` changes the batch shape; ``default`` fills keys
        missing from ``others``; ``call_on_nested`` passes nested tensordicts to ``fn``
        instead of recursing. Non-tensor entries are carried into the result (in their
        own containers), ``fn`` is not applied to them unless ``is_leaf`` (a predicate on
        the entry's type) says they are leaves (:func:`~tensordict.is_leaf_nontensor`).
        With ``filter_empty=True`` a result without any entry is ``None``. ``out``
        receives the results (its entries are replaced, unless ``inplace``) and is
        returned. On a lazy stack the result is a lazy stack of the members' results
        (``others`` are split along the stack dimension). ``propagate_lock`` locks the
        result when this tensordict is locked. The reference's multithreading keywords
        (``num_threads``, ``checked``) are accepted; the leaves are mapped in this thread.

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
            unknown = set(constructor_kwargs) - _APPLY_THREAD_KWARGS - _APPLY_NEST_KWARGS
            if unknown:
                raise TypeError(f"apply() got unexpected keyword arguments {sorted(unknown)}.")
            nest = {k: constructor_kwargs[k] for k in _APPLY_NEST_KWARGS & set(constructor_kwargs)}
            if nest:  # the reference's apply forwards these to its tree map
                return self._apply_nest(  # type: ignore[return-value]
                    fn, *others, batch_size=batch_size, device=device, names=names,
                    inplace=inplace, default=default, filter_empty=filter_empty,
                    call_on_nested=call_on_nested, is_leaf=is_leaf, out=out, **nest,
                )  # fmt: skip
        if is_leaf is _kinds.is_leaf_default:
            is_leaf = None
        if (
            device is NO_DEFAULT
            and not inplace
            and default is NO_DEFAULT
            and filter_empty is None
            and not call_on_nested
            and is_leaf is None
        ):
            spec = DEFAULT_APPLY
        else:
            spec = ApplySpec(
                device=device,
                inplace=inplace,
                default=default,
                filter_empty=filter_empty,
                call_on_nested=call_on_nested,
                is_leaf=is_leaf,
            )
        into = out if inplace else None  # out= without inplace: the result is written there
        result = self._tree_map(
            fn, *others, spec=spec, batch_size=batch_size, names=names, out=into
        )
        if result is None:  # filter_empty=True and nothing was kept
            return None  # type: ignore[return-value]
        if out is not None and not inplace:
            out.update(result)
            return out  # type: ignore[return-value]
        if propagate_lock and not inplace and result is not self and _locked(self):
            result.lock_()
        return cast("Self", result)

    def _apply_nest(
        self,
        fn: Callable[..., Any],
        *others: _kinds.Base,
        batch_size: Sequence[int] | None = None,
        device: Any = NO_DEFAULT,
        names: Any = NO_DEFAULT,
        inplace: bool = False,
        checked: bool = False,
        call_on_nested: bool = False,
        default: Any = NO_DEFAULT,
        named: bool = False,
        nested_keys: bool = False,
        prefix: tuple[str, ...] = (),
        filter_empty: bool | None = None,
        is_leaf: Callable[[type], bool] | None = None,
        out: _kinds.Base | None = None,
        **constructor_kwargs: Any,
    ) -> Self | None:
        """The reference's private tree map, with its keywords (clients such as TorchRL
        call it; docs: compatibility). :meth:`apply` and :meth:`named_apply` are the
        public forms; ``checked=True`` trusts the results' shapes.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a={"b": torch.zeros(1)}, c=torch.ones(1))
        >>> td._apply_nest(lambda k, v: v + len(k), named=True, nested_keys=True)["a", "b"]
        tensor([2.])
        """
        unknown = set(constructor_kwargs) - _APPLY_THREAD_KWARGS
        if unknown:
            raise TypeError(f"_apply_nest() got unexpected keyword arguments {sorted(unknown)}.")
        spec = ApplySpec(
            device=device,
            inplace=inplace,
            checked=checked,
            call_on_nested=call_on_nested,
            default=default,
            named=named,
            nested_keys=nested_keys,
            filter_empty=filter_empty,
            is_leaf=None if is_leaf is _kinds.is_leaf_default else is_leaf,
        )
        into = out if inplace else None
        result = self._tree_map(
            fn, *others, spec=spec, batch_size=batch_size, names=names, prefix=prefix, out=into
        )
        if out is not None and not inplace and result is not None:
            out.update(result)
            return out  # type: ignore[return-value]
        return cast("Self | None", result)

    def _fast_apply(
        self,
        fn: Callable[..., Any],
        *others: _kinds.Base,
        filter_empty: bool | None = False,
        checked: bool = True,
        propagate_lock: bool = False,
        **kwargs: Any,
    ) -> Self | None:
        """:meth:`_apply_nest` that trusts the results' shapes and keeps empty nested
        results (the reference's private fast path, called by clients).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.ones(2), batch_size=[2])._fast_apply(lambda x: x * 3)["a"]
        tensor([3., 3.])
        """
        kwargs.pop("num_threads", None)
        result: Any = self._apply_nest(
            fn, *others, filter_empty=filter_empty, checked=checked, **kwargs
        )
        if propagate_lock and result is not None and result is not self and _locked(self):
            result.lock_()
        return cast("Self | None", result)

    def apply_(self, fn: Callable[..., Any], *others: _kinds.Base, **kwargs: Any) -> Self:
        """Apply ``fn`` to every leaf and write the results in place.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> a = torch.ones(2)
        >>> _ = TensorDict({"a": a}, [2]).apply_(lambda x: x * 3)
        >>> a
        tensor([3., 3.])
        """
        return self.apply(fn, *others, inplace=True, **kwargs)

    def named_apply(
        self,
        fn: Callable[..., Any],
        *others: _kinds.Base,
        nested_keys: bool = False,
        batch_size: Sequence[int] | None = None,
        device: Any = NO_DEFAULT,
        names: Any = NO_DEFAULT,
        inplace: bool = False,
        default: Any = NO_DEFAULT,
        filter_empty: bool | None = None,
        propagate_lock: bool = False,
        call_on_nested: bool = False,
        is_leaf: Callable[[type], bool] | None = None,
        out: _kinds.Base | None = None,
        prefix: tuple[str, ...] = (),
        **constructor_kwargs: Any,
    ) -> Self | None:
        """Like :meth:`apply`, but ``fn(key, value, *other_values)`` also gets the key.

        With ``nested_keys=True`` the key is the full nested key.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(()), "b": {"c": torch.zeros(())}})
        >>> out = td.named_apply(lambda k, v: v + len(k), nested_keys=True)
        >>> out["a"], out["b", "c"]
        (tensor(1.), tensor(2.))
        """
        unknown = set(constructor_kwargs) - _APPLY_THREAD_KWARGS
        if unknown:
            raise TypeError(f"named_apply() got unexpected keyword arguments {sorted(unknown)}.")
        if is_leaf is not None and is_leaf is not _kinds.is_leaf_default:
            raise NotImplementedError(
                "named_apply(is_leaf=...): only the default leaves are supported."
            )
        spec = ApplySpec(
            device=device,
            inplace=inplace,
            default=default,
            filter_empty=filter_empty,
            call_on_nested=call_on_nested,
            named=True,
            nested_keys=nested_keys,
        )
        result = self._tree_map(
            fn, *others, spec=spec, batch_size=batch_size, names=names, prefix=prefix, out=out
        )
        if propagate_lock and result is not None and not inplace and _locked(self):
            result.lock_()
        return cast("Self | None", result)


def _locked(td: Any) -> bool:
    """Whether ``td`` (the tensordict this mixin is part of) is locked."""
    return bool(td.is_locked)
