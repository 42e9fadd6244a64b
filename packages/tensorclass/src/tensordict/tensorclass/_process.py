"""Turning a class with annotations into a class with fields (tensorclass or typed
tensordict): dataclass processing, reserved names, field specs, descriptors, ``__init__``."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import torch.utils._pytree as pytree

from tensordict import TensorDict
from tensordict._plugins.api import register_class
from tensordict.tensorclass import _fields
from tensordict.tensorclass._fields import MISSING, FieldSpec, Flags
from tensordict.tensorclass._init import make_init
from tensordict.tensorclass._wrapper import _Wrapper, sync_init_state

#: Field names that would hide a member of every instance (``shadow=True`` allows them).
#: ``data`` and ``grad`` are common field names: they are allowed and hide the
#: tensordict properties of the same name.
RESERVED: frozenset[str] = frozenset(
    n
    for n in {*dir(TensorDict), *dir(_Wrapper)}
    if not (n.startswith("__") and n.endswith("__")) and n not in {"data", "grad"}
) | {"_tensordict", "_non_tensordict"}


def _initvars(cls: Any) -> list[dataclasses.Field[Any]]:
    kind = getattr(dataclasses, "_FIELD_INITVAR")  # noqa: B009 - private to dataclasses
    return [f for f in cls.__dataclass_fields__.values() if getattr(f, "_field_type") is kind]  # noqa: B009


def _is_data_descriptor(cls: Any, name: str) -> bool:
    """Whether a base of ``cls`` (beyond the user's classes) has a data descriptor
    ``name`` (a property such as ``batch_size``), which a field must override with a data
    descriptor of its own."""
    for klass in cls.__mro__:
        if klass in (_Wrapper, *_Wrapper.__mro__) and name in klass.__dict__:
            return hasattr(type(klass.__dict__[name]), "__set__")
    return False


def process(cls: Any, flags: Flags, *, unwrap: bool) -> None:
    """Make ``cls`` (a subclass of the wrapper base) a class with fields, in place."""
    flags.check(cls.__name__)
    previous = cls.__dict__.get("_field_specs")
    if previous is not None:  # processed before: put the defaults back for dataclass
        for name, spec in previous.items():
            if name in cls.__dict__:
                delattr(cls, name)
            if spec.default is not MISSING and name in vars(cls).get("__annotations__", {}):
                setattr(cls, name, spec.default)
    dataclasses.dataclass(cls, init=False, repr=False, eq=False, kw_only=flags.kw_only)
    fields = dataclasses.fields(cls)
    if not flags.shadow:
        for f in fields:
            if f.name in RESERVED:
                raise AttributeError(
                    f"Attribute name {f.name} can't be used with @tensorclass: it is a member "
                    f"of every instance ({cls.__name__}.{f.name}). Rename the field, or pass "
                    "shadow=True to let the field hide that member."
                )
    namespace = _fields.defining_namespace()
    hints = _fields.resolve_hints(cls, namespace)
    if flags.tensor_only:
        _fields.check_tensor_only(cls, {f.name: hints.get(f.name, Any) for f in fields})
    # a name defined later (in the module or the function): resolved again when the
    # first instance is made
    cls._pending_namespace = namespace if _fields.has_unresolved(hints) else None
    _build_specs(cls, flags, hints, unwrap)
    if "__init__" not in vars(cls) or getattr(vars(cls)["__init__"], "_generated", False):
        init = make_init(cls, cls._field_specs, _initvars(cls))
        init._generated = True  # type: ignore[attr-defined]
        cls.__init__ = init
    else:
        cls._init_names = tuple(f.name for f in fields if f.init)
    cls._run_post_init = hasattr(cls, "__post_init__")
    cls._post_init_on_rebuild = cls._run_post_init and not flags.skip_post_init_on_rebuild
    sync_init_state(cls)
    cls.__hash__ = object.__hash__ if flags.frozen else None
    cls.__expected_keys__ = frozenset(cls._field_specs)
    register_class(cls)  # loaders find it by name, without importing anything
    _register_pytree(cls)


def refresh_hints(cls: Any) -> None:
    """Evaluate the annotations that named something not defined yet (see :func:`process`)."""
    hints = _fields.resolve_hints(cls, cls._pending_namespace)
    cls._pending_namespace = None
    _build_specs(cls, cls._flags, hints, cls._unwrap_values)


def _build_specs(cls: Any, flags: Flags, hints: dict[str, Any], unwrap: bool) -> None:
    """The field specs, the class attributes that read fields, the fast-path sets."""
    fields = dataclasses.fields(cls)
    specs: dict[str, FieldSpec] = {}
    for f in fields:
        hint = hints.get(f.name, Any)
        specs[f.name] = FieldSpec(
            name=f.name,
            hint=hint,
            default=f.default,
            default_factory=f.default_factory,
            plain=_fields.is_plain(hint) and not _is_data_descriptor(cls, f.name),
            cast=_fields.caster(flags, hint),
            unwrap=unwrap and not (flags.tensor_only and _fields.keeps_wrapper(hint)),
        )
    _publish_hints(cls, fields, hints)
    cls._field_specs = specs
    cls._flags = flags
    for name in _fields.FLAG_NAMES:
        setattr(cls, f"_{name}", getattr(flags, name))
    _fields.install_descriptors(cls, specs)
    cls._plain_names = tuple(n for n, s in specs.items() if s.plain)
    cls._plain_set = frozenset(cls._plain_names)
    strict = flags.tensor_only or cls._strict_fields
    for spec in specs.values():
        spec.fast = spec.plain and spec.cast is None and not flags.frozen
        spec.tensor_typed = strict and _fields.is_tensor_hint(spec.hint)
    cls._fast_set = frozenset(n for n, s in specs.items() if s.fast)
    cls._tensor_typed_names = tuple(n for n, s in specs.items() if s.tensor_typed)
    cls._bulk_init = (
        all(s.cast is None for s in specs.values()) and cls.__setattr__ is _Wrapper.__setattr__
    )
    sync_init_state(cls)


def _publish_hints(
    cls: Any, fields: tuple[dataclasses.Field[Any], ...], hints: dict[str, Any]
) -> None:
    """Write the evaluated annotations back (``Field.type`` and the ``__annotations__`` of
    the class that declares each field), so that ``typing.get_type_hints`` and
    ``dataclasses.fields`` give types, also for names local to the defining function."""
    for f in fields:
        hint = hints.get(f.name)
        if hint is None or not isinstance(f.type, str) or not _fields.is_resolved(hint):
            continue
        f.type = hint
        for klass in cls.__mro__:
            own = klass.__dict__.get("__annotations__")
            if own is not None and isinstance(own.get(f.name), str):
                own[f.name] = hint
                break


def _register_pytree(cls: Any) -> None:
    """Make the class a pytree node (one child: its tensordict), for ``torch.vmap``,
    ``tree_map`` and compiled code."""
    if cls in pytree.SUPPORTED_NODES:
        return
    pytree.register_pytree_node(cls, _flatten, functools.partial(_unflatten, cls))


def _flatten(obj: Any) -> tuple[list[Any], Any]:
    return [obj._tensordict], None


def _unflatten(cls: Any, children: Any, context: Any) -> Any:
    return cls._rewrap(children[0])


_OPTION_CLASSES: dict[tuple[Any, ...], type] = {}


def options_class(cls: Any, options: Any, allowed: tuple[str, ...]) -> type:
    """``cls[...]``: a subclass of ``cls`` that only carries the options named (it has no
    fields; classes deriving from it inherit the options). Cached, so the same options
    give the same class."""
    names = (options,) if isinstance(options, str) else tuple(options)
    for name in names:
        if name not in allowed:
            raise TypeError(
                f"{cls.__name__}[...] takes option names among {list(allowed)}, got {name!r}."
            )
    key = (cls, tuple(sorted(set(names))))
    made = _OPTION_CLASSES.get(key)
    if made is None:
        made = type(
            f"{cls.__name__}_{'_'.join(key[1])}",
            (cls,),
            {"__slots__": (), "_options_only": True, "__module__": cls.__module__},
            **dict.fromkeys(key[1], True),
        )
        _OPTION_CLASSES[key] = made
    return made
