"""Every public module path of the reference library imports, with its public names.

The list is ``tools/reference/public-modules.json`` (read off tensordict 0.15.3). A module
that core ships must import whatever is installed; a name that a sibling distribution
provides must resolve when that sibling is installed, and otherwise raise the
``ModuleNotFoundError`` naming the ``pip install`` that fixes it. The modules of a sibling
(``tensordict.nn.*`` …) are checked when that sibling is installed.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import warnings
from pathlib import Path

import pytest

LIST = Path(__file__).resolve().parents[3] / "tools" / "reference" / "public-modules.json"
MODULES: dict[str, list[str]] = json.loads(LIST.read_text())["modules"]

#: The sibling subpackages, by the distribution that installs them.
SIBLINGS = ("nn", "memmap", "distributed", "tensorclass")

#: Core modules whose contents a sibling owns (core ships a forwarder).
FORWARDED = {
    "tensordict.persistent": "memmap",
    "tensordict.store": "distributed",
    "tensordict.typedtensordict": "tensorclass",
    "tensordict.prototype": "nn",
    "tensordict.prototype.fx": "nn",
    "tensordict.testing": "tensorclass",
}


def _installed(sub: str) -> bool:
    return importlib.util.find_spec(f"tensordict.{sub}") is not None


def _shipped_by(module: str) -> str | None:
    """The sibling that ships ``module``, or None when core does."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in SIBLINGS else None


def _owner_of(module: str, name: str) -> str | None:
    """The sibling providing ``module.name``, or None when core does."""
    shipped = _shipped_by(module)
    if shipped is not None:
        return shipped
    if name in vars(importlib.import_module(module)):  # defined by core itself
        return None
    if module in FORWARDED:
        return FORWARDED[module]
    from tensordict._plugins.siblings import LAZY_TOP_LEVEL

    if name in LAZY_TOP_LEVEL:  # tensordict, tensordict.base, tensordict.tensordict
        return LAZY_TOP_LEVEL[name][0]
    return None


CASES = [(module, name) for module, names in MODULES.items() for name in names]


def test_the_list_covers_the_reference_modules():
    # a hand-computed expectation: the 30 public module paths of the reference 0.15
    assert len(MODULES) == 30
    assert {"tensordict.functional", "tensordict.persistent", "tensordict.store"} <= set(MODULES)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_imports(module):
    shipped = _shipped_by(module)
    if shipped is not None and not _installed(shipped):
        pytest.skip(f"{module} is shipped by tensordict.{shipped}, not installed here")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # tabular, as the reference
        mod = importlib.import_module(module)
    assert mod.__name__ == module


@pytest.mark.parametrize("module, name", CASES, ids=[f"{m}:{n}" for m, n in CASES])
def test_public_name(module, name):
    shipped = _shipped_by(module)
    if shipped is not None and not _installed(shipped):
        pytest.skip(f"{module} is shipped by tensordict.{shipped}, not installed here")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        mod = importlib.import_module(module)
        owner = _owner_of(module, name)  # before getattr, which caches a forwarded name
        if owner is None or _installed(owner):
            assert getattr(mod, name) is not None
        else:
            with pytest.raises(
                ModuleNotFoundError, match=f"pip install tensordict-{owner}|pip install {owner}"
            ):
                getattr(mod, name)


def test_a_forwarded_name_is_the_siblings_object():
    pytest.importorskip("tensordict.memmap")
    from tensordict.memmap import PersistentTensorDict
    from tensordict.persistent import PersistentTensorDict as forwarded

    assert forwarded is PersistentTensorDict


def test_tabular_warns_on_import():
    import sys

    sys.modules.pop("tensordict.tabular", None)
    with pytest.warns(DeprecationWarning, match="tensordict.tabular is deprecated"):
        importlib.import_module("tensordict.tabular")
