"""Tensorclass-aware modules. They need the ``tensorclass`` distribution (the
``tensorclass`` extra); those tests skip with the reason when it is absent or incomplete."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tensordict import TensorDict
from tensordict.nn import TensorClassModuleBase, TensorDictModule


def test_typing_on_non_tensorclasses_cannot_become_a_td_module():
    class Plain(TensorClassModuleBase[torch.Tensor, torch.Tensor]):
        def forward(self, x):
            return x + 1

    module = Plain()
    assert module.input_type is torch.Tensor and module.output_type is torch.Tensor
    assert module(torch.zeros(1)).item() == 1
    with pytest.raises(ValueError, match="both input and output type as TensorClass"):
        module.as_td_module()


def _classes(tensorclass):
    @tensorclass
    class Pair:
        a: torch.Tensor
        b: torch.Tensor

    @tensorclass
    class SumDiff:
        added: torch.Tensor
        subtracted: torch.Tensor

    @tensorclass
    class Report:
        pair: Pair
        result: SumDiff

    class AddDiff(TensorClassModuleBase[Pair, SumDiff]):
        def forward(self, x: Pair) -> SumDiff:
            return SumDiff(added=x.a + x.b, subtracted=x.a - x.b, batch_size=x.batch_size)

    class Reporter(TensorClassModuleBase[Pair, Report]):
        def __init__(self):
            super().__init__()
            self.inner = AddDiff()

        def forward(self, x: Pair) -> Report:
            return Report(pair=x, result=self.inner(x), batch_size=x.batch_size)

    return Pair, SumDiff, Report, AddDiff, Reporter


def test_tensorclass_module_forward_and_td_module(tensorclass):
    Pair, SumDiff, Report, AddDiff, Reporter = _classes(tensorclass)
    pair = Pair(a=torch.full((3,), 10.0), b=torch.full((3,), 4.0), batch_size=[3])
    out = Reporter()(pair)
    assert isinstance(out, Report) and out.result.added.tolist() == [14.0] * 3
    td_module = Reporter().as_td_module()
    assert set(td_module.in_keys) == {"a", "b"}
    assert set(td_module.out_keys) == {
        ("pair", "a"),
        ("pair", "b"),
        ("result", "added"),
        ("result", "subtracted"),
    }
    td = td_module(pair.to_tensordict())
    assert td["result", "subtracted"].tolist() == [6.0] * 3
    assert AddDiff()(pair).batch_size == (3,)


def test_tensordict_module_on_a_tensorclass(tensorclass):
    @tensorclass
    class Data:
        inputs: torch.Tensor
        outputs: torch.Tensor = None

    lin = nn.Linear(3, 4)
    module = TensorDictModule(lin, in_keys=["inputs"], out_keys=["outputs"])
    data = Data(inputs=torch.randn(5, 3), batch_size=[5])
    out = module(data)
    assert out is data
    torch.testing.assert_close(data.outputs, lin(data.inputs))
    assert isinstance(TensorDict.from_module(lin), TensorDict)
