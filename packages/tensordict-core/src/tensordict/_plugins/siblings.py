"""Where sibling distributions plug into core, without core importing them eagerly.

Core never imports ``tensordict.memmap``, ``tensordict.nn``, ``tensordict.distributed``
or ``tensordict.tensorclass`` at import time. Two mechanisms reach them on demand:

* :data:`LAZY_TOP_LEVEL` maps top-level ``tensordict.<name>`` attributes that a sibling
  owns to ``(subpackage, attribute)``; core's module ``__getattr__`` resolves them.
* :func:`forward` is what the short forwarder methods on ``TensorDictBase`` call: it
  imports the owning subpackage on first use and calls the named hook there.

When the sibling is not installed, both raise :class:`ModuleNotFoundError` naming the
exact ``pip install`` that fixes it.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

#: subpackage -> distribution name on PyPI.
DISTRIBUTIONS: dict[str, str] = {
    "memmap": "tensordict-memmap",
    "nn": "tensordict-nn",
    "distributed": "tensordict-distributed",
    "tensorclass": "tensorclass",
}

#: top-level name -> (subpackage, attribute in that subpackage).
LAZY_TOP_LEVEL: dict[str, tuple[str, str]] = {
    "MemoryMappedTensor": ("memmap", "MemoryMappedTensor"),
    "PersistentTensorDict": ("memmap", "PersistentTensorDict"),
    "memmap": ("memmap", "memmap"),
    "save": ("memmap", "save"),
    "load": ("memmap", "load"),
    "load_memmap": ("memmap", "load_memmap"),
    "is_memmap": ("memmap", "is_memmap"),
    "from_h5": ("memmap", "from_h5"),
    "pack_memmap": ("memmap", "pack_memmap"),
    "unpack_memmap": ("memmap", "unpack_memmap"),
    "append_memmap": ("memmap", "append_memmap"),
    "is_memmap_archive": ("memmap", "is_memmap_archive"),
    "refresh_archive_checksums": ("memmap", "refresh_archive_checksums"),
    "to_safetensors": ("memmap", "to_safetensors"),
    "from_safetensors": ("memmap", "from_safetensors"),
    "from_parquet": ("memmap", "from_parquet"),
    "from_csv": ("memmap", "from_csv"),
    "from_json": ("memmap", "from_json"),
    "from_zarr": ("memmap", "from_zarr"),
    "from_module": ("nn", "from_module"),
    "from_modules": ("nn", "from_modules"),
    "TensorDictParams": ("nn", "TensorDictParams"),
    "TensorDictStore": ("distributed", "TensorDictStore"),
    "LazyStackedTensorDictStore": ("distributed", "LazyStackedTensorDictStore"),
    "as_tensordict_module": ("nn", "as_tensordict_module"),
    "TensorClassModuleBase": ("nn", "TensorClassModuleBase"),
    "TensorClassModuleWrapper": ("nn", "TensorClassModuleWrapper"),
    "tensorclass": ("tensorclass", "tensorclass"),
    "TensorClass": ("tensorclass", "TensorClass"),
    "from_dataclass": ("tensorclass", "from_dataclass"),
    "TypedTensorDict": ("tensorclass", "TypedTensorDict"),
}


def missing_sibling_error(subpackage: str, what: str) -> ModuleNotFoundError:
    """The error raised when ``what`` needs a sibling distribution that is not installed.

    >>> err = missing_sibling_error("memmap", "TensorDict.memmap")
    >>> "pip install tensordict-memmap" in str(err)
    True
    """
    dist = DISTRIBUTIONS[subpackage]
    err = ModuleNotFoundError(
        f"{what} is provided by the '{dist}' distribution, which is not installed. "
        f"Install it with: pip install {dist}"
    )
    err.name = f"tensordict.{subpackage}"
    return err


def import_sibling(subpackage: str, what: str) -> ModuleType:
    """Import ``tensordict.<subpackage>`` or raise the clear install error.

    >>> import_sibling("no-such", "x")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    KeyError: 'no-such'
    """
    name = f"tensordict.{subpackage}"
    loaded = sys.modules.get(name)  # already imported: no import machinery (traceable)
    if loaded is not None:
        return loaded
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name == name:
            raise missing_sibling_error(subpackage, what) from None
        raise


def import_extra(module: str, install: str, what: str) -> ModuleType:
    """Import the third-party ``module`` that an optional extra brings (``pyarrow`` for
    ``tensordict-core[arrow]`` …), or raise :class:`ModuleNotFoundError` naming the
    ``pip install`` that fixes it.

    >>> import_extra("no_such_module", "tensordict-core[arrow]", "to_arrow")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ModuleNotFoundError: to_arrow needs the 'no_such_module' package, ... pip install tensordict-core[arrow]
    """
    loaded = sys.modules.get(module)
    if loaded is not None:
        return loaded
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        top = module.split(".")[0]
        if err.name not in (module, top):
            raise
        new = ModuleNotFoundError(
            f"{what} needs the '{top}' package, which is not installed. "
            f"Install it with: pip install {install}"
        )
        new.name = top
        raise new from None


def sibling_attr(subpackage: str, attr: str, what: str) -> Any:
    """Return ``tensordict.<subpackage>.<attr>``, importing the sibling on first use.

    A sibling that is installed but does not provide ``attr`` yet raises
    :class:`NotImplementedError` naming the distribution and the attribute.
    """
    module = import_sibling(subpackage, what)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise NotImplementedError(
            f"{what}: the installed '{DISTRIBUTIONS[subpackage]}' does not provide '{attr}' yet"
        ) from None


def forward(subpackage: str, hook: str, what: str, *args: Any, **kwargs: Any) -> Any:
    """Call ``tensordict.<subpackage>.<hook>(*args, **kwargs)`` (the forwarder body)."""
    return sibling_attr(subpackage, hook, what)(*args, **kwargs)


def module_forwarder(
    module: str, subpackage: str, names: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a public module of core whose contents a
    sibling owns (``tensordict.persistent`` holds the memmap sibling's
    ``PersistentTensorDict``): ``names`` maps each public name to the sibling's attribute
    (``"module.attr"`` for an attribute of one of the sibling's modules).
    Importing the module always works; reading a name imports the sibling, or raises the
    :class:`ModuleNotFoundError` naming the ``pip install`` that fixes it.

    >>> getattr_, dir_ = module_forwarder("tensordict.x", "memmap", {"Y": "MemoryMappedTensor"})
    >>> getattr_("Z")
    Traceback (most recent call last):
    AttributeError: module 'tensordict.x' has no attribute 'Z'
    """

    def __getattr__(name: str) -> Any:
        attr = names.get(name)
        if attr is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        owner, _, attr = attr.rpartition(".")  # "_fx.symbolic_trace": a sibling's module
        if owner:
            import_sibling(subpackage, f"{module}.{name}")
            value = getattr(importlib.import_module(f"tensordict.{subpackage}.{owner}"), attr)
        else:
            value = sibling_attr(subpackage, attr, f"{module}.{name}")
        setattr(sys.modules[module], name, value)  # resolved once
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[module])) | set(names))

    return __getattr__, __dir__
