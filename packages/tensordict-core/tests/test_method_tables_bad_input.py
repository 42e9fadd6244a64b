"""Bad input to the method families: a clear error naming the key, the batch size or the
expectation, of the type the reference raises, and the tensordict left unchanged.
"""

from __future__ import annotations

import math
import operator

import pytest
import torch
from core_helpers import (
    INT,
    TABLE_MASK,
    TABLE_WARNINGS,
    make_table_td,
)
from core_helpers import table_check_leafwise as check_leafwise

from tensordict import TensorDict
from tensordict._engine.ops import (
    BINARY,
)
from tensordict._engine.ops_reduce import CUMULATIVE, REDUCTIONS

pytestmark = TABLE_WARNINGS


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "call",
    [
        *(lambda td, n=n: getattr(td, n)(*(0.5,) * (n == "quantile"), dim=2) for n in REDUCTIONS),
        *(
            lambda td, n=n: getattr(td, n)(*(0.5,) * (n == "quantile"), dim=(0, -3))
            for n in REDUCTIONS
        ),
        *(lambda td, n=n: getattr(td, n)(-3) for n in CUMULATIVE),
        lambda td: td.roll(1, 2),
        lambda td: td.rot90(1, (0, 2)),
        lambda td: td.repeat_interleave(2, dim=3),
        lambda td: td.softmax(-3),
        lambda td: td.gather(2, torch.zeros(2, 3, dtype=torch.long)),
        lambda td: td.scatter(2, torch.zeros(2, 3, dtype=torch.long), 1.0),
    ],
)
def test_bad_dim_names_the_batch_size(call):
    td = make_table_td()
    with pytest.raises(IndexError, match=r"batch_size=\(2, 3\)"):
        call(td)


def test_bad_reduction_arguments():
    td = make_table_td()
    with pytest.raises(ValueError, match="'feature'"):
        td.sum(dim="features")
    with pytest.raises(ValueError, match="twice"):
        td.sum(dim=(0, -2))
    with pytest.raises(TypeError, match="amax"):
        td.max(dim=(0, 1))
    with pytest.raises(TypeError, match="unexpected keyword"):
        td.sum(correction=1)
    with pytest.raises(ValueError, match="scalar"):
        td.quantile(torch.tensor([0.1, 0.9]), 0)
    with pytest.raises(RuntimeError, match="'a'") as info:
        make_table_td(INT).mean(0)
    assert "torch.int64" in str(info.value)


def test_inplace_bad_operand_names_key_and_leaves_data_unchanged():
    td = make_table_td()
    before = td.clone()
    other = td.clone()
    other["n", "c"] = torch.ones(2, 3, 5, 3)  # wrong feature size for ('n', 'c')
    for name in BINARY:
        args = (other,) if len(BINARY[name].operands) == 1 else (other, other)
        with pytest.raises(RuntimeError, match=r"\('n', 'c'\)"):
            getattr(td, name + "_")(*args)
        check_leafwise(td, before, lambda k, x: x)
    with pytest.raises(RuntimeError, match=r"\('n', 'c'\)"):
        td.add(other)


def test_masks_of_wrong_shape_leave_data_unchanged():
    td = make_table_td()
    before = td.clone()
    for bad in (torch.ones(3, dtype=torch.bool), torch.ones(2, 3, 4, dtype=torch.bool)):
        with pytest.raises(RuntimeError, match=r"batch_size=\(2, 3\)"):
            td.masked_fill_(bad, 0)
        with pytest.raises(RuntimeError, match=r"batch_size=\(2, 3\)"):
            td.masked_select(bad)
        with pytest.raises(RuntimeError, match=r"batch_size=\(2, 3\)"):
            td.where(bad, 0.0)
    with pytest.raises(TypeError, match="boolean"):
        td.masked_fill_(torch.ones(2, 3), 0)
    check_leafwise(td, before, lambda k, x: x)


def test_where_shape_mismatch_names_the_key():
    td = make_table_td()
    other = td.clone()
    other["b"] = torch.zeros(2, 3, 7, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="'b'"):
        td.where(TABLE_MASK, other)


def test_reduce_true_needs_a_tensor():
    with pytest.raises(ValueError, match="no tensor leaf"):
        TensorDict({"s": "only text"}, [2]).sum(reduce=True)


def test_reduction_of_empty_batch_and_no_leaves():
    td = TensorDict({"a": torch.zeros(0, 3)}, [0])
    assert td.sum(0)["a"].shape == (3,)
    assert td.sum(reduce=True) == 0
    assert math.isnan(td.mean(reduce=True))
    assert TensorDict(batch_size=[2]).sum(0).batch_size == ()


def test_operator_module_is_consistent():
    td = make_table_td()
    check_leafwise(operator.sub(5, td), td, lambda k, x: 5 - x)
