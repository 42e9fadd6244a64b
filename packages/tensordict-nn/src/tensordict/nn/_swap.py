"""Writing a tree of tensors into a module tree, with an undo log.

:class:`Swapper` walks nested mappings (``dict`` or tensordict storage) alongside a module
(or a ``TensorDictParams``), puts each value in the slot of the same name, records what
it replaced (for the returned swap) and how to undo each write. One pass validates and
writes: on a bad key, or a value whose shape does not fit its slot (:mod:`._slot_check`),
the writes already made are undone before the error is raised, so the module is left
unchanged (the same tensors in every slot).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from tensordict import TensorDict, TensorDictBase
from tensordict._plugins.api import NON_TENSOR, is_first_class
from tensordict.nn._slot_check import check_copy, check_swap

_Parameter = nn.Parameter
_Tensor = torch.Tensor
_is_wrapped = torch._C._functorch.is_functorch_wrapped_tensor
_MISSING: Any = object()


def entries_of(td: Any) -> Mapping[str, Any]:
    """The entries of a tensordict level as a mapping (no copy for a dense one)."""
    store = getattr(td, "_tensordict", None)
    if isinstance(store, dict):
        return store
    return {key: td._get_str(key, None) for key in td.keys()}


def as_param(value: _Tensor, old: Any, compiling: bool | None = None) -> _Tensor:
    """A plain value that does not require grad becomes an ``nn.Parameter`` (with the
    ``requires_grad`` of ``old``); values that require grad or are transformed by
    ``torch.func`` are kept as they are, so gradients reach them. ``compiling`` is
    ``torch.compiler.is_compiling()``, when the caller knows it."""
    plain = type(value) is _Tensor  # tested first: isinstance(x, Parameter) is slow
    if (not plain and isinstance(value, _Parameter)) or value.requires_grad:
        return value
    if torch.compiler.is_compiling() if compiling is None else compiling:
        return value
    if _is_wrapped(value):
        return value
    requires_grad = old.requires_grad if isinstance(old, _Tensor) else False
    if plain:  # what nn.Parameter(value) does, without its checks
        param: _Tensor = _Tensor._make_subclass(_Parameter, value, requires_grad)
        return param
    try:
        return _Parameter(value, requires_grad=requires_grad)
    except RuntimeError:
        # a subclass whose detach() is a plain tensor (MemoryMappedTensor): the parameter
        # is a plain tensor over the same memory, so the module reads the loaded values
        plain_view: _Tensor = value.as_subclass(_Tensor)
        return _Tensor._make_subclass(_Parameter, plain_view, requires_grad)


def is_plain_module(target: Any) -> bool:
    """An ``nn.Module`` that is not also a tensordict (``TensorDictParams`` is both)."""
    return isinstance(target, nn.Module) and "_tensordict" not in target.__dict__


def _names(target: Any) -> list[str]:
    if is_plain_module(target):
        return sorted({*target._parameters, *target._buffers, *target._modules})
    return sorted(entries_of(target))


class Swapper:
    """Write values into a module tree; keep the replaced values and an undo log."""

    __slots__ = ("preserve", "inplace", "non_blocking", "undo", "seen", "compiling")

    def __init__(
        self,
        *,
        preserve: bool = True,
        inplace: bool = False,
        non_blocking: bool = False,
        memo: dict[Any, Any] | None = None,
    ) -> None:
        self.preserve = preserve
        self.inplace = inplace
        self.non_blocking = non_blocking
        self.undo: list[tuple[Any, ...]] = []
        self.seen: dict[Any, Any] = {} if memo is None else memo
        self.compiling = torch.compiler.is_compiling()

    # ------------------------------------------------------------------ walking
    def write(
        self,
        store: Mapping[str, Any],
        target: Any,
        replaced: dict[str, Any],
        path: tuple[str, ...] = (),
    ) -> None:
        """Write ``store`` into ``target``; fill ``replaced`` with the values replaced.
        On error, everything written so far is undone."""
        try:
            self._write(store, target, replaced, path)
        except BaseException:
            self.rollback()
            raise

    def _write(
        self, store: Mapping[str, Any], target: Any, replaced: dict[str, Any], path: tuple[str, ...]
    ) -> None:
        is_module = is_plain_module(target)
        # The common slot, a parameter of a module replaced by a value that as_param
        # leaves as it is (a parameter, a value gradients must reach, one transformed by
        # torch.func, anything while compiling), is written here.
        params = target._parameters if is_module and self.preserve and not self.inplace else None
        seen = self.seen
        compiling = self.compiling
        owner = id(target)
        for key, value in store.items():
            if isinstance(value, _Tensor) or is_first_class(value):
                slot = (owner, key)
                old = seen.get(slot, _MISSING)
                if old is _MISSING:  # (else a module reached twice: written once)
                    old = _MISSING if params is None else params.get(key, _MISSING)
                    if old is not _MISSING and (
                        value.requires_grad
                        or compiling  # (before _is_wrapped, which Dynamo cannot trace)
                        or _is_wrapped(value)
                        or (type(value) is not _Tensor and isinstance(value, _Parameter))
                    ):
                        params[key] = value  # type: ignore[index]
                        self.undo.append((params, key, old))
                    else:
                        old = self._leaf(target, is_module, key, value, path)
                    check_swap(value, old, path, key, target)  # (undone if bad)
                    seen[slot] = old
                replaced[key] = old
                continue
            if isinstance(value, NON_TENSOR):
                continue
            if isinstance(value, TensorDictBase):
                value = entries_of(value)
            elif not isinstance(value, Mapping):
                raise TypeError(
                    f"to_module: the entry {'.'.join((*path, key))!r} is a "
                    f"{type(value).__name__}, not a tensor or a tensordict."
                )
            child = target._modules.get(key) if is_module else entries_of(target).get(key)
            if child is None or not isinstance(child, (nn.Module, TensorDictBase)):
                raise KeyError(
                    f"to_module: {'.'.join((*path, key))!r} names no submodule of "
                    f"{type(target).__name__}; its entries are {_names(target)}. "
                    "The module was left unchanged."
                )
            sub: dict[str, Any] = {}
            replaced[key] = sub
            self._write(value, child, sub, (*path, key))

    def _missing(self, target: Any, key: str, path: tuple[str, ...]) -> KeyError:
        return KeyError(
            f"to_module: {type(target).__name__} has no parameter or buffer "
            f"{'.'.join((*path, key))!r}; its entries are {_names(target)}. "
            "The module was left unchanged."
        )

    def _leaf(
        self, target: Any, is_module: bool, key: str, value: _Tensor, path: tuple[str, ...]
    ) -> Any:
        """Write one value (copied in with ``inplace``; into a module's slot, or into a
        ``TensorDictParams``'s entries); return what it replaced."""
        if self.inplace:
            return self._copy_in(target, is_module, key, value, path)
        if is_module:
            return self._swap_module(target, key, value, path)
        entries = target._tensordict
        old = entries.get(key)
        if not isinstance(old, _Tensor):
            raise self._missing(target, key, path)
        if self.preserve and isinstance(old, _Parameter):
            value = as_param(value, old, self.compiling)
        entries[key] = value
        self.undo.append((entries, key, old))
        return old

    def _swap_module(
        self, module: nn.Module, key: str, value: _Tensor, path: tuple[str, ...]
    ) -> Any:
        params = module._parameters
        old = params.get(key, _MISSING)
        if old is not _MISSING:
            if self.preserve:
                params[key] = as_param(value, old, self.compiling)  # type: ignore[assignment]
            elif isinstance(value, _Parameter):
                params[key] = value
            else:  # becomes a plain attribute: out of parameters() and state_dict()
                attrs = module.__dict__
                del params[key]
                self.undo.append((params, key, old))
                self.undo.append((attrs, key, attrs.get(key, _MISSING)))
                attrs[key] = value
                return old
            self.undo.append((params, key, old))
            return old
        buffers = module._buffers
        old = buffers.get(key, _MISSING)
        if old is not _MISSING:
            if self.preserve and isinstance(value, _Parameter):
                value = value.detach()
            buffers[key] = value
            self.undo.append((buffers, key, old))
            return old
        attrs = module.__dict__
        old = attrs.get(key, _MISSING)
        if not isinstance(old, _Tensor):  # a plain tensor attribute (preserve=False before)
            raise self._missing(module, key, path)
        if isinstance(value, _Parameter):
            del attrs[key]
            self.undo.append((attrs, key, old))
            self.undo.append((params, key, _MISSING))
            params[key] = value
        else:
            attrs[key] = value
            self.undo.append((attrs, key, old))
        return old

    def _copy_in(
        self, target: Any, is_module: bool, key: str, value: _Tensor, path: tuple[str, ...]
    ) -> Any:
        if is_module:
            current = target._parameters.get(key)
            if current is None:
                current = target._buffers.get(key)
            if current is None:
                current = target.__dict__.get(key)
        else:
            current = entries_of(target).get(key)
        if not isinstance(current, _Tensor):
            raise self._missing(target, key, path)
        check_copy(value, current, path, key, target)
        previous = current.detach().clone()
        with torch.no_grad():
            current.copy_(value, non_blocking=self.non_blocking)
        self.undo.append(("copy", current, previous))
        return previous

    # ------------------------------------------------------------------ undo
    def rollback(self) -> None:
        """Undo every write, last first."""
        undo(self.undo)
        self.undo = []


def undo(log: list[tuple[Any, ...]]) -> None:
    """Apply an undo log written by :class:`Swapper` (last entry first)."""
    for owner, key, previous in reversed(log):
        if owner == "copy":
            with torch.no_grad():
                key.copy_(previous)
        elif previous is _MISSING:
            owner.pop(key, None)
        else:
            owner[key] = previous


def tree_to_td(tree: dict[str, Any], batch_size: torch.Size | None = None) -> TensorDict:
    """Nested dicts of tensors as a TensorDict (no validation: the caller knows shapes)."""
    size = torch.Size([]) if batch_size is None else batch_size
    store = {k: tree_to_td(v, size) if isinstance(v, dict) else v for k, v in tree.items()}
    return TensorDict._new_unsafe(store, size)
