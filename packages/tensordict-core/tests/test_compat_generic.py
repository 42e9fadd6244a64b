"""Behaviour of the reference 0.15 that code written against it relies on: dense-tensordict
operations (keys, shapes, updates, locks, arithmetic, apply, conversions), each checked
against torch or a hand-computed value, with the reference's exception types and the data
left unchanged on bad input."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from core_helpers import assert_same, assert_unchanged, snapshot

from tensordict import (
    LazyStackedTensorDict,
    NonTensorStack,
    TensorDict,
    is_leaf_nontensor,
    lazy_stack,
    merge_tensordicts,
    set_lazy_legacy,
)
from tensordict.utils import convert_ellipsis_to_idx


def _td() -> TensorDict:
    return TensorDict(
        {"a": torch.arange(12.0).reshape(3, 4), "b": {"c": torch.arange(60.0).reshape(3, 4, 5)}},
        [3, 4],
    )


# ---------------------------------------------------------------------- indexing helpers
def test_convert_ellipsis_to_idx_expands_the_one_ellipsis():
    full = slice(None)
    assert convert_ellipsis_to_idx((0, ..., 0), [3, 4, 5, 6]) == (0, full, full, 0)
    assert convert_ellipsis_to_idx(..., [2, 3]) == (full, full)
    assert convert_ellipsis_to_idx((None, 1, ...), [2, 3]) == (None, 1, full)
    for idx in ((..., 0, ...), (0, ..., 0, ...)):
        with pytest.raises(RuntimeError):
            convert_ellipsis_to_idx(idx, [3, 4, 5])
        with pytest.raises(IndexError):  # the same error is torch's IndexError too
            _td()[idx]


# ---------------------------------------------------------------------- shape operations
def test_permute_errors_have_the_reference_and_torch_types():
    td = _td()
    snap = snapshot(td)
    for dims in ((1, 1), (0, 1, 2), (0, 2), (2, 0)):
        for err in (ValueError, RuntimeError):
            with pytest.raises(err):
                td.permute(*dims)
    assert_unchanged(td, snap)
    assert td.permute(0, 1) is td  # the identity
    assert torch.equal(td.permute(1, 0)["b", "c"], td["b", "c"].permute(1, 0, 2))


def test_permute_and_view_back_in_lazy_legacy_mode_give_the_original():
    td = _td()
    with set_lazy_legacy(True):
        assert td.permute(1, 0).permute(1, 0) is td
        assert td.view(-1).view(3, 4) is td
        assert td.permute(1, 0).permute(0, 1) is not td
    assert td.permute(1, 0).permute(1, 0) is not td  # a new tensordict otherwise


def test_flips_and_rot90_need_enough_batch_dims():
    one = TensorDict({"a": torch.arange(3)}, [3])
    for op in (lambda t: t.fliplr(), lambda t: t.rot90()):
        with pytest.raises(RuntimeError, match="at least 2 batch"):
            op(one)
    assert one.flipud()["a"].tolist() == [2, 1, 0]
    td = _td()
    assert torch.equal(td.fliplr()["b", "c"], td["b", "c"].flip(1))
    assert torch.equal(td.rot90()["a"], torch.rot90(td["a"]))


def test_movedim_errors():
    td = _td()
    with pytest.raises(ValueError, match="same number of elements"):
        td.movedim((0,), (1, 0))
    with pytest.raises(RuntimeError, match="repeated dim in destination"):
        td.movedim((0, 1), (1, 1))
    with pytest.raises(IndexError):
        td.movedim(0, 5)
    assert td.movedim(1, 1) is td


def test_expand_as_a_tensordict_expands_leaf_by_leaf():
    td0 = TensorDict({"a": torch.ones(3, 1, 4), "b": {"c": torch.ones(3, 2, 1, 4)}}, [3])
    td1 = TensorDict({"a": torch.zeros(2, 3, 5, 4), "b": {"c": torch.zeros(2, 3, 2, 6, 4)}}, [2, 3])
    out = td0.expand_as(td1)
    assert out.batch_size == (2, 3)
    assert torch.equal(out["a"], td0["a"].expand_as(td1["a"]))
    assert torch.equal(out["b", "c"], td0["b", "c"].expand_as(td1["b", "c"]))
    assert td0.expand_as(torch.zeros(2, 3)).batch_size == (2, 3)  # a tensor: the batch shape


def test_repeat_keeps_the_names_and_subclasses_survive_stack_and_indexing():
    td = TensorDict({"a": torch.zeros(2, 3)}, [2, 3], names=["x", "y"])
    assert td.repeat(1, 2).names == ["x", "y"]
    assert td.repeat(2, 1, 2).names == [None, "x", "y"]

    class Sub(TensorDict):
        pass

    t = Sub(a=torch.randn(3), batch_size=[3])
    stacked = torch.stack([t, t])
    assert type(stacked) is Sub and type(stacked[0]) is Sub
    assert torch.equal(stacked["a"], torch.stack([t["a"], t["a"]]))


def test_split_and_chunk_of_jagged_leaves():
    seqs = [torch.tensor([1, 2, 3]), torch.tensor([4, 5, 6, 7]), torch.tensor([8])]
    nt = torch.nested.as_nested_tensor(seqs, layout=torch.jagged)
    parts = TensorDict({"x": nt}, [3]).split([2, 1])
    assert [p.batch_size[0] for p in parts] == [2, 1]
    got = [t.tolist() for p in parts for t in p["x"].unbind()]
    assert got == [s.tolist() for s in seqs]
    assert len(TensorDict({"x": nt}, [3]).chunk(3)) == 3


# ---------------------------------------------------------------------- keys
def test_key_membership_needs_a_key():
    td = _td()
    assert "a" in td and ("b", "c") in td and "z" not in td
    with pytest.raises(RuntimeError, match="NestedKey"):
        0 in td  # noqa: B015


def test_merge_calls_back_only_for_keys_every_input_holds():
    td0 = TensorDict({"a": {"b0": 0}, "common": 0})
    td1 = TensorDict({"a": {"b1": 1}, "f": {"g": 1}, "common": 1})
    td2 = TensorDict({"f": {"g": 2}, "common": 2})
    out = merge_tensordicts(td0, td1, td2, callback_exist=lambda *v: torch.stack(list(v)))
    assert out["common"].tolist() == [0, 1, 2]
    assert out["f", "g"] == 1  # in two inputs only: the first value
    assert set(out.keys(True, True)) == {("a", "b0"), ("a", "b1"), ("f", "g"), "common"}


def test_separates_default_none_and_split_keys_drop_emptied_levels():
    td = TensorDict(a=0, b=TensorDict(c=0, d=0))
    out = td.separates("a", ("b", "d"), "e", default=None)
    assert out.get("e").data is None and out["a"] == 0
    assert list(td.keys(True, True)) == [("b", "c")]
    td = TensorDict({"a": 0, "b": {"c": 1}, "d": {"e": 2, "f": 3}})
    parts = td.split_keys([("b", "c")], [("d", "e"), ("d", "f")], inplace=True)
    assert parts[-1] is td and list(td.keys()) == ["a"]


def test_rename_key_into_and_out_of_its_own_subtree():
    td = TensorDict(a={"b": {"c": 0}})
    td.rename_key_(("a", "b", "c"), ("a", "b"))
    assert td["a", "b"] == 0 and list(td.keys(True, True)) == [("a", "b")]
    td = TensorDict(nest={"x": 1})
    td.rename_key_("nest", ("nest", "moved"))
    assert list(td.keys(True, True)) == [("nest", "moved", "x")]
    with pytest.raises(KeyError, match="already present"):
        td.rename_key_(("nest", "moved", "x"), ("nest", "moved"), safe=True)


def test_flatten_keys_drops_empty_nested_tensordicts():
    td = TensorDict(a=0, b={}, c={"d": {}, "e": 1})
    assert list(td.flatten_keys(".").keys()) == ["a", "c.e"]


def test_depth_and_bytes():
    td = TensorDict({"a": {"b": {"c": {}, "e": 0}}, "g": 0})
    assert td.depth == 2  # the empty ("a", "b", "c") does not count
    v, offsets = torch.ones(3), torch.tensor([0, 1, 3])
    t = torch.zeros(3)
    w = torch.ones(3, requires_grad=True)
    w.sum().backward()
    njt = torch.nested.nested_tensor_from_jagged(v, offsets)
    shared = torch.nested.nested_tensor_from_jagged(t, offsets)  # reuses t and offsets
    td = TensorDict(t=t, w=w, njt=njt, shared=shared)
    # t: 12, w and its grad: 24, njt: values 12 + offsets 24
    assert td.bytes() == 12 + 24 + 36
    assert td.bytes(count_duplicates=True) == 12 + 24 + 36 + 36


# ---------------------------------------------------------------------- updates and locks
def test_update_without_entries_and_update_prefix_keys():
    td = _td()
    assert td.update() is td and td.update_() is td
    other = _td().apply(lambda x: x + 1)
    c = td["b", "c"]
    td.update_(other, keys_to_update=["b"])
    assert td["b", "c"] is c and torch.equal(c, other["b", "c"])
    assert torch.equal(td["a"], _td()["a"])
    with pytest.raises(KeyError, match="was not found"):
        td.update_({"zz": torch.zeros(3, 4)})


def test_update_batch_size_resizes_and_keeps_identities():
    td0 = TensorDict(a=torch.zeros(3), n={"b": torch.zeros(3, 2)}, batch_size=[3])
    td1 = TensorDict(a=torch.ones(4), n={"b": torch.ones(4, 2)}, batch_size=[4])
    snap = snapshot(td0)
    with pytest.raises(RuntimeError, match="update_batch_size"):
        td0.update(td1)
    assert_unchanged(td0, snap)
    nested = td0["n"]
    td0.update(td1, update_batch_size=True)
    assert td0.batch_size == (4,) and td0["n"] is nested and nested.batch_size == (4,)
    assert_same(td0, td1)
    lazy = lazy_stack([TensorDict(r=torch.zeros(2), batch_size=[2])] * 2, -1)
    dest = TensorDict(s=lazy, batch_size=[])
    src = TensorDict(s=lazy_stack([TensorDict(r=torch.ones(3), batch_size=[3])] * 3, -1))
    dest.update(src, update_batch_size=True)
    assert dest["s"] is lazy and lazy.batch_size == (3, 3)
    locked = TensorDict(a=torch.zeros(3), batch_size=[3]).lock_()
    with pytest.raises(RuntimeError, match="lock"):
        locked.update(td1, update_batch_size=True)
    assert locked.batch_size == (3,)


def test_a_locked_tensordict_only_takes_in_place_writes():
    td = _td().lock_()
    a = td["a"]
    snap = snapshot(td)
    for write in (
        lambda: td.set("a", torch.ones(3, 4)),
        lambda: td.__setitem__("a", torch.ones(3, 4)),
        lambda: td.update({"a": torch.ones(3, 4)}),
        lambda: td.set("new", torch.ones(3, 4)),
    ):
        with pytest.raises(RuntimeError, match="Cannot modify locked TensorDict"):
            write()
    assert_unchanged(td, snap)
    td.set("a", torch.ones(3, 4), inplace=True)
    td.update({"a": torch.full((3, 4), 2.0)}, inplace=True)
    assert td["a"] is a and bool((a == 2).all())


def test_construction_takes_source_or_keywords_not_both():
    with pytest.raises(ValueError, match="not both"):
        TensorDict({"a": 1}, b=2)


# ---------------------------------------------------------------------- arithmetic
def test_tensor_operands_line_up_with_the_batch_dims():
    td = _td()
    for shape in [(4,), (3, 1), (2, 3, 4)]:
        t = torch.arange(1.0, 1.0 + torch.Size(shape).numel()).reshape(shape)
        out = td * t
        bs = torch.broadcast_shapes(shape, td.batch_size)
        assert out.batch_size == bs
        assert torch.equal(out["a"], td["a"] * t)
        assert torch.equal(out["b", "c"], td["b", "c"] * t.unsqueeze(-1))
        assert torch.equal(td.clamp(None, t)["b", "c"], td["b", "c"].clamp(max=t.unsqueeze(-1)))
    with pytest.raises(RuntimeError, match="batch"):
        td * torch.ones(5)


def test_default_fills_or_intersects_the_keys():
    td0 = TensorDict(a=1, b=1, c=1)
    td1 = TensorDict(b=2, c=2, d=2)
    with pytest.raises(KeyError):
        td0.add(td1)
    out = td0.add(td1, default=torch.tensor(3))
    assert (out["a"], out["b"], out["d"]) == (4, 3, 5)
    inter = td0.mul(td1, default="intersection")
    assert set(inter.keys()) == {"b", "c"} and inter["b"] == 2


def test_arithmetic_on_a_locked_tensordict_gives_a_locked_result_and_out_reductions():
    td = _td().lock_()
    assert (td + 1).is_locked and not (td == 1).is_locked
    out = _td().logsumexp(dim=1)
    a = out["a"]
    res = _td().logsumexp(dim=1, out=out)
    assert res is out and out["a"] is a
    torch.testing.assert_close(a, torch.logsumexp(_td()["a"], 1))


# ---------------------------------------------------------------------- apply and autograd
def test_apply_out_is_leaf_and_filter_empty():
    td = TensorDict(a=torch.zeros(3), s="text", batch_size=[3])
    dest = TensorDict(a=torch.ones(3, dtype=torch.long), batch_size=[3])
    assert td.apply(lambda x: x + 2, out=dest) is dest and dest["a"].tolist() == [2.0] * 3
    seen = []
    td.apply(lambda x: seen.append(type(x).__name__), is_leaf=is_leaf_nontensor)
    assert sorted(seen) == ["NonTensorData", "Tensor"]
    assert td.apply(lambda x: None, filter_empty=True, is_leaf=is_leaf_nontensor) is None
    assert td.apply(lambda x: None, filter_empty=False) is not None


def test_grad_and_data_follow_the_lock():
    w = torch.ones(3, requires_grad=True)
    td = TensorDict(w=w, batch_size=[3])
    assert td.grad is None  # no gradient yet
    (w * 2).sum().backward()
    assert not td.grad.is_locked and torch.equal(td.grad["w"], torch.full((3,), 2.0))
    td.lock_()
    assert td.grad.is_locked and td.data.is_locked


# ---------------------------------------------------------------------- conversions
def test_from_any_of_lists():
    values = torch.randn(2, 3).tolist()
    t = TensorDict.from_any(values)
    assert isinstance(t, torch.Tensor) and t.tolist() == values
    ragged = TensorDict.from_any([[1, 2], [3]])
    assert isinstance(ragged, NonTensorStack) and ragged.tolist() == [[1, 2], [3]]


def test_pad_sequence_and_lazy_stacks_keep_working_with_the_new_lock_rule():
    # a locked lazy stack refuses replacing an entry in its members too
    lazy = LazyStackedTensorDict(*[TensorDict(a=torch.zeros(2), batch_size=[2])] * 2).lock_()
    with pytest.raises(RuntimeError, match="Cannot modify locked TensorDict"):
        lazy.set("a", torch.ones(2, 2))
    lazy.set("a", torch.ones(2, 2), inplace=True)
    assert lazy["a"].tolist() == [[1.0, 1.0], [1.0, 1.0]]


# ---------------------------------------------------------------------- lazy-legacy views
def test_lazy_legacy_views_write_through_and_refuse_other_shape_ops():
    td = _td()
    with set_lazy_legacy(True):
        t = td.transpose(0, 1)
        t["new"] = torch.ones(4, 3)
        t.set(("n", "x"), torch.arange(12.0).reshape(4, 3))
        assert torch.equal(td["n", "x"], torch.arange(12.0).reshape(4, 3).T)
        assert td["new"].shape == (3, 4) and t.transpose(1, 0) is td
        u = td.unsqueeze(-1)
        assert u.squeeze(-1) is td
        uu = u.transpose(0, 1)  # a view of the view: writes through both
        uu["deep"] = torch.zeros(4, 3, 1)
        assert td["deep"].shape == (3, 4) and u["deep"].shape == (3, 4, 1)
        with pytest.raises(ValueError, match="dimensions are incompatible"):
            t.transpose(-5, -6)
    assert type(td.transpose(0, 1)) is TensorDict  # outside the mode: a plain tensordict
    with pytest.raises(RuntimeError, match="Make it dense"):
        u.squeeze(-1)  # outside the mode a view refuses shape operations, its inverse too
    with pytest.raises(RuntimeError, match="Cannot call `view`"):
        u.view(-1)
    td.lock_()
    assert u.is_locked  # a view follows its source's lock
    td.unlock_()
    assert not u.is_locked
    assert type(u + 1) is TensorDict and type(u.clone()) is TensorDict


def test_to_another_tensordict_and_index_names():
    td = _td()
    other = TensorDict(x=torch.zeros(1, dtype=torch.float64))
    assert td.to(other=other)["b", "c"].dtype == torch.float64
    named = TensorDict(a=torch.zeros(4, 3, 2), batch_size=[4, 3, 2], names=["a", "b", "c"])
    index = torch.tensor([[0, 1], [1, 2]])
    assert named[:, index].names == ["a", "b", "b", "c"]
    assert named[:, index].batch_size == torch.zeros(4, 3, 2)[:, index].shape


def test_elementwise_losses_leaf_by_leaf():
    td = _td()
    target = td.apply(lambda x: x * 0.5)
    none = F.l1_loss(td, target, reduction="none")
    assert none.batch_size == td.batch_size
    assert torch.equal(none["b", "c"], F.l1_loss(td["b", "c"], target["b", "c"], reduction="none"))
    mean = F.mse_loss(td, target)
    assert mean.batch_size == () and torch.equal(mean["a"], F.mse_loss(td["a"], target["a"]))
    total = F.smooth_l1_loss(td, torch.zeros(4), reduction="sum")
    want = F.smooth_l1_loss(td["b", "c"], torch.zeros(3, 4, 5), reduction="sum")
    assert torch.equal(total["b", "c"], want)


def test_compare_lazy_stack_with_heterogeneous_tensors():
    # the non-tensor leaves are compared; the tensors that differ across members are not
    # stacked for that
    a = TensorDict({"a": torch.zeros(3), "s": "x"}, [])
    b = TensorDict({"a": torch.zeros(4), "s": "y"}, [])
    stack = lazy_stack([a, b])
    out = stack == stack.clone()
    assert torch.equal(out["s"], torch.tensor([True, True]))
    assert out.tensordicts[1]["a"].shape == (4,) and out.tensordicts[1]["a"].all()


def test_consolidated_is_locked():
    import pickle

    td = TensorDict({"a": torch.zeros(1, 1), "b": TensorDict(c=torch.zeros(1, 1))}, [1])
    out = td.consolidate()
    assert out.is_locked and out["b"].is_locked and not td.is_locked
    with pytest.raises(RuntimeError, match="locked"):
        out["new"] = torch.zeros(1)
    # the lock is consolidate's: a pickled copy has the source's (none here)
    assert not pickle.loads(pickle.dumps(out)).is_locked
    assert pickle.loads(pickle.dumps(td.clone().lock_().consolidate())).is_locked
    same = td.consolidate(inplace=True)
    assert same is td and td.is_locked


def test_where_out_takes_the_entries_it_lacks():
    td = _td()
    mask = torch.tensor([[True, False, True, False]] * 3)
    out = td.empty()
    result = td.where(mask, td.empty(), pad=1, out=out)
    assert result is out and set(out.keys(True, True)) == set(td.keys(True, True))
    want = torch.where(mask[..., None], td["b", "c"], torch.ones(()))
    assert torch.equal(out["b", "c"], want)


def test_dtype_views_of_lazy_tensordicts():
    members = [TensorDict(a=torch.randn(3, 2), batch_size=[3]) for _ in range(2)]
    stack = lazy_stack(members, 1)
    dense = stack.view(torch.uint8, batch_size=[])  # a new batch size: dense
    assert type(dense) is TensorDict and dense.batch_size == ()
    assert torch.equal(dense["a"], torch.stack([m["a"] for m in members], 1).view(torch.uint8))
    with pytest.raises(TypeError, match="batch_size"):
        stack.to(torch.float64, batch_size=[])
    source = TensorDict(a=torch.randn(4, 1, 2), batch_size=[4, 1, 2])
    with set_lazy_legacy(True):
        view = source.squeeze(1)
        viewed = view.view(torch.int32)
        assert type(viewed) is TensorDict
        assert torch.equal(viewed["a"], source["a"].squeeze(1).view(torch.int32))
    with pytest.raises(TypeError, match="batch_size"):
        view.to(torch.float64, batch_size=[])
    out = torch.vmap(lambda x: x + 1)(view)  # a pytree node as TensorDict is
    assert type(out) is TensorDict and torch.equal(out["a"], source["a"].squeeze(1) + 1)


# the reference's phrases, kept in our messages so that `except`/`match=` written against
# it still work (each message goes on to name the key, shapes or dims)
def _heterogeneous_read():
    lazy_stack([TensorDict(a=torch.zeros(2)), TensorDict(a=torch.zeros(3))])["a"]


@pytest.mark.parametrize(
    "call, error, phrase",
    [
        (
            lambda: bool(TensorDict(a=torch.zeros(2))),
            RuntimeError,
            "to boolean value is not permitted",
        ),
        (lambda: TensorDict(a=torch.zeros(2)).pop("z"), KeyError, "You are trying to pop key"),
        (_heterogeneous_read, RuntimeError, "Failed to stack tensors within a tensordict"),
        (
            lambda: TensorDict(batch_size=[2, 3]).transpose(0, 5),
            (IndexError, ValueError, RuntimeError),
            "dim0 and dim1 must be within the range",
        ),
        (
            lambda: TensorDict(a=torch.zeros(2), batch_size=[2]).where(
                torch.ones(2, dtype=torch.bool), TensorDict(b=torch.zeros(2), batch_size=[2])
            ),
            KeyError,
            "not found and no pad value provided",
        ),
        (
            lambda: TensorDict({"a.b": torch.zeros(1), "a": {"b": torch.zeros(1)}}).flatten_keys(),
            KeyError,
            "Flattening keys in tensordict causes keys to collide",
        ),
        (lambda: TensorDict().split(1, 0), IndexError, "Incompatible dim"),
    ],
    ids=["bool", "pop", "lazy-read", "transpose", "where", "flatten", "dim"],
)
def test_reference_phrases_in_errors(call, error, phrase):
    with pytest.raises(error, match=phrase):
        call()
