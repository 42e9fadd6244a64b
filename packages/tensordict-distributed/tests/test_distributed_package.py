"""The tensordict-distributed distribution: install, version lockstep, import edges."""

import importlib.metadata
import json
import subprocess
import sys

import tensordict
import tensordict.distributed

DISTRIBUTION = "tensordict-distributed"
#: Modules that ``import tensordict.distributed`` must never load: undeclared siblings
#: (memmap belongs to the ``memmap`` extra and is imported only when used), HDF5, and redis
#: (extra ``redis``, imported when a store is made).
NOT_DECLARED = ("h5py", "redis", "tensordict.memmap", "tensordict.nn", "tensordict.tensorclass")


def modules_loaded_by(statement: str) -> set[str]:
    """``sys.modules`` of a fresh interpreter after running ``statement``."""
    code = f"{statement}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


def test_subpackage_is_in_the_core_namespace():
    assert tensordict.distributed.__name__ == "tensordict.distributed"
    assert sys.modules["tensordict.distributed"] is tensordict.distributed
    assert "all_reduce" in tensordict.distributed.__doc__


def test_version_is_in_lockstep_with_core():
    assert tensordict.distributed.__version__ == tensordict.__version__
    assert importlib.metadata.version(DISTRIBUTION) == tensordict.distributed.__version__


def test_import_loads_nothing_undeclared():
    loaded = modules_loaded_by("import tensordict.distributed")
    assert "tensordict.distributed" in loaded
    leaked = {m for m in loaded for bad in NOT_DECLARED if m == bad or m.startswith(bad + ".")}
    assert not leaked, f"import tensordict.distributed loaded {sorted(leaked)}"
