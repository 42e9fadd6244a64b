"""The batch-shape ops and ``new_*`` constructors of ``tensordict._engine.ops_batch``, each
against the same torch operation applied leaf by leaf on ``core_helpers.make_table_td`` and
on every kind of ``any_td``. The tests iterate over the tables, so a new row is checked as
soon as it exists; a row needs its cases here.
"""

from __future__ import annotations

import pytest
import torch
from core_helpers import (
    TABLE_BS,
    TABLE_WARNINGS,
    make_table_td,
    tensor_leaves,
)
from core_helpers import table_check_any as check_any
from core_helpers import table_check_leafwise as check_leafwise

from tensordict import TensorDict
from tensordict._engine.ops_batch import BATCH_OPS, NEW

pytestmark = TABLE_WARNINGS


# --------------------------------------------------------------------------- batch ops
def _flat_batch(x, nb=2):
    return x.reshape(-1, *x.shape[nb:])


#: name -> list of (args, kwargs, leaf oracle(x) -> tensor, expected root batch size).
BATCH_CASES = {
    "roll": [
        ((1,), {}, lambda x: _flat_batch(x).roll(1, 0).reshape(x.shape), TABLE_BS),
        ((2, 1), {}, lambda x: x.roll(2, 1), TABLE_BS),
        (((1, -1), (0, -1)), {}, lambda x: x.roll((1, -1), (0, 1)), TABLE_BS),
    ],
    "rot90": [
        ((), {}, lambda x: x.rot90(1, (0, 1)), (3, 2)),
        ((2, (1, 0)), {}, lambda x: x.rot90(2, (1, 0)), TABLE_BS),
    ],
    "tile": [
        ((2,), {}, lambda x: x.repeat(1, 2, *[1] * (x.ndim - 2)), (2, 6)),
        (((2, 1, 3),), {}, lambda x: x.repeat(2, 1, 3, *[1] * (x.ndim - 2)), (2, 2, 9)),
    ],
    "repeat_interleave": [
        ((2,), {"dim": 1}, lambda x: x.repeat_interleave(2, 1), (2, 6)),
        ((2,), {}, lambda x: _flat_batch(x).repeat_interleave(2, 0), (12,)),
        (
            (torch.tensor([1, 0, 2]),),
            {"dim": -1},
            lambda x: x.repeat_interleave(torch.tensor([1, 0, 2]), 1),
            (2, 3),
        ),
    ],
    "atleast_1d": [((), {}, lambda x: x, TABLE_BS)],
    "atleast_2d": [((), {}, lambda x: x, TABLE_BS)],
    # as the reference: leading dims of size 1 (torch.atleast_3d of a 2-d tensor appends)
    "atleast_3d": [((), {}, lambda x: x.unsqueeze(0), (1, 2, 3))],
    "softmax": [
        ((0,), {}, lambda x: x.softmax(0), TABLE_BS),
        ((-1,), {"dtype": torch.float64}, lambda x: x.softmax(1, dtype=torch.float64), TABLE_BS),
    ],
    "gather": [
        (
            (1, torch.tensor([[2, 0], [1, 1]])),
            {},
            lambda x: x.gather(
                1,
                torch.tensor([[2, 0], [1, 1]])
                .reshape(2, 2, *[1] * (x.ndim - 2))
                .expand(2, 2, *x.shape[2:]),
            ),
            (2, 2),
        ),
    ],
}


def test_every_batch_op_has_cases_here():
    assert set(BATCH_CASES) == set(BATCH_OPS)


@pytest.mark.parametrize(
    "name, case",
    [(n, c) for n, cases in BATCH_CASES.items() for c in cases],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_batch_op_leafwise(name, case):
    args, kwargs, leaf_fn, batch = case
    td = make_table_td()
    result = getattr(td, name)(*args, **kwargs)
    assert result.batch_size == torch.Size(batch)
    assert result["n"].batch_size == torch.Size(batch) + torch.Size([5])
    assert result["n", "m"].batch_size == result["n"].batch_size
    check_leafwise(result, td, lambda k, x: leaf_fn(x))


@pytest.mark.parametrize("n", [1, 2, 3])
def test_atleast_nd_on_small_batches(n):
    for bs in [(), (4,), (4, 2)]:
        td = TensorDict({"a": torch.zeros(*bs, 3), "n": {"b": torch.zeros(torch.Size(bs))}}, bs)
        out = getattr(td, f"atleast_{n}d")()
        # as the reference: size-1 dims are prepended (torch puts a 1-d tensor's in the
        # middle for atleast_3d: (4,) -> (1, 4, 1); a tensordict's batch gets (1, 1, 4))
        want = torch.Size([1] * max(n - len(bs), 0) + list(bs))
        assert out.batch_size == want
        assert out["a"].shape == want + (3,)
        assert out["n", "b"].shape == want
        assert getattr(torch, f"atleast_{n}d")(td).batch_size == want


# --------------------------------------------------------------------------- new_* constructors
@pytest.mark.parametrize("name", NEW)
def test_new_constructors(name):
    td = make_table_td()
    args = ((4, 1), 7.5) if name == "new_full" else (4, 1)
    out = getattr(td, name)(*args)
    assert out.batch_size == (4, 1)
    assert out["n"].batch_size == (4, 1, 5)
    assert out["s"] == "label"
    for k, x in tensor_leaves(td).items():
        y = out.get(k)
        assert y.shape == (4, 1, *x.shape[2:]) and y.dtype == x.dtype
        if name != "new_empty":
            fill = args[1:] if name == "new_full" else ()
            want = getattr(x, name)((4, 1, *x.shape[2:]), *fill)
            assert torch.equal(y, want)
    typed = getattr(td, name)(*args, dtype=torch.float16, device="cpu")
    assert typed.device == torch.device("cpu") and typed["n"].device == torch.device("cpu")
    assert all(v.dtype == torch.float16 for v in tensor_leaves(typed).values())


def test_new_tensor():
    td = make_table_td()
    out = td.new_tensor([[1, 2]])
    assert out.batch_size == (1, 2) and out["n"].batch_size == (1, 2)
    for k, x in tensor_leaves(td).items():
        assert torch.equal(out.get(k), torch.tensor([[1, 2]], dtype=x.dtype))
    from_td = td.new_tensor(td.float(), dtype=torch.float64)
    check_leafwise(from_td, td, lambda k, x: x.float().double())


def test_like_functions():
    td = make_table_td()
    for fn in (torch.zeros_like, torch.ones_like, torch.empty_like, torch.rand_like):
        out = fn(td)
        for k, x in tensor_leaves(td).items():
            assert out.get(k).shape == x.shape and out.get(k).dtype == x.dtype
    check_leafwise(torch.full_like(td, 3), td, lambda k, x: torch.full_like(x, 3))
    check_leafwise(torch.zeros_like(td), td, lambda k, x: torch.zeros_like(x))


# --------------------------------------------------------------------------- every kind


@pytest.mark.parametrize("name", list(BATCH_CASES))
def test_batch_op_rows_over_every_kind(any_td, name):
    for args, kwargs, leaf_fn, batch in BATCH_CASES[name]:
        out = getattr(any_td, name)(*args, **kwargs)
        check_any(out, any_td, leaf_fn, batch, non_tensors=False)
        assert tensor_leaves(out) and out.get("tag").data == "t"
