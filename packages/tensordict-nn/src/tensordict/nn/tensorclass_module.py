"""Modules typed on tensorclasses: ``forward(x: InputClass) -> OutputClass``.

:class:`TensorClassModuleBase` is generic in its input and output tensorclass types
(``TensorClassModuleBase[In, Out]``); :meth:`TensorClassModuleBase.as_td_module` turns
it into a tensordict module whose in_keys and out_keys are the leaf fields of those
classes. The tensorclass classes come from the ``tensorclass`` distribution (the
``tensorclass`` extra of ``tensordict-nn``); this module itself only reads them.
"""

from __future__ import annotations

import typing
from typing import Any, Generic, TypeVar

from torch import nn

from tensordict import is_tensor_collection
from tensordict.nn.common import TensorDictModuleBase

__all__ = ["TensorClassModuleBase", "TensorClassModuleWrapper"]

InputTensorClass = TypeVar("InputTensorClass")
OutputTensorClass = TypeVar("OutputTensorClass")


def _is_tensorclass_type(cls: Any) -> bool:
    return isinstance(cls, type) and getattr(cls, "_is_tensorclass", False) is True


def _field_types(cls: type) -> dict[str, Any]:
    """The resolved type of each field (classes defined in a function included: the
    tensorclass machinery records the hints it resolved where the class was defined)."""
    try:
        hints = typing.get_type_hints(cls)
    except Exception:
        hints = {}
    for name, spec in (getattr(cls, "_field_specs", None) or {}).items():
        hint = getattr(spec, "hint", None)
        if isinstance(hint, type):
            hints.setdefault(name, hint)
    return hints


def _leaf_keys(cls: type, prefix: tuple[str, ...] = ()) -> list[Any]:
    """The leaf entries of a tensorclass type: fields, nested tensorclasses expanded."""
    fields = getattr(cls, "__dataclass_fields__", None)
    names = list(fields) if fields else list(_field_types(cls))
    hints = _field_types(cls)
    keys: list[Any] = []
    for name in names:
        if name in {"batch_size", "device", "names"}:
            continue
        hint = hints.get(name)
        if hint is not None and _is_tensorclass_type(hint):
            keys += _leaf_keys(hint, (*prefix, name))
        else:
            path = (*prefix, name)
            keys.append(path[0] if len(path) == 1 else path)
    return keys


class TensorClassModuleBase(Generic[InputTensorClass, OutputTensorClass], nn.Module):
    """A module whose ``forward`` takes an ``InputTensorClass`` and returns an
    ``OutputTensorClass`` (both tensorclasses), declared as
    ``class M(TensorClassModuleBase[In, Out])``.

    :meth:`as_td_module` wraps it for tensordict pipelines.

    >>> import torch
    >>> from tensordict.nn import TensorClassModuleBase
    >>> from tensordict.tensorclass import TensorClass  # doctest: +SKIP
    >>> class In(TensorClass):  # doctest: +SKIP
    ...     x: torch.Tensor
    >>> class Out(TensorClass):  # doctest: +SKIP
    ...     y: torch.Tensor
    >>> class Double(TensorClassModuleBase[In, Out]):  # doctest: +SKIP
    ...     def forward(self, data: In) -> Out:
    ...         return Out(y=data.x * 2, batch_size=data.batch_size)
    >>> Double().as_td_module().out_keys  # doctest: +SKIP
    ['y']
    """

    input_type: Any = None
    output_type: Any = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in getattr(cls, "__orig_bases__", ()):
            origin = typing.get_origin(base)
            if isinstance(origin, type) and issubclass(origin, TensorClassModuleBase):
                args = typing.get_args(base)
                if len(args) == 2:
                    cls.input_type, cls.output_type = args

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)

    def as_td_module(self) -> TensorClassModuleWrapper:
        """This module as a tensordict module (reads and writes the classes' leaf fields)."""
        return TensorClassModuleWrapper(self)


class TensorClassModuleWrapper(TensorDictModuleBase):
    """A :class:`TensorClassModuleBase` seen as a tensordict module.

    The input tensordict is converted to the module's input tensorclass, and the output
    tensorclass's entries are written into the tensordict.
    """

    def __init__(self, module: TensorClassModuleBase[Any, Any]) -> None:
        in_type, out_type = module.input_type, module.output_type
        if not (_is_tensorclass_type(in_type) and _is_tensorclass_type(out_type)):
            raise ValueError(
                "Only TensorClassModuleBase implementations with both input and output type as "
                f"TensorClass can be converted to TensorDictModule; {type(module).__name__} is "
                f"typed {getattr(in_type, '__name__', in_type)} -> "
                f"{getattr(out_type, '__name__', out_type)}."
            )
        super().__init__()
        self.tc_module = module
        self.in_keys = _leaf_keys(in_type)
        self.out_keys = _leaf_keys(out_type)

    def forward(self, tensordict: Any = None, **kwargs: Any) -> Any:
        """Call the module on the tensordict's content, write the output's entries."""
        in_type = self.tc_module.input_type
        if tensordict is None:
            from tensordict import TensorDict

            tensordict = TensorDict(kwargs)
            dispatched = True
        else:
            dispatched = False
        data = in_type.from_tensordict(tensordict.select(*self.in_keys, strict=False))
        out = self.tc_module(data)
        out_td = out.to_tensordict() if is_tensor_collection(out) else out
        selected = self.out_keys
        if dispatched:
            values = [out_td.get(key) for key in selected]
            return values[0] if len(values) == 1 else tuple(values)
        for key in selected:
            tensordict.set(key, out_td.get(key))
        return tensordict
