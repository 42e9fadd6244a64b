"""``TensorDict.scatter``: torch's op and the reference's distributed form, told apart."""

import pytest
import torch

from tensordict import TensorDict


def test_torch_scatter_form_against_torch():
    td = TensorDict({"a": torch.zeros(3, 2)}, [3])
    index = torch.tensor([2, 0])
    expected = torch.zeros(3, 2).scatter(0, index[:, None].expand(2, 2), 1.0)
    assert torch.equal(td.scatter(0, index, 1.0)["a"], expected)
    assert torch.equal(torch.scatter(td, 0, index, 1.0)["a"], expected)


def test_scatter_without_a_rank_or_an_index_is_a_type_error():
    td = TensorDict({"a": torch.zeros(3)}, [3])
    with pytest.raises(TypeError, match="source rank"):
        td.scatter()
    assert torch.equal(td["a"], torch.zeros(3))


def test_distributed_form_goes_to_the_sibling():
    import importlib.util

    td = TensorDict({"a": torch.zeros(3)}, [3])
    if importlib.util.find_spec("tensordict.distributed") is None:
        with pytest.raises(ModuleNotFoundError, match="tensordict-distributed"):
            td.scatter(src=0, tensordicts=[td])
    else:  # the sibling got it: no process group is running here
        with pytest.raises(RuntimeError, match="init_process_group"):
            td.scatter(src=0, tensordicts=[td])
    assert torch.equal(td["a"], torch.zeros(3))
