"""memmap/save/load of tensorclasses through tensordict-memmap: the class comes back, and
loading imports nothing. Skipped when tensordict-memmap (or its API) is not installed."""

from __future__ import annotations

import importlib.util
import json
import sys
import warnings

import pytest
import torch
from tc_helpers import Nested, assert_same_data, make_batch, make_nested

from tensordict import TensorClass, TensorDict

memmap = pytest.importorskip("tensordict.memmap", reason="tensordict-memmap is not installed")
if not all(hasattr(memmap, name) for name in ("MemoryMappedTensor", "load_memmap", "td_memmap_")):
    pytest.skip(
        "the installed tensordict-memmap does not provide its memmap API yet",
        allow_module_level=True,
    )


def test_memmap_in_place_and_load_back(tmp_path):
    nested = make_nested()
    expected = nested.clone()
    assert nested.memmap_(tmp_path) is nested
    assert isinstance(nested.X, memmap.MemoryMappedTensor) and nested.is_memmap()
    assert isinstance(nested.child.X, memmap.MemoryMappedTensor) and nested.z == "outer"
    for loaded in (Nested.load_memmap(tmp_path), TensorDict.load_memmap(tmp_path)):
        assert type(loaded) is Nested and type(loaded.child) is Nested
        assert_same_data(loaded, expected)


def test_memmap_copy_and_memmap_like(tmp_path):
    batch = make_batch()
    copy = batch.memmap(tmp_path / "copy")
    assert type(copy) is type(batch) and copy is not batch
    assert_same_data(copy, batch)
    like = batch.memmap_like(tmp_path / "like")
    assert type(like) is type(batch) and (like.obs == 0).all() and like.label == "train"


def test_save_and_load(tmp_path):
    batch = make_batch()
    batch.save(tmp_path)
    assert_same_data(TensorDict.load(tmp_path), batch)
    assert type(type(batch).load(tmp_path)) is type(batch)


def test_tensorclass_inside_a_tensordict(tmp_path):
    batch = make_batch()
    td = TensorDict(outer={"b": batch}, x=torch.zeros(4), batch_size=[4])
    td.memmap_(tmp_path)
    loaded = TensorDict.load_memmap(tmp_path)
    assert type(loaded["outer", "b"]) is type(batch)
    assert_same_data(loaded["outer", "b"], batch)


def test_loading_names_no_module_into_sys_modules(tmp_path):
    class Local(TensorClass):
        a: torch.Tensor

    Local(a=torch.arange(3), batch_size=[3]).memmap_(tmp_path)
    meta_path = tmp_path / "meta.json"
    meta = json.loads(meta_path.read_text())
    assert "Local" in meta["_type"]
    module = "tensorclass_never_imported_module_xyz"
    meta["_type"] = f"<class '{module}.Local'>"
    meta_path.write_text(json.dumps(meta))
    assert importlib.util.find_spec(module) is None
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        loaded = TensorDict.load_memmap(tmp_path)
    assert module not in sys.modules
    assert type(loaded) is TensorDict and loaded["a"].tolist() == [0, 1, 2]
    # the caller's class is used when the caller asks through it
    assert type(Local.load_memmap(tmp_path)) is Local
