"""Saving and loading folders: round trips, in-place variants, options, repr."""

from __future__ import annotations

import gc
import json
import os
import sys

import pytest
import torch
from memmap_helpers import assert_same, folder_bytes, run_python, sample_lazy, sample_td

import tensordict
from tensordict import (
    LazyStackedTensorDict,
    MemoryMappedTensor,
    MetaData,
    NonTensorData,
    NonTensorStack,
    TensorDict,
)
from tensordict.utils import TensorDictFuture


def test_memmap_round_trip_of_every_entry_kind(tmp_path):
    td = sample_td()
    td.names = ["batch"]
    out = td.memmap(tmp_path / "d")
    assert out is not td and out.is_locked and out.is_memmap()
    assert type(out["float"]) is MemoryMappedTensor
    assert out["float"].filename == str(tmp_path / "d" / "float.memmap")
    loaded = TensorDict.load_memmap(tmp_path / "d")
    assert_same(loaded, td)
    assert loaded.names == ["batch"]
    assert type(loaded["nested", "deeper", "y"]) is MemoryMappedTensor
    assert loaded.get("labels").tolist() == ["a", "b", "c"]
    assert isinstance(loaded.get("labels"), NonTensorStack)


def test_layout_is_one_meta_json_per_level_and_one_file_per_leaf(tmp_path):
    sample_td().memmap(tmp_path)
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["shape"] == [3] and meta["_class"] == "tensordict:TensorDict"
    assert meta["float"] == {
        "device": "cpu",
        "shape": [3, 4],
        "dtype": "torch.float32",
        "is_nested": False,
    }
    assert meta["nested"] == {"type": "TensorDict"} and meta["text"] == {"type": "NonTensorData"}
    assert (tmp_path / "float.memmap").stat().st_size == 12 * 4
    assert json.loads((tmp_path / "text" / "meta.json").read_text())["data"] == "a string"
    stack = json.loads((tmp_path / "labels" / "meta.json").read_text())
    assert stack["data"] == ["a", "b", "c"] and stack["_class"] == "tensordict:NonTensorStack"
    assert (tmp_path / "nested" / "deeper" / "y.memmap").is_file()


def test_lazy_stack_round_trip(tmp_path):
    lazy = sample_lazy()
    out = lazy.memmap(tmp_path)
    assert isinstance(out, LazyStackedTensorDict) and out.is_memmap()
    loaded = TensorDict.load_memmap(tmp_path)
    assert isinstance(loaded, LazyStackedTensorDict) and loaded.stack_dim == 0
    for a, b in zip(loaded.tensordicts, lazy.tensordicts):
        assert_same(a, b)
    assert (tmp_path / "0" / "meta.json").is_file() and (tmp_path / "1" / "only.memmap").is_file()


@pytest.mark.parametrize("stack_dim", [0, 1, 2])
def test_empty_lazy_stack_round_trip(tmp_path, stack_dim):
    # an empty stack is built from its (absent) members' batch size: saved and loaded, it
    # keeps its own batch size, with the 0 at the stack dimension
    empty = LazyStackedTensorDict(stack_dim=stack_dim, batch_size=[2, 3])
    expected = torch.Size([2, 3][:stack_dim] + [0] + [2, 3][stack_dim:])
    assert empty.batch_size == expected
    out = empty.memmap(tmp_path / "d")
    loaded = TensorDict.load_memmap(tmp_path / "d")
    assert out.batch_size == loaded.batch_size == expected
    assert isinstance(loaded, LazyStackedTensorDict) and loaded.stack_dim == stack_dim


def test_lazy_stack_inside_a_tensordict_and_stack_dim(tmp_path):
    inner = LazyStackedTensorDict(
        TensorDict({"a": torch.zeros(3)}, [3]), TensorDict({"a": torch.ones(3)}, [3]), stack_dim=1
    )
    td = TensorDict({"inner": inner, "x": torch.arange(3)}, [3])
    loaded = TensorDict.load_memmap(td.memmap(tmp_path).saved_path)
    assert isinstance(loaded["inner"], LazyStackedTensorDict) and loaded["inner"].stack_dim == 1
    assert torch.equal(loaded["inner", "a"], inner["a"])


def test_non_tensor_root_and_metadata(tmp_path):
    td = TensorDict(
        {
            "m": MetaData("run-1", batch_size=[2]),
            "n": NonTensorData(None, batch_size=[2]),
            "f": NonTensorData(1.5, batch_size=[2]),
            "l": NonTensorData([1, "a"], batch_size=[2]),
        },
        [2],
    )
    loaded = TensorDict.load_memmap(td.memmap(tmp_path).saved_path)
    assert type(loaded.get("m")).__name__ == "MetaData" or loaded["m"] == "run-1"
    assert (
        loaded["m"] == "run-1"
        and loaded["n"] is None
        and loaded["f"] == 1.5
        and loaded["l"] == [1, "a"]
    )
    stack = NonTensorStack.from_list([["a", "b"], ["c", "d"]])
    tensordict.memmap(stack, tmp_path / "s")
    loaded = tensordict.load_memmap(tmp_path / "s")
    assert loaded.tolist() == [["a", "b"], ["c", "d"]]


def test_non_tensor_leaves_save_on_their_own(tmp_path):
    stack = torch.stack([NonTensorStack.from_list([0, 1])] * 3)
    saved = stack.memmap(tmp_path / "s")
    assert type(saved) is NonTensorStack and saved.tolist() == [[0, 1], [0, 1], [0, 1]]
    loaded = NonTensorStack.load_memmap(tmp_path / "s")
    assert type(loaded) is NonTensorStack and loaded.batch_size == (3, 2)
    assert loaded.tolist() == stack.tolist()
    one = NonTensorData("label", batch_size=[2])
    one.save(tmp_path / "d")
    back = TensorDict.load(tmp_path / "d")
    assert type(back) is NonTensorData and back.data == "label" and back.batch_size == (2,)
    like = stack.memmap_like(tmp_path / "l")
    assert type(like) is NonTensorStack and like.batch_size == stack.batch_size


@pytest.mark.parametrize(
    "leaf",
    [lambda: torch.stack([NonTensorData(0), NonTensorData(1)]), lambda: NonTensorData("x")],
    ids=["stack", "data"],
)
def test_non_tensor_leaves_memmap_in_place(tmp_path, leaf):
    value = leaf()
    assert not value.is_memmap()
    assert value.memmap_(tmp_path / "v") is value
    assert value.is_memmap() and value.saved_path == str(tmp_path / "v")
    assert json.loads((tmp_path / "v" / "meta.json").read_text())["data"] == value.tolist()
    assert TensorDict.load_memmap(tmp_path / "v").tolist() == value.tolist()
    assert not leaf().is_memmap()  # a fresh value knows no folder


def test_memmap_in_place(tmp_path):
    td = sample_td()
    ids = id(td["nested"])
    assert td.memmap_(tmp_path) is td
    assert td.is_locked and td.is_memmap() and id(td["nested"]) == ids
    assert type(td["nested", "x"]) is MemoryMappedTensor
    assert td.saved_path == str(tmp_path) and td["nested"].saved_path == str(tmp_path / "nested")
    again = td.memmap_()  # already memory-mapped: a no-op
    assert again is td and td["float"] is again["float"]


def test_memmap_in_place_of_a_lazy_stack(tmp_path):
    lazy = sample_lazy()
    lazy.memmap_(tmp_path)
    assert all(type(t["a"]) is MemoryMappedTensor for t in lazy.tensordicts)
    assert lazy.is_memmap()


def test_memmap_without_prefix_uses_shared_memory():
    td = sample_td()
    out = td.memmap()
    assert type(out["float"]) is MemoryMappedTensor and out["float"]._filename is None
    assert out["float"].is_shared()
    assert_same(out, td)
    assert out.saved_path is None  # memory-mapped, in no folder (as the reference)
    with pytest.raises(AttributeError, match="saved path"):
        td.saved_path  # not memory-mapped at all


def test_memmap_of_a_memmapped_tensordict_needs_copy_existing(tmp_path):
    source = sample_td()
    td = source.memmap(tmp_path / "a")
    with pytest.raises(RuntimeError, match="copy_existing"):
        td.memmap(tmp_path / "b")
    assert not (tmp_path / "b").exists()  # nothing written
    copy = td.memmap(tmp_path / "b", copy_existing=True)
    assert copy["float"].filename.startswith(str(tmp_path / "b"))
    assert_same(TensorDict.load_memmap(tmp_path / "b"), source)


def test_re_memmap_to_the_same_prefix_keeps_the_files(tmp_path):
    td = TensorDict({"a": torch.arange(4.0)}, [4]).memmap_(tmp_path)
    before = os.stat(tmp_path / "a.memmap").st_ino
    td.memmap_(tmp_path)  # hard-linked into the new folder, not copied
    assert os.stat(tmp_path / "a.memmap").st_ino == before
    td["a"][0] = 9  # the tensordict still maps the live file
    assert TensorDict.load_memmap(tmp_path)["a"][0] == 9


def test_existsok(tmp_path):
    td = sample_td()
    td.memmap(tmp_path / "d")
    with pytest.raises(RuntimeError, match="already exists"):
        td.memmap(tmp_path / "d", existsok=False)
    td.memmap(tmp_path / "empty", existsok=False)  # a new folder is fine
    (tmp_path / "e").mkdir()
    td.memmap(tmp_path / "e", existsok=False)  # and so is an empty one


def test_overwrite_keeps_foreign_files_and_drops_stale_entries(tmp_path):
    TensorDict({"old": torch.zeros(2), "p": NonTensorData(1 + 2j)}, [2]).memmap(
        tmp_path, allow_pickle=True
    )
    (tmp_path / "notes.txt").write_text("mine")
    TensorDict({"new": torch.ones(2)}, [2]).memmap(tmp_path)
    names = set(os.listdir(tmp_path))
    assert names == {"meta.json", "new.memmap", "notes.txt"}
    assert (tmp_path / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("num_threads", [0, 3])
def test_num_threads_and_return_early(tmp_path, num_threads):
    td = TensorDict({f"k{i}": torch.full((50,), float(i)) for i in range(20)}, [50])
    out = td.memmap(tmp_path / "t", num_threads=num_threads)
    assert_same(out, td)
    future = td.memmap(tmp_path / "f", num_threads=num_threads, return_early=True)
    assert isinstance(future, TensorDictFuture)
    result = future.result()
    assert future.done()
    assert_same(result, td)
    failing = TensorDict({"c": NonTensorData(1j)}, []).memmap(
        tmp_path / "x", return_early=True, allow_pickle=False
    )
    with pytest.raises(TypeError, match="allow_pickle"):
        failing.result()


def test_memmap_like(tmp_path):
    td = sample_td()
    like = td.memmap_like(tmp_path)
    assert like.is_memmap() and like["text"] == "a string"
    assert not like["float"].any() and like["float"].shape == (3, 4)
    assert like["float"].untyped_storage().data_ptr() != td["float"].untyped_storage().data_ptr()
    expanded = TensorDict({"img": torch.zeros(3, 8, 8, dtype=torch.uint8)}, []).expand(10_000)
    big = expanded.memmap_like(tmp_path / "big")
    # zero-filled files are sparse: allocating does not write 1.9 MB of zeros
    stat = os.stat(tmp_path / "big" / "img.memmap")
    assert stat.st_size == 10_000 * 3 * 8 * 8
    assert stat.st_blocks * 512 < stat.st_size
    big[42] = TensorDict({"img": torch.full((3, 8, 8), 7, dtype=torch.uint8)}, [])
    again = TensorDict.load_memmap(tmp_path / "big")
    assert (again["img"][42] == 7).all() and not again["img"][41].any()


def test_save_and_dumps_alias(tmp_path):
    td = sample_td()
    assert td.save(tmp_path / "a").is_memmap()
    assert td.dumps(tmp_path / "b").is_memmap()
    assert_same(TensorDict.load(tmp_path / "a"), td)
    assert_same(tensordict.load(tmp_path / "b"), td)
    assert_same(tensordict.save(td, tmp_path / "c"), td)


def test_load_options(tmp_path):
    td = sample_td()
    td.memmap(tmp_path)
    meta = TensorDict.load_memmap(tmp_path, device="meta")
    assert meta["float"].device.type == "meta" and meta["nested", "x"].shape == (3, 5)
    nested = TensorDict.load_memmap(tmp_path, subpath=("nested", "deeper"))
    assert torch.equal(nested["y"], td["nested", "deeper", "y"])
    assert torch.equal(TensorDict.load_memmap(tmp_path, subpath="nested/deeper")["y"], nested["y"])
    with pytest.raises(ValueError, match="No tensordict found under subpath"):
        TensorDict.load_memmap(tmp_path, subpath=("nested", "missing"))
    with pytest.raises(ValueError, match="mode must be"):
        TensorDict.load_memmap(tmp_path, mode="w")
    private = TensorDict.load_memmap(tmp_path, mode="r")
    with pytest.raises(RuntimeError, match="read-only"):  # a write would never reach the file
        private["float"].fill_(-1)
    assert TensorDict.load_memmap(tmp_path)["float"][0, 1] == 1
    shared = TensorDict.load_memmap(tmp_path, mode="r+")
    shared["float"].fill_(-1)
    assert (TensorDict.load_memmap(tmp_path)["float"] == -1).all()
    cpu = TensorDict.load_memmap(tmp_path, device="cpu", non_blocking=True)
    assert cpu.device == torch.device("cpu")


def test_load_into_out_and_in_place_loads(tmp_path):
    td = sample_td()
    td.memmap(tmp_path)
    out = td.clone().zero_()
    nested = out["nested"]
    assert TensorDict.load_memmap(tmp_path, out=out) is out
    assert torch.equal(out["float"], td["float"]) and out["nested"] is nested
    assert out.saved_path == str(tmp_path) and out["nested"].saved_path == str(tmp_path / "nested")
    dest = td.clone().zero_()
    assert dest.load_memmap_(tmp_path) is dest
    assert torch.equal(dest["int"], td["int"]) and type(dest["int"]) is MemoryMappedTensor
    dest2 = td.clone().zero_()
    dest2.load_(tmp_path)
    assert torch.equal(dest2["float"], td["float"])


def test_memmap_refresh_sees_entries_added_by_others(tmp_path):
    td = TensorDict({"a": torch.zeros(2)}, [2]).memmap_(tmp_path)
    other = TensorDict.load_memmap(tmp_path).memmap_()
    other.make_memmap(("b", "c"), shape=[2, 3], dtype=torch.int32).fill_(4)
    assert ("b", "c") not in td.keys(True)
    td.memmap_refresh_()
    assert (td["b", "c"] == 4).all() and td.is_locked


def test_memmap_refresh_after_append_takes_the_new_rows(tmp_path):
    from tensordict.memmap import append_memmap

    td = TensorDict({"a": torch.zeros(2), "n": {"b": torch.zeros(2, 3)}}, [2]).memmap(tmp_path)
    append_memmap(tmp_path, TensorDict({"a": torch.ones(1), "n": {"b": torch.ones(1, 3)}}, [1]))
    td.memmap_refresh_()  # it raised: the folder's batch size had grown
    expected = TensorDict.load_memmap(tmp_path)
    assert td.batch_size == (3,) and td.is_locked
    assert torch.equal(td["a"], torch.tensor([0.0, 0.0, 1.0]))
    assert torch.equal(td["n", "b"], expected["n", "b"]) and td["n"].batch_size == (3,)


def test_make_memmap_family(tmp_path):
    td = TensorDict().memmap_(tmp_path)
    td.make_memmap("a", shape=[3, 4], dtype=torch.float32).fill_(1)
    td.make_memmap(("b", "c"), shape=[5], dtype=torch.int64).fill_(2)
    src = torch.arange(6.0).view(2, 3)
    copy = td.make_memmap_from_tensor("t", src)
    assert copy.untyped_storage().data_ptr() != src.untyped_storage().data_ptr()
    storage = MemoryMappedTensor.from_tensor(torch.ones(4)).untyped_storage()
    td.make_memmap_from_storage("s", storage, shape=[4], dtype=torch.float32)
    assert td.is_locked and td.is_memmap()
    loaded = TensorDict.load_memmap(tmp_path)
    assert (loaded["a"] == 1).all() and (loaded["b", "c"] == 2).all()
    assert torch.equal(loaded["t"], src) and (loaded["s"] == 1).all()
    with pytest.raises(RuntimeError, match="already exists"):
        td.make_memmap(("b", "c"), shape=[5])
    foreign = MemoryMappedTensor.ones([2], filename=tmp_path / "elsewhere.memmap")
    with pytest.raises(RuntimeError, match="filename"):
        td.make_memmap_from_storage("f", foreign.untyped_storage(), shape=[2])
    with pytest.raises(RuntimeError, match="memmap_"):
        TensorDict().make_memmap("x", shape=[1])


def test_memmap_in_place_refuses_views():
    class View(TensorDict):
        pass

    td = TensorDict({"a": torch.zeros(2)}, [2])
    assert td.memmap_() is td  # plain tensordicts are fine
    from tensordict.memmap._api import td_memmap_

    with pytest.raises(RuntimeError, match="in-place"):
        td_memmap_(object())


def test_repr_shows_memory_mapping_and_location(tmp_path):
    td = TensorDict({"a": torch.zeros(2)}, [2]).memmap(tmp_path)
    text = repr(td)
    assert "MemoryMappedTensor(" in text and f"memmap_prefix='{tmp_path}'" in text
    assert "memmap_prefix" not in repr(td.clone())


def test_top_level_functions(tmp_path):
    td = sample_td()
    out = tensordict.memmap(td, tmp_path / "m")
    assert tensordict.is_memmap(out) and not tensordict.is_memmap(td)
    assert tensordict.is_memmap(out["float"]) and not tensordict.is_memmap(1)
    assert_same(tensordict.load_memmap(tmp_path / "m"), td)
    import tensordict.memmap as package

    assert callable(package) and package(td, tmp_path / "n").is_memmap()


def test_reload_lazily_in_a_fresh_process(tmp_path):
    td = TensorDict({"x": torch.arange(1000.0).view(100, 10)}, [100])
    td.memmap(tmp_path)
    code = (
        "import sys, torch\n"
        "from tensordict import TensorDict\n"
        "td = TensorDict.load_memmap(sys.argv[1])\n"
        "print(type(td['x']).__name__, float(td['x'][42].sum()))\n"
    )
    assert run_python(code, str(tmp_path)).split() == [
        "MemoryMappedTensor",
        str(float(sum(range(420, 430)))),
    ]


def test_progress_bar(tmp_path, capsys):
    td = TensorDict({"a": torch.zeros(1000)}, [1000])
    td.memmap(tmp_path / "quiet")
    assert "saving" not in capsys.readouterr().err  # not a terminal, small: no bar
    td.memmap(tmp_path / "loud", progress=True)
    assert "saving" in capsys.readouterr().err
    td.memmap(tmp_path / "off", progress=False)
    assert capsys.readouterr().err == ""


def test_progress_bar_on_loads(tmp_path, capsys):
    TensorDict({"a": torch.zeros(1000)}, [1000]).memmap(tmp_path / "d")
    capsys.readouterr()
    TensorDict.load_memmap(tmp_path / "d")
    assert "loading" not in capsys.readouterr().err  # mapping reads nothing: no bar
    loaded = TensorDict.load_memmap(tmp_path / "d", progress=True)
    assert "loading" in capsys.readouterr().err and (loaded["a"] == 0).all()
    TensorDict.load(tmp_path / "d", device="meta", progress=False)
    assert capsys.readouterr().err == ""


def test_share_non_tensor_is_refused_clearly(tmp_path):
    with pytest.raises(NotImplementedError, match="share_non_tensor"):
        TensorDict({"a": "x"}, []).memmap(tmp_path, share_non_tensor=True)


def test_bad_arguments(tmp_path):
    td = sample_td()
    with pytest.raises(ValueError, match="num_threads"):
        td.memmap(tmp_path, num_threads=-1)
    with pytest.raises(ValueError, match="compression"):
        td.memmap(tmp_path, compression="deflate")
    with pytest.raises(TypeError, match="allow_pickle must be a bool"):
        TensorDict.load_memmap(tmp_path, allow_pickle=1)
    (tmp_path / "file").write_text("x")
    with pytest.raises(RuntimeError, match="not a folder"):
        td.memmap(tmp_path / "file", archive=False)
    with pytest.raises(FileNotFoundError, match="meta.json"):
        TensorDict.load_memmap(tmp_path / "missing")


def test_many_leaves_save_atomically_with_one_filesystem_sync(tmp_path):
    # 300 files: past the count where one syncfs replaces the per-file fsyncs
    td = TensorDict({f"k{i}": torch.full((2,), float(i)) for i in range(300)}, [2])
    TensorDict({"old": torch.zeros(2)}, [2]).memmap(tmp_path / "data")
    saved = td.memmap(tmp_path / "data")
    loaded = TensorDict.load_memmap(tmp_path / "data")
    for i in range(300):
        assert torch.equal(loaded[f"k{i}"], torch.full((2,), float(i)))
        assert torch.equal(saved[f"k{i}"], torch.full((2,), float(i)))
    assert "old" not in loaded.keys()
    assert sorted(os.listdir(tmp_path)) == ["data"]  # no staging folder left behind


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="syncfs is Linux only")
def test_sync_filesystem_flushes_or_names_the_path(tmp_path):
    from tensordict.memmap import _fs

    assert _fs.sync_filesystem(tmp_path) is True
    with pytest.raises(FileNotFoundError):
        _fs.sync_filesystem(tmp_path / "missing")


def test_a_failed_save_leaves_the_garbage_collector_running(tmp_path):
    assert gc.isenabled()
    with pytest.raises(TypeError, match="allow_pickle"):
        TensorDict({"x": NonTensorData(1 + 2j)}, []).memmap(tmp_path / "x", allow_pickle=False)
    assert gc.isenabled()
    gc.disable()
    try:  # a caller that turned it off keeps it off
        TensorDict({"a": torch.zeros(1)}, []).memmap(tmp_path / "y")
        assert not gc.isenabled()
    finally:
        gc.enable()


# --------------------------------------------------------------------------- bad targets


def _leaves(td):
    """Every leaf of ``td`` (by key) as a plain tensor copy, and its identity."""
    return {
        key: (value.as_subclass(torch.Tensor).clone(), id(value))
        for key, value in td.items(True, True)
        if isinstance(value, torch.Tensor)
    }


SAVED = lambda: TensorDict(  # noqa: E731
    {"a": torch.arange(6.0).view(3, 2), "n": {"b": torch.ones(3, dtype=torch.int64)}}, [3]
)
BAD_TARGETS = {  # what differs: (target, exception, message)
    "an extra key": (
        lambda: SAVED().zero_().set("extra", torch.zeros(3)),
        KeyError,
        r"only in the saved data: \[\]; only in the target: \['extra'\]",
    ),
    "a missing nested key": (
        lambda: SAVED().zero_().exclude(("n", "b")),
        KeyError,
        r"at 'n' \(only in the saved data: \['b'\]",
    ),
    "the batch size": (
        lambda: TensorDict({"a": torch.zeros(4, 2), "n": {"b": torch.zeros(4)}}, [4]),
        RuntimeError,
        r"at the root it has batch size \[4\], the saved data \[3\]",
    ),
    "a leaf shape": (
        lambda: SAVED().zero_().set("a", torch.zeros(3, 5)),
        RuntimeError,
        r"'a' has shape \[3, 5\] .*the saved one shape \[3, 2\]",
    ),
    "a nested dtype": (
        lambda: SAVED().zero_().set(("n", "b"), torch.zeros(3, dtype=torch.complex64)),
        RuntimeError,
        r"\('n', 'b'\) has shape \[3\] and dtype torch.complex64, .*dtype torch.int64",
    ),
    "a tensor for a tensordict": (
        lambda: SAVED().zero_().exclude("n").set("n", torch.zeros(3)),
        RuntimeError,
        r"at 'n' it holds a tensor, the saved data a tensordict",
    ),
}


@pytest.mark.parametrize("loader", ["load_memmap_", "load_", "load_memmap(out=)", "load(out=)"])
@pytest.mark.parametrize("what", list(BAD_TARGETS))
def test_loading_into_a_tensordict_of_another_structure_changes_nothing(tmp_path, what, loader):
    SAVED().memmap(tmp_path / "saved")
    before = folder_bytes(tmp_path / "saved")
    make, error, message = BAD_TARGETS[what]
    target = make()
    keys, leaves = list(target.keys(True)), _leaves(target)
    load = {
        "load_memmap_": lambda: target.load_memmap_(tmp_path / "saved"),
        "load_": lambda: target.load_(tmp_path / "saved"),
        "load_memmap(out=)": lambda: TensorDict.load_memmap(tmp_path / "saved", out=target),
        "load(out=)": lambda: tensordict.load(tmp_path / "saved", out=target),
    }[loader]
    with pytest.raises(error, match=message):
        load()
    assert list(target.keys(True)) == keys and target.batch_size == make().batch_size
    for key, (value, ident) in leaves.items():
        now = target.get(key)
        assert id(now) == ident and type(now) is torch.Tensor and torch.equal(now, value)
    assert folder_bytes(tmp_path / "saved") == before


def test_loading_into_a_memory_mapped_tensordict_moves_it(tmp_path):
    SAVED().memmap(tmp_path / "saved")
    target = SAVED().zero_().memmap_(tmp_path / "target")  # locked, in another folder
    nested = target["n"]
    assert target.load_memmap_(tmp_path / "saved") is target
    assert (target == SAVED()).all() and target["n"] is nested and target.is_locked
    assert target.saved_path == str(tmp_path / "saved")
    assert target["n"].saved_path == str(tmp_path / "saved" / "n")
    assert target["a"].filename == str(tmp_path / "saved" / "a.memmap")


def test_update_in_place_of_complex_values_into_a_real_leaf_changes_nothing(tmp_path):
    like = SAVED().memmap_like(tmp_path / "like")  # zero-filled int64 and float32 files
    before = folder_bytes(tmp_path / "like")
    values = {"a": torch.ones(3, 2), "n": {"b": torch.tensor([1 + 2j, 3, 4])}}
    with pytest.raises(RuntimeError, match=r"'n', 'b'\) is complex .*torch.int64.*imaginary"):
        like.update_(values)
    assert folder_bytes(tmp_path / "like") == before  # 'a' was not written either
    assert (like["a"] == 0).all() and (like["n", "b"] == 0).all()
    memory = SAVED()
    with pytest.raises(RuntimeError, match="imaginary part"):  # in memory too
        memory.update_(values)
    assert (memory == SAVED()).all()
    like.update_({"a": torch.ones(3, 2), "n": {"b": torch.tensor([1 + 2j, 3, 4]).real.long()}})
    assert like["n", "b"].tolist() == [1, 3, 4]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda td: td.make_memmap("b", [4, 2]),
            r"'b' would have shape \[4, 2\].*batch size \[3\]",
        ),
        (lambda td: td.make_memmap("b", []), r"'b' would have shape \[\].*batch size \[3\]"),
        (
            lambda td: td.make_memmap(("n", "c"), [2]),
            r"\('n', 'c'\) would have shape \[2\].*batch size \[3, 2\]",
        ),
        (
            lambda td: td.make_memmap(("new", "c"), [2, 3]),
            r"\('new', 'c'\) would have shape \[2, 3\].*batch size \[3\]",
        ),
        (
            lambda td: td.make_memmap_from_tensor("b", torch.zeros(2, 3)),
            r"'b' would have shape \[2, 3\].*batch size \[3\]",
        ),
        (
            lambda td: td.make_memmap_from_storage(
                "b", torch.zeros(8).untyped_storage(), [4, 2], dtype=torch.float32
            ),
            r"'b' would have shape \[4, 2\].*batch size \[3\]",
        ),
        (
            lambda td: td.make_memmap("b", torch.tensor([[1], [2]]), dtype=torch.float32),
            r"'b' would have shape nested, 2 rows.*batch size \[3\]",
        ),
    ],
    ids=["leading", "scalar", "nested-level", "new-level", "from_tensor", "from_storage", "nested"],
)
def test_make_memmap_with_the_wrong_leading_dims_changes_nothing(tmp_path, make, message):
    td = TensorDict({"a": torch.zeros(3), "n": {"x": torch.zeros(3, 2)}}, [3])
    td["n"].batch_size = [3, 2]
    td.memmap_(tmp_path)
    before, keys = folder_bytes(tmp_path), list(td.keys(True))
    with pytest.raises(RuntimeError, match=message):
        make(td)
    assert folder_bytes(tmp_path) == before and list(td.keys(True)) == keys and td.is_locked
    td.make_memmap(("n", "c"), [3, 2, 4]).fill_(1)  # leading dims right: created
    assert (TensorDict.load_memmap(tmp_path)["n", "c"] == 1).all()
