"""cat_tensors, stack_tensors, cat_from_tensordict and stack_from_tensordict."""

from __future__ import annotations

import pytest
import torch
from core_helpers import assert_unchanged, snapshot
from hypothesis import given, settings
from hypothesis import strategies as st

from tensordict import LazyStackedTensorDict, TensorDict, is_leaf_nontensor, lazy_stack


def _flat() -> TensorDict:
    return TensorDict(
        a=torch.tensor([[0.0], [1.0]]),
        b=torch.tensor([[2.0, 3.0], [4.0, 5.0]]),
        c=torch.tensor([[6.0], [7.0]]),
        batch_size=[2],
    )


def _nested() -> TensorDict:
    return TensorDict(
        {
            "z": torch.tensor([[1.0, 2.0], [3.0, 4.0]]),
            "n": {
                "y": torch.tensor([[5.0, 6.0], [7.0, 8.0]]),
                "m": {"x": torch.tensor([[9.0, 10.0], [11.0, 12.0]])},
            },
            "a": torch.tensor([[13.0, 14.0], [15.0, 16.0]]),
            "label": "text",
        },
        batch_size=[2],
    )


def _lazy() -> LazyStackedTensorDict:
    return lazy_stack(
        [
            TensorDict(
                a=torch.full((2, 1), float(i)),
                b={"c": torch.full((2, 2), 10.0 + i)},
                batch_size=[2],
            )
            for i in range(3)
        ]
    )


# ---------------------------------------------------------------------- cat_tensors
def test_cat_tensors_reference_example():
    td = TensorDict(a=torch.zeros(1), b=torch.ones(1))
    assert td.cat_tensors("a", "b", out_key="c") is td
    assert list(td.keys()) == ["c"]
    assert td["c"].tolist() == [0.0, 1.0]


def test_cat_tensors_along_feature_dim_and_removes_sources():
    td = _flat()
    a, b = td["a"], td["b"]
    td.cat_tensors("a", "b", out_key="ab", dim=1)
    assert td["ab"].tolist() == [[0.0, 2.0, 3.0], [1.0, 4.0, 5.0]]
    assert torch.equal(td["ab"], torch.cat([a, b], 1))
    assert list(td.keys()) == ["c", "ab"]


def test_cat_tensors_negative_dim_and_keep_entries():
    td = _flat()
    before = td.clone()
    td.cat_tensors("c", "a", "b", out_key="all", dim=-1, keep_entries=True)
    assert td["all"].tolist() == [[6.0, 0.0, 2.0, 3.0], [7.0, 1.0, 4.0, 5.0]]
    for key in ("a", "b", "c"):
        assert torch.equal(td[key], before[key])


def test_cat_tensors_along_batch_dim_without_batch():
    td = TensorDict(a=torch.tensor([1, 2]), b=torch.tensor([3]))
    td.cat_tensors("b", "a", out_key="c")
    assert td["c"].tolist() == [3, 1, 2]
    assert td["c"].dtype == torch.int64


def test_cat_tensors_nested_keys():
    td = _nested()
    td.cat_tensors(("n", "y"), ("n", "m", "x"), "a", out_key=("n", "out"), dim=-1)
    assert td["n", "out"].tolist() == [
        [5.0, 6.0, 9.0, 10.0, 13.0, 14.0],
        [7.0, 8.0, 11.0, 12.0, 15.0, 16.0],
    ]
    assert list(td.keys(True, True, is_leaf=is_leaf_nontensor)) == ["z", ("n", "out"), "label"]
    assert ("n", "m") in td.keys(True)  # the emptied nested tensordict stays


def test_cat_tensors_nested_key_spellings():
    td = _nested()
    td.cat_tensors(("n", ("y",)), (("n", "m"), "x"), out_key=(("new",), "k"), dim=1)
    assert td["new", "k"].tolist() == [[5.0, 6.0, 9.0, 10.0], [7.0, 8.0, 11.0, 12.0]]


def test_cat_tensors_out_key_is_a_source():
    td = _flat()
    td.cat_tensors("a", "c", out_key="a", dim=1)
    assert td["a"].tolist() == [[0.0, 6.0], [1.0, 7.0]]
    assert list(td.keys()) == ["a", "b"]


def test_cat_tensors_overwrites_other_existing_out_key():
    td = _flat()
    td.cat_tensors("a", "c", out_key="b", dim=1)
    assert td["b"].tolist() == [[0.0, 6.0], [1.0, 7.0]]
    assert list(td.keys()) == ["b"]


def test_cat_tensors_repeated_source():
    td = _flat()
    td.cat_tensors("a", "a", out_key="aa", dim=1)
    assert td["aa"].tolist() == [[0.0, 0.0], [1.0, 1.0]]
    assert list(td.keys()) == ["b", "c", "aa"]


def test_cat_tensors_lazy_stack():
    lazy = _lazy()
    a, c = lazy["a"], lazy["b", "c"]
    lazy.cat_tensors("a", ("b", "c"), out_key="ac", dim=-1)
    assert torch.equal(lazy["ac"], torch.cat([a, c], -1))
    assert lazy["ac"].shape == (3, 2, 3)
    for i, member in enumerate(lazy.tensordicts):
        assert list(member.keys(True, True)) == ["ac"]
        assert member["ac"].tolist() == [[i, 10.0 + i, 10.0 + i]] * 2


# ---------------------------------------------------------------------- stack_tensors
def test_stack_tensors_reference_example():
    td = TensorDict(a=torch.tensor(0.0), b=torch.tensor(1.0))
    td.stack_tensors("a", "b", out_key="c")
    assert td["c"].tolist() == [0.0, 1.0]
    assert list(td.keys()) == ["c"]


@pytest.mark.parametrize("dim", [1, 2, -1, -2])
def test_stack_tensors_dims_count_in_result(dim):
    td = _nested()
    y, x = td["n", "y"], td["n", "m", "x"]
    td.stack_tensors(("n", "y"), ("n", "m", "x"), out_key="s", dim=dim, keep_entries=True)
    assert torch.equal(td["s"], torch.stack([y, x], dim))
    assert td["s"].shape == (2, 2, 2)
    assert torch.equal(td["n", "y"], y)


def test_stack_tensors_hand_computed():
    td = TensorDict(a=torch.tensor([1, 2]), b=torch.tensor([3, 4]), batch_size=[2])
    td.stack_tensors("a", "b", out_key="ab", dim=1)
    assert td["ab"].tolist() == [[1, 3], [2, 4]]


def test_stack_tensors_lazy_stack():
    lazy = _lazy()
    c = lazy["b", "c"]
    lazy.stack_tensors(("b", "c"), ("b", "c"), out_key=("b", "cc"), dim=-1)
    assert torch.equal(lazy["b", "cc"], torch.stack([c, c], -1))
    assert all(list(m.keys(True, True)) == ["a", ("b", "cc")] for m in lazy.tensordicts)


# ---------------------------------------------------------------------- bad input leaves td unchanged
@pytest.mark.parametrize("make", [_flat, _nested, _lazy], ids=["flat", "nested", "lazy"])
def test_missing_key_raises_and_changes_nothing(make):
    td = make()
    snap = snapshot(td)
    with pytest.raises(KeyError, match="'missing'"):
        td.cat_tensors("a", "missing", out_key="out", dim=-1)
    with pytest.raises(KeyError, match=r"\('a', 'nope'\)"):
        td.stack_tensors("a", ("a", "nope"), out_key="out")
    assert_unchanged(td, snap)


def test_non_tensor_key_raises_type_error():
    td = _nested()
    snap = snapshot(td)
    with pytest.raises(TypeError, match="'label' is a non-tensor NonTensorData"):
        td.cat_tensors("a", "label", out_key="out", dim=1)
    with pytest.raises(TypeError, match="'n' is a nested TensorDict"):
        td.cat_tensors("a", "n", out_key="out")
    assert_unchanged(td, snap)


def test_cat_shape_mismatch_names_keys_and_shapes():
    td = _flat()
    snap = snapshot(td)
    with pytest.raises(RuntimeError, match=r"cat_tensors.*'a': \(2, 1\), 'b': \(2, 2\)"):
        td.cat_tensors("a", "b", out_key="ab", dim=0)  # result (4, ...) but also mismatched
    assert_unchanged(td, snap)


def test_stack_shape_mismatch_names_shapes():
    td = _flat()
    snap = snapshot(td)
    with pytest.raises(RuntimeError, match=r"stack_tensors.*'a': \(2, 1\), 'b': \(2, 2\)"):
        td.stack_tensors("a", "b", out_key="ab", dim=1)
    assert_unchanged(td, snap)


def test_dim_out_of_range():
    td = _flat()
    snap = snapshot(td)
    with pytest.raises(IndexError, match="cat_tensors.*dim=5"):
        td.cat_tensors("a", "c", out_key="ac", dim=5)
    assert_unchanged(td, snap)


@pytest.mark.parametrize("make", [_flat, _lazy], ids=["flat", "lazy"])
def test_result_that_breaks_batch_size_is_refused(make):
    td = make()
    snap = snapshot(td)
    # Concatenating along the (first) batch dimension changes it: the write is refused.
    with pytest.raises(RuntimeError, match="'out'"):
        td.cat_tensors("a", "a", out_key="out", dim=0)
    assert_unchanged(td, snap)


def test_no_keys_is_a_type_error():
    with pytest.raises(TypeError, match="at least one key"):
        _flat().cat_tensors(out_key="x")


@pytest.mark.parametrize("make", [_flat, _nested, _lazy], ids=["flat", "nested", "lazy"])
def test_locked_tensordict_refuses_and_changes_nothing(make):
    td = make()
    td.lock_()
    snap = snapshot(td)
    with pytest.raises(RuntimeError, match="cannot delete key 'a'.*locked"):
        td.cat_tensors("a", "a", out_key="out", dim=-1)
    # Keeping the entries still adds a key, which a locked tensordict refuses too.
    with pytest.raises(RuntimeError, match="cannot add key 'out'.*locked"):
        td.stack_tensors("a", "a", out_key="out", dim=-1, keep_entries=True)
    assert_unchanged(td, snap)
    assert td.is_locked


def test_locked_tensordict_refuses_to_overwrite_an_existing_key():
    # as the reference: a locked tensordict only takes in-place writes
    td = _flat().lock_()
    snap = snapshot(td)
    with pytest.raises(RuntimeError, match="cannot replace key 'b'"):
        td.cat_tensors("a", "c", out_key="b", dim=1, keep_entries=True)
    assert_unchanged(td, snap)


def test_locked_nested_parent_refuses_deleting():
    td = _nested()
    td["n"].lock_()
    snap = snapshot(td)
    with pytest.raises(RuntimeError, match=r"cannot delete key \('n', 'y'\)"):
        td.cat_tensors("a", ("n", "y"), out_key="out", dim=1)
    with pytest.raises(RuntimeError, match=r"cannot add key \('n', 'm2', 'k'\)"):
        td.cat_tensors("a", "z", out_key=("n", "m2", "k"), dim=1, keep_entries=True)
    assert_unchanged(td, snap)


def test_lazy_stack_with_one_locked_member_changes_nothing():
    lazy = _lazy()
    lazy.tensordicts[1].lock_()
    snap = snapshot(lazy)
    with pytest.raises(RuntimeError, match="locked"):
        lazy.cat_tensors("a", ("b", "c"), out_key="ac", dim=-1)
    assert_unchanged(lazy, snap)
    assert all("ac" not in m.keys() for m in lazy.tensordicts)


def test_lazy_stack_write_refused_by_a_locked_member_changes_no_member():
    # The locked member refuses overwriting "a" (only in-place writes reach a locked
    # tensordict): the members before it, already written, are restored.
    lazy = _lazy()
    lazy.tensordicts[1].lock_()
    snap = snapshot(lazy)
    with pytest.raises(RuntimeError, match="cannot replace key 'a'"):
        lazy.cat_tensors("a", ("b", "c"), out_key="a", dim=-1)
    assert_unchanged(lazy, snap)
    assert lazy["a"].shape == (3, 2, 1)


# ---------------------------------------------------------------------- *_from_tensordict
def test_cat_from_tensordict_reference_examples():
    td = TensorDict(a=torch.zeros(2, 1), b=torch.ones(2, 2), batch_size=[2])
    assert td.cat_from_tensordict(dim=1).tolist() == [[0.0, 1.0, 1.0], [0.0, 1.0, 1.0]]
    assert td.cat_from_tensordict(dim=1, sorted=["b", "a"]).tolist() == [
        [1.0, 1.0, 0.0],
        [1.0, 1.0, 0.0],
    ]


def test_stack_from_tensordict_reference_example():
    td = TensorDict(a=torch.zeros(2), b=torch.ones(2), batch_size=[2])
    assert td.stack_from_tensordict(dim=1).tolist() == [[0.0, 1.0], [0.0, 1.0]]
    assert td.stack_from_tensordict().tolist() == [[0.0, 0.0], [1.0, 1.0]]


def test_from_tensordict_nested_insertion_order_skips_non_tensors():
    td = _nested()
    leaves = [td["z"], td["n", "y"], td["n", "m", "x"], td["a"]]  # depth first
    assert torch.equal(td.cat_from_tensordict(), torch.cat(leaves, 0))
    assert torch.equal(td.cat_from_tensordict(-1, sorted=False), torch.cat(leaves, -1))
    assert torch.equal(td.stack_from_tensordict(1), torch.stack(leaves, 1))
    assert td.cat_from_tensordict(1)[0].tolist() == [1, 2, 5, 6, 9, 10, 13, 14]


def test_from_tensordict_sorted_true_matches_keys_sort():
    td = TensorDict(
        {"b": torch.tensor([1]), "a_": {"x": torch.tensor([2])}, "a": torch.tensor([3])}
    )
    keys = list(td.keys(True, True, sort=True))
    assert keys == ["a", ("a_", "x"), "b"]
    assert td.cat_from_tensordict(sorted=True).tolist() == [3, 2, 1]
    assert torch.equal(td.stack_from_tensordict(sorted=True), torch.stack([td[k] for k in keys]))


def test_from_tensordict_sorted_list_with_nested_keys():
    td = _nested()
    order = ["a", ("n", "m", "x"), "z", ("n", ("y",))]
    expected = torch.cat([td["a"], td["n", "m", "x"], td["z"], td["n", "y"]], -1)
    assert torch.equal(td.cat_from_tensordict(-1, sorted=order), expected)


@pytest.mark.parametrize(
    "order, message",
    [
        (["a", "z", ("n", "y")], r"missing tensor leaves \[\('n', 'm', 'x'\)\]"),
        (["a", "z", ("n", "y"), ("n", "m", "x"), "q"], r"not tensor leaves \['q'\]"),
        (["a", "z", ("n", "y"), ("n", "m", "x"), "label"], r"not tensor leaves \['label'\]"),
        (["a", "a", "z", ("n", "y"), ("n", "m", "x")], r"repeated keys \['a'\]"),
    ],
)
def test_from_tensordict_bad_sorted_list(order, message):
    td = _nested()
    with pytest.raises(RuntimeError, match=message):
        td.cat_from_tensordict(sorted=order)
    with pytest.raises(RuntimeError, match=message):
        td.stack_from_tensordict(sorted=order)


def test_from_tensordict_sorted_bad_type():
    with pytest.raises(TypeError, match="sorted= takes"):
        _flat().cat_from_tensordict(sorted="a")  # type: ignore[arg-type]


def test_from_tensordict_out_passes_through():
    td = TensorDict(a=torch.zeros(2), b=torch.ones(2), batch_size=[2])
    out = torch.empty(4)
    assert td.cat_from_tensordict(out=out) is out
    assert out.tolist() == [0.0, 0.0, 1.0, 1.0]
    out2 = torch.empty(2, 2)
    assert td.stack_from_tensordict(1, out=out2) is out2
    assert out2.tolist() == [[0.0, 1.0], [0.0, 1.0]]


def test_stack_from_tensordict_shape_mismatch_names_shapes():
    with pytest.raises(
        RuntimeError, match=r"share one shape.*'a': \(2, 1\), 'b': \(2, 2\), 'c': \(2, 1\)"
    ):
        _flat().stack_from_tensordict()


def test_cat_from_tensordict_mismatch_and_bad_dim():
    with pytest.raises(RuntimeError, match=r"cat_from_tensordict.*'a': \(2, 1\), 'b': \(2, 2\)"):
        _flat().cat_from_tensordict(0)
    with pytest.raises(IndexError, match="cat_from_tensordict.*dim=3"):
        _flat().cat_from_tensordict(3)


def test_from_tensordict_without_tensor_leaves():
    with pytest.raises(RuntimeError, match="no tensor leaves"):
        TensorDict({"s": "text", "n": {}}).cat_from_tensordict()
    with pytest.raises(RuntimeError, match="no tensor leaves"):
        TensorDict().stack_from_tensordict()


def test_from_tensordict_lazy_stack():
    lazy = _lazy()
    a, c = lazy["a"], lazy["b", "c"]
    assert torch.equal(lazy.cat_from_tensordict(-1), torch.cat([a, c], -1))
    assert torch.equal(
        lazy.cat_from_tensordict(-1, sorted=[("b", "c"), "a"]), torch.cat([c, a], -1)
    )
    with pytest.raises(RuntimeError, match="share one shape"):
        lazy.stack_from_tensordict()
    assert torch.equal(lazy.exclude("a").stack_from_tensordict(), c.unsqueeze(0))


# ---------------------------------------------------------------------- properties
@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 4), min_size=1, max_size=5),
    batch=st.integers(1, 3),
    keep=st.booleans(),
)
def test_cat_tensors_then_split_gives_back_the_entries(sizes, batch, keep):
    originals = {f"k{i}": torch.randn(batch, n) for i, n in enumerate(sizes)}
    td = TensorDict(dict(originals), batch_size=[batch])
    td.cat_tensors(*originals, out_key=("out", "cat"), dim=1, keep_entries=keep)
    parts = td["out", "cat"].split(sizes, dim=1)
    for part, original in zip(parts, originals.values()):
        assert torch.equal(part, original)
    assert set(td.keys()) == ({"out"} | (set(originals) if keep else set()))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 5), shape=st.lists(st.integers(1, 3), max_size=3), data=st.data())
def test_stack_tensors_then_unbind_gives_back_the_entries(n, shape, data):
    dim = data.draw(st.integers(-(len(shape) + 1), len(shape)))
    originals = {f"k{i}": torch.randn(tuple(shape)) for i in range(n)}
    td = TensorDict(dict(originals))
    td.stack_tensors(*originals, out_key="s", dim=dim)
    for part, original in zip(td["s"].unbind(dim), originals.values()):
        assert torch.equal(part, original)
    assert list(td.keys()) == ["s"]
    assert torch.equal(TensorDict(dict(originals)).stack_from_tensordict(dim), td["s"])
