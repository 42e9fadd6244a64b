"""``TensorDictSequential``: run tensordict modules one after the other on one tensordict."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from torch import nn

from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase
from tensordict._plugins.api import NestedKey
from tensordict.nn._keys import as_key_list, select_keys
from tensordict.nn._wrappers import WrapModule
from tensordict.nn.common import (
    _MISS,
    TensorDictModule,
    TensorDictModuleBase,
    _DeprecatedModuleState,
    _global_hooks_or_tracing,
    _hooks_or_tracing,
    _own_hooks,
)
from tensordict.nn.dispatch import tensordict_entry
from tensordict.nn.utils import _SKIP_EXISTING

__all__ = ["TensorDictSequential"]


def _as_td_module(module: Any) -> nn.Module:
    if isinstance(module, TensorDictModuleBase) or (
        isinstance(module, nn.Module) and TensorDictModuleBase.is_tdmodule_compatible(module)
    ):
        return module
    if callable(module):
        return WrapModule(module)
    raise ValueError(
        f"TensorDictSequential takes tensordict modules or callables tensordict -> "
        f"tensordict; got {module!r} (type {type(module).__name__})."
    )


def _has_keys(td: TensorDictBase, keys: Iterable[Any]) -> bool:
    present = td.keys(True)
    return all(key in present for key in keys)


class TensorDictSequential(_DeprecatedModuleState, TensorDictModuleBase):
    """A sequence of tensordict modules, each reading what the previous ones wrote.

    Args:
        *modules: tensordict modules, or callables ``tensordict -> tensordict`` (wrapped
            in :class:`WrapModule`), or a single ``OrderedDict`` (or dict) of them to
            name them.
        partial_tolerant: skip the modules whose inputs are missing; on a lazy stack, run
            each module on the members that have its inputs.
        selected_out_keys: keep only these outputs (intermediate results that were not
            in the input are removed).
        inplace: ``True`` writes into the input tensordict; ``False`` returns a new
            tensordict with the outputs only; ``None`` (default) follows the modules: the
            input is returned when they all wrote into it.

    The sequence's ``in_keys`` are the inputs that no earlier module produces; its
    ``out_keys`` are every output.

    >>> import torch
    >>> from torch import nn
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import TensorDictModule, TensorDictSequential
    >>> seq = TensorDictSequential(
    ...     TensorDictModule(nn.Linear(3, 4), in_keys=["obs"], out_keys=["hidden"]),
    ...     TensorDictModule(nn.Linear(4, 2), in_keys=["hidden"], out_keys=["action"]),
    ... )
    >>> seq.in_keys, seq.out_keys
    (['obs'], ['hidden', 'action'])
    >>> seq(TensorDict(obs=torch.randn(5, 3), batch_size=[5]))["action"].shape
    torch.Size([5, 2])
    """

    def __init__(
        self,
        *modules: Callable[[TensorDictBase], TensorDictBase] | dict[str, Any],
        partial_tolerant: bool = False,
        selected_out_keys: list[NestedKey] | None = None,
        inplace: bool | str | None = None,
    ) -> None:
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], dict):
            container: nn.Module = nn.ModuleDict(
                OrderedDict((name, _as_td_module(m)) for name, m in modules[0].items())
            )
        else:
            container = nn.ModuleList([_as_td_module(m) for m in modules])
        self.module = container
        self.partial_tolerant = partial_tolerant
        if isinstance(inplace, str) and inplace != "empty":
            raise ValueError(f"inplace must be True, False, 'empty' or None; got {inplace!r}.")
        self.inplace = inplace
        self.__dict__["_selected_out_keys"] = None
        if selected_out_keys is not None:
            self.select_out_keys(*as_key_list(selected_out_keys, "selected_out_keys"))

    # ------------------------------------------------------------------ container
    def _module_list(self) -> list[Any]:
        container: Any = self._modules["module"]
        if isinstance(container, nn.ModuleDict):
            return list(container.values())
        return list(container)

    def _new_like(self, modules: list[Any], names: list[str] | None) -> TensorDictSequential:
        """A sequence of the same kind with ``modules`` (named ``names`` for a dict)."""
        args: Any = (OrderedDict(zip(names, modules)),) if names is not None else modules
        return TensorDictSequential(
            *args, partial_tolerant=self.partial_tolerant, inplace=self.inplace
        )

    def _names(self) -> list[str] | None:
        container: Any = self._modules["module"]
        return list(container.keys()) if isinstance(container, nn.ModuleDict) else None

    def __len__(self) -> int:
        container: Any = self._modules["module"]
        return len(container)

    def __getitem__(self, index: int | slice | str) -> Any:
        container: Any = self._modules["module"]
        if isinstance(index, str):
            return container[index]
        if isinstance(index, slice):
            names = self._names()
            return self._new_like(
                self._module_list()[index], None if names is None else names[index]
            )
        return self._module_list()[index]

    def __setitem__(self, index: int | str, module: Any) -> None:
        container: Any = self._modules["module"]
        module = _as_td_module(module)
        if isinstance(container, nn.ModuleDict):
            name = index if isinstance(index, str) else list(container.keys())[index]
            container[name] = module
        else:
            container[index] = module

    def __delitem__(self, index: int | slice | str) -> None:
        container: Any = self._modules["module"]
        if isinstance(container, nn.ModuleDict) and not isinstance(index, str):
            names = list(container.keys())[index]
            for name in [names] if isinstance(names, str) else names:
                del container[name]
        else:
            del container[index]

    # ------------------------------------------------------------------ keys
    @property
    def in_keys(self) -> list[Any]:
        """The inputs that no earlier module of the sequence produces."""
        explicit: list[Any] | None = self.__dict__.get("_in_keys")
        if explicit is not None:
            return explicit
        return self._compute_in_and_out_keys(self._module_list())[0]

    @in_keys.setter
    def in_keys(self, value: Any) -> None:
        self.__dict__["_in_keys"] = None if value is None else as_key_list(value, "in_keys")

    @property
    def out_keys_source(self) -> list[Any]:
        explicit: list[Any] | None = self.__dict__.get("_out_keys")
        if explicit is not None:
            return explicit
        return self._compute_in_and_out_keys(self._module_list())[1]

    def _compute_in_and_out_keys(self, modules: Sequence[Any]) -> tuple[list[Any], list[Any]]:
        """The in_keys (read before any module of ``modules`` writes them) and out_keys
        (every key written, in the order of its last write, as the reference) of a
        sequence of ``modules``. Reads nothing
        of ``self``: subclasses (TorchRL's) call it before ``__init__``.

        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> mods = [TensorDictModule(torch.nn.Identity(), ["x"], ["y"]),
        ...         TensorDictModule(torch.nn.Identity(), ["y"], ["z"])]
        >>> TensorDictSequential._compute_in_and_out_keys(None, mods)
        (['x'], ['y', 'z'])
        """
        in_keys: list[Any] = []
        written: list[Any] = []
        for module in modules:
            for key in module.in_keys:
                if key not in written and key not in in_keys:
                    in_keys.append(key)
            written.extend(module.out_keys)
        out_keys = [key for i, key in enumerate(written) if key not in written[i + 1 :]]
        return in_keys, out_keys

    @property
    def out_keys(self) -> list[Any]:
        """Every output, or the selected ones after :meth:`select_out_keys`."""
        selected: list[Any] | None = self.__dict__.get("_selected_out_keys")
        return self.out_keys_source if selected is None else selected

    @out_keys.setter
    def out_keys(self, value: Any) -> None:
        self.__dict__["_out_keys"] = None if value is None else as_key_list(value, "out_keys")
        self.__dict__["_selected_out_keys"] = None

    def select_out_keys(self, *selected_out_keys: NestedKey) -> TensorDictSequential:
        """Keep only these outputs; intermediate results not in the input are removed.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule, TensorDictSequential
        >>> seq = TensorDictSequential(
        ...     TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"]),
        ...     TensorDictModule(lambda y: y * 2, in_keys=["y"], out_keys=["z"]),
        ... ).select_out_keys("z")
        >>> sorted(seq(TensorDict(x=torch.zeros(()))).keys())
        ['x', 'z']
        """
        self.__dict__["_selected_out_keys"] = select_keys(selected_out_keys, self.out_keys_source)
        return self

    def reset_out_keys(self) -> TensorDictSequential:
        self.__dict__["_selected_out_keys"] = None
        return self

    def _selection_changed(self) -> None:  # the forward applies the selection itself
        pass

    @property
    def _select_before_return(self) -> bool:
        return self.__dict__.get("_selected_out_keys") is not None

    # ------------------------------------------------------------------ sub-sequences
    def select_subsequence(
        self,
        in_keys: Iterable[NestedKey] | None = None,
        out_keys: Iterable[NestedKey] | None = None,
    ) -> TensorDictSequential:
        """The modules needed to go from ``in_keys`` to ``out_keys``, as a new sequence.

        With ``in_keys``, modules that read none of those keys (or of the keys computed
        from them) are dropped; with ``out_keys``, modules whose outputs do not lead to
        those keys are dropped. Nested sequences are reduced the same way. The modules
        are shared with this sequence. Raises :class:`ValueError` when nothing is left.

        >>> from tensordict.nn import TensorDictModule, TensorDictSequential
        >>> seq = TensorDictSequential(
        ...     TensorDictModule(lambda a: a, in_keys=["a"], out_keys=["b"]),
        ...     TensorDictModule(lambda b: b, in_keys=["b"], out_keys=["c"]),
        ...     TensorDictModule(lambda a: a, in_keys=["a"], out_keys=["d"]),
        ... )
        >>> seq.select_subsequence(out_keys=["c"]).out_keys
        ['b', 'c']
        """
        modules = self._module_list()
        names: list[Any] = self._names() or [None] * len(modules)
        pairs: list[tuple[Any, Any]] = list(zip(names, modules))
        if in_keys is not None:
            tainted = set(as_key_list(list(in_keys), "in_keys"))
            kept = []
            for name, module in pairs:
                if isinstance(module, TensorDictSequential):
                    try:
                        module = module.select_subsequence(in_keys=list(tainted))
                    except ValueError:
                        continue
                elif not any(key in tainted for key in module.in_keys):
                    continue
                tainted.update(module.out_keys)
                kept.append((name, module))
            pairs = kept
        if out_keys is not None:
            needed = set(as_key_list(list(out_keys), "out_keys"))
            kept = []
            for name, module in reversed(pairs):
                wanted = [key for key in module.out_keys if key in needed]
                if not wanted:
                    continue
                if isinstance(module, TensorDictSequential):
                    module = module.select_subsequence(out_keys=wanted)
                needed.update(module.in_keys)
                kept.append((name, module))
            pairs = kept[::-1]
        if not pairs:
            raise ValueError(
                "No modules left after selection. Make sure that in_keys and out_keys are "
                f"coherent (in_keys={in_keys}, out_keys={out_keys}; the sequence reads "
                f"{self.in_keys} and writes {self.out_keys})."
            )
        kept_names = [name for name, _ in pairs] if self._names() is not None else None
        return self._new_like([m for _, m in pairs], kept_names)

    # ------------------------------------------------------------------ call
    def _run_module(self, module: Any, td: Any, **kwargs: Any) -> Any:
        if not self.partial_tolerant:
            return module(td, **kwargs)
        keys = module.in_keys
        if _has_keys(td, keys):
            return module(td, **kwargs)
        if isinstance(td, LazyStackedTensorDict):
            for member in td.tensordicts:
                if _has_keys(member, keys):
                    result = self._run_module(module, member, **kwargs)
                    if result is not member:
                        member.update(result)
        return td

    @tensordict_entry(auto_batch_size=False)
    def forward(
        self,
        tensordict: Any,
        tensordict_out: Any = None,
        **kwargs: Any,
    ) -> Any:
        """Run every module in order; return the tensordict (see ``inplace``)."""
        inplace = self.inplace
        if tensordict_out is not None or inplace is False or isinstance(inplace, str):
            working = tensordict.copy()
        else:
            working = tensordict
        selected = self.__dict__.get("_selected_out_keys")
        if selected is not None:
            present = working.keys(True)
            dropped = [k for k in self.out_keys_source if k not in selected and k not in present]
        tolerant = self.partial_tolerant
        # Plain TensorDictModules on a dense tensordict run their common case directly
        # when nothing (global hook, tracer, skip-existing mode) could see the difference.
        direct = (
            not tolerant
            and not kwargs
            and type(working) is TensorDict
            and not _SKIP_EXISTING.get()
            and not _global_hooks_or_tracing()
        )
        container: Any = self._modules["module"]
        for module in container._modules.values():
            if direct and type(module) is TensorDictModule and not _own_hooks(module):
                result = module._direct(working)
                if result is _MISS:
                    result = module(working)
            elif tolerant:
                result = self._run_module(module, working, **kwargs)
            elif kwargs:
                result = module(working, **kwargs)
            else:
                result = module(working)
            if (
                inplace is True
                and result is not working
                and result.batch_size == working.batch_size
            ):
                working.update(result)  # merge into the input
            else:
                working = result
        if selected is not None and dropped:
            working.exclude(*dropped, inplace=True)
        if tensordict_out is None and inplace is None:
            return working
        if tensordict_out is None and inplace is True:
            return tensordict if working.batch_size == tensordict.batch_size else working
        keys = [k for k in self.out_keys if k in working.keys(True)]
        if tensordict_out is not None:
            return tensordict_out.update(working.select(*keys))
        if isinstance(inplace, str):  # "empty"
            return tensordict.empty().update(working.select(*keys))
        return TensorDict().update(working.select(*keys))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # As for TensorDictModule: a dense tensordict, no hook, forward not overridden,
        # skip-existing off: straight to the body of forward.
        if (
            args
            and type(args[0]) is TensorDict
            and type(self).forward is _SEQ_FORWARD
            and not _SKIP_EXISTING.get()
            and not _hooks_or_tracing(self)
        ):
            return _SEQ_FORWARD_BODY(self, *args, **kwargs)
        return super().__call__(*args, **kwargs)


_SEQ_FORWARD = TensorDictSequential.forward
_SEQ_FORWARD_BODY = TensorDictSequential.forward.__wrapped__  # type: ignore[attr-defined]
