"""Modules that read their inputs from a tensordict and write their outputs into it.

:class:`TensorDictModuleBase` is the common base: ``in_keys``/``out_keys``, output
selection, parameter reset. :class:`TensorDictModule` wraps any callable;
:class:`TensorDictModuleWrapper`, :class:`WrapModule` and :func:`as_tensordict_module`
live in :mod:`tensordict.nn._wrappers` and are re-exported here.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn
from torch.nn.modules import module as _torch_module

from tensordict import NonTensorStack, TensorDict, TensorDictBase
from tensordict._plugins.api import NON_TENSOR, NestedKey
from tensordict.base import NO_DEFAULT
from tensordict.nn._keys import IGNORE, as_key_list, repeated_keys, select_keys
from tensordict.nn.dispatch import tensordict_entry
from tensordict.nn.utils import _SKIP_EXISTING

# Also importable from here (defined elsewhere): TensorDictModuleWrapper, WrapModule,
# as_tensordict_module, dispatch, make_tensordict.
__all__ = ["TensorDictModule", "TensorDictModuleBase"]

_MISSING_INPUTS = (
    "Some tensors that are necessary for the module call may not have not been found in "
    "the input tensordict"
)


_Tensor = torch.Tensor
_MISS = object()


def _cloudpickle() -> Any:
    """The ``cloudpickle`` module (imported on first use: only pickling needs it)."""
    return importlib.import_module("cloudpickle")


class _PickledCallable:
    """The wrapped callable of a pickled :class:`TensorDictModule`, as cloudpickle bytes."""

    __slots__ = ("payload",)

    def __init__(self, payload: bytes) -> None:
        self.payload = payload

    def __getstate__(self) -> bytes:
        return self.payload

    def __setstate__(self, payload: bytes) -> None:
        self.payload = payload


def _non_tensor_value(value: Any) -> Any:
    """What a module receives for a non-tensor entry: the value (a list for a stack)."""
    if isinstance(value, NonTensorStack):
        return value.tolist()
    return value.data


def _indent(text: str) -> str:
    return text.replace("\n", "\n    ")


# torch mutates these in place (never rebinds them): bound once here.
_GLOBAL_FORWARD_HOOKS = _torch_module._global_forward_hooks
_GLOBAL_FORWARD_PRE_HOOKS = _torch_module._global_forward_pre_hooks
_GLOBAL_BACKWARD_HOOKS = _torch_module._global_backward_hooks
_GLOBAL_BACKWARD_PRE_HOOKS = _torch_module._global_backward_pre_hooks
_tracing_state = torch._C._get_tracing_state


def _hooks_or_tracing(module: nn.Module) -> bool:
    """Whether a call must go through ``nn.Module.__call__`` (hooks, jit tracing, or a
    ``module.compile()``-d call); otherwise ``forward`` can be called directly."""
    return _own_hooks(module) or _global_hooks_or_tracing()


def _own_hooks(module: nn.Module) -> bool:
    """Whether ``module`` has hooks of its own or a ``module.compile()``-d call."""
    d = module.__dict__
    return bool(
        d["_forward_hooks"]
        or d["_forward_pre_hooks"]
        or d["_backward_hooks"]
        or d["_backward_pre_hooks"]
        or d.get("_compiled_call_impl") is not None
    )


def _global_hooks_or_tracing() -> bool:
    """Whether a global module hook is registered or a jit trace is running."""
    return bool(
        _GLOBAL_FORWARD_HOOKS
        or _GLOBAL_FORWARD_PRE_HOOKS
        or _GLOBAL_BACKWARD_HOOKS
        or _GLOBAL_BACKWARD_PRE_HOOKS
        or _tracing_state()
    )


class TensorDictModuleBase(nn.Module):
    """Base of the modules that take a tensordict and return one.

    A subclass declares its ``in_keys`` and ``out_keys`` (as class attributes or in
    ``__init__``; nested keys are unravelled) and implements ``forward(tensordict)``.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import TensorDictModuleBase
    >>> class Double(TensorDictModuleBase):
    ...     in_keys = ["x"]
    ...     out_keys = [("out", "x2")]
    ...     def forward(self, td):
    ...         td["out", "x2"] = td["x"] * 2
    ...         return td
    >>> Double()(TensorDict(x=torch.ones(2)))["out", "x2"]
    tensor([2., 2.])
    >>> Double().out_keys
    [('out', 'x2')]
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Class-level ``in_keys = [...]`` becomes the default of the instance property.
        for name in ("in_keys", "out_keys"):
            value = cls.__dict__.get(name)
            if value is not None and not isinstance(value, property):
                setattr(cls, f"_{name}_default", value)
                delattr(cls, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # nn.Module.__call__ costs two Python frames even without hooks: skip it when
        # nothing (hook, tracer, compiled call) would see the difference.
        if _hooks_or_tracing(self):
            return nn.Module.__call__(self, *args, **kwargs)
        return self.forward(*args, **kwargs)

    # ------------------------------------------------------------------ keys
    def _keys_attr(self, name: str) -> list[Any]:
        try:
            keys: list[Any] = self.__dict__[name]
            return keys
        except KeyError:
            default = getattr(type(self), f"{name}_default", None)
            if default is None:
                raise AttributeError(
                    f"'{type(self).__name__}' object has no attribute '{name[1:]}'"
                ) from None
            keys = as_key_list(default, name[1:])
            self.__dict__[name] = keys
            return keys

    @property
    def in_keys(self) -> list[Any]:
        """The keys the module reads (settable; nested keys are unravelled)."""
        return self._keys_attr("_in_keys")

    @in_keys.setter
    def in_keys(self, value: Any) -> None:
        self.__dict__["_in_keys"] = as_key_list(value, "in_keys")

    @property
    def out_keys(self) -> list[Any]:
        """The keys the module writes: the selected ones after :meth:`select_out_keys`."""
        selected = self.__dict__.get("_selected_out_keys")
        return self._keys_attr("_out_keys") if selected is None else selected

    @out_keys.setter
    def out_keys(self, value: Any) -> None:
        self.__dict__["_out_keys"] = as_key_list(value, "out_keys")
        self.__dict__["_selected_out_keys"] = None
        self._selection_changed()

    @property
    def out_keys_source(self) -> list[Any]:
        """Every key the module can write, whatever the selection."""
        return self._keys_attr("_out_keys")

    @staticmethod
    def is_tdmodule_compatible(module: Any) -> bool:
        """Whether ``module`` declares ``in_keys`` and ``out_keys``.

        >>> from torch import nn
        >>> from tensordict.nn import TensorDictModule, TensorDictModuleBase
        >>> TensorDictModuleBase.is_tdmodule_compatible(nn.Linear(1, 1))
        False
        """
        return hasattr(module, "in_keys") and hasattr(module, "out_keys")

    # ------------------------------------------------------------------ selection
    def select_out_keys(self, *out_keys: NestedKey) -> TensorDictModuleBase:
        """Write only ``out_keys`` (a subset of the out_keys); returns the module itself.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> m = TensorDictModule(lambda x: (x + 1, x - 1), in_keys=["x"], out_keys=["a", "b"])
        >>> sorted(m.select_out_keys("b")(TensorDict(x=torch.zeros(()))).keys())
        ['b', 'x']
        """
        keys = select_keys(out_keys, self.out_keys_source)
        self.__dict__["_selected_out_keys"] = keys
        self._selection_changed()
        return self

    def reset_out_keys(self) -> TensorDictModuleBase:
        """Undo :meth:`select_out_keys`; returns the module itself."""
        self.__dict__["_selected_out_keys"] = None
        self._selection_changed()
        return self

    def _selection_changed(self) -> None:
        # Generic modules write what their forward writes: a forward hook removes the
        # outputs that are not selected. Subclasses that write selectively override.
        handle = self.__dict__.pop("_selection_hook", None)
        if handle is not None:
            handle.remove()
        selected = self.__dict__.get("_selected_out_keys")
        if selected is None:
            return
        dropped = [k for k in self._keys_attr("_out_keys") if k not in selected]
        if not dropped:
            return

        def drop_unselected(module: nn.Module, args: Any, output: Any) -> Any:
            if isinstance(output, TensorDictBase):
                output.exclude(*dropped, inplace=True)
            return output

        self.__dict__["_selection_hook"] = self.register_forward_hook(drop_unselected)

    # ------------------------------------------------------------------ parameters
    def reset_parameters_recursive(
        self, parameters: TensorDictBase | None = None
    ) -> TensorDictBase | None:
        """Re-initialise every submodule that has a ``reset_parameters`` method.

        With ``parameters`` (a tensordict shaped like ``TensorDict.from_module(self)``,
        without batch dimensions), those are re-initialised in place instead and
        returned; the module's own parameters are left untouched.
        """
        if parameters is None:
            if not self._reset_submodules():
                warnings.warn(
                    "reset_parameters_recursive was called without the parameters argument "
                    "and did not find any parameters to reset",
                    UserWarning,
                    stacklevel=2,
                )
            return None
        if parameters.batch_dims:
            raise RuntimeError(
                "reset_parameters_recursive resets one set of parameters; got a tensordict "
                f"with batch dimensions {tuple(parameters.batch_size)}. Reset each element "
                "separately (for instance through its unbind)."
            )
        with parameters.to_module(self, preserve_module_state=False):
            self._reset_submodules()
        return parameters

    def _reset_submodules(self) -> bool:
        found = False
        for module in self.modules():
            if isinstance(module, TensorDictModuleBase):
                continue
            reset = getattr(module, "reset_parameters", None)
            if callable(reset):
                reset()
                found = True
        return found

    # ------------------------------------------------------------------ repr
    def _repr_fields(self) -> list[str]:
        fields = [f"{name}={_indent(repr(child))}" for name, child in self._modules.items()]
        for name in ("in_keys", "out_keys"):
            try:
                fields.append(f"{name}={getattr(self, name)}")
            except (AttributeError, RuntimeError):
                pass
        return fields

    def __repr__(self) -> str:
        fields = self._repr_fields()
        if not fields:
            return f"{type(self).__name__}()"
        return f"{type(self).__name__}(\n    " + ",\n    ".join(fields) + ")"


def forward_attribute(module: nn.Module, name: str, child: str) -> Any:
    """``nn.Module.__getattr__``, then the attribute of the wrapped ``child`` (an
    ``nn.Module`` child or a plain attribute); dunder names are never forwarded."""
    try:
        return nn.Module.__getattr__(module, name)
    except AttributeError:
        if name.startswith("__"):
            raise
        inner = module.__dict__.get("_modules", {}).get(child)
        if inner is None:
            inner = module.__dict__.get(child)
        if inner is None:
            raise
        return getattr(inner, name)


def _is_collection(value: Any) -> bool:
    """A tensordict that holds entries (not a non-tensor wrapper)."""
    return isinstance(value, TensorDictBase) and not isinstance(value, NON_TENSOR)


def _lookup(container: Any, key: Any) -> Any:
    if isinstance(container, TensorDictBase):
        return container.get(key)
    if isinstance(key, tuple):
        if key in container:
            return container[key]
        for part in key:
            container = container[part]
        return container
    return container[key]


class _DeprecatedModuleState:
    """``device`` and ``is_functional`` of the reference's module classes, kept (deprecated)
    so that code reading them still runs."""

    @property
    def device(self) -> torch.device:
        """Deprecated: the device of the first parameter (CPU when there is none)."""
        warnings.warn(
            f"{type(self).__name__}.device is deprecated and will be removed in "
            "TensorDict 0.17: a module may hold parameters on several devices.",
            DeprecationWarning,
            stacklevel=2,
        )
        for param in self.parameters():  # type: ignore[attr-defined]
            return param.device  # type: ignore[no-any-return]
        return torch.device("cpu")

    @property
    def is_functional(self) -> bool:
        """Deprecated: always ``False`` (functional calls go through ``to_module``)."""
        warnings.warn(
            f"{type(self).__name__}.is_functional is deprecated and will be removed in "
            "TensorDict 0.17.",
            DeprecationWarning,
            stacklevel=2,
        )
        return False


class TensorDictModule(_DeprecatedModuleState, TensorDictModuleBase):
    """Wrap a callable so that it reads ``in_keys`` and writes ``out_keys`` of a tensordict.

    Args:
        module: the callable (an ``nn.Module``, a function …).
        in_keys: the keys whose values are passed positionally, in order; or a dict
            mapping keyword-argument names to keys (``out_to_in_map=True``, the default)
            or keys to keyword-argument names (``out_to_in_map=False``).
        out_keys: the keys the outputs are written to, in order. ``"_"`` drops an output.
        out_to_in_map: how to read an ``in_keys`` dict (see above).
        inplace: ``True`` writes into the input tensordict; ``False`` into a new empty
            tensordict; ``"empty"`` into ``tensordict.empty()`` (same batch size and
            device); a tensordict writes into that one.
        method: call this method of ``module`` instead of ``module`` itself.
        method_kwargs: extra keyword arguments of every call.
        strict: a missing input raises :class:`KeyError`; otherwise it is passed as
            ``None`` (and a call that then fails raises :class:`KeyError` naming it).
        get_kwargs: keyword arguments for ``tensordict.get`` when reading inputs.

    Called with a tensordict it returns the tensordict written to; called with tensors
    (positionally in in_keys order, or as keywords named after the keys, nested parts
    joined by ``_``) it returns the output tensors.

    >>> import torch
    >>> from torch import nn
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import TensorDictModule
    >>> module = TensorDictModule(nn.Linear(3, 2), in_keys=["obs"], out_keys=[("net", "out")])
    >>> td = module(TensorDict(obs=torch.randn(4, 3), batch_size=[4]))
    >>> td["net", "out"].shape
    torch.Size([4, 2])
    >>> module(obs=torch.randn(4, 3)).shape
    torch.Size([4, 2])
    """

    def __init__(
        self,
        module: Callable[..., Any],
        in_keys: NestedKey | list[NestedKey] | dict[Any, Any],
        out_keys: NestedKey | list[NestedKey],
        *,
        out_to_in_map: bool | None = None,
        inplace: bool | str | TensorDictBase = True,
        method: str | None = None,
        method_kwargs: dict[str, Any] | None = None,
        strict: bool = False,
        get_kwargs: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if isinstance(module, type) or not callable(module):
            raise ValueError(
                f"Module {module!r} is not callable: TensorDictModule wraps a callable "
                "(an nn.Module instance or a function)."
            )
        if isinstance(in_keys, Mapping):
            if out_to_in_map is False:
                names, keys = list(in_keys.values()), list(in_keys.keys())
            else:
                names, keys = list(in_keys.keys()), list(in_keys.values())
            if not all(isinstance(name, str) for name in names):
                raise ValueError(
                    f"in_keys given as a dict map keys to keyword-argument names; got "
                    f"{dict(in_keys)!r} with out_to_in_map={out_to_in_map}, whose names "
                    f"{names!r} are not all strings."
                )
            self.__dict__["_kwarg_names"] = names
            in_keys = keys
        else:
            if out_to_in_map is not None:
                warnings.warn(
                    "out_to_in_map is not None but is only used when in_key is a dictionary.",
                    UserWarning,
                    stacklevel=2,
                )
            self.__dict__["_kwarg_names"] = None
        self.in_keys = in_keys
        if IGNORE in self.in_keys:
            warnings.warn(
                f'key "{IGNORE}" is for ignoring output, it should not be used in input keys',
                UserWarning,
                stacklevel=2,
            )
        self.out_keys = out_keys
        repeated = repeated_keys(self.__dict__["_out_keys"])
        if repeated:
            raise ValueError(
                f"TensorDictModule: out_keys={self.__dict__['_out_keys']} names "
                f"{', '.join(map(repr, repeated))} more than once; each output needs its own "
                f'key (use "{IGNORE}" for every output to drop).'
            )
        if isinstance(inplace, str) and inplace != "empty":
            raise ValueError(
                f"inplace must be True, False, 'empty' or a tensordict; got {inplace!r}."
            )
        self.inplace = inplace
        self.method = method
        self.method_kwargs = dict(method_kwargs) if method_kwargs else {}
        self.strict = strict
        self.get_kwargs = dict(get_kwargs) if get_kwargs else {}
        self.module = module

    # ------------------------------------------------------------------ keys
    def _selection_changed(self) -> None:
        # Which outputs are written: (position in the call's outputs, key).
        source = self.__dict__.get("_out_keys", [])
        selected = self.__dict__.get("_selected_out_keys")
        self.__dict__["_write_plan"] = [
            (i, key)
            for i, key in enumerate(source)
            if key != IGNORE and (selected is None or key in selected)
        ]

    # ------------------------------------------------------------------ call
    def _callable(self) -> Callable[..., Any]:
        module = self._modules.get("module")
        if module is None:
            module = self.__dict__["module"]
        method = self.__dict__["method"]
        return module if method is None else getattr(module, method)

    def _read_inputs(self, tensordict: Any) -> list[Any]:
        get_kwargs = self.__dict__["get_kwargs"]
        keys = self._keys_attr("_in_keys")
        if self.__dict__["strict"]:
            try:
                # a missing key must raise, whatever get()'s default-to-None mode
                kwargs = {"default": NO_DEFAULT, **get_kwargs}
                values = [tensordict.get(key, **kwargs) for key in keys]
            except KeyError as err:
                raise KeyError(
                    f"{_MISSING_INPUTS}: {err.args[0] if err.args else err} "
                    f"(module: {self._module_name()}, strict=True)."
                ) from None
        elif get_kwargs:
            values = [tensordict.get(key, default=None, **get_kwargs) for key in keys]
        else:
            if type(tensordict) is TensorDict:
                store = tensordict._tensordict
                values = [store.get(key) if type(key) is str else _MISS for key in keys]
                if all(type(v) is _Tensor for v in values):  # the hot path: plain tensors
                    return values
            get = tensordict.get
            values = [get(key, None) for key in keys]
        return [_non_tensor_value(v) if isinstance(v, NON_TENSOR) else v for v in values]

    def _module_name(self) -> str:
        module = self._modules.get("module", self.__dict__.get("module"))
        return type(module).__name__ if isinstance(module, nn.Module) else repr(module)

    def _outputs(self, out: Any) -> tuple[Any, ...]:
        out_keys = self._keys_attr("_out_keys")
        if isinstance(out, _Tensor):
            results: tuple[Any, ...] = (out,)
        elif type(out) is tuple:
            results = out
        elif out is None:
            if not out_keys:
                return ()
            # (the reference: there are more out_keys than tensors)
            raise RuntimeError(
                f"There are more out_keys than tensors: {self._module_name()} returned None, "
                f"but out_keys={out_keys} expects {len(out_keys)} output(s). Return a tensor "
                "per out_key (a tuple of them for several), or give no out_keys."
            )
        elif isinstance(out, Mapping) or (_is_collection(out)):
            return tuple(None if key == IGNORE else _lookup(out, key) for key in out_keys)
        else:
            results = (out,)
        if len(results) != len(out_keys):
            if len(results) > len(out_keys):
                raise RuntimeError(
                    f"There are more tensors (len(tensors)={len(results)}) than out_keys "
                    f"(out_keys={out_keys}): {self._module_name()} returned {len(results)} "
                    f"outputs for {len(out_keys)} out_keys."
                )
            raise RuntimeError(
                f"There are more out_keys than tensors: {self._module_name()} returned "
                f"{len(results)} outputs for out_keys={out_keys}."
            )
        return results

    @tensordict_entry(auto_batch_size=False)
    def forward(
        self,
        tensordict: TensorDictBase,
        *args: Any,
        tensordict_out: TensorDictBase | None = None,
        **kwargs: Any,
    ) -> TensorDictBase:
        """Read the inputs, call the module, write the outputs; return the tensordict."""
        tensors = self._read_inputs(tensordict)
        names = self.__dict__["_kwarg_names"]
        fn = self._callable()
        method_kwargs = self.__dict__["method_kwargs"]
        if method_kwargs:
            kwargs = {**method_kwargs, **kwargs}
        try:
            if names is None:
                out = fn(*tensors, *args, **kwargs)
            else:
                out = fn(*args, **dict(zip(names, tensors)), **kwargs)
        except Exception as err:
            signature_error = isinstance(err, TypeError) and "keyword argument" in str(err)
            if not signature_error and any(t is None for t in tensors):
                missing = {key for key, t in zip(self._keys_attr("_in_keys"), tensors) if t is None}
                raise KeyError(
                    f"{_MISSING_INPUTS}: the following inputs are None: {missing} "
                    f"(module: {self._module_name()}; the call raised "
                    f"{type(err).__name__}: {err})."
                ) from err
            raise
        results = self._outputs(out)
        if tensordict_out is None:
            inplace = self.__dict__["inplace"]
            if inplace is True:
                tensordict_out = tensordict
            elif inplace is False:
                tensordict_out = TensorDict()
            elif isinstance(inplace, str):  # "empty"
                tensordict_out = tensordict.empty()
            else:
                tensordict_out = inplace
        written: TensorDictBase = self._write(tensordict_out, results)
        return written

    def _write(self, tensordict_out: Any, results: tuple[Any, ...]) -> Any:
        if type(tensordict_out) is TensorDict:
            for i, key in self.__dict__["_write_plan"]:
                value = results[i]
                if type(key) is str:
                    tensordict_out._set_str(key, value, inplace=False, validated=False)
                else:
                    tensordict_out.set(key, value)
        else:
            for i, key in self.__dict__["_write_plan"]:
                tensordict_out.set(key, results[i])
        return tensordict_out

    def _direct(self, td: TensorDict) -> Any:
        """``forward(td)`` for the common case, in one function: plain tensors at the
        in_keys, a positional call, outputs written in place. Returns a sentinel
        (having done nothing) when the case does not apply."""
        d = self.__dict__
        if (
            d["inplace"] is not True
            or d["_kwarg_names"] is not None
            or d["method"] is not None
            or d["method_kwargs"]
            or d["get_kwargs"]
        ):
            return _MISS
        store = td._tensordict
        tensors = []
        for key in d["_in_keys"]:
            value = store.get(key) if type(key) is str else None
            if type(value) is not _Tensor:
                return _MISS
            tensors.append(value)
        module = self._modules.get("module")
        out = (d["module"] if module is None else module)(*tensors)
        if type(out) is _Tensor and len(d["_out_keys"]) == 1:
            plan = d["_write_plan"]
            if len(plan) == 1:  # one tensor to one key: written as td._set_str would
                key = plan[0][1]
                bs = td._batch_size
                if (
                    type(key) is str
                    and td._device is None
                    and not td._is_locked
                    and out.shape[: len(bs)] == bs
                ):
                    store[key] = out
                    return td
            for _, key in plan:
                if type(key) is str:
                    td._set_str(key, out, inplace=False, validated=False)
                else:
                    td.set(key, out)
            return td
        return self._write(td, self._outputs(out))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # The hot path: a dense tensordict, no hook, forward not overridden, skip-existing
        # off: straight to the body of forward (no entry wrapper, no nn.Module.__call__).
        if (
            args
            and type(args[0]) is TensorDict
            and type(self).forward is _TDM_FORWARD
            and not _SKIP_EXISTING.get()
            and not _hooks_or_tracing(self)
        ):
            if len(args) == 1 and not kwargs:
                out = self._direct(args[0])
                if out is not _MISS:
                    return out
            return _TDM_FORWARD_BODY(self, *args, **kwargs)
        return super().__call__(*args, **kwargs)

    def __getstate__(self) -> dict[str, Any]:
        # A callable that is not a module (a lambda, a local function) is pickled by
        # value with cloudpickle, so that such modules pickle (multiprocessing, copies).
        state: dict[str, Any] = super().__getstate__()  # type: ignore[no-untyped-call]
        module = state.get("module")
        if module is not None:
            state["module"] = _PickledCallable(_cloudpickle().dumps(module))
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        module = state.get("module")
        if type(module) is _PickledCallable:  # only reached from pickle.loads
            state = {**state, "module": _cloudpickle().loads(module.payload)}
        super().__setstate__(state)  # type: ignore[no-untyped-call]

    def __getattr__(self, name: str) -> Any:
        return forward_attribute(self, name, "module")

    def _repr_fields(self) -> list[str]:
        fields = super()._repr_fields()
        if "module" not in self._modules and "module" in self.__dict__:
            fields.insert(0, f"module={self.__dict__['module']!r}")
        return fields


_TDM_FORWARD = TensorDictModule.forward
_TDM_FORWARD_BODY = TensorDictModule.forward.__wrapped__  # type: ignore[attr-defined]

# Re-exported here, where the reference library defines them.
from tensordict import make_tensordict as make_tensordict  # noqa: E402
from tensordict.nn.dispatch import dispatch as dispatch  # noqa: E402

#: Names the reference library defines here and :mod:`tensordict.nn._wrappers` holds (it
#: builds on this module, so they are looked up when first asked for: no import circle).
_FROM_WRAPPERS = ("TensorDictModuleWrapper", "WrapModule", "as_tensordict_module")


def __getattr__(name: str) -> Any:
    if name in _FROM_WRAPPERS:
        from tensordict.nn import _wrappers

        return getattr(_wrappers, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
