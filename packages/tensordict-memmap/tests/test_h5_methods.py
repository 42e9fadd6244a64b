"""PersistentTensorDict's TensorDict methods: results match the same method on the
in-memory TensorDict, writes reach the HDF5 file (checked by reopening it with h5py), bad
input leaves the file unchanged, and metadata queries read no data."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from memmap_helpers import assert_same, needs_h5py

from tensordict import PersistentTensorDict, TensorDict, is_leaf_nontensor

pytestmark = needs_h5py


def _td() -> TensorDict:
    return TensorDict(
        {
            "a": torch.arange(24.0).view(3, 4, 2),
            "n": TensorDict(
                {"c": torch.arange(60).view(3, 4, 5), "d": torch.ones(3, 4, 5, 2)}, [3, 4, 5]
            ),
            "s": "text",
        },
        [3, 4],
    )


@pytest.fixture
def h5(tmp_path):
    out = PersistentTensorDict.from_dict(_td(), filename=tmp_path / "f.h5")
    yield out
    out.close()


def _file(h5) -> dict:
    """Every dataset of the file, read with h5py directly: {path: array}."""
    import h5py

    out = {}
    with h5py.File(h5.file.filename, "r") as f:
        f.visititems(
            lambda name, obj: (
                out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None
            )
        )
    return out


def _same_file(before: dict, after: dict) -> bool:
    return before.keys() == after.keys() and all(
        np.array_equal(before[k], after[k]) for k in before
    )


@pytest.mark.parametrize(
    "name, args",
    [
        ("reshape", (12,)),
        ("flatten", (0, 1)),
        ("unflatten", (1, (2, 2))),
        ("expand", (2, 3, 4)),
        ("repeat", (2, 1)),
        ("flip", (0,)),
        ("narrow", (1, 1, 2)),
        ("flatten_keys", ()),
        ("rename", ("x", "y")),
        ("consolidate", ()),
    ],
)
def test_shape_and_key_ops_match_tensordict(h5, name, args):
    before = _file(h5)
    out = getattr(h5, name)(*args)
    expected = getattr(_td(), name)(*args)
    assert type(out) is TensorDict
    assert_same(out, expected)
    assert out.names == expected.names
    assert _same_file(before, _file(h5))


@pytest.mark.parametrize(
    "name, args",
    [("view", (4, 3)), ("unsqueeze", (0,)), ("squeeze", ()), ("permute", (1, 0)),
     ("transpose", (0, 1)), ("movedim", (0, 1)), ("swapaxes", (0, 1))],
)  # fmt: skip
def test_views_are_refused_as_in_the_reference(h5, name, args):
    # an HDF5 dataset has no view: RuntimeError naming the method and the way out
    before = _file(h5)
    with pytest.raises(
        RuntimeError, match=rf"Cannot call `{name}` on a PersistentTensorDict.*to_tensordict"
    ):
        getattr(h5, name)(*args)
    assert _same_file(before, _file(h5))
    # the way out works: the same op on the content read into memory
    assert_same(getattr(h5.to_tensordict(), name)(*args), getattr(_td(), name)(*args))


@pytest.mark.parametrize("name, args", [("unbind", (1,)), ("split", (2, 1)), ("chunk", (3, 0))])
def test_splitting_ops_match_tensordict(h5, name, args):
    parts, expected = getattr(h5, name)(*args), getattr(_td(), name)(*args)
    assert len(parts) == len(expected)
    for part, exp in zip(parts, expected):
        assert_same(part, exp)


def test_select_and_exclude_read_only_what_they_keep(h5, monkeypatch):
    import h5py

    read = []
    original = h5py.Dataset.__getitem__

    def spy(self, index):
        read.append(self.name)
        return original(self, index)

    monkeypatch.setattr(h5py.Dataset, "__getitem__", spy)
    picked = h5.select(("n", "c"), "s")
    assert read == ["/n/c"]
    assert_same(picked, _td().select(("n", "c"), "s"))
    assert picked["n"].batch_size == (3, 4, 5)
    read.clear()
    rest = h5.exclude("a", ("n", "d"))
    assert sorted(read) == ["/n/c"]
    assert_same(rest, _td().exclude("a", ("n", "d")))
    with pytest.raises(KeyError):
        h5.select("missing")
    assert list(h5.select("missing", "a", strict=False).keys()) == ["a"]


def test_select_and_exclude_in_place_delete_from_the_file(h5):
    h5.exclude(("n", "d"), inplace=True)
    assert sorted(_file(h5)) == ["a", "n/c"]
    h5.select("s", ("n", "c"), inplace=True)
    assert sorted(_file(h5)) == ["n/c"]
    assert h5["s"] == "text"
    reopened = PersistentTensorDict.from_h5(h5.file.filename)
    assert set(reopened.keys(True, True, is_leaf=is_leaf_nontensor)) == {("n", "c"), "s"}
    assert set(reopened.keys(True, True)) == {("n", "c")}  # as a TensorDict: no leaf


def test_in_place_ops_are_written_to_the_file(h5):
    mirror = _td()
    for td in (h5, mirror):
        td.add_(1)
        td.mul_(2)
        td.update(
            {"new": torch.full((3, 4, 5), 7), "n": {"c": torch.zeros(3, 4, 5, dtype=torch.int64)}}
        )
        td.update_({"a": torch.ones(3, 4, 2)})
        td.set_at_(("n", "d"), torch.full((5, 2), 3.0), (1, 2))
        td.update_at_({"a": torch.full((4, 2), 9.0)}, torch.tensor([2]))
        td.rename_key_("new", ("n", "moved"))
        td.del_(("n", "c"))
    with PersistentTensorDict.from_h5(h5.file.filename) as again:
        assert_same(again.to_tensordict(), mirror)
    h5.clear()
    assert h5.is_empty() and _file(h5) == {}


def test_copy_shares_the_file_and_replace_writes_to_it(h5):
    other = h5.copy()
    assert type(other) is PersistentTensorDict and other.file.filename == h5.file.filename
    other["b"] = torch.zeros(3, 4)
    assert "b" in h5.keys()
    out = h5.replace(a=torch.zeros(3, 4, 2))
    assert (out["a"] == 0).all() and (h5["a"] == 0).all()


def test_bad_input_leaves_the_file_unchanged(h5):
    before = _file(h5)
    with pytest.raises(RuntimeError, match="batch size"):
        h5.update({"ok": torch.zeros(3, 4), "bad": torch.zeros(5)})
    with pytest.raises(RuntimeError, match="shape"):
        h5.update_({"a": torch.zeros(3, 4, 2), ("n", "c"): torch.zeros(2, 2)})
    with pytest.raises(KeyError):
        h5.update_({"a": torch.zeros(3, 4, 2), "missing": torch.zeros(3, 4)})
    with pytest.raises(RuntimeError):
        h5.set_at_("a", torch.zeros(7), 0)
    with pytest.raises(KeyError):
        h5.del_("missing")
    with pytest.raises(KeyError):
        h5.rename_key_("a", "s", safe=True)
    assert _same_file(before, _file(h5))


def test_names_lock_and_device(h5):
    h5.refine_names("x", ...)
    assert h5.names == ["x", None]
    h5.rename_("rows", "cols")
    h5.rename_(cols="c")
    assert h5.names == ["rows", "c"]
    h5.rename_(c="cols")
    assert PersistentTensorDict.from_h5(h5.file.filename).names == ["rows", "cols"]
    h5.names = None
    assert h5.names == [None, None]
    h5.lock_()
    assert h5.is_locked
    with pytest.raises(RuntimeError, match="locked"):
        h5["z"] = torch.zeros(3, 4)
    h5.zero_()  # in place: allowed while locked, as for a locked TensorDict
    assert not h5["a"].any()
    with pytest.raises(RuntimeError, match="locked"):
        h5.del_("a")
    h5.is_locked = False
    h5["z"] = torch.zeros(3, 4)
    view = h5.to("cpu")
    assert type(view) is PersistentTensorDict and view.device == torch.device("cpu")
    assert view["a"].device.type == "cpu" and h5.device is None
    cast = h5.to(torch.float64)
    assert type(cast) is TensorDict and cast["n", "c"].dtype == torch.float64
    assert h5.auto_device_().device == torch.device("cpu")
    assert h5.clear_device_().device is None
    h5.device = "cpu"
    assert h5.device == torch.device("cpu")


def test_auto_batch_size(tmp_path):
    raw = PersistentTensorDict.from_dict(
        TensorDict({"a": torch.zeros(3, 4, 2), "b": torch.zeros(3, 4)}, []),
        filename=tmp_path / "r.h5",
    )
    assert raw.batch_size == ()
    assert raw.auto_batch_size_().batch_size == (3, 4)
    assert raw.auto_batch_size_(batch_dims=1).batch_size == (3,)
    raw.close()


def test_metadata_queries_read_no_data(h5, monkeypatch):
    import h5py

    def refuse(self, index):
        raise AssertionError(f"read {self.name}")

    monkeypatch.setattr(h5py.Dataset, "__getitem__", refuse)
    assert h5.get_item_shape("a") == (3, 4, 2) and h5.get_item_shape(("n", "d")) == (3, 4, 5, 2)
    assert h5.entry_class("a") is torch.Tensor
    assert h5.entry_class("n") is PersistentTensorDict
    assert not h5.is_empty() and h5.sorted_keys == ["a", "n", "s"] and h5.depth == 1
    empty = h5.empty(recurse=True)
    assert type(empty) is TensorDict and empty["n"].batch_size == (3, 4, 5)
    assert list(empty.keys(True, True)) == []


def test_state_dict_round_trip(h5):
    other = _td().apply(lambda x: x * 3)
    h5.load_state_dict(other.state_dict())
    assert_same(h5.to_tensordict(), other)
    mine, theirs = h5.state_dict(), other.state_dict()
    assert list(mine) == list(theirs) and all(torch.equal(mine[k], theirs[k]) for k in theirs)


def test_arithmetic_gives_in_memory_results(h5):
    assert_same(h5 + 1, _td() + 1)
    assert (h5 == _td()).all()
    assert_same(h5.apply(lambda x: x * 2), _td().apply(lambda x: x * 2))
    assert_same(h5.data, _td())


def test_in_place_memory_ops_are_refused(h5):
    with pytest.raises(NotImplementedError, match="to_tensordict"):
        h5.share_memory_()
    with pytest.raises(RuntimeError, match="to_tensordict"):
        h5.pin_memory_()


def test_lock_contexts_restore_the_lock_state_and_keep_the_file_open(h5):
    with h5.lock_():
        assert h5.is_locked
        with pytest.raises(RuntimeError, match="locked"):
            h5["z"] = torch.zeros(3, 4)
    assert not h5.is_locked and bool(h5.file)  # unlocked again, file still open
    h5.lock_()
    with h5.unlock_():
        h5["z"] = torch.ones(3, 4)
    assert h5.is_locked
    assert torch.equal(h5["z"], torch.ones(3, 4))
    with h5:  # a plain block closes the file
        pass
    assert not bool(h5.file)
