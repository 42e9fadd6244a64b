"""The generated ``__init__`` of a tensorclass (:func:`make_init`).

Most classes get a one-pass body: each field is checked inline, unrolled in field order
(as ``TensorDict``'s constructor checks its entries), and the tensordict is built around
the checked entries; non-tensor values are validated in place afterwards. Anything else
(a subclass calling the parent's ``__init__``, casts, annotations still to resolve, a
tensordict, dict or list value) goes through :meth:`_Wrapper._init_fields`. What the body
reads on each call lives in the class's :class:`~._wrapper.InitState`.
"""

from __future__ import annotations

import dataclasses
import keyword
from collections.abc import Callable, Sequence
from typing import Any

from tensordict import TensorDict, TensorDictBase
from tensordict._plugins.api import parse_batch_size, parse_device
from tensordict.tensorclass import _fields, _schema
from tensordict.tensorclass._fields import MISSING, FieldSpec
from tensordict.tensorclass._wrapper import (
    _FACTORY,
    _TD,
    InitState,
    _is_compiling,
    _set_data,
    _set_dict,
    _shape_error,
    _Size,
    _Tensor,
)

#: Values that the one-pass constructor leaves to the full ``TensorDict`` constructor:
#: their validation depends on the entries already stored (names taken from a nested
#: tensordict, lists that may become stacks).
_NOT_SIMPLE = (TensorDictBase, dict, list)


def _finish_pending(self: Any, td: TensorDict, pending: list[str], state: InitState) -> None:
    """The non-tensor values of the generated ``__init__``, stored as given in ``td``:
    validated in place as ``TensorDict`` stores them, in field order, then the class's
    checks (a tensor-typed field refuses them, a plain field given one is read through a
    value descriptor from now on)."""
    store = td._tensordict
    typed = state.tensor_typed
    plain = state.plain
    refused = None
    upgraded = False
    for name in pending:
        value = store[name]
        stored = store[name] = td._validate_value(name, value)
        if typed and name in typed and refused is None and isinstance(stored, _fields._NON_TENSOR):
            refused = (name, value)  # (raised once every value is validated)
        if plain and name in plain and not isinstance(stored, (_Tensor, TensorDictBase)):
            upgraded = True
    if refused is not None:
        raise _schema.tensor_field_error(type(self), *refused)
    if upgraded:
        self._check_plain(store)


#: Names of the generated ``__init__`` (globals and locals): a class with a field of one
#: of these names gets the plain constructor, which calls ``_init_fields``.
_INIT_NAMES = frozenset(
    {
        "self",
        "batch_size",
        "device",
        "names",
        "_cls",
        "_st",
        "_Tensor",
        "_Size",
        "_TD",
        "_FACTORY",
        "_NOT_SIMPLE",
        "_parse_batch_size",
        "_parse_device",
        "_shape_error",
        "_finish_pending",
        "_is_compiling",
        "_set_data",
        "_set_dict",
        "_bs",
        "_dev",
        "_nb",
        "_b0",
        "_sh",
        "_source",
        "_pending",
        "_td",
    }
)


def make_init(
    cls: Any, specs: dict[str, FieldSpec], initvars: Sequence[dataclasses.Field[Any]]
) -> Callable[..., Any]:
    """The generated ``__init__``: the fields (in order, keyword-only ones after ``*``),
    then ``batch_size``, ``device`` and ``names``.

    When the class takes its values without casting (``_bulk_init``), the body checks
    each field inline (one pass, unrolled, as ``TensorDict``'s constructor does) and
    builds the tensordict around the checked entries; non-tensor values are validated in
    place afterwards (:func:`_finish_pending`). Anything else (a subclass calling it, a
    class with casts, annotations still to resolve, a tensordict, dict or list value)
    goes through :meth:`_Wrapper._init_fields`."""
    positional: list[str] = []
    kw_only: list[str] = []
    namespace: dict[str, Any] = {"_FACTORY": _FACTORY}
    seen_default = False
    all_fields = [f for f in dataclasses.fields(cls)] + list(initvars)
    factories: dict[str, Any] = {}
    for f in all_fields:
        if not f.init:
            continue
        if not f.name.isidentifier() or keyword.iskeyword(f.name):
            raise TypeError(f"{cls.__name__}: field name {f.name!r} is not an identifier.")
        if f.default is not MISSING:
            namespace[f"_d_{f.name}"] = f.default
            param = f"{f.name}=_d_{f.name}"
        elif f.default_factory is not MISSING:
            param = f"{f.name}=_FACTORY"
            factories[f.name] = f.default_factory
        else:
            param = f.name
        if f.kw_only:
            kw_only.append(param)
            continue
        if "=" in param:
            seen_default = True
        elif seen_default:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
        positional.append(param)
    field_names = [f.name for f in dataclasses.fields(cls) if f.init]
    initvar_names = [f.name for f in initvars if f.init]
    # a field named like a keyword (shadow=True) takes its place in the signature
    meta = [m for m in ("batch_size", "device", "names") if m not in field_names]
    keyword_only = [*kw_only, *(f"{m}=None" for m in meta)]
    params = ", ".join(["self", *positional, *(["*", *keyword_only] if keyword_only else [])])
    values = "(" + "".join(f"{n}, " for n in field_names) + ")"
    extra = "(" + "".join(f"{n}, " for n in initvar_names) + ")"
    args = ", ".join(m if m in meta else "None" for m in ("batch_size", "device", "names"))
    generic = f"self._init_fields({values}, {args}, {extra})"
    lines = [f"def __init__({params}):"]
    used = {*field_names, *initvar_names, *(f"_d_{n}" for n in field_names)}
    if len(meta) == 3 and not (used & _INIT_NAMES) and not any(n.startswith("_f_") for n in used):
        state = InitState()
        cls._init_state = state
        namespace.update(
            _cls=cls,
            _st=state,
            _Tensor=_Tensor,
            _Size=_Size,
            _TD=_TD,
            _NOT_SIMPLE=_NOT_SIMPLE,
            _parse_batch_size=parse_batch_size,
            _parse_device=parse_device,
            _shape_error=_shape_error,
            _finish_pending=_finish_pending,
        )
        lines += [
            "    if type(self) is not _cls or not _st.fast:",
            f"        {generic}",
            "        return",
            "    _bs = batch_size if type(batch_size) is _Size else _parse_batch_size(batch_size)",
            "    _dev = None if device is None else _parse_device(device)",
            "    _nb = len(_bs)",
            "    _b0 = _bs[0] if _nb == 1 else None",
            "    _source = {}",
            "    _pending = None",
        ]
        for n in field_names:
            if n in factories:
                namespace[f"_f_{n}"] = factories[n]
                lines.append(f"    if {n} is _FACTORY: {n} = _f_{n}()")
            lines += [
                f"    if type({n}) is _Tensor:",
                f"        if _dev is not None and {n}.device != _dev: {n} = {n}.to(_dev)",
                # shape[:nb] != bs, without a torch.Size slice for one batch dim
                f"        _sh = {n}.shape",
                "        if ((not _sh or _sh[0] != _b0) if _nb == 1 else (_nb and _sh[:_nb] != _bs)):",
                f"            raise _shape_error(_cls, {n!r}, {n}, _bs)",
                f"        _source[{n!r}] = {n}",
                f"    elif {n} is not None:",
                f"        if isinstance({n}, _NOT_SIMPLE):",
                f"            {generic}",
                "            return",
                f"        _source[{n!r}] = {n}",
                f"        if _pending is None: _pending = [{n!r}]",
                f"        else: _pending.append({n!r})",
            ]
        lines += [
            "    _td = _TD._new_unsafe(_source, _bs, _dev)",
            "    if _pending is not None: _finish_pending(self, _td, _pending, _st)",
            "    if names is not None: _td.names = names",
            "    if _is_compiling(): self._link(_td)",
            "    else:",
            "        _set_data(self, _td)",
            "        _set_dict(self, _source)",
            "    if _st.frozen: _td.lock_()",
            "    if _st.post_init: self.__post_init__("
            + "".join(f"{n}, " for n in initvar_names)
            + ")",
        ]
        # (the slot setters are bound at the end of the module)
        namespace.update(_is_compiling=_is_compiling, _set_data=_set_data, _set_dict=_set_dict)
    else:
        lines.append(f"    {generic}")
    src = "\n".join(lines) + "\n"
    exec(src, namespace)  # noqa: S102 - generated from the class's own field names
    init: Callable[..., Any] = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    cls._init_names = tuple(field_names)
    return init
