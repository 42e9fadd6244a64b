"""``TensorDictParams``: a tensordict that is also an ``nn.Module``.

Its leaves are the module's parameters (``nn.Parameter``) and buffers, so a model that
holds a ``TensorDictParams`` exposes them through ``parameters()``, ``state_dict()``,
``to()``/``double()``, optimizers … The module's ``_parameters`` and ``_buffers`` are
live views over the tensordict's leaves (flat names joined with ``"."``), so the two
never disagree.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any

import torch
from torch import nn
from torch.nn.parameter import Buffer

from tensordict import TensorDict, TensorDictBase
from tensordict._plugins.api import NON_TENSOR
from tensordict._plugins.api import pytree as _pytree

__all__ = ["TensorDictParams"]

_Parameter = nn.Parameter


def _is_td(value: Any) -> bool:
    return isinstance(value, TensorDictBase) and not isinstance(value, NON_TENSOR)


def _as_buffer(value: torch.Tensor) -> torch.Tensor:
    """``value`` marked as a buffer (``isinstance(value, Buffer)``), in place when the
    tensor takes attributes, so that it keeps its identity."""
    try:
        value._is_buffer = True  # type: ignore[attr-defined]
        return value
    except (AttributeError, RuntimeError):
        return Buffer(value)


def _convert_leaf(value: Any, no_convert: bool, memo: dict[int, Any]) -> Any:
    """A tensor as a parameter (floating/complex) or a buffer; other values unchanged."""
    if not isinstance(value, torch.Tensor):
        return value
    found = memo.get(id(value))
    if found is not None:
        return found
    if isinstance(value, _Parameter) or getattr(value, "_is_buffer", False):
        out = value
    elif not no_convert and (value.is_floating_point() or value.is_complex()):
        out = _Parameter(value)
    else:
        out = _as_buffer(value)
    memo[id(value)] = out
    return out


def _convert_td(td: TensorDictBase, no_convert: bool, memo: dict[int, Any]) -> TensorDict:
    """A TensorDict of ``td``'s structure whose tensor leaves are converted. A plain
    nested TensorDict whose leaves need no conversion is kept as it is (shared)."""
    if not isinstance(td, TensorDict):
        td = td.to_tensordict()
    store = {}
    same = not isinstance(td, TensorDictParams)
    for key in td.keys():
        value = td._get_str(key, None)
        if _is_td(value):
            new = _convert_td(value, no_convert, memo)
        else:
            new = _convert_leaf(value, no_convert, memo)
        same = same and new is value
        store[key] = new
    if same:
        return td
    names = td._names
    return TensorDict._new_unsafe(store, td.batch_size, td.device, names and list(names))


def _walk(store: dict, prefix: str) -> Iterator[tuple[str, Any]]:
    for key, value in store.items():
        if isinstance(value, TensorDict):
            yield from _walk(value._tensordict, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


class _LeafView(MutableMapping):
    """``module._parameters`` / ``module._buffers`` of a TensorDictParams: the leaves
    that are (not) ``nn.Parameter``, by flat ``"."``-joined name. Writes go to the
    tensordict unconverted (they come from ``nn.Module`` machinery)."""

    __slots__ = ("_owner", "_params")

    def __init__(self, owner: TensorDictParams, params: bool) -> None:
        self._owner = weakref.ref(owner)
        self._params = params

    def _store(self) -> dict:
        owner = self._owner()
        return {} if owner is None else owner._tensordict

    def _keep(self, value: Any) -> bool:
        return isinstance(value, torch.Tensor) and isinstance(value, _Parameter) == self._params

    def _find(self, name: str) -> tuple[dict, str]:
        store = self._store()
        parts = name.split(".")
        for part in parts[:-1]:
            sub = store.get(part)
            if not isinstance(sub, TensorDict):
                raise KeyError(name)
            store = sub._tensordict
        return store, parts[-1]

    def __getitem__(self, name: str) -> Any:
        store, key = self._find(name)
        value = store.get(key)
        if value is None or not self._keep(value):
            raise KeyError(name)
        return value

    def __setitem__(self, name: str, value: Any) -> None:
        store, key = self._find(name)
        store[key] = value

    def __delitem__(self, name: str) -> None:
        store, key = self._find(name)
        if key not in store:
            raise KeyError(name)
        del store[key]

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            self[name]
        except KeyError:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        return (name for name, value in _walk(self._store(), "") if self._keep(value))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def items(self) -> Any:  # type: ignore[override]
        return [(name, value) for name, value in _walk(self._store(), "") if self._keep(value)]

    def __repr__(self) -> str:
        return f"{'Parameters' if self._params else 'Buffers'}({dict(self.items())})"


class TensorDictParams(TensorDict, nn.Module):
    """A tensordict whose leaves are registered as the parameters and buffers of a module.

    Args:
        parameters: a tensordict or a dict (or keyword arguments). Floating-point and
            complex tensors become ``nn.Parameter`` (existing parameters are kept as they
            are, so ties are preserved); other tensors become buffers.
        no_convert: keep tensors that are not ``nn.Parameter`` as buffers.
        lock: lock the tensordict.

    Assigned to a module attribute it appears in ``parameters()``, ``state_dict()``
    (``"<attr>.<key>.<subkey>"``), ``.to()``/``.double()``; entries written later are
    converted the same way. Operations return plain tensordicts, except ``clone()``,
    ``copy()`` and ``to()``, which return a ``TensorDictParams``.

    >>> import torch
    >>> from torch import nn
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import TensorDictParams
    >>> class Model(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.params = TensorDictParams(TensorDict(w=torch.zeros(3), b={"c": torch.ones(2)}))
    >>> model = Model()
    >>> sorted(name for name, _ in model.named_parameters())
    ['params.b.c', 'params.w']
    >>> isinstance(model.params["w"], nn.Parameter)
    True
    """

    def __init__(
        self,
        parameters: TensorDictBase | dict | None = None,
        *,
        no_convert: bool = False,
        lock: bool = False,
        **kwargs: Any,
    ) -> None:
        nn.Module.__init__(self)
        if parameters is None:
            source: TensorDictBase = TensorDict(kwargs)
        elif _is_td(parameters):
            source = parameters  # type: ignore[assignment]
        elif isinstance(parameters, Mapping):
            source = TensorDict(dict(parameters), **kwargs)
        else:
            raise TypeError(
                f"TensorDictParams takes a tensordict or a dict; got {type(parameters).__name__}."
            )
        converted = _convert_td(source, no_convert, {})
        object.__setattr__(self, "no_convert", no_convert)
        object.__setattr__(self, "_tensordict", dict(converted._tensordict))
        object.__setattr__(self, "_batch_size", converted._batch_size)
        object.__setattr__(self, "_device", converted._device)
        object.__setattr__(self, "_names", converted._names)
        object.__setattr__(self, "_is_locked", False)
        object.__setattr__(self, "_get_post_hooks", [])
        object.__setattr__(self, "_parameters", _LeafView(self, params=True))
        object.__setattr__(self, "_buffers", _LeafView(self, params=False))
        if lock:
            self.lock_()

    @classmethod
    def _new_unsafe(cls, *args: Any, **kwargs: Any) -> TensorDict:  # type: ignore[override]
        # Operations build plain tensordicts (a TensorDictParams is built explicitly).
        return TensorDict._new_unsafe(*args, **kwargs)

    def _nested_store(self) -> dict[str, Any]:
        """The entries as nested dicts (used by ``from_module``)."""

        def unfold(store: dict) -> dict:
            return {
                k: unfold(v._tensordict) if isinstance(v, TensorDict) else v
                for k, v in store.items()
            }

        return unfold(self._tensordict)

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_") and not isinstance(value, (nn.Module, torch.Tensor)):
            object.__setattr__(self, name, value)
        else:
            nn.Module.__setattr__(self, name, value)

    # ------------------------------------------------------------------ writes convert
    def _converted(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return _convert_leaf(value, self.no_convert, {})
        if _is_td(value):
            return _convert_td(value, self.no_convert, {})
        if isinstance(value, Mapping):
            return _convert_td(TensorDict(dict(value)), self.no_convert, {})
        return value

    def _set_str(
        self, key: str, value: Any, *, inplace: bool, validated: bool, **kwargs: Any
    ) -> Any:  # type: ignore[override]
        if inplace and key in self._tensordict:
            with torch.no_grad():
                return super()._set_str(key, value, inplace=True, validated=validated, **kwargs)
        return super()._set_str(
            key, self._converted(value), inplace=inplace, validated=validated, **kwargs
        )

    def _set_tuple(
        self, key: tuple, value: Any, *, inplace: bool, validated: bool, **kwargs: Any
    ) -> Any:  # type: ignore[override]
        if len(key) == 1:
            return self._set_str(key[0], value, inplace=inplace, validated=validated, **kwargs)
        with torch.no_grad():
            return super()._set_tuple(
                key, self._converted(value), inplace=inplace, validated=validated, **kwargs
            )

    def __setitem__(self, index: Any, value: Any) -> None:
        if isinstance(index, (str, tuple)) and (
            isinstance(index, str) or (index and isinstance(index[0], (str, tuple)))
        ):
            self.set(index, value)
            return
        with torch.no_grad():
            super().__setitem__(index, value)

    def update(self, input_dict_or_td: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        with torch.no_grad():
            return super().update(self._converted(input_dict_or_td), *args, **kwargs)

    # ------------------------------------------------------------------ reads (post hooks)
    def register_get_post_hook(self, hook: Callable[[TensorDictParams, Any], Any]) -> None:
        """Call ``hook(self, value)`` on every leaf read (its result is returned instead).

        >>> import torch
        >>> from tensordict.nn import TensorDictParams
        >>> p = TensorDictParams(a=torch.zeros(2))
        >>> p.register_get_post_hook(lambda self, x: x.data)
        >>> p["a"].requires_grad
        False
        """
        self._get_post_hooks.append(hook)

    def _hooked(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            for hook in self._get_post_hooks:
                value = hook(self, value)
        return value

    def __getitem__(self, index: Any) -> Any:
        value = super().__getitem__(index)
        return self._hooked(value) if self._get_post_hooks else value

    def get(self, key: Any, *args: Any, **kwargs: Any) -> Any:
        value = super().get(key, *args, **kwargs)
        return self._hooked(value) if self._get_post_hooks else value

    def values(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        values = super().values(*args, **kwargs)
        if not self._get_post_hooks:
            return values
        return (self._hooked(v) for v in values)

    def items(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        items = super().items(*args, **kwargs)
        if not self._get_post_hooks:
            return items
        return ((k, self._hooked(v)) for k, v in items)

    # ------------------------------------------------------------------ copies
    def _rebuilt(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> TensorDictParams:
        """A TensorDictParams whose leaves are ``fn(leaf)``, parameters staying
        parameters (same ``requires_grad``) and ties preserved."""
        memo: dict[int, Any] = {}
        identity = fn is _same

        def convert(value: Any) -> Any:
            if not isinstance(value, torch.Tensor):
                return value
            found = memo.get(id(value))
            if found is None and identity:
                found = value
            if found is None:
                new = fn(value)
                if isinstance(value, _Parameter):
                    found = _Parameter(new, requires_grad=value.requires_grad)
                else:
                    found = Buffer(new) if getattr(value, "_is_buffer", False) else new
                memo[id(value)] = found
            return found

        def rebuild(td: TensorDict) -> TensorDict:
            store = {
                k: rebuild(v) if isinstance(v, TensorDict) else convert(v)
                for k, v in td._tensordict.items()
            }
            return TensorDict._new_unsafe(store, td._batch_size, td._device, td._names)

        plain = rebuild(self)
        out = TensorDictParams.__new__(TensorDictParams)
        TensorDictParams.__init__(out, plain, no_convert=True)
        object.__setattr__(out, "no_convert", self.no_convert)
        return out

    def clone(self, recurse: bool = True, **kwargs: Any) -> TensorDictParams:  # type: ignore[override]
        """A copy with cloned leaves (``recurse=False``: the same leaves), same kinds."""
        if not recurse:
            return self._rebuilt(_same)
        return self._rebuilt(lambda t: t.detach().clone())

    def copy(self) -> TensorDictParams:  # type: ignore[override]
        return self.clone(recurse=False)

    def __copy__(self) -> TensorDictParams:
        return self.clone(recurse=False)

    def __deepcopy__(self, memo: dict | None = None) -> TensorDictParams:
        return self.clone()

    def to(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        """Cast like ``TensorDict.to``; the result is a TensorDictParams of the same kinds."""
        result = TensorDict.to(self, *args, **kwargs)
        if result is self or not _is_td(result):
            return result

        def rewrap(moved: TensorDict, own: dict | None) -> TensorDict:
            store: dict[str, Any] = {}
            for key, value in moved._tensordict.items():
                mine = None if own is None else own.get(key)
                if isinstance(value, TensorDict):
                    store[key] = rewrap(
                        value, mine._tensordict if isinstance(mine, TensorDict) else None
                    )
                elif isinstance(mine, _Parameter) and not isinstance(value, _Parameter):
                    store[key] = _Parameter(value.detach(), requires_grad=mine.requires_grad)
                else:
                    store[key] = value
            return TensorDict._new_unsafe(store, moved.batch_size, moved.device, moved._names)

        return TensorDictParams(rewrap(result, self._tensordict), no_convert=True)

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (
            _rebuild_params,
            (self._nested_store(), tuple(self._batch_size), self._device, self._is_locked),
        )

    # ------------------------------------------------------------------ module protocol
    def state_dict(
        self, *args: Any, destination: Any = None, prefix: str = "", keep_vars: bool = False
    ) -> Any:  # type: ignore[override]
        """``nn.Module.state_dict``: flat ``"a.b"`` names."""
        return nn.Module.state_dict(
            self, *args, destination=destination, prefix=prefix, keep_vars=keep_vars
        )

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ) -> Any:  # type: ignore[override]
        """Load a module state dict (flat names) or a ``TensorDict.state_dict()``, in place."""
        nested = any(isinstance(v, Mapping) for v in state_dict.values()) or any(
            str(k).startswith("__") for k in state_dict
        )
        with torch.no_grad():
            if nested:
                return TensorDict.load_state_dict(self, state_dict, strict=strict, assign=assign)
            return nn.Module.load_state_dict(self, state_dict, strict=strict, assign=assign)

    def _load_from_state_dict(
        self,
        state_dict: Mapping[str, Any],
        prefix: str,
        local_metadata: Any,
        strict: bool,
        missing_keys: list[str],
        unexpected_keys: list[str],
        error_msgs: list[str],
    ) -> None:
        # nn.Module's version reads the first "."-separated part of a key as a local
        # name; ours are "."-joined paths, so the entries are matched whole.
        local = dict(self._parameters.items())
        local.update(self._buffers.items())
        with torch.no_grad():
            for name, current in local.items():
                key = prefix + name
                if key not in state_dict:
                    missing_keys.append(key)
                    continue
                value = state_dict[key]
                if not isinstance(value, torch.Tensor):
                    error_msgs.append(f"{key}: expected a tensor, got {type(value).__name__}.")
                elif value.shape != current.shape:
                    error_msgs.append(
                        f"size mismatch for {key}: copying a param with shape {tuple(value.shape)} "
                        f"from checkpoint, the shape in current model is {tuple(current.shape)}."
                    )
                else:
                    current.copy_(value)
        if strict:
            for key in state_dict:
                if key.startswith(prefix) and key[len(prefix) :] not in local:
                    unexpected_keys.append(key)

    def forward(self, *input: Any) -> None:  # type: ignore[override]
        raise RuntimeError(
            "TensorDictParams is a container of parameters: it has no forward. Read its "
            "entries (params['key']) or write them into a module with params.to_module(module)."
        )

    def __repr__(self) -> str:
        plain = TensorDict._new_unsafe(
            self._tensordict, self._batch_size, self._device, self._names
        )
        return f"TensorDictParams(params={_indent(repr(plain))})"

    def extra_repr(self) -> str:
        return ""

    def __hash__(self) -> int:
        return id(self)


def _same(tensor: torch.Tensor) -> torch.Tensor:
    return tensor


def _indent(text: str) -> str:
    return text.replace("\n", "\n    ")


def _rebuild_params(store: dict, batch_size: tuple, device: Any, locked: bool) -> TensorDictParams:
    out = TensorDictParams(TensorDict(store, batch_size=batch_size, device=device), no_convert=True)
    if locked:
        out.lock_()
    return out


def _no_grad(method: Callable) -> Callable:
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with torch.no_grad():
            return method(self, *args, **kwargs)

    return wrapper


# In-place operations (``zero_``, ``copy_``, ``mul_`` …) write into parameters, which
# autograd only allows without recording: they run under ``torch.no_grad``.
for _name in dir(TensorDict):
    if (
        _name.endswith("_")
        and not _name.startswith("_")
        and _name not in {"lock_", "unlock_", "requires_grad_"}
        and callable(getattr(TensorDict, _name, None))
    ):
        setattr(TensorDictParams, _name, _no_grad(getattr(TensorDict, _name)))
del _name


# torch.vmap / pytree: the parameters are leaves like any tensordict's; what comes back
# (batched, traced or mapped values) is a plain TensorDict, never new parameters.
_pytree.register(TensorDictParams, rebuild_as=TensorDict)
