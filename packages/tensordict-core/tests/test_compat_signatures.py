"""Methods whose parameters follow the reference 0.15: the binary ops' keywords, casts with
``cast_filter``, ``rsub``/``clamp``. Results are checked against torch leaf by leaf."""

from __future__ import annotations

import inspect

import pytest
import torch

from tensordict import TensorDict, is_inexact


def _td() -> TensorDict:
    return TensorDict(
        a=torch.tensor([1.0, 2.0, 3.0]),
        n={"b": torch.tensor([[4.0], [5.0], [6.0]])},
        batch_size=[3],
    )


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("add", ["self", "other", "alpha", "default"]),
        ("add_", ["self", "other", "alpha"]),
        ("sub_", ["self", "other", "alpha"]),
        ("mul_", ["self", "other"]),
        ("lerp", ["self", "end", "weight"]),
        ("addcdiv", ["self", "other1", "other2", "value"]),
        ("addcmul_", ["self", "other1", "other2", "value"]),
        ("clamp_min", ["self", "other", "default"]),
        ("float", ["self", "cast_filter"]),
        ("rsub", ["self", "other", "alpha", "default"]),
        ("clamp", ["self", "min", "max", "out"]),
    ],
)
def test_parameters(name: str, params: list[str]) -> None:
    assert list(inspect.signature(getattr(TensorDict, name)).parameters) == params


def test_add_alpha_matches_torch() -> None:
    td, other = _td(), _td() * 2
    out = td.add(other, alpha=3)
    assert torch.equal(out["a"], torch.add(td["a"], other["a"], alpha=3))
    assert torch.equal(out["n", "b"], torch.add(td["n", "b"], other["n", "b"], alpha=3))
    scalar = td.add(2, alpha=3)  # a scalar operand takes the leaf-by-leaf path
    assert torch.equal(scalar["a"], torch.add(td["a"], 2, alpha=3))


def test_sub_inplace_alpha_positional() -> None:
    td, other = _td(), _td()
    expected = torch.sub(td["a"], other["a"] * 1, alpha=2)
    assert td.sub_(other, 2) is td
    assert torch.equal(td["a"], expected)


def test_addcdiv_value_positional_and_addcmul_keyword() -> None:
    td, t1, t2 = _td(), _td() + 1, _td() + 2
    out = td.addcdiv(t1, t2, 0.5)
    assert torch.allclose(out["a"], torch.addcdiv(td["a"], t1["a"], t2["a"], value=0.5))
    expected = torch.addcmul(td["n", "b"], t1["n", "b"], t2["n", "b"], value=3)
    td.addcmul_(t1, t2, value=3)
    assert torch.equal(td["n", "b"], expected)
    with pytest.raises(TypeError):
        td.addcmul(t1, t2, 3)  # value is keyword-only there


def test_lerp_end_weight() -> None:
    td, end = _td(), _td() * 3
    out = td.lerp(end=end, weight=0.25)
    assert torch.allclose(out["a"], torch.lerp(td["a"], end["a"], 0.25))


def test_default_fills_missing_keys_and_inplace_twins_have_no_default() -> None:
    td = _td()
    partial = TensorDict(a=torch.ones(3), batch_size=[3])
    out = td.clamp_min(partial, 5.0)  # default is positional for clamp_min
    assert torch.equal(out["a"], torch.clamp_min(td["a"], torch.ones(3)))
    assert torch.equal(out["n", "b"], torch.clamp_min(td["n", "b"], 5.0))
    with pytest.raises(TypeError):
        td.mul_(partial, default=1.0)
    with pytest.raises(TypeError):
        td.add(partial, unknown=1)


@pytest.mark.filterwarnings("ignore:.*quantize_per_tensor:UserWarning")
def test_cast_filter_gets_tuple_keys_and_picks_leaves() -> None:
    td = TensorDict(
        a=torch.ones(2),
        i=torch.ones(2, dtype=torch.long),
        n={"c": torch.ones(2)},
        batch_size=[2],
    )
    seen = []

    def only_nested(key: tuple, value: torch.Tensor) -> bool:
        seen.append(key)
        return key == ("n", "c")

    out = td.float16(cast_filter=only_nested)
    assert sorted(seen) == [("a",), ("i",), ("n", "c")]
    assert out["n", "c"].dtype == torch.float16
    assert out["a"].dtype == torch.float32
    assert out["a"] is td["a"]  # left alone, not copied
    half = td.half(cast_filter=is_inexact)
    assert (half["a"].dtype, half["i"].dtype) == (torch.float16, torch.int64)
    typed = td.type(torch.int32, cast_filter=lambda k, v: k == ("a",))
    assert (typed["a"].dtype, typed["i"].dtype) == (torch.int32, torch.int64)
    quant = td.qint8(cast_filter=lambda k, v: k == ("a",))
    assert quant["a"].dtype == torch.qint8
    assert quant["i"].dtype == torch.int64


def test_rsub_alpha_default_and_clamp_out() -> None:
    td = _td()
    out = td.rsub(10, alpha=2)
    assert torch.equal(out["a"], torch.rsub(td["a"], 10, alpha=2))
    partial = TensorDict(a=torch.ones(3), batch_size=[3])
    filled = td.rsub(partial, default=7.0)
    assert torch.equal(filled["a"], 1 - td["a"])
    assert torch.equal(filled["n", "b"], 7.0 - td["n", "b"])
    target = td.clone().zero_()
    result = td.clamp(2.0, 5.0, out=target)
    assert result is target
    assert torch.equal(target["a"], torch.clamp(td["a"], 2.0, 5.0))
    assert torch.equal(target["n", "b"], torch.clamp(td["n", "b"], 2.0, 5.0))
