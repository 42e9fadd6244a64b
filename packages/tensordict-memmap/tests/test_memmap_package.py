"""The tensordict-memmap distribution: install, version lockstep, import edges."""

import importlib.metadata
import inspect
import json
import subprocess
import sys

import pytest

import tensordict
import tensordict.memmap
from tensordict._plugins.siblings import LAZY_TOP_LEVEL

DISTRIBUTION = "tensordict-memmap"
#: Modules that ``import tensordict.memmap`` must never load: undeclared siblings, and
#: h5py, which belongs to the ``h5`` extra and is imported only when HDF5 is used.
NOT_DECLARED = ("h5py", "tensordict.nn", "tensordict.distributed", "tensordict.tensorclass")


def modules_loaded_by(statement: str) -> set[str]:
    """``sys.modules`` of a fresh interpreter after running ``statement``."""
    code = f"{statement}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


def test_subpackage_is_in_the_core_namespace():
    assert tensordict.memmap.__name__ == "tensordict.memmap"
    assert sys.modules["tensordict.memmap"] is tensordict.memmap
    assert "MemoryMappedTensor" in tensordict.memmap.__doc__


def test_version_is_in_lockstep_with_core():
    assert tensordict.memmap.__version__ == tensordict.__version__
    assert importlib.metadata.version(DISTRIBUTION) == tensordict.memmap.__version__


def test_import_loads_nothing_undeclared():
    loaded = modules_loaded_by("import tensordict.memmap")
    assert "tensordict.memmap" in loaded
    leaked = {m for m in loaded for bad in NOT_DECLARED if m == bad or m.startswith(bad + ".")}
    assert not leaked, f"import tensordict.memmap loaded {sorted(leaked)}"


def test_module_call_forwards_to_the_memmap_function(monkeypatch):
    calls = []

    def fake_memmap(*args, **kwargs):
        calls.append((args, kwargs))
        return "result"

    monkeypatch.setattr(tensordict.memmap, "memmap", fake_memmap, raising=False)
    assert tensordict.memmap("td", prefix="/tmp/x") == "result"
    assert calls == [(("td",), {"prefix": "/tmp/x"})]


def test_module_call_without_the_function_names_the_distribution(monkeypatch):
    monkeypatch.delattr(tensordict.memmap, "memmap", raising=False)
    with pytest.raises(NotImplementedError, match=DISTRIBUTION):
        tensordict.memmap()


@pytest.mark.parametrize(
    "name", sorted(n for n, (sub, _) in LAZY_TOP_LEVEL.items() if sub == "memmap" and n != "memmap")
)
def test_top_level_names_resolve_here_or_say_not_implemented(name):
    attr = LAZY_TOP_LEVEL[name][1]
    if hasattr(tensordict.memmap, attr):
        assert getattr(tensordict, name) is getattr(tensordict.memmap, attr)
    else:
        with pytest.raises(NotImplementedError, match=DISTRIBUTION):
            getattr(tensordict, name)


def test_top_level_access_before_import_does_not_shadow_the_subpackage():
    # Whatever ``tensordict.memmap`` resolved to first, ``import tensordict.memmap`` must
    # still give the subpackage, and the top-level name must stay callable.
    code = (
        "import sys, tensordict\n"
        "try:\n"
        "    tensordict.memmap\n"
        "except NotImplementedError:\n"
        "    pass\n"
        "import tensordict.memmap as m\n"
        "assert m is sys.modules['tensordict.memmap'], m\n"
        "assert callable(tensordict.memmap)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_signatures_users_see_are_the_reference_ones():
    # the reference's parameter lists (tensordict 0.15), by hand
    memmap_params = [
        "data", "prefix", "copy_existing", "num_threads", "return_early", "share_non_tensor",
        "existsok", "robust_key", "archive", "compression", "atomic",
    ]  # fmt: skip
    assert list(inspect.signature(tensordict.memmap).parameters)[:11] == memmap_params
    # TensorDict.memmap (core's forwarder) calls this hook with the tensordict first
    assert list(inspect.signature(tensordict.memmap.td_memmap).parameters)[:11] == memmap_params
    init = inspect.signature(tensordict.MemoryMappedTensor.__init__).parameters
    assert list(init) == [
        "self", "source", "handler", "dtype", "shape", "index", "device", "filename",
    ]  # fmt: skip
    assert list(inspect.signature(tensordict.memmap.td_from_h5).parameters)[0] == "filename"
    assert list(inspect.signature(tensordict.from_h5).parameters)[0] == "h5_file"
