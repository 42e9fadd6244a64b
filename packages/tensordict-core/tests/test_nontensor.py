"""Non-tensor data: NonTensorStack, MetaData, and strings/objects through indexing,
stacking, cat, unbind, clone, ``to``, partial writes and lazy stacks.

Independent oracle for a stack of values: a numpy object array holding the same values,
put through the same indexing or shape operation.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tensordict import (
    MetaData,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    capture_non_tensor_stack,
    is_non_tensor,
    is_tensor_collection,
    lazy_stack,
    set_capture_non_tensor_stack,
)


def labelled(values: list, batch=(2,)) -> list[TensorDict]:
    return [TensorDict({"s": v, "x": torch.zeros(batch)}, list(batch)) for v in values]


def values_of(td: TensorDict, key: str = "s") -> list:
    """The value of every batch element as nested lists (one value read back broadcast)."""
    leaf = dict(td.items())[key]
    if isinstance(leaf, NonTensorData):
        out = np.empty(tuple(leaf.batch_size), dtype=object)
        out.fill(leaf.data)
        return out.tolist()
    return leaf.tolist()


def oracle(values: list, batch=(2,)) -> np.ndarray:
    """The object array a stack of ``values`` (each broadcast over ``batch``) must equal."""
    out = np.empty((len(values), *batch), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out


def obj(values: list) -> np.ndarray:
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr


# ---------------------------------------------------------------- stacking keeps every value
def test_stack_of_different_strings_keeps_every_value_in_order():
    stacked = torch.stack(labelled(["a", "b", "c"]))
    stack = stacked.get("s")
    assert isinstance(stack, NonTensorStack)
    assert stack.tolist() == oracle(["a", "b", "c"]).tolist()
    assert stacked["s"] == stack.tolist()
    assert stacked.get_non_tensor("s") == stack.tolist()
    assert stack.batch_size == stacked.batch_size


def test_stack_of_identical_values_is_a_stack_whose_data_is_the_value():
    stacked = torch.stack(labelled(["a", "a"]))
    stack = stacked.get("s")
    assert type(stack) is NonTensorStack and stack.batch_size == torch.Size([2, 2])
    assert stacked["s"] == [["a", "a"], ["a", "a"]] and stack.data == "a"
    assert stacked[1].get("s").data == "a"
    with pytest.raises(AttributeError, match="different values"):
        torch.stack(labelled(["a", "b"])).get("s").data


def test_capture_mode_stacks_identical_values_into_one():
    assert capture_non_tensor_stack() is False
    assert capture_non_tensor_stack(allow_none=True) is None
    with pytest.warns(DeprecationWarning, match="set_capture_non_tensor_stack"):
        mode = set_capture_non_tensor_stack(True)
    with mode:
        assert capture_non_tensor_stack() is True
        assert os.environ["CAPTURE_NONTENSOR_STACK"] == "True"
        stacked = torch.stack(labelled(["a", "a"]))
        assert type(stacked.get("s")) is NonTensorData and stacked["s"] == "a"
        assert type(torch.stack(labelled(["a", "b"])).get("s")) is NonTensorStack
    assert capture_non_tensor_stack(allow_none=True) is None
    assert "CAPTURE_NONTENSOR_STACK" not in os.environ


def test_values_of_different_types_are_not_merged():
    # [1] and (1,)... and "1" never merge, even in capture mode; equal values of one type do
    pair = [TensorDict({"v": NonTensorData([1])}), TensorDict({"v": NonTensorData((1,))})]
    with pytest.warns(DeprecationWarning):
        capture = set_capture_non_tensor_stack(True)
    with capture:
        assert torch.stack(pair)["v"] == [[1], (1,)]
        same = [TensorDict({"v": NonTensorData([1])}), TensorDict({"v": NonTensorData([1])})]
        assert torch.stack(same)["v"] == [1]


def test_objects_and_arrays_stack():
    a, b = object(), [1, 2]  # a list of numbers would become a tensor: wrap it
    stacked = torch.stack([TensorDict({"o": a}), TensorDict({"o": NonTensorData(b)})])
    got = stacked["o"]
    assert got[0] is a and got[1] is b


@pytest.mark.parametrize(
    "index",
    [1, -1, slice(0, 2), [2, 0], (slice(None), 1), (0, 1), (..., 0), (None, 1)],
    ids=repr,
)
def test_indexing_matches_object_array(index):
    values = ["a", "b", "c"]
    stacked = torch.stack(labelled(values))
    expected = np.asarray(oracle(values)[index], dtype=object)
    assert values_of(stacked[index]) == expected.tolist()


def test_shape_ops_match_object_array():
    values = ["a", "b", "c"]
    stacked = torch.stack(labelled(values))
    ref = oracle(values)
    assert values_of(stacked.permute(1, 0)) == ref.transpose(1, 0).tolist()
    assert values_of(stacked.reshape(-1)) == ref.reshape(-1).tolist()
    assert values_of(stacked.reshape(2, 3)) == ref.reshape(2, 3).tolist()
    assert values_of(stacked.unsqueeze(1)) == ref[:, None].tolist()
    assert values_of(stacked.flip(0)) == ref[::-1].tolist()
    assert values_of(stacked.expand(2, 3, 2)) == np.broadcast_to(ref, (2, 3, 2)).tolist()
    assert [values_of(t) for t in stacked.split(2, 0)] == [ref[:2].tolist(), ref[2:].tolist()]


def test_unbind_round_trip_gives_back_single_values():
    stacked = torch.stack(labelled(["a", "b", "c"]))
    parts = stacked.unbind(0)
    assert [p["s"] for p in parts] == ["a", "b", "c"]
    assert all(type(dict(p.items())["s"]) is NonTensorData for p in parts)
    assert [p["s"] for p in stacked.unbind(1)] == [["a", "b", "c"]] * 2
    assert [p["s"] for p in stacked] == ["a", "b", "c"]


def test_cat_keeps_values_in_order():
    one = torch.stack(labelled(["a", "b"], batch=()))
    two = torch.stack(labelled(["c"], batch=()))
    out = torch.cat([one, two, one])
    assert out["s"] == ["a", "b", "c", "a", "b"]
    same = torch.cat([TensorDict({"s": "k"}, [2]), TensorDict({"s": "k"}, [1])])
    assert same["s"] == "k"
    mixed = torch.cat([TensorDict({"s": "k"}, [2]), TensorDict({"s": "m"}, [1])])
    assert mixed["s"] == ["k", "k", "m"]


def test_clone_and_to_keep_values():
    stacked = torch.stack(labelled(["a", "b"]))
    for out in (stacked.clone(), stacked.to("cpu"), stacked.to(torch.float64), stacked.copy()):
        assert out["s"] == [["a", "a"], ["b", "b"]]
    assert stacked.clone().get("s") is not stacked.get("s")
    assert stacked.apply(lambda x: x + 1)["s"] == [["a", "a"], ["b", "b"]]
    assert (stacked + 1)["s"] == [["a", "a"], ["b", "b"]]


def test_stack_of_stacks():
    inner = [
        torch.stack(labelled(["a", "b"], batch=())),
        torch.stack(labelled(["c", "d"], batch=())),
    ]
    assert torch.stack(inner)["s"] == [["a", "b"], ["c", "d"]]
    assert torch.stack(inner, 1)["s"] == [["a", "c"], ["b", "d"]]


# ---------------------------------------------------------------- partial writes
def test_partial_write_turns_data_into_a_stack():
    td = TensorDict({"s": "a", "x": torch.zeros(3)}, [3])
    td[1] = TensorDict({"s": "z", "x": torch.ones(())}, [])
    assert td["s"] == ["a", "z", "a"]
    td[torch.tensor([0, 2])] = TensorDict({"s": "y", "x": torch.ones(2)}, [2])
    assert td["s"] == ["y", "z", "y"]
    td[:] = TensorDict({"s": "q", "x": torch.ones(3)}, [3])  # all the same again:
    assert td["s"] == ["q", "q", "q"]  # still a stack, as in the reference
    assert type(dict(td.items())["s"]) is NonTensorStack
    assert type(td[0].get("s")) is NonTensorData and td[0]["s"] == "q"


def test_write_a_stack_at_an_index_and_preallocate():
    src = torch.stack(labelled(["a", "b"], batch=()))
    td = TensorDict({"s": "-", "x": torch.zeros(4)}, [4])
    td[1:3] = src
    assert td["s"] == ["-", "a", "b", "-"]
    fresh = TensorDict(batch_size=[3])
    fresh[1:] = src
    assert fresh["s"] == [None, "a", "b"]
    assert torch.equal(fresh["x"], torch.zeros(3))


def test_set_and_set_inplace_on_a_stack_entry():
    td = torch.stack(labelled(["a", "b"], batch=()))
    td.set_("s", "z")
    assert td["s"] == ["z", "z"]
    td["s"] = NonTensorStack("p", "q")
    assert td["s"] == ["p", "q"]
    with pytest.raises(RuntimeError, match=r"key 's'.*shape \(3,\).*batch_size=\(2,\)"):
        td["s"] = NonTensorStack("p", "q", "r")
    assert td["s"] == ["p", "q"]


def test_stacking_a_string_with_a_tensor_names_the_key():
    a = TensorDict({"v": "text"})
    b = TensorDict({"v": torch.zeros(())})
    with pytest.raises(RuntimeError, match="'v'"):
        torch.stack([a, b])
    assert a["v"] == "text"


# ---------------------------------------------------------------- MetaData
def test_metadata_is_kept_once():
    tds = [TensorDict({"m": MetaData("run-0"), "x": torch.zeros(2)}, [2]) for i in range(3)]
    stacked = torch.stack(tds)
    assert stacked["m"] == "run-0"
    leaf = stacked.get("m")
    assert type(leaf) is MetaData and leaf.batch_size == torch.Size([3, 2])
    assert leaf.data == "run-0" and stacked.get_non_tensor("m") == "run-0"
    for out in (stacked[1], stacked.reshape(-1), stacked.clone(), stacked.unbind(0)[2]):
        assert type(dict(out.items())["m"]) is MetaData and out["m"] == "run-0"
    for out in (stacked.unsqueeze(0), stacked.expand(2, 3, 2)):  # no stack of a MetaData
        assert type(out.get("m")) is MetaData and out["m"] == "run-0"
    assert torch.cat(tds)["m"] == "run-0"
    assert isinstance(leaf, NonTensorData) and "MetaData(data=run-0" in repr(leaf)


def test_different_metadata_values_are_stacked():
    tds = [TensorDict({"m": MetaData(f"run-{i}")}) for i in range(3)]
    stacked = torch.stack(tds)
    assert type(stacked.get("m")) is NonTensorStack
    assert stacked["m"] == ["run-0", "run-1", "run-2"]


# ---------------------------------------------------------------- helpers and accessors
def test_is_non_tensor_and_collection():
    stack = NonTensorStack("a", "b")
    assert is_non_tensor(stack) and is_non_tensor(NonTensorStack) and is_non_tensor(MetaData("x"))
    assert is_tensor_collection(stack) and not is_non_tensor(torch.zeros(1))


def test_set_get_non_tensor_items_filter():
    td = TensorDict({"x": torch.zeros(2), "n": {"y": torch.zeros(2)}}, [2])
    td.set_non_tensor("s", 3)
    td.set_non_tensor(("n", "t"), "text")
    assert td["s"] == 3 and td.get_non_tensor(("n", "t")) == "text"
    assert td.non_tensor_items() == (("s", 3),)
    assert dict(td.non_tensor_items(include_nested=True)) == {"s": 3, ("n", "t"): "text"}
    filtered = td.filter_non_tensor_data()
    assert set(filtered.keys(True, True)) == {"x", ("n", "y")}
    assert td["s"] == 3  # the original keeps them
    stacked = torch.stack([td, td.clone().set_non_tensor("s", 4)])
    assert stacked.non_tensor_items() == (("s", [[3, 3], [4, 4]]),)
    assert stacked.get_non_tensor("s", "default") == [[3, 3], [4, 4]]
    assert td.get_non_tensor("missing", "default") == "default"


def test_lazy_stack_of_non_tensor_entries():
    tds = labelled(["a", "b", "c"])
    tds[1]["only"] = "here"
    lazy = lazy_stack(tds)
    assert isinstance(lazy.get("s"), NonTensorStack)
    assert lazy["s"] == oracle(["a", "b", "c"]).tolist()
    assert lazy[1]["s"] == "b" and lazy[:, 0]["s"] == ["a", "b", "c"]
    lazy.set_non_tensor("t", "all")
    assert all(td["t"] == "all" for td in tds)
    lazy["u"] = NonTensorStack.from_list([["p", "p"], ["q", "q"], ["r", "r"]])
    assert [td["u"] for td in tds] == [["p", "p"], ["q", "q"], ["r", "r"]]
    assert set(lazy.filter_non_tensor_data().keys()) == {"x"}
    assert "only" not in lazy.filter_non_tensor_data().tensordicts[1].keys()
    assert lazy.non_tensor_items()[0][0] == "s"
    assert lazy_stack([NonTensorData("a"), NonTensorData("b")]).tolist() == ["a", "b"]


# ---------------------------------------------------------------- NonTensorStack itself
def test_non_tensor_stack_api():
    stack = NonTensorStack("a", "b", "c")
    assert stack.batch_size == torch.Size([3]) and len(stack) == 3
    assert stack.tolist() == ["a", "b", "c"]
    assert stack[1].data == "b" and isinstance(stack[1], NonTensorData)
    assert [item.data for item in stack.tensordicts] == ["a", "b", "c"]
    stack[0] = "z"
    assert stack.tolist() == ["z", "b", "c"]
    assert (stack.clone() == stack).all() and sorted(stack.clone()._values) == ["b", "c", "z"]
    nested = NonTensorStack.from_list([["a", "b"], ["c", "d"]])
    assert nested.batch_size == torch.Size([2, 2])
    assert nested.transpose(0, 1).tolist() == [["a", "c"], ["b", "d"]]
    assert NonTensorStack(nested, nested, stack_dim=2).batch_size == torch.Size([2, 2, 2])
    assert repr(NonTensorStack("a")) == (
        "NonTensorStack(\n    ['a'],\n    batch_size=torch.Size([1]),\n    device=None)"
    )
    with pytest.raises(RuntimeError, match=r"item 1 has batch_size=\(2,\) but item 0 has"):
        NonTensorStack(NonTensorData("a"), NonTensorData("b", batch_size=[2]))
    with pytest.raises(ValueError, match="ndim=3"):
        NonTensorStack.from_list([["a"]], ndim=3)


def test_expanded_stack_can_be_written():
    stack = NonTensorStack("a", "b").expand(3, 2)
    stack[0, 0] = "z"
    assert stack.tolist() == [["z", "b"], ["a", "b"], ["a", "b"]]


# ---------------------------------------------------------------- properties
words = st.text(alphabet="abc", min_size=0, max_size=3)


@settings(max_examples=40, deadline=None)
@given(
    values=st.lists(words, min_size=1, max_size=5),
    batch=st.lists(st.integers(1, 3), max_size=2),
    dim=st.integers(0, 2),
)
def test_stack_unbind_round_trip(values, batch, dim):
    dim = min(dim, len(batch))
    tds = [TensorDict({"s": v, "x": torch.zeros(batch)}, batch) for v in values]
    stacked = torch.stack(tds, dim)
    ref = np.moveaxis(oracle(values, tuple(batch)), 0, dim)
    assert stacked["s"] == ref.tolist()
    assert [t["s"] for t in stacked.unbind(dim)] == values
    assert [t["s"] for t in lazy_stack(tds, dim).unbind(dim)] == values
    assert lazy_stack(tds, dim)["s"] == ref.tolist()


@settings(max_examples=40, deadline=None)
@given(values=st.lists(words, min_size=2, max_size=6), data=st.data())
def test_indexing_a_stack_matches_object_array(values, data):
    stacked = torch.stack([TensorDict({"s": v}) for v in values])
    n = len(values)
    index = data.draw(
        st.one_of(
            st.integers(-n, n - 1),
            st.lists(st.integers(0, n - 1), min_size=1, max_size=4),
            st.builds(slice, st.integers(0, n), st.integers(0, n), st.integers(1, 2)),
        )
    )
    expected = obj(values)[index]
    got = stacked[index]["s"] if stacked[index].batch_size.numel() else []
    if isinstance(expected, np.ndarray):
        if len(set(expected.tolist())) == 1 and len(expected) > 0:
            assert got in (expected[0], expected.tolist())
        else:
            assert got == expected.tolist()
    else:
        assert got == expected


@pytest.mark.parametrize("method", ["update_", "copy_"])
def test_in_place_update_from_a_stack_keeps_one_value_per_element(method: str) -> None:
    def stacked(values: list[str], x: float) -> TensorDict:
        return torch.stack([TensorDict({"s": v, "x": torch.full((), x)}) for v in values])

    dest = stacked(["a", "b"], 0.0)
    getattr(dest, method)(stacked(["c", "d"], 1.0))
    assert dest["s"] == ["c", "d"]  # not [["c", "d"], ["c", "d"]]
    assert torch.equal(dest["x"], torch.ones(2))
    dest.update_(lazy_stack([TensorDict({"s": "e", "x": torch.zeros(())})] * 2))
    assert dest["s"] == ["e", "e"]


def test_set_in_place_of_a_stack_into_a_single_value_entry() -> None:
    td = TensorDict({"s": "x", "a": torch.zeros(2)}, [2])
    td.set_("s", NonTensorStack("y", "y"))  # one value for the whole batch: written
    assert td["s"] == "y"
    with pytest.raises(
        RuntimeError, match="different values in place into the non-tensor entry 's'"
    ):
        td.set_("s", NonTensorStack("p", "q"))
    assert td["s"] == "y"  # unchanged, and not a stack nested in the value
    td.set("s", NonTensorStack("p", "q"))  # not in place: stored as a stack
    assert td["s"] == ["p", "q"]
