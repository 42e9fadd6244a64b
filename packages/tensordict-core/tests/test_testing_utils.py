"""assert_allclose_td / assert_close, and set_printoptions / get_printoptions."""

from __future__ import annotations

import pytest
import torch

import tensordict
from tensordict import (
    TensorDict,
    assert_allclose_td,
    assert_close,
    get_printoptions,
    set_printoptions,
)


@pytest.fixture
def td():
    return TensorDict(
        {"a": torch.zeros(2, 3), "b": {"c": torch.ones(2), "d": torch.arange(2)}, "s": "x"}, [2]
    )


def test_equal_tensordicts_pass(td):
    assert assert_allclose_td(td, td.clone()) is True
    assert assert_close(td, td.clone()) is True
    close = td.clone()
    close["b", "c"] += 1e-7
    assert assert_allclose_td(td, close)


def test_first_differing_key_is_named(td):
    other = td.clone()
    other["b", "d"][1] = 5
    other["b", "c"][0] = 3.0
    with pytest.raises(AssertionError, match=r"key \('b', 'c'\) does not match") as info:
        assert_allclose_td(td, other, msg="context")
    assert str(info.value).endswith("context")


def test_tolerances(td):
    other = td.clone()
    other["a"] += 0.01
    with pytest.raises(AssertionError, match="key 'a'"):
        assert_allclose_td(td, other)
    assert assert_allclose_td(td, other, atol=0.1, rtol=0)


def test_nan_handling():
    a = TensorDict({"x": torch.tensor([float("nan")])}, [1])
    assert assert_allclose_td(a, a.clone())
    with pytest.raises(AssertionError, match="key 'x'"):
        assert_allclose_td(a, a.clone(), equal_nan=False)


def test_key_mismatch_is_assertion_and_key_error(td):
    other = td.clone()
    del other["b", "d"]
    with pytest.raises(AssertionError, match=r"\('b', 'd'\)"):
        assert_allclose_td(td, other)
    with pytest.raises(KeyError):
        assert_allclose_td(td, other)


def test_other_mismatches(td):
    with pytest.raises(AssertionError, match="key 'a' does not match.*shape"):
        assert_allclose_td(td, td[:1])
    # as the reference: batch sizes are not compared, the leaves are
    assert assert_allclose_td(
        TensorDict(a=torch.zeros(3)), TensorDict(a=torch.zeros(3), batch_size=[3])
    )
    other = td.clone()
    other["s"] = "y"
    with pytest.raises(AssertionError, match="key 's'.*'x'"):
        assert_allclose_td(td, other)
    other = td.clone()
    other["a"] = other["a"].double()
    with pytest.raises(AssertionError, match="key 'a'.*dtype"):
        assert_allclose_td(td, other)
    with pytest.raises(TypeError, match="compares tensordicts"):
        assert_allclose_td(td, {"a": 1})  # type: ignore[arg-type]


def test_print_options_context_restores(td):
    default = get_printoptions()
    with set_printoptions(max_fields=1, sort_keys=False, show_is_shared=False):
        text = repr(td)
        assert get_printoptions()["max_fields"] == 1
    assert get_printoptions() == default
    assert "is_shared" not in text and "... (2 more)" in text
    assert text.index("a:") < text.index("... (2 more)")
    assert "is_shared" in repr(td)


def test_print_options_global_set_and_reset(td):
    try:
        set_printoptions(sort_keys=False)
        keys_order = [
            line.strip().split(":")[0]
            for line in repr(TensorDict({"z": 1, "a": 2})).splitlines()[2:4]
        ]
        assert keys_order == ["z", "a"]
    finally:
        set_printoptions(reset=True)
    assert get_printoptions() == {"sort_keys": True, "max_fields": None, "show_is_shared": True}
    with pytest.raises(ValueError, match="max_fields"):
        set_printoptions(max_fields=-1)


def test_top_level_exports():
    for name in (
        "assert_allclose_td",
        "assert_close",
        "dense_stack_tds",
        "from_consolidated",
        "get_printoptions",
        "is_tensorclass",
        "merge_tensordicts",
        "pad",
        "pad_sequence",
        "set_printoptions",
    ):
        assert name in tensordict.__all__ and callable(getattr(tensordict, name))


def test_jagged_entries_compare_component_by_component():
    def njt(values):
        return torch.nested.nested_tensor_from_jagged(values, offsets=torch.tensor([0, 2, 5]))

    a = TensorDict(x=njt(torch.arange(5.0)), batch_size=[2])
    b = TensorDict(x=njt(torch.arange(5.0)), batch_size=[2])  # its own ragged size symbol
    assert a["x"].shape != b["x"].shape  # what a plain assert_close would trip on
    assert assert_allclose_td(a, b)
    c = TensorDict(x=njt(torch.arange(5.0) + 1), batch_size=[2])
    with pytest.raises(AssertionError, match="'x'"):
        assert_allclose_td(a, c)
