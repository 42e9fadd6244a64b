"""Shape operations with the reference 0.15's parameters: ``inplace=True`` (the tensordict
itself takes the result, nested tensordicts keep their identity), ``movedim`` with tuples,
``new_*(empty_lazy=True)``, ``pad_sequence`` with ``padding_side``/per-key values/a mask key."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable
from typing import Any

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict, lazy_stack, pad, pad_sequence


def _td() -> TensorDict:
    return TensorDict(
        a=torch.arange(12.0).reshape(3, 4),
        nested=TensorDict(b=torch.arange(24.0).reshape(3, 4, 2), batch_size=[3, 4]),
        batch_size=[3, 4],
    )


OPS: dict[str, Callable[..., Any]] = {
    "reshape": lambda td, **kw: td.reshape(12, **kw),
    "flatten": lambda td, **kw: td.flatten(0, 1, **kw),
    "unflatten": lambda td, **kw: td.unflatten(1, (2, 2), **kw),
    "repeat": lambda td, **kw: td.repeat(2, 1, **kw),
    "repeat_interleave": lambda td, **kw: td.repeat_interleave(2, dim=0, **kw),
    "roll": lambda td, **kw: td.roll(1, 0, **kw),
    "gather": lambda td, **kw: td.gather(1, torch.tensor([[0, 2], [1, 3], [3, 0]]), **kw),
    "pad": lambda td, **kw: td.pad([0, 1, 2, 0], value=-1.0, **kw),
    "masked_select": lambda td, **kw: td.masked_select(torch.tensor([True, False, True]), **kw),
    "contiguous": lambda td, **kw: td.contiguous(**kw),
}


@pytest.mark.parametrize("name", list(OPS))
def test_inplace_matches_out_of_place_and_keeps_identity(name: str) -> None:
    expected = OPS[name](_td())
    td = _td()
    nested = td["nested"]
    out = OPS[name](td, inplace=True)
    assert out is td
    assert td["nested"] is nested
    assert td.batch_size == expected.batch_size
    assert nested.batch_size == expected["nested"].batch_size
    for key in ("a", ("nested", "b")):
        assert torch.equal(td[key], expected[key]), key


@pytest.mark.parametrize("name", [n for n in OPS if n != "contiguous"])
def test_inplace_refuses_a_locked_tensordict_and_changes_nothing(name: str) -> None:
    td = _td().lock_()
    before = td.clone()
    with pytest.raises(RuntimeError, match="locked"):
        OPS[name](td, inplace=True)
    assert td.batch_size == before.batch_size
    assert (td == before).all()


def test_contiguous_inplace_on_a_locked_tensordict() -> None:
    base = torch.arange(20.0).reshape(4, 5)
    td = TensorDict(a=base[:, ::2], batch_size=[4, 3]).lock_()
    assert td.contiguous(inplace=True) is td
    assert td["a"].is_contiguous()
    assert torch.equal(td["a"], base[:, ::2])


@pytest.mark.parametrize("name", ["reshape", "flatten", "unflatten", "repeat", "contiguous"])
def test_inplace_on_a_lazy_stack_raises(name: str) -> None:
    stack = lazy_stack([_td(), _td()], 0)
    with pytest.raises(NotImplementedError, match=name):
        {
            "reshape": lambda: stack.reshape(24, inplace=True),
            "flatten": lambda: stack.flatten(0, 1, inplace=True),
            "unflatten": lambda: stack.unflatten(2, (2, 2), inplace=True),
            "repeat": lambda: stack.repeat(1, 1, 2, inplace=True),
            "contiguous": lambda: stack.contiguous(inplace=True),
        }[name]()


def test_inplace_releases_the_old_leaves() -> None:
    td = TensorDict(a=torch.zeros(4, 5), batch_size=[4, 5])
    ref = weakref.ref(td["a"])
    td.roll(1, 0, inplace=True)
    gc.collect()
    assert ref() is None


def test_gather_inplace_errors() -> None:
    td = TensorDict(a=torch.zeros(3, 4), batch_size=[3, 4])
    with pytest.raises(NotImplementedError, match="index.ndim"):
        td.gather(0, torch.tensor([0, 1]), inplace=True)
    with pytest.raises(ValueError, match="mutually exclusive"):
        td.gather(0, torch.zeros(3, 4, dtype=torch.long), out=td.clone(), inplace=True)


def test_top_level_pad_inplace() -> None:
    td = _td()
    assert pad(td, [1, 0], inplace=True) is td
    assert td.batch_size == torch.Size([4, 4])
    assert torch.equal(td["a"][0], torch.zeros(4))


def test_flatten_defaults_to_every_dimension() -> None:
    td = TensorDict(a=torch.zeros(2, 3, 4, 5), batch_size=[2, 3, 4])
    assert td.flatten().batch_size == torch.Size([24])
    assert td.flatten(1).batch_size == torch.Size([2, 12])


@pytest.mark.parametrize(
    ("source", "destination"), [(0, 2), ((0, 1), (2, 0)), ((2, 0), (0, 1)), (-1, 0)]
)
def test_movedim_matches_torch(source: Any, destination: Any) -> None:
    x = torch.arange(24.0).reshape(2, 3, 4)
    td = TensorDict(a=x.unsqueeze(-1), batch_size=[2, 3, 4])
    expected = torch.movedim(x, source, destination)
    out = td.movedim(source, destination)
    assert out.batch_size == expected.shape
    assert torch.equal(out["a"].squeeze(-1), expected)
    assert torch.equal(td.moveaxis(source, destination)["a"], out["a"])
    lazy = lazy_stack(list(td.unbind(1)), 1)
    assert torch.equal(lazy.movedim(source, destination)["a"], out["a"])


def test_permute_expand_reshape_keywords() -> None:
    td = TensorDict(a=torch.zeros(2, 3, 5), batch_size=[2, 3])
    assert td.permute(dims=(1, 0)).batch_size == torch.Size([3, 2])
    assert td.expand(size=(4, 2, 3))["a"].shape == torch.Size([4, 2, 3, 5])
    assert td.reshape(size=(6,)).batch_size == torch.Size([6])
    assert td.swapaxes(axis0=0, axis1=1).batch_size == torch.Size([3, 2])
    assert td.flip(0, 1)["a"].shape == torch.Size([2, 3, 5])
    assert td.view(torch.int32, batch_size=[2, 3])["a"].dtype == torch.int32


def test_new_zeros_empty_lazy() -> None:
    stack = lazy_stack(
        [TensorDict(a=torch.zeros(2)), TensorDict(a=torch.zeros(3), b=torch.ones(1))]
    )
    out = stack.new_zeros(3, empty_lazy=True)
    assert isinstance(out, LazyStackedTensorDict)
    assert out.batch_size == torch.Size([3])
    assert list(out.keys()) == []
    td = TensorDict(
        a=torch.zeros(2, 3),
        lazy=lazy_stack([TensorDict(x=torch.zeros(2, 5), batch_size=[2])] * 2, 1),
        batch_size=[2],
    )
    out = td.new_ones(4, empty_lazy=True)
    assert torch.equal(out["a"], torch.ones(4, 3))
    assert isinstance(out["lazy"], LazyStackedTensorDict)
    assert out["lazy"].batch_size == torch.Size([4, 2])
    assert list(out["lazy"].keys()) == []
    assert td.new_ones(4)["lazy", "x"].shape == torch.Size([4, 2, 5])


def test_pad_sequence_left_side_per_key_values_and_mask_key() -> None:
    tds = [TensorDict(a=torch.ones(n, 2), b=torch.full((n,), 2.0), batch_size=[n]) for n in (1, 3)]
    out = pad_sequence(
        tds, padding_value={"a": -1.0, "b": 5.0}, return_mask=("m", "k"), padding_side="left"
    )
    assert torch.equal(out["a"][:, :, 0], torch.tensor([[-1.0, -1.0, 1.0], [1.0, 1.0, 1.0]]))
    assert torch.equal(out["b"], torch.tensor([[5.0, 5.0, 2.0], [2.0, 2.0, 2.0]]))
    assert torch.equal(out["m", "k", "a"], torch.tensor([[False, False, True], [True] * 3]))
    feature = [TensorDict(a=torch.ones(n)) for n in (2, 1)]
    right = pad_sequence(feature, return_mask=True)
    assert torch.equal(right["a"], torch.tensor([[1.0, 1.0], [1.0, 0.0]]))
    assert torch.equal(right["masks", "a"], torch.tensor([[True, True], [True, False]]))
    with pytest.raises(ValueError, match="padding_side"):
        pad_sequence(feature, padding_side="middle")


CONTEXT_OPS: dict[str, Callable[[Any], Any]] = {
    "transpose": lambda td: td.transpose(1, 0),
    "permute": lambda td: td.permute(1, 0),
    "unsqueeze": lambda td: td.unsqueeze(0),
    "squeeze": lambda td: td.unsqueeze(1).squeeze(1),
    "view": lambda td: td.view(-1),
    "flatten": lambda td: td.flatten(0, 1),
    "unflatten": lambda td: td.unflatten(1, (2, 2)),
}


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("name", list(CONTEXT_OPS))
def test_keys_added_in_a_shape_context_reach_the_source(name: str, lazy: bool) -> None:
    source = TensorDict(a=torch.arange(24.0).reshape(3, 4, 2), batch_size=[3, 4])
    if lazy:
        source = lazy_stack(list(source.unbind(0)))
    op = CONTEXT_OPS[name]
    if name == "squeeze":  # the context belongs to the squeeze, whose source is unsqueezed
        source = source.unsqueeze(1)
        op = lambda td: td.squeeze(1)  # noqa: E731
    view = op(source)
    c = torch.arange(float(view.numel())).reshape(view.shape)
    with view as t:
        t.set("c", c)
        t.set(("n", "d"), c.unsqueeze(-1))
    expected = op(TensorDict(c=torch.zeros(source.shape), batch_size=source.shape)).batch_size
    assert expected == view.batch_size
    assert source["c"].shape == source.batch_size
    # the value reached the source through the inverse operation
    assert torch.equal(op(source)["c"], c)
    assert torch.equal(op(source)["n", "d"], c.unsqueeze(-1))


def test_replaced_entries_reach_the_source_and_deleted_ones_stay() -> None:
    td = TensorDict(a=torch.zeros(3, 4), b=torch.zeros(3, 4), batch_size=[3, 4])
    with td.transpose(1, 0) as t:
        t["a"] = torch.ones(4, 3)
        del t["b"]
    assert td["a"].sum() == 12
    assert "b" in td.keys()


def test_squeeze_without_dim_cannot_write_back() -> None:
    td = TensorDict(a=torch.zeros(3, 1), batch_size=[3, 1])
    with pytest.raises(RuntimeError, match="dim"):
        with td.squeeze() as t:
            t.set("c", torch.ones(3))


def test_shape_op_results_still_pickle() -> None:
    import pickle

    td = TensorDict(a=torch.arange(6.0).reshape(2, 3), batch_size=[2, 3])
    back = pickle.loads(pickle.dumps(td.transpose(1, 0)))
    assert torch.equal(back["a"], td["a"].T)
