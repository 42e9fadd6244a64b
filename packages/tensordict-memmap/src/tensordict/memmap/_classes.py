"""Class names in ``meta.json`` files, and how a loader finds a class without importing.

A saved folder records the class of each tensordict it holds, in the reference library's
spelling (``"_type": "<class 'tensordict._dense.td.TensorDict'>"``). Loading never imports a
module because of that string: the built-in kinds map to core's classes through a table;
any other class is used only if the caller passed it (``classes=``), if it is registered
(:func:`register_class`), if its module is already imported and holds it, or if the
caller opted in with ``import_classes=True``. Otherwise the loader warns and returns a
plain :class:`~tensordict.TensorDict`.
"""

from __future__ import annotations

import importlib
import re
import sys
import warnings
from collections.abc import Iterable
from typing import Any

from tensordict import LazyStackedTensorDict, MetaData, NonTensorData, NonTensorStack, TensorDict
from tensordict._plugins.api import lookup_class
from tensordict._plugins.api import register_class as _register
from tensordict.base import TensorDictBase

#: What the reference library writes for the kinds core implements (``_type``, ``_class``).
BUILTIN: dict[type, tuple[str, str | None]] = {
    TensorDict: ("<class 'tensordict._dense.td.TensorDict'>", "tensordict:TensorDict"),
    LazyStackedTensorDict: (
        "<class 'tensordict._lazy.stack.LazyStackedTensorDict'>",
        "tensordict:LazyStackedTensorDict",
    ),
    NonTensorData: ("<class 'tensordict.tensorclass.NonTensorData'>", None),
    MetaData: ("<class 'tensordict.tensorclass.MetaData'>", None),
    NonTensorStack: (
        "<class 'tensordict.tensorclass.NonTensorStack'>",
        "tensordict:NonTensorStack",
    ),
}
#: Short names (the ``"type"`` of an entry in the parent's meta.json) of the built-ins.
SHORT = {cls: cls.__name__ for cls in BUILTIN}
_BY_SHORT = {name: cls for cls, name in SHORT.items()}
_TYPE_RE = re.compile(r"^<class '([^']+)'>$")


def register_class(cls: type) -> type:
    """Let loaders rebuild ``cls`` from saved folders without importing anything.

    Returns ``cls``, so it can decorate a class. Classes whose module is imported and
    holds them, and subclasses of ``TensorDictBase``, are found without registration;
    register other classes defined inside functions (tensorclasses register themselves
    through ``tensordict._util.class_registry``).

    >>> from tensordict import TensorDict
    >>> from tensordict.memmap import register_class
    >>> class MyTD(TensorDict):
    ...     pass
    >>> register_class(MyTD) is MyTD
    True
    """
    return _register(cls)


def qualified_name(cls: type) -> str:
    """``module.qualname`` of a class.

    >>> qualified_name(TensorDict)
    'tensordict._dense.td.TensorDict'
    """
    return f"{cls.__module__}.{cls.__qualname__}"


def type_fields(cls: type) -> dict[str, Any]:
    """The ``_type`` (and ``_class``) fields that name ``cls`` in a meta.json."""
    for builtin, (type_str, class_str) in BUILTIN.items():
        if cls is builtin:
            out: dict[str, Any] = {"_type": type_str}
            if class_str is not None:
                out["_format_version"] = 1
                out["_class"] = class_str
            return out
    return {"_type": f"<class '{qualified_name(cls)}'>"}


def short_name(cls: type) -> str:
    """The ``"type"`` written for an entry of this class in its parent's meta.json."""
    return SHORT.get(cls, cls.__name__)


def builtin_from_meta(meta: dict[str, Any]) -> type | None:
    """The core class a meta.json names, if it is a built-in kind (no lookup, no import)."""
    name = meta.get("_class")
    if isinstance(name, str) and name.startswith("tensordict:"):
        found = _BY_SHORT.get(name.split(":", 1)[1])
        if found is not None:
            return found
    type_str = meta.get("_type")
    for cls, (builtin_type, _) in BUILTIN.items():
        if type_str == builtin_type:
            return cls
    if isinstance(type_str, str):
        dotted = dotted_from_type(type_str)
        if dotted is not None and dotted.startswith("tensordict."):
            # other spellings of core's classes (older versions, private module paths)
            found = _BY_SHORT.get(dotted.rsplit(".", 1)[-1])
            if found is not None and dotted.rsplit(".", 1)[-1] in {
                "TensorDict",
                "LazyStackedTensorDict",
            }:
                return found
    return None


def dotted_from_type(type_str: Any) -> str | None:
    """``"a.b.C"`` from ``"<class 'a.b.C'>"``; None for anything else."""
    if not isinstance(type_str, str):
        return None
    match = _TYPE_RE.match(type_str)
    return match.group(1) if match else None


def resolve(dotted: str, classes: Iterable[type] = (), import_classes: bool = False) -> type | None:
    """The class named ``dotted`` (``module.qualname``), found without importing code
    unless ``import_classes`` is true; None if it cannot be found that way."""
    for cls in classes:
        if qualified_name(cls) == dotted or cls.__name__ == dotted.rsplit(".", 1)[-1]:
            return cls
    found = lookup_class(dotted)
    if found is not None:
        return found
    found = _from_modules(dotted, import_classes)
    if found is not None:
        return found
    for cls in _subclasses(TensorDictBase):
        if qualified_name(cls) == dotted:
            return cls
    return None


def _from_modules(dotted: str, import_classes: bool) -> type | None:
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:cut])
        module = sys.modules.get(module_name)
        if module is None and import_classes:
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                module = None
        if module is None:
            continue
        obj: Any = module
        for attr in parts[cut:]:
            obj = getattr(obj, attr, None)
            if obj is None:
                break
        if isinstance(obj, type):
            return obj
    return None


def _subclasses(cls: type) -> list[type]:
    out: list[type] = []
    stack: list[type] = [cls]
    while stack:
        subs: list[type] = stack.pop().__subclasses__()
        out.extend(subs)
        stack.extend(subs)
    return out


def rebuild(cls: type, content: Any) -> Any:
    """An instance of ``cls`` holding the loaded ``content`` (a tensordict).

    Tensorclasses (and other classes with ``from_tensordict``) are rebuilt with it;
    ``TensorDict`` subclasses are called with the content. A class that cannot be rebuilt
    gives the plain content with a warning.
    """
    if isinstance(content, cls):
        return content
    try:
        from_td = getattr(cls, "from_tensordict", None)
        if callable(from_td):
            return from_td(content)
        if isinstance(cls, type) and issubclass(cls, TensorDictBase):
            return cls(content)  # type: ignore[call-arg]
    except Exception as err:  # noqa: BLE001 - reported, the data is still returned
        warnings.warn(
            f"could not rebuild an instance of {qualified_name(cls)} from the loaded data "
            f"({type(err).__name__}: {err}); returning a {type(content).__name__}.",
            UserWarning,
            stacklevel=3,
        )
        return content
    warnings.warn(
        f"{qualified_name(cls)} cannot be rebuilt from a tensordict; returning a "
        f"{type(content).__name__}.",
        UserWarning,
        stacklevel=3,
    )
    return content
