"""pad and pad_sequence."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tensordict import NonTensorData, NonTensorStack, TensorDict, lazy_stack, pad, pad_sequence


def test_pad_matches_functional_pad_per_leaf():
    td = TensorDict(
        {"a": torch.randn(3, 4, 2), "b": {"c": torch.arange(12).reshape(3, 4)}, "s": "x"},
        [3, 4],
        names=["t", "e"],
    )
    out = pad(td, [1, 2, 0, 3], value=7)
    assert out.batch_size == (6, 7) and out["b"].batch_size == (6, 7)
    # F.pad lists dims from the last one: (last_before, last_after, ...)
    assert torch.equal(out["a"], F.pad(td["a"], [0, 0, 0, 3, 1, 2], value=7))
    assert torch.equal(out["b", "c"], F.pad(td["b", "c"], [0, 3, 1, 2], value=7))
    # the non-tensor entry becomes one value per element, None where padded
    grid = [[None] * 7] + [["x"] * 4 + [None] * 3 for _ in range(3)] + [[None] * 7] * 2
    assert out["s"] == grid and out.names == ["t", "e"]
    assert td.batch_size == (3, 4)  # input untouched


def test_pad_first_dims_only_and_method():
    td = TensorDict({"a": torch.ones(2, 3)}, [2, 3])
    out = pad(td, [1, 1])
    assert out.batch_size == (4, 3)
    assert out["a"][:, 0].tolist() == [0, 1, 1, 0]
    assert td.pad([0, 0, 0, 2])["a"].shape == (2, 5)
    bools = TensorDict({"m": torch.ones(2, dtype=torch.bool)}, [2]).pad([1, 0])
    assert bools["m"].tolist() == [False, True, True]


def test_pad_bad_sizes():
    td = TensorDict({"a": torch.ones(2, 3)}, [2])
    with pytest.raises(ValueError, match=r"at most the 1 batch dimension.*\[1, 1, 1, 1\]"):
        pad(td, [1, 1, 1, 1])
    with pytest.raises(ValueError, match="pairs"):
        pad(td, [1])
    with pytest.raises(RuntimeError, match="negative output size"):
        pad(td, [-3, 0])
    with pytest.raises(TypeError, match="tensordict"):
        pad(torch.zeros(2), [1, 1])  # type: ignore[arg-type]


def test_pad_sequence_feature_dim():
    tds = [
        TensorDict({"a": torch.ones(3, 8), "b": torch.ones(6, 8), "s": "x"}),
        TensorDict({"a": torch.ones(5, 8) * 2, "b": torch.ones(6, 8), "s": "x"}),
    ]
    out = pad_sequence(tds, return_mask=True, padding_value=-1)
    assert out.batch_size == (2,)
    assert out["a"].shape == (2, 5, 8) and out["b"].shape == (2, 6, 8)
    assert torch.equal(out["a"][0, :3], torch.ones(3, 8))
    assert torch.equal(out["a"][0, 3:], torch.full((2, 8), -1.0))
    assert torch.equal(out["a"][1], torch.full((5, 8), 2.0))
    assert out["masks", "a"].tolist() == [[True] * 3 + [False] * 2, [True] * 5]
    assert out["masks", "b"].all() and out["masks", "b"].shape == (2, 6)
    assert out["s"] == ["x", "x"]  # one value per element, as torch.stack gives them


def test_pad_sequence_batch_dim():
    tds = [
        TensorDict({"a": torch.arange(n * 2.0).reshape(n, 2), "n": {"b": torch.ones(n)}}, [n])
        for n in (1, 3, 2)
    ]
    out = pad_sequence(tds, pad_dim=0, return_mask=True)
    assert out.batch_size == (3, 3) and out["n"].batch_size == (3, 3)
    assert out["a"][0].tolist() == [[0, 1], [0, 0], [0, 0]]
    assert out["n", "b"].tolist() == [[1, 0, 0], [1, 1, 1], [1, 1, 0]]
    assert out["masks", "a"].tolist() == [[True, False, False], [True] * 3, [True, True, False]]
    assert out["masks", "n", "b"].shape == (3, 3)


def test_pad_sequence_inner_dim():
    tds = [TensorDict({"a": torch.ones(2, n)}, [2]) for n in (1, 4)]
    out = pad_sequence(tds, pad_dim=1, return_mask=True)
    assert out.batch_size == (2, 2) and out["a"].shape == (2, 2, 4)
    assert out["masks", "a"].shape == (2, 2, 4)
    assert out["masks", "a"][0].tolist() == [[True, False, False, False]] * 2


def test_pad_sequence_bad_input():
    with pytest.raises(ValueError, match="at least one"):
        pad_sequence([])
    with pytest.raises(KeyError, match="different keys"):
        pad_sequence([TensorDict({"a": torch.ones(1)}), TensorDict({"b": torch.ones(1)})])
    with pytest.raises(ValueError, match=r"'a'.*no dimension pad_dim=1"):
        pad_sequence(
            [TensorDict({"a": torch.ones(1)}), TensorDict({"a": torch.ones(2)})], pad_dim=1
        )
    with pytest.raises(ValueError, match="same number of batch dimensions"):
        pad_sequence([TensorDict(batch_size=[1]), TensorDict()])
    with pytest.raises(ValueError, match="outside pad_dim"):
        pad_sequence([TensorDict(batch_size=[1, 2]), TensorDict(batch_size=[1, 3])], pad_dim=0)


from tensordict._leaves import nontensor as _nontensor  # noqa: E402  (a rename must fail, not skip)


@pytest.mark.skipif(not hasattr(_nontensor, "NonTensorStack"), reason="needs NonTensorStack")
def test_pad_non_tensor_stack_with_none():
    td = torch.stack([TensorDict({"s": s, "x": torch.ones(())}) for s in "ab"])
    out = pad(td, [1, 2])
    assert out["s"] == [None, "a", "b", None, None]
    grid = torch.stack([td, td], 1)  # [2, 2]
    assert pad(grid, [0, 0, 0, 1])["s"] == [["a", "a", None], ["b", "b", None]]
    seq = pad_sequence([td, td[:1]], pad_dim=0)
    assert seq["x"].tolist() == [[1, 1], [1, 0]]


def test_negative_pad_crops_like_functional_pad():
    td = TensorDict(
        {"a": torch.arange(12.0).reshape(3, 4), "b": {"c": torch.ones(3, 4, 2)}}, [3, 4]
    )
    out = pad(td, [-1, 2, 1, -2], value=5)
    assert out.batch_size == (4, 3) and out["b"].batch_size == (4, 3)
    assert torch.equal(out["a"], F.pad(td["a"], [1, -2, -1, 2], value=5))
    assert torch.equal(out["b", "c"], F.pad(td["b", "c"], [0, 0, 1, -2, -1, 2], value=5))


def test_crop_past_the_size_raises_and_leaves_data_unchanged():
    td = TensorDict({"a": torch.ones(3, 4), "b": torch.zeros(3, 4, 2)}, [3, 4])
    a, b = td["a"], td["b"]
    for safe in (True, False):
        with pytest.raises(RuntimeError, match="negative output size"):
            td.pad([-10, 0, 0, 0], inplace=True, safe=safe)
    assert td["a"] is a and td["b"] is b and td.batch_size == (3, 4)


def test_pad_inplace_keeps_nested_and_non_tensor_stack_identity():
    td = TensorDict(
        {"x": torch.arange(3.0), "n": {"y": torch.ones(3, 2)}, "s": NonTensorStack("a", "b", "c")},
        [3],
    )
    nested, stack = td["n"], td.get("s")
    assert pad(td, [1, 1], value=-1, inplace=True) is td
    assert td["n"] is nested and td.get("s") is stack
    assert td["x"].tolist() == [-1.0, 0.0, 1.0, 2.0, -1.0]
    assert nested["y"].shape == (5, 2) and stack.tolist() == [None, "a", "b", "c", None]


def test_pad_non_tensor_entries_become_stacks_padded_with_none():
    td = TensorDict({"m": NonTensorData("m", batch_size=[2]), "x": torch.ones(2)}, [2])
    out = pad(td, [0, 1])
    assert out.get("m").tolist() == ["m", "m", None]
    stack = NonTensorStack("a", "b", "c")
    assert pad(stack, [1, -1]).tolist() == [None, "a", "b"]
    assert pad(stack, [0, 1], inplace=True) is stack and stack.tolist() == ["a", "b", "c", None]
    with pytest.raises(RuntimeError, match="identity"):
        pad(NonTensorData("a", batch_size=[2]), [0, 1], inplace=True)


def test_pad_inplace_on_a_lazy_stack_pads_members_and_adds_members():
    members = [TensorDict({"x": torch.full((4,), float(i))}, [4]) for i in range(2)]
    lazy = lazy_stack(members, 0)
    expected = pad(lazy.to_tensordict(), [1, 0, 0, 2], value=3.0)
    assert pad(lazy, [1, 0, 0, 2], value=3.0, inplace=True) is lazy
    assert lazy.batch_size == (3, 6)
    assert all(a is b for a, b in zip(lazy.tensordicts[1:], members))
    assert torch.equal(lazy.tensordicts[0]["x"], torch.full((6,), 3.0))
    assert torch.equal(lazy["x"], expected["x"])
    cropped = lazy_stack([TensorDict({"x": torch.ones(4)}, [4]) for _ in range(2)], 0)
    first, x = cropped.tensordicts[0], [m["x"] for m in cropped.tensordicts]
    with pytest.raises(RuntimeError, match="negative output size"):
        cropped.pad([0, 0, -10, 0], inplace=True)
    assert all(m["x"] is t for m, t in zip(cropped.tensordicts, x))
    assert cropped.batch_size == (2, 4)
    assert cropped.pad([0, -1], inplace=True) is cropped
    assert cropped.batch_size == (1, 4) and cropped.tensordicts == [first]
