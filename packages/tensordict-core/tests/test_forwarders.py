"""Sibling forwarders: TensorDict methods and top-level names owned by another distribution.

With the sibling missing they raise ``ModuleNotFoundError`` naming the exact
``pip install <dist>``; with it present they pass their arguments through; and core never
imports a sibling (or h5py) at import time.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import types

import pytest
import torch

import tensordict
from tensordict import TensorDict

SUBPACKAGE_DIST = {
    "memmap": "tensordict-memmap",
    "nn": "tensordict-nn",
    "distributed": "tensordict-distributed",
    "tensorclass": "tensorclass",
}

# (callable on a tensordict, owning subpackage): instance and class methods of TensorDict
METHODS = [
    (lambda td: td.memmap("/tmp/never-written"), "memmap"),
    (lambda td: td.memmap_("/tmp/never-written"), "memmap"),
    (lambda td: td.memmap_like("/tmp/never-written"), "memmap"),
    (lambda td: td.memmap_refresh_(), "memmap"),
    (lambda td: td.make_memmap("k", shape=[2]), "memmap"),
    (lambda td: td.make_memmap_from_tensor("k", torch.zeros(2)), "memmap"),
    (lambda td: td.save("/tmp/never-written"), "memmap"),
    (lambda td: td.dumps("/tmp/never-written"), "memmap"),
    (lambda td: td.load_("/tmp/never-written"), "memmap"),
    (lambda td: td.load_memmap_("/tmp/never-written"), "memmap"),
    (lambda td: td.to_h5("/tmp/never-written.h5"), "memmap"),
    (lambda td: TensorDict.load("/tmp/never-written"), "memmap"),
    (lambda td: TensorDict.load_memmap("/tmp/never-written"), "memmap"),
    (lambda td: TensorDict.from_h5("/tmp/never-written.h5"), "memmap"),
    (lambda td: td.to_module(torch.nn.Linear(2, 2)), "nn"),
    (lambda td: TensorDict.from_module(torch.nn.Linear(2, 2)), "nn"),
    (lambda td: TensorDict.from_modules(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)), "nn"),
    (lambda td: td.send(dst=1), "distributed"),
    (lambda td: td.isend(dst=1), "distributed"),
    (lambda td: td.recv(src=1), "distributed"),
    (lambda td: td.irecv(src=1), "distributed"),
    (lambda td: td.init_remote(dst=1), "distributed"),
    (lambda td: TensorDict.from_remote_init(src=1), "distributed"),
    (lambda td: td.broadcast(src=0), "distributed"),
    (lambda td: td.reduce(dst=0), "distributed"),
    (lambda td: td.all_reduce(), "distributed"),
    (lambda td: td.all_gather(), "distributed"),
    (lambda td: td.map(lambda x: x, num_workers=1), "distributed"),
    (lambda td: td.map_iter(lambda x: x, num_workers=1), "distributed"),
]
METHOD_IDS = [
    "memmap",
    "memmap_",
    "memmap_like",
    "memmap_refresh_",
    "make_memmap",
    "make_memmap_from_tensor",
    "save",
    "dumps",
    "load_",
    "load_memmap_",
    "to_h5",
    "load",
    "load_memmap",
    "from_h5",
    "to_module",
    "from_module",
    "from_modules",
    "send",
    "isend",
    "recv",
    "irecv",
    "init_remote",
    "from_remote_init",
    "broadcast",
    "reduce",
    "all_reduce",
    "all_gather",
    "map",
    "map_iter",
]

TOP_LEVEL = {
    "MemoryMappedTensor": "memmap",
    "PersistentTensorDict": "memmap",
    "memmap": "memmap",
    "save": "memmap",
    "load": "memmap",
    "load_memmap": "memmap",
    "from_h5": "memmap",
    "from_module": "nn",
    "from_modules": "nn",
    "TensorDictParams": "nn",
    "as_tensordict_module": "nn",
    "TensorDictStore": "distributed",
    "LazyStackedTensorDictStore": "distributed",
    "tensorclass": "tensorclass",
    "TensorClass": "tensorclass",
    "from_dataclass": "tensorclass",
}

_MISSING = object()


def hide_sibling(monkeypatch, subpackage):
    """Make ``import tensordict.<subpackage>`` fail as if the distribution were absent."""
    monkeypatch.setitem(sys.modules, f"tensordict.{subpackage}", None)


def forget_top_level(monkeypatch, name):
    """Drop any binding of ``tensordict.<name>`` so the lazy module ``__getattr__`` runs."""
    if name in vars(tensordict):
        monkeypatch.delattr(tensordict, name)


@pytest.mark.parametrize("call, subpackage", METHODS, ids=METHOD_IDS)
def test_method_without_sibling_names_pip_install(monkeypatch, call, subpackage):
    hide_sibling(monkeypatch, subpackage)
    td = TensorDict({"a": torch.zeros(2)}, [2])
    with pytest.raises(ModuleNotFoundError) as info:
        call(td)
    assert f"pip install {SUBPACKAGE_DIST[subpackage]}" in str(info.value)
    # the tensordict is untouched
    assert list(td.keys()) == ["a"] and torch.equal(td["a"], torch.zeros(2))


@pytest.mark.parametrize("name", list(TOP_LEVEL))
def test_top_level_name_without_sibling_names_pip_install(monkeypatch, name):
    subpackage = TOP_LEVEL[name]
    hide_sibling(monkeypatch, subpackage)
    forget_top_level(monkeypatch, name)
    with pytest.raises(ModuleNotFoundError) as info:
        getattr(tensordict, name)
    assert f"pip install {SUBPACKAGE_DIST[subpackage]}" in str(info.value)
    assert name not in vars(tensordict)  # a failure is not cached


def test_from_import_without_sibling(monkeypatch):
    hide_sibling(monkeypatch, "memmap")
    forget_top_level(monkeypatch, "MemoryMappedTensor")
    with pytest.raises(ImportError) as info:
        exec("from tensordict import MemoryMappedTensor", {})
    assert "pip install tensordict-memmap" in str(info.value)


def test_unknown_top_level_name_is_attribute_error():
    with pytest.raises(AttributeError, match="no_such_name"):
        tensordict.no_such_name  # noqa: B018


def test_is_memmap_is_false_without_memmap_sibling(monkeypatch):
    hide_sibling(monkeypatch, "memmap")
    assert TensorDict({"a": torch.zeros(2)}, [2]).is_memmap() is False


def test_forwarders_are_documented():
    for name in ("memmap", "load_memmap", "isend", "to_module", "from_module"):
        doc = getattr(TensorDict, name).__doc__
        assert doc and "pip install" in doc, name


# ---------------------------------------------------------------- pass-through to the sibling
def _hook_name(method):
    from tensordict._plugins.forwarders import FORWARDERS

    for row in FORWARDERS:
        if row[0] == method:
            return row[2]
    raise AssertionError(f"no forwarder row for {method}")


def test_instance_forwarder_passes_td_and_arguments(monkeypatch):
    calls = []
    fake = types.ModuleType("tensordict.memmap")
    setattr(fake, _hook_name("memmap"), lambda *a, **k: calls.append((a, k)) or "result")
    monkeypatch.setitem(sys.modules, "tensordict.memmap", fake)
    td = TensorDict({"a": torch.zeros(2)}, [2])
    assert td.memmap("prefix", num_threads=3) == "result"
    assert len(calls) == 1
    args, kwargs = calls[0]
    assert args[0] is td and args[1:] == ("prefix",)
    assert kwargs == {"num_threads": 3}


def test_classmethod_forwarder_passes_arguments(monkeypatch):
    calls = []
    fake = types.ModuleType("tensordict.memmap")
    setattr(fake, _hook_name("load_memmap"), lambda *a, **k: calls.append((a, k)) or "loaded")
    monkeypatch.setitem(sys.modules, "tensordict.memmap", fake)
    assert TensorDict.load_memmap("some/path", device="cpu") == "loaded"
    assert calls == [(("some/path",), {"device": "cpu"})]


def test_top_level_name_resolves_from_sibling(monkeypatch):
    fake = types.ModuleType("tensordict.memmap")
    marker = type("MemoryMappedTensor", (), {})
    fake.MemoryMappedTensor = marker
    monkeypatch.setitem(sys.modules, "tensordict.memmap", fake)
    saved = vars(tensordict).get("MemoryMappedTensor", _MISSING)
    vars(tensordict).pop("MemoryMappedTensor", None)
    try:
        assert tensordict.MemoryMappedTensor is marker
    finally:
        vars(tensordict).pop("MemoryMappedTensor", None)
        if saved is not _MISSING:
            vars(tensordict)["MemoryMappedTensor"] = saved


# ---------------------------------------------------------------- fresh interpreters
def run_python(code):
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


FORBIDDEN = [
    "tensordict.memmap",
    "tensordict.nn",
    "tensordict.distributed",
    "tensordict.tensorclass",
    "h5py",
]


def test_core_never_imports_a_sibling():
    """After ``import tensordict`` (and after using core) no sibling or h5py is loaded."""
    loaded = run_python(
        """
        import json, sys
        import tensordict
        after_import = sorted(sys.modules)
        import torch
        from tensordict import TensorDict
        td = TensorDict({"a": torch.zeros(3, 2), "n": {"b": torch.ones(3)}, "s": "x"}, [3])
        td = torch.stack([td, td.clone()], 0)[:, 1:].reshape(-1).apply(lambda x: x + 1)
        td[0] = td[1]
        repr(td), td.to(torch.float64), td.lock_().unlock_(), (td == td).all()
        print(json.dumps({"import": after_import, "use": sorted(sys.modules)}))
        """
    )
    assert "tensordict" in loaded["import"]
    for phase in ("import", "use"):
        for name in FORBIDDEN:
            assert name not in loaded[phase], (phase, name)


def test_uninstalled_siblings_in_fresh_interpreter():
    """An import hook makes every sibling unimportable, as if only core were installed."""
    result = run_python(
        """
        import importlib.abc, json, sys
        BLOCKED = ("tensordict.memmap", "tensordict.nn", "tensordict.distributed",
                   "tensordict.tensorclass")

        class NotInstalled(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name in BLOCKED or name.startswith(tuple(b + "." for b in BLOCKED)):
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
                return None

        sys.meta_path.insert(0, NotInstalled())
        import torch
        import tensordict
        from tensordict import TensorDict

        td = TensorDict({"a": torch.zeros(2)}, [2])
        calls = {
            "memmap": lambda: td.memmap("/tmp/x"),
            "load_memmap": lambda: TensorDict.load_memmap("/tmp/x"),
            "isend": lambda: td.isend(dst=1),
            "to_module": lambda: td.to_module(torch.nn.Linear(1, 1)),
            "MemoryMappedTensor": lambda: tensordict.MemoryMappedTensor,
            "tensorclass": lambda: tensordict.tensorclass,
            "TensorDictParams": lambda: tensordict.TensorDictParams,
        }
        out = {}
        for name, call in calls.items():
            try:
                call()
                out[name] = "no error"
            except ModuleNotFoundError as err:
                out[name] = "ModuleNotFoundError: " + str(err)
            except Exception as err:
                out[name] = type(err).__name__ + ": " + str(err)
        out["is_memmap"] = td.is_memmap()
        print(json.dumps(out))
        """
    )
    expected = {
        "memmap": "tensordict-memmap",
        "load_memmap": "tensordict-memmap",
        "isend": "tensordict-distributed",
        "to_module": "tensordict-nn",
        "MemoryMappedTensor": "tensordict-memmap",
        "tensorclass": "tensorclass",
        "TensorDictParams": "tensordict-nn",
    }
    for name, dist in expected.items():
        assert result[name].startswith("ModuleNotFoundError: "), (name, result[name])
        assert f"pip install {dist}" in result[name], (name, result[name])
    assert result["is_memmap"] is False
