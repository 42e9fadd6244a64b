"""The list-to-stack and capture modes, lists written to a tensordict, and LinkedList.

Oracles: ``torch.tensor`` of the same list (numbers), the list itself (non-numbers, read
back element by element), the environment variable each mode keeps in sync.
"""

from __future__ import annotations

import os
import pickle
import warnings

import pytest
import torch

from tensordict import (
    NonTensorData,
    NonTensorStack,
    TensorDict,
    capture_non_tensor_stack,
    lazy_legacy,
    list_to_stack,
    set_capture_non_tensor_stack,
    set_lazy_legacy,
    set_list_to_stack,
)
from tensordict import utils as td_utils
from tensordict._util import modes as _modes
from tensordict.utils import LinkedList


# ---------------------------------------------------------------- the modes
def test_exported_from_utils_too():
    for name in (
        "set_list_to_stack",
        "list_to_stack",
        "set_capture_non_tensor_stack",
        "capture_non_tensor_stack",
    ):
        assert getattr(td_utils, name) is globals()[name]


def test_defaults_and_allow_none():
    assert list_to_stack() is True and list_to_stack(allow_none=True) is None
    assert capture_non_tensor_stack() is False and capture_non_tensor_stack(allow_none=True) is None


def test_context_manager_sets_and_restores_the_environment():
    assert "LIST_TO_STACK" not in os.environ
    with set_list_to_stack(True):
        assert list_to_stack(allow_none=True) is True
        assert os.environ["LIST_TO_STACK"] == "True"
        with pytest.warns(DeprecationWarning, match="set_list_to_stack"):
            inner = set_list_to_stack(False)
        with inner:
            assert list_to_stack() is False and os.environ["LIST_TO_STACK"] == "False"
        assert list_to_stack() is True and os.environ["LIST_TO_STACK"] == "True"
    assert list_to_stack(allow_none=True) is None and "LIST_TO_STACK" not in os.environ


def test_decorator_applies_the_mode_each_call():
    @set_list_to_stack(True)
    def inside() -> bool | None:
        return list_to_stack(allow_none=True)

    assert inside() is True and inside() is True
    assert list_to_stack(allow_none=True) is None


def test_set_changes_the_mode_for_good():
    try:
        set_capture_non_tensor_stack(False).set()
        assert capture_non_tensor_stack(allow_none=True) is False
        assert os.environ["CAPTURE_NONTENSOR_STACK"] == "False"
        with set_capture_non_tensor_stack(False):
            pass
        assert capture_non_tensor_stack(allow_none=True) is False  # restored: still set
    finally:
        _modes.set_capture_non_tensor_stack._write(None)  # leave the process as it was
    assert capture_non_tensor_stack(allow_none=True) is None


def test_only_the_deprecated_direction_warns():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        set_list_to_stack(True)
        set_capture_non_tensor_stack(False)
    with pytest.warns(DeprecationWarning, match="set_capture_non_tensor_stack"):
        set_capture_non_tensor_stack(True)


def test_lazy_legacy_shares_the_mode_machinery():
    before, env_before = lazy_legacy(allow_none=True), os.environ.get("LAZY_LEGACY_OP")
    assert lazy_legacy() is False  # the default (or another test's False)
    tds = [TensorDict({"a": torch.zeros(2)}, [2]) for _ in range(2)]
    with set_lazy_legacy(True):
        assert os.environ["LAZY_LEGACY_OP"] == "True" and lazy_legacy() is True
        assert type(torch.stack(tds)).__name__ == "LazyStackedTensorDict"
    assert type(torch.stack(tds)).__name__ == "TensorDict"
    assert lazy_legacy(allow_none=True) is before
    assert os.environ.get("LAZY_LEGACY_OP") == env_before


# ---------------------------------------------------------------- lists written to a tensordict
@pytest.mark.parametrize(
    "value",
    [[1, 2], [1.5, 2.5], [True, False], [[1, 2], [3, 4]], [], [1 + 2j, 3j]],
    ids=["ints", "floats", "bools", "nested", "empty", "complex"],
)
def test_lists_of_numbers_become_tensors(value):
    want = torch.tensor(value)
    for write in ("ctor", "setitem", "set"):
        bs = [len(value)] if value else []
        if write == "ctor":
            td = TensorDict({"x": value}, bs)
        elif write == "setitem":
            td = TensorDict(batch_size=bs)
            td["x"] = value
        else:
            td = TensorDict(batch_size=bs).set("x", value)
        got = td.get("x")
        assert type(got) is torch.Tensor and got.dtype == want.dtype
        assert torch.equal(got, want)


def test_a_list_of_tensors_is_stacked():
    parts = [torch.zeros(3), torch.ones(3)]
    td = TensorDict({"x": parts}, [2])
    assert torch.equal(td["x"], torch.stack(parts))


@pytest.mark.parametrize(
    "value, batch, shape",
    [
        (["a", "b"], [2], (2,)),
        (["a", "b"], [], (2,)),  # extra dimensions, like a tensor's
        ([["a", "b"], ["c", "d"]], [2], (2, 2)),
        ([1, "a"], [2], (2,)),
        ([{"k": 1}, {"k": 2}], [2], (2,)),
        ([None, None], [2], (2,)),
    ],
)
def test_lists_of_other_values_become_stacks(value, batch, shape):
    td = TensorDict(batch_size=batch)
    td["x"] = value
    stack = td.get("x")
    assert type(stack) is NonTensorStack and stack.batch_size == shape
    assert stack.tolist() == value
    assert td["x"] == value and isinstance(td["x"], LinkedList)


def test_a_stack_that_does_not_fit_the_batch_raises_and_changes_nothing():
    td = TensorDict({"y": torch.zeros(3)}, [3])
    with pytest.raises(RuntimeError, match=r"'x'.*\(2,\).*batch_size=\(3,\)"):
        td["x"] = ["a", "b"]
    with pytest.raises(RuntimeError, match="'x'"):
        td["x"] = [1.0, 2.0]
    assert list(td.keys()) == ["y"]


def test_list_to_stack_off_stores_the_list_as_one_value():
    with pytest.warns(DeprecationWarning):
        mode = set_list_to_stack(False)
    with mode:
        td = TensorDict(batch_size=[3])
        td["x"] = ["a", "b"]
        td["n"] = [1, 2, 3]  # numbers still become a tensor
    assert type(td.get("x")) is NonTensorData and td["x"] == ["a", "b"]
    assert td.get("x").batch_size == (3,)
    assert torch.equal(td["n"], torch.tensor([1, 2, 3]))


def test_from_dict_and_auto_batch_size_see_the_stack():
    td = TensorDict.from_dict({"q": ["s1", "s2", "s3", "s4"]}, auto_batch_size=True, batch_dims=1)
    assert td.batch_size == (4,) and td["q"] == ["s1", "s2", "s3", "s4"]


def test_tuples_are_kept_as_one_value():
    td = TensorDict({"t": ("a", "b")}, [2])
    assert type(td.get("t")) is NonTensorData and td["t"] == ("a", "b")


# ---------------------------------------------------------------- LinkedList
def test_linked_list_writes_items_back():
    td = TensorDict(a=["foo", "bar", "baz"], batch_size=(3,))
    values = td["a"]
    assert isinstance(values, LinkedList) and values._td() is td.get("a")
    values[0] = "x"
    assert td.get("a").tolist() == ["x", "bar", "baz"] and values == ["x", "bar", "baz"]
    values[1:] = ["y", "z"]
    assert td["a"] == ["x", "y", "z"]
    with pytest.raises(ValueError, match="length"):
        values[1:] = ["only one"]
    assert td["a"] == ["x", "y", "z"] and values == ["x", "y", "z"]


@pytest.mark.parametrize(
    "change",
    [
        lambda v: v.append("q"),
        lambda v: v.extend(["q"]),
        lambda v: v.insert(0, "q"),
        lambda v: v.pop(),
        lambda v: v.remove("foo"),
        lambda v: v.clear(),
        lambda v: v.__delitem__(0),
        lambda v: v.__iadd__(["q"]),
        lambda v: v.__imul__(2),
    ],
)
def test_length_changes_unlink(change):
    td = TensorDict(a=["foo", "bar"], batch_size=(2,))
    values = td["a"]
    change(values)
    assert values._td() is None
    if values:
        values[0] = "zzz"  # the list only
    assert td["a"] == ["foo", "bar"]


def test_linked_list_str_repr_eq_tolist_pickle():
    td = TensorDict(a=NonTensorStack("foo", "bar"), batch_size=(2,))
    values = td["a"]
    assert str(values) == repr(values) == "LinkedList(['foo', 'bar'])"
    assert values == ["foo", "bar"] and not (values != ["foo", "bar"])
    plain = values.tolist()
    assert type(plain) is list and plain == ["foo", "bar"]
    back = pickle.loads(pickle.dumps(values))
    assert type(back) is LinkedList and back == values and back._td() is None
    assert LinkedList(["x"])._td() is None
    with pytest.raises(TypeError):
        hash(values)


def test_a_failed_write_leaves_the_list_unchanged():
    td = TensorDict(a=["foo", "bar"], batch_size=(2,))
    values = td["a"]
    with pytest.raises(IndexError):
        values[5] = "x"
    assert values == ["foo", "bar"] and td["a"] == ["foo", "bar"]
