"""state_dict / load_state_dict."""

from __future__ import annotations

import io
from collections import OrderedDict

import pytest
import torch

from tensordict import NonTensorData, TensorDict


@pytest.fixture
def td():
    return TensorDict(
        {
            "a": torch.arange(6.0).reshape(2, 3),
            "b": {"c": torch.tensor([1, 2]), "d": {"e": torch.tensor([[0.5], [1.5]])}},
            "s": "text",
            "n": NonTensorData(3),
        },
        batch_size=[2],
    )


def _zeros_like_structure():
    return TensorDict(
        {
            "a": torch.zeros(2, 3),
            "b": {"c": torch.zeros(2, dtype=torch.int64), "d": {"e": torch.zeros(2, 1)}},
            "s": "other",
            "n": NonTensorData(0),
        },
        batch_size=[2],
    )


def test_state_dict_format(td):
    # the reference's (and torch.nn.Module's) layout: flat tensors, levels in _metadata
    sd = td.state_dict()
    assert isinstance(sd, OrderedDict) and list(sd) == ["a", "b.c", "b.d.e"]
    assert list(sd._metadata) == ["", "b", "b.d", "s", "n"]
    assert sd._metadata[""] == {"batch_size": torch.Size([2]), "device": None}
    assert sd._metadata["b.d"]["batch_size"] == torch.Size([2])
    assert sd._metadata["s"]["_non_tensor"] == {"data": "text"}
    assert sd._metadata["n"]["_non_tensor"] == {"data": 3}
    assert torch.equal(sd["a"], td["a"]) and not sd["a"].requires_grad
    assert sd["a"].data_ptr() == td["a"].data_ptr()  # detached, not copied


def test_nested_state_dict_format(td):
    sd = td.state_dict(flatten=False)
    assert isinstance(sd, OrderedDict) and isinstance(sd["b"], OrderedDict)
    assert list(sd) == ["a", "b", "s", "n"] and list(sd["b"]["d"]) == ["e"]
    assert sd["s"] == "text" and sd["n"] == 3
    assert sd._metadata[""] == {"batch_size": torch.Size([2]), "device": None}
    assert sd["b"]["d"]._metadata[""]["batch_size"] == torch.Size([2])


def test_keep_vars_prefix_destination(td):
    sd = td.state_dict(keep_vars=True)
    assert sd["a"] is td["a"]
    dest = {"other": 1}
    out = td.state_dict(destination=dest, prefix="m.")
    assert out is dest and set(dest) == {"m.a", "m.b.c", "m.b.d.e", "other"}
    with_meta = td.state_dict(prefix="m.")
    assert list(with_meta._metadata)[:2] == ["m", "m.b"]


def test_legacy_layout_still_loads(td, assert_td_equal):
    legacy = {
        "a": td["a"].clone(),
        "b": {"c": td["b", "c"], "d": {"e": td["b", "d", "e"], "__batch_size": torch.Size([2])}},
        "s": "text",
        "n": 3,
        "__batch_size": torch.Size([2]),
        "__device": None,
    }
    dest = _zeros_like_structure().load_state_dict(legacy)
    assert_td_equal(dest, td)


def test_leafless_nested_levels_do_not_count_for_strict():
    data = TensorDict({"a": {"b": {}}, "d": 1})
    data.load_state_dict(TensorDict({"d": 0}).state_dict(), strict=True)
    assert data["d"] == 0
    data = TensorDict({"d": 0})
    data.load_state_dict(TensorDict({"a": {"b": {}}, "d": 1}).state_dict(), strict=True)
    assert data["d"] == 1


def test_load_in_place_keeps_storage(td, assert_td_equal):
    dest = _zeros_like_structure()
    a, e = dest["a"], dest["b", "d", "e"]
    out = dest.load_state_dict(td.state_dict())
    assert out is dest
    assert dest["a"] is a and dest["b", "d", "e"] is e
    assert_td_equal(dest, td)
    assert dest["s"] == "text" and dest.get_non_tensor("n") == 3


def test_load_assign_replaces(td):
    dest = _zeros_like_structure()
    a = dest["a"]
    sd = td.state_dict()
    dest.load_state_dict(sd, assign=True)
    assert dest["a"] is sd["a"] and dest["a"] is not a


def test_load_into_empty_non_strict_builds_everything(td, assert_td_equal):
    dest = TensorDict()
    dest.load_state_dict(td.state_dict(), strict=False)
    assert dest.batch_size == (2,) and dest["b"].batch_size == (2,)
    assert_td_equal(dest, td)


def test_load_from_flatten(td, assert_td_equal):
    dest = _zeros_like_structure()
    e = dest["b", "d", "e"]
    dest.load_state_dict(td.state_dict(flatten=True), from_flatten=True)
    assert dest["b", "d", "e"] is e
    assert_td_equal(dest, td)
    dest = _zeros_like_structure()
    dest.load_state_dict(td.state_dict(flatten=False), from_flatten=False)
    assert_td_equal(dest, td)
    fresh = TensorDict()
    fresh.load_state_dict(td.state_dict(flatten=True), from_flatten=True, strict=False)
    assert_td_equal(fresh, td)


def test_load_from_flatten_with_dotted_keys():
    td = TensorDict({"a.b": torch.ones(()), "c": {"d": torch.ones(())}})
    dest = TensorDict({"a.b": torch.zeros(()), "c": {"d": torch.zeros(())}})
    dest.load_state_dict(td.state_dict(flatten=True), from_flatten=True)
    assert dest["a.b"] == 1 and dest["c", "d"] == 1


def test_torch_save_weights_only_round_trip(td, assert_td_equal):
    buf = io.BytesIO()
    torch.save(td.state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf, weights_only=True)
    dest = _zeros_like_structure().load_state_dict(sd)
    assert_td_equal(dest, td)


def test_batch_size_change_on_load():
    src = TensorDict({"a": torch.ones(2, 3)}, [2, 3])
    dest = TensorDict({"a": torch.zeros(2, 3)}, [2])
    dest.load_state_dict(src.state_dict())
    assert dest.batch_size == (2, 3) and torch.equal(dest["a"], torch.ones(2, 3))


def test_nested_keeps_its_extra_batch_dims_when_parent_changes():
    src = TensorDict({"x": torch.ones(2, 3)}, [2])
    sd = src.state_dict(flatten=True)  # only the root batch size is recorded
    dest = TensorDict({"x": torch.zeros(2, 3)}, [])
    dest.load_state_dict(sd, from_flatten=True)
    assert dest.batch_size == (2,)


def test_strict_key_mismatch_leaves_data_unchanged(td):
    dest = _zeros_like_structure()
    sd = td.state_dict(flatten=False)
    del sd["b"]["c"]
    sd["b"]["extra"] = torch.ones(2)
    with pytest.raises(RuntimeError, match=r"at 'b'.*\['extra'\].*\['c'\]"):
        dest.load_state_dict(sd)
    assert torch.equal(dest["a"], torch.zeros(2, 3))  # 'a' came first but was not written
    assert "extra" not in dest["b"].keys()


def test_shape_mismatch_leaves_data_unchanged(td):
    dest = _zeros_like_structure()
    sd = td.state_dict()
    sd["b.d.e"] = torch.ones(2, 4)
    with pytest.raises(RuntimeError, match=r"\('b', 'd', 'e'\).*\(2, 4\).*\(2, 1\)"):
        dest.load_state_dict(sd)
    assert torch.equal(dest["a"], torch.zeros(2, 3))


def test_bad_batch_size_leaves_data_unchanged():
    dest = TensorDict({"a": torch.zeros(2, 3), "b": torch.zeros(2)}, [2])
    sd = {"a": torch.ones(2, 3), "__batch_size": torch.Size([2, 3])}
    with pytest.raises(RuntimeError, match=r"'b'.*\(2,\).*\(2, 3\)"):
        dest.load_state_dict(sd, strict=False)
    assert torch.equal(dest["a"], torch.zeros(2, 3)) and dest.batch_size == (2,)


def test_bad_input_types():
    with pytest.raises(TypeError, match="expects a dict"):
        TensorDict().load_state_dict([1, 2])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="pass its state_dict"):
        TensorDict().load_state_dict({"x": TensorDict()}, strict=False)
    with pytest.raises(KeyError, match="__batch_size"):
        TensorDict({"__batch_size": torch.zeros(())}).state_dict()


def test_locked_tensordict_refuses_new_keys():
    dest = TensorDict({"a": torch.zeros(())}).lock_()
    with pytest.raises(RuntimeError, match="'b'.*locked"):
        dest.load_state_dict({"a": torch.ones(()), "b": torch.ones(())}, strict=False)
    assert dest["a"] == 0
    dest.load_state_dict({"a": torch.ones(())})
    assert dest["a"] == 1


from tensordict._leaves import nontensor as _nontensor  # noqa: E402  (a rename must fail, not skip)


@pytest.mark.skipif(not hasattr(_nontensor, "NonTensorStack"), reason="needs NonTensorStack")
def test_non_tensor_stack_and_metadata_round_trip():
    td = torch.stack(
        [TensorDict({"s": s, "m": _nontensor.MetaData("run"), "x": torch.zeros(())}) for s in "ab"]
    )
    sd = td.state_dict(flatten=False)
    assert sd["s"] == ["a", "b"] and sd["m"] == "run"
    flat = td.state_dict()
    assert flat._metadata["s"]["_non_tensor"]["data"] == ["a", "b"]
    dest = torch.stack(
        [TensorDict({"s": s, "m": _nontensor.MetaData("old"), "x": torch.ones(())}) for s in "xy"]
    )
    dest.load_state_dict(sd)
    assert type(dest.get("s")).__name__ == "NonTensorStack" and dest["s"] == ["a", "b"]
    assert type(dict(dest.items())["m"]).__name__ == "MetaData" and dest["m"] == "run"
    sd["s"] = ["only one"]
    with pytest.raises(RuntimeError, match="'s'.*nested lists"):
        dest.load_state_dict(sd)
    assert dest["s"] == ["a", "b"]
