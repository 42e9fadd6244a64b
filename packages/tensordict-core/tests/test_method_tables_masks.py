"""Masks, ``where``, ``scatter``, ``gather`` and the other methods of
``tensordict._engine.ops_batch.METHODS``, each against the same torch operation applied leaf
by leaf on ``core_helpers.make_table_td``; every row of ``METHODS`` must have a test here.
"""

from __future__ import annotations

import pytest
import torch
from core_helpers import (
    TABLE_BS,
    TABLE_MASK,
    TABLE_WARNINGS,
    make_table_td,
)
from core_helpers import table_check_leafwise as check_leafwise

from tensordict._engine.ops_batch import METHODS

pytestmark = TABLE_WARNINGS


# --------------------------------------------------------------------------- masks, where, scatter


def _right(t, x):
    return t.reshape(*t.shape, *[1] * (x.ndim - t.ndim))


def test_every_method_has_a_test_here():
    assert set(METHODS) == {
        "new_tensor",
        "masked_fill",
        "masked_fill_",
        "masked_select",
        "where",
        "scatter",
    }


@pytest.mark.parametrize(
    "mask", [TABLE_MASK, TABLE_MASK[:, :1], TABLE_MASK[:, 0]], ids=["full", "broadcast", "lead"]
)
def test_masked_fill_and_inplace(mask):
    td = make_table_td()
    check_leafwise(td.masked_fill(mask, -1.0), td, lambda k, x: x.masked_fill(_right(mask, x), -1))
    check_leafwise(
        torch.masked_fill(td, mask, -1.0), td, lambda k, x: x.masked_fill(_right(mask, x), -1)
    )
    before = td.clone()
    assert td.masked_fill_(mask, 0) is td
    check_leafwise(td, before, lambda k, x: x.masked_fill(_right(mask, x), 0))


@pytest.mark.parametrize(
    "mask", [TABLE_MASK, TABLE_MASK[:, 0], TABLE_MASK.unsqueeze(-1)], ids=["full", "lead", "x1"]
)
def test_masked_select(mask):
    td = make_table_td()
    out = td.masked_select(mask)
    m = mask.squeeze(-1) if mask.ndim > 2 else mask
    assert out.batch_size == (int(m.sum()), *TABLE_BS[m.ndim :])
    check_leafwise(out, td, lambda k, x: x[m])
    check_leafwise(torch.masked_select(td, mask), td, lambda k, x: x[m])


def test_where_operands():
    td = make_table_td()
    other = td.apply(lambda x: -x)
    check_leafwise(
        td.where(TABLE_MASK, other), td, lambda k, x: torch.where(_right(TABLE_MASK, x), x, -x)
    )
    check_leafwise(
        td.where(TABLE_MASK, 0.5), td, lambda k, x: torch.where(_right(TABLE_MASK, x), x, 0.5)
    )
    t = torch.tensor(2.0)
    check_leafwise(
        td.where(TABLE_MASK, t), td, lambda k, x: torch.where(_right(TABLE_MASK, x), x, t)
    )
    check_leafwise(
        torch.where(TABLE_MASK, td, other),
        td,
        lambda k, x: torch.where(_right(TABLE_MASK, x), x, -x),
    )
    check_leafwise(
        torch.where(TABLE_MASK, 1.0, other),
        td,
        lambda k, x: torch.where(_right(TABLE_MASK, x), 1.0, -x),
    )
    out = td.clone()
    assert td.where(TABLE_MASK, other, out=out) is out
    check_leafwise(out, td, lambda k, x: torch.where(_right(TABLE_MASK, x), x, -x))
    cond = td.apply(lambda x: x > 1.0)
    check_leafwise(td.where(cond, other), td, lambda k, x: torch.where(x > 1.0, x, -x))


def test_where_pad():
    td = make_table_td()
    other = td.exclude("a").set("extra", torch.ones(2, 3))
    with pytest.raises(KeyError, match="'a'"):
        td.where(TABLE_MASK, other)
    out = td.where(TABLE_MASK, other, pad=0.0)
    assert torch.equal(out["a"], torch.where(TABLE_MASK, td["a"], 0.0))
    assert torch.equal(out["extra"], torch.where(TABLE_MASK, 0.0, torch.ones(2, 3)))


def test_scatter():
    td = make_table_td()
    index = torch.tensor([[1, 0, 1]])
    src = td.apply(lambda x: x * 10)

    def expected(k, x, s):
        idx = _right(index, x).expand(*index.shape, *x.shape[2:])
        return x.scatter(0, idx, s)

    check_leafwise(td.scatter(0, index, src), td, lambda k, x: expected(k, x, src.get(k)))
    check_leafwise(td.scatter(0, index, 7.0), td, lambda k, x: expected(k, x, 7.0))
    check_leafwise(torch.scatter(td, 0, index, src), td, lambda k, x: expected(k, x, src.get(k)))


def test_gather_dispatch_and_out():
    td = make_table_td()
    index = torch.tensor([[1, 0, 1]])
    ref = td.gather(0, index)
    check_leafwise(torch.gather(td, 0, index), ref, lambda k, x: x)
    out = ref.clone().zero_()
    assert td.gather(0, index, out=out) is out
    check_leafwise(out, ref, lambda k, x: x)


def test_functional_softmax():
    td = make_table_td()
    check_leafwise(torch.nn.functional.softmax(td, dim=1), td, lambda k, x: torch.softmax(x, 1))
