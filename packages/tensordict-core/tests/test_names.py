"""Dimension names: setting, refine_names, rename/rename_, and how they follow ops."""

from __future__ import annotations

import pytest
import torch

from tensordict import TensorDict, lazy_stack


def make_td(names=("x", "y", "z")):
    return TensorDict(
        {
            "a": torch.zeros(2, 3, 4),
            "n": {"b": torch.zeros(2, 3, 4, 5)},
            "deep": TensorDict({"c": torch.zeros(2, 3, 4, 6)}, [2, 3, 4, 6]),
        },
        [2, 3, 4],
        names=list(names) if names is not None else None,
    )


def test_unnamed_by_default():
    td = make_td(names=None)
    assert td.names == [None, None, None]
    assert TensorDict().names == []


def test_names_at_construction_propagate_to_nested():
    td = make_td()
    assert td.names == ["x", "y", "z"]
    assert td["n"].names == ["x", "y", "z"]
    # the nested tensordict's extra batch dim stays unnamed
    assert td["deep"].names == ["x", "y", "z", None]


def test_names_setter_and_partial_names():
    td = make_td(names=None)
    td.names = ["x", None, "z"]
    assert td.names == ["x", None, "z"]
    assert td["n"].names == ["x", None, "z"]


def test_names_none_clears():
    td = make_td()
    td.names = None
    assert td.names == [None, None, None]
    assert td["n"].names == [None, None, None]


def test_names_returned_list_is_a_copy():
    td = make_td()
    names = td.names
    names[0] = "changed"
    assert td.names == ["x", "y", "z"]


def test_new_nested_entry_inherits_names():
    td = make_td()
    td["new", "leaf"] = torch.zeros(2, 3, 4)
    assert td["new"].names == ["x", "y", "z"]
    td["d"] = {"e": torch.zeros(2, 3, 4)}
    assert td["d"].names == ["x", "y", "z"]
    td.set("t", TensorDict({"f": torch.zeros(2, 3, 4, 7)}, [2, 3, 4, 7]))
    assert td["t"].names == ["x", "y", "z", None]


# ---------------------------------------------------------------- refine_names
def test_refine_names():
    td = make_td(names=None)
    assert td.refine_names("p", "q", "r") is td
    assert td.names == ["p", "q", "r"]
    assert td["n"].names == ["p", "q", "r"]


def test_refine_names_with_ellipsis():
    td = make_td(names=None)
    td.refine_names(..., "last")
    assert td.names == [None, None, "last"]
    td.refine_names("first", ...)
    assert td.names == ["first", None, "last"]


def test_refine_names_keeps_existing_and_fills_unnamed():
    td = make_td(names=None)
    td.names = ["x", None, None]
    td.refine_names("x", "y", None)
    assert td.names == ["x", "y", None]


def test_refine_names_cannot_change_a_name():
    td = make_td()
    with pytest.raises(RuntimeError, match="'x'"):
        td.refine_names("q", "y", "z")
    assert td.names == ["x", "y", "z"]


# ---------------------------------------------------------------- rename / rename_
def test_rename_positional_returns_copy():
    td = make_td()
    out = td.rename("p", None, "r")
    assert out.names == ["p", None, "r"]
    assert out["n"].names == ["p", None, "r"]
    assert td.names == ["x", "y", "z"]
    assert td["n"].names == ["x", "y", "z"]
    assert out["a"] is td["a"]


def test_rename_mapping():
    td = make_td()
    out = td.rename(x="X", z="Z")
    assert out.names == ["X", "y", "Z"]
    assert td.names == ["x", "y", "z"]


def test_rename__in_place_propagates():
    td = make_td()
    assert td.rename_(y="Y") is td
    assert td.names == ["x", "Y", "z"]
    assert td["n"].names == ["x", "Y", "z"]
    assert td["deep"].names == ["x", "Y", "z", None]


def test_rename__positional():
    td = make_td()
    td.rename_("a", "b", "c")
    assert td.names == ["a", "b", "c"]
    td.rename_(None, None, None)
    assert td.names == [None, None, None]


def test_rename_unknown_name_raises():
    td = make_td()
    with pytest.raises(ValueError, match="'missing'"):
        td.rename_(missing="m")
    assert td.names == ["x", "y", "z"]


# ---------------------------------------------------------------- validation
def test_duplicate_names_rejected():
    with pytest.raises(ValueError, match="unique"):
        TensorDict(batch_size=[2, 3], names=["a", "a"])


def test_wrong_number_of_names_rejected():
    td = make_td()
    with pytest.raises(ValueError, match="3 batch"):
        td.names = ["a", "b"]
    assert td.names == ["x", "y", "z"]


def test_conflicting_nested_names_rejected():
    td = make_td()
    sub = TensorDict({"c": torch.zeros(2, 3, 4)}, [2, 3, 4], names=["p", "q", "r"])
    with pytest.raises(ValueError, match="names"):
        td.set("sub", sub)
    assert "sub" not in td.keys()


# ---------------------------------------------------------------- propagation through ops
def test_names_through_indexing():
    td = make_td()
    assert td[0].names == ["y", "z"]
    assert td[0]["n"].names == ["y", "z"]
    assert td[:, 1].names == ["x", "z"]
    assert td[..., 0].names == ["x", "y"]
    assert td[1:].names == ["x", "y", "z"]
    assert td[:, None].names == ["x", None, "y", "z"]
    assert td[torch.tensor([0, 1])].names == ["x", "y", "z"]


def test_names_through_shape_ops():
    td = make_td()
    assert td.unsqueeze(1).names == ["x", None, "y", "z"]
    assert td.unsqueeze(-1).names == ["x", "y", "z", None]
    assert td.permute(2, 0, 1).names == ["z", "x", "y"]
    assert td.permute(2, 0, 1)["n"].names == ["z", "x", "y"]
    assert td.transpose(0, 2).names == ["z", "y", "x"]
    assert td.unbind(1)[0].names == ["x", "z"]
    assert td.split(1, 1)[0].names == ["x", "y", "z"]
    assert td.expand(5, 2, 3, 4).names == [None, "x", "y", "z"]
    assert td.flatten(0, 1).names == [None, "z"]
    assert td.flip(0).names == ["x", "y", "z"]
    assert td.reshape(-1).names == [None]


def test_names_through_squeeze_leaf_only():
    td = TensorDict({"a": torch.zeros(2, 1, 3)}, [2, 1, 3], names=["x", "one", "z"])
    assert td.squeeze(1).names == ["x", "z"]
    assert td.squeeze().names == ["x", "z"]


def test_names_through_clone_to_apply():
    td = make_td()
    assert td.clone().names == ["x", "y", "z"]
    assert td.to(torch.float64).names == ["x", "y", "z"]
    assert td.apply(lambda x: x + 1).names == ["x", "y", "z"]
    assert td.copy().names == ["x", "y", "z"]
    assert (td + 1).names == ["x", "y", "z"]


def test_names_through_stack_and_cat():
    td = make_td()
    stacked = torch.stack([td, td.clone()], 1)
    assert stacked.names == ["x", None, "y", "z"]
    assert torch.cat([td, td.clone()], 2).names == ["x", "y", "z"]


def test_batch_size_setter_keeps_leading_names():
    td = make_td()
    td.batch_size = [2, 3]
    assert td.names == ["x", "y"]
    td.batch_size = [2, 3, 4]
    assert td.names == ["x", "y", None]


def test_names_reach_a_nested_lazy_stack():
    inner = lazy_stack([TensorDict(batch_size=[2, 4]) for _ in range(3)], 1)
    td = TensorDict(n=inner, batch_size=[2])
    td.names = ["env"]
    assert inner.names == ["env", None, None]
    td.rename_(env="batch")
    assert inner.names == ["batch", None, None]
    td.names = None
    assert inner.names == [None, None, None]


def test_naming_a_stack_dimension_as_a_nested_dimension_is_refused():
    td = TensorDict({"": TensorDict({}, [3, 4], names=["c", "d"])}, [3], names=["c"])
    stack = lazy_stack([td, td], -1)
    assert stack[""].names == ["c", None, "d"]
    with pytest.raises(ValueError, match="'d'"):
        stack.names = ["c", "d"]
    assert stack.names == ["c", None] and td[""].names == ["c", "d"]
    stack.names = ["c", "e"]
    assert stack[""].names == ["c", "e", "d"]
    assert stack[0][""].names == stack[""][0].names == ["e", "d"]
