"""The tensordict-nn distribution: install, version lockstep, import edges."""

import importlib.metadata
import json
import subprocess
import sys

import pytest

import tensordict
import tensordict.nn
from tensordict._plugins.siblings import LAZY_TOP_LEVEL

DISTRIBUTION = "tensordict-nn"
#: Modules that ``import tensordict.nn`` must never load: undeclared siblings (tensorclass
#: belongs to the ``tensorclass`` extra and is imported only when used) and HDF5.
NOT_DECLARED = ("h5py", "tensordict.memmap", "tensordict.distributed", "tensordict.tensorclass")


def modules_loaded_by(statement: str) -> set[str]:
    """``sys.modules`` of a fresh interpreter after running ``statement``."""
    code = f"{statement}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


def test_subpackage_is_in_the_core_namespace():
    assert tensordict.nn.__name__ == "tensordict.nn"
    assert sys.modules["tensordict.nn"] is tensordict.nn
    assert "TensorDictModule" in tensordict.nn.__doc__


def test_version_is_in_lockstep_with_core():
    assert tensordict.nn.__version__ == tensordict.__version__
    assert importlib.metadata.version(DISTRIBUTION) == tensordict.nn.__version__


def test_import_loads_nothing_undeclared():
    loaded = modules_loaded_by("import tensordict.nn")
    assert "tensordict.nn" in loaded
    leaked = {m for m in loaded for bad in NOT_DECLARED if m == bad or m.startswith(bad + ".")}
    assert not leaked, f"import tensordict.nn loaded {sorted(leaked)}"


@pytest.mark.parametrize("name", sorted(n for n, (sub, _) in LAZY_TOP_LEVEL.items() if sub == "nn"))
def test_top_level_names_resolve_here_or_say_not_implemented(name):
    attr = LAZY_TOP_LEVEL[name][1]
    if hasattr(tensordict.nn, attr):
        assert getattr(tensordict, name) is getattr(tensordict.nn, attr)
    else:
        with pytest.raises(NotImplementedError, match=DISTRIBUTION):
            getattr(tensordict, name)
