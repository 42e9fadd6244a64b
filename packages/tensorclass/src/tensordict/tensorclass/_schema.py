"""The declared fields of a class as a schema: which keys a write may add, which fields a
removal may take away, which values a tensor field takes.

The checks run before anything is written, so a refused call leaves the instance (or
the tensordict given to it) as it was. A tensorclass refuses keys that are not fields
where the reference does (``from_dict``, ``from_tensordict``, ``update``); a
:class:`~tensordict.TypedTensorDict`, whose annotations are its whole contract, also
refuses them on ``set``/``td[key] = ...`` and refuses removing a required field, or
building an instance without one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tensordict._plugins.api import NON_TENSOR_TYPES
from tensordict.tensorclass._fields import MISSING


def top_name(key: Any) -> Any:
    """The field a (possibly nested) key starts at: ``("a", ("b",))`` -> ``"a"``.

    >>> top_name(("a", ("b",))), top_name("c")
    ('a', 'c')
    """
    while type(key) is tuple and key:
        key = key[0]
    return key


def keys_of(source: Any) -> list[Any]:
    """The top-level keys that writing ``source`` (a mapping, a tensordict or an instance
    of a class with fields) adds; ``[]`` for anything else (the write itself rejects it).

    >>> keys_of({"a": 1, ("b", "c"): 2})
    ['a', 'b']
    """
    if getattr(type(source), "_wraps_tensordict", False):
        source = source._tensordict
    if isinstance(source, Mapping) or hasattr(source, "keys"):
        return [top_name(k) for k in source.keys()]
    return []


def unknown_names(cls: Any, keys: Iterable[Any]) -> list[Any]:
    """The names among ``keys`` (top-level parts) that are not fields of ``cls``, in order,
    each once."""
    specs = cls._field_specs
    out: list[Any] = []
    for key in keys:
        name = top_name(key)
        if name not in specs and name not in out:
            out.append(name)
    return out


def required_names(cls: Any) -> list[str]:
    """The fields of ``cls`` without a default (nor a default factory)."""
    return [
        name
        for name, spec in cls._field_specs.items()
        if spec.default is MISSING and spec.default_factory is MISSING
    ]


def refuse_unknown(cls: Any, keys: Iterable[Any], what: str, error: type[Exception]) -> None:
    """Raise ``error`` naming the keys that are not fields of ``cls`` (``what``: the call)."""
    unknown = unknown_names(cls, keys)
    if unknown:
        verb = "is not a field" if len(unknown) == 1 else "are not fields"
        raise error(
            f"{what}: {', '.join(map(repr, unknown))} {verb} of {cls.__name__}, whose "
            f"fields are {sorted(cls._field_specs)}. Nothing was written."
        )


def refuse_missing(cls: Any, present: Iterable[Any], what: str) -> None:
    """Raise :class:`TypeError` naming the required fields of ``cls`` not in ``present``."""
    have = set(present)
    missing = [name for name in required_names(cls) if name not in have]
    if missing:
        raise TypeError(
            f"{what} missing required field(s): {', '.join(missing)} (a {cls.__name__} "
            "needs every field without a default)."
        )


def refuse_removal(cls: Any, names: Iterable[Any], what: str) -> None:
    """Raise :class:`AttributeError` when ``names`` include a required field of ``cls``."""
    required = set(required_names(cls))
    removed = [name for name in names if top_name(name) in required and type(name) is str]
    if removed:
        verb = "is a required field" if len(removed) == 1 else "are required fields"
        raise AttributeError(
            f"{what}: {', '.join(map(repr, removed))} {verb} of {cls.__name__} (declared "
            "without a default) and cannot be removed. The instance was left unchanged."
        )


def tensor_field_error(cls: Any, name: str, value: Any) -> TypeError:
    """The error for a value that is not a tensor (and does not become one) written to a
    field annotated with tensor types only, in a class that promises tensors there."""
    if type(value) in NON_TENSOR_TYPES:
        value = value.tolist() if hasattr(value, "tolist") else getattr(value, "data", value)
    shown = repr(value)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    kind = "a tensor_only tensorclass" if cls._tensor_only else f"a {cls._kind}"
    hint = cls._field_specs[name].hint
    return TypeError(
        f"{cls.__name__}.{name} is annotated {getattr(hint, '__name__', hint)} in {kind}: it "
        f"takes tensors (or numbers and arrays, which become tensors); got a "
        f"{type(value).__name__} ({shown}). Nothing was written."
    )
