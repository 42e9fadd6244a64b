"""Indexing along the batch dimensions: every leaf must equal ``leaf[index]`` with the
ellipsis expanded over the batch dimensions only (never the feature dimensions)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tensordict import TensorDict

BATCH = (2, 3, 4)


def make_td():
    return TensorDict(
        {
            "a": torch.arange(24).reshape(2, 3, 4),
            "f": torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(2, 3, 4, 5),
            "n": {
                "g": torch.arange(2 * 3 * 4 * 2 * 2).reshape(2, 3, 4, 2, 2),
                # a nested tensordict with one more batch dim than its parent
                "deep": TensorDict(
                    {"h": torch.arange(2 * 3 * 4 * 6 * 2).reshape(2, 3, 4, 6, 2)}, [2, 3, 4, 6]
                ),
            },
            "s": "shared",
        },
        list(BATCH),
    )


def expand_ellipsis(index, nb=len(BATCH)):
    """The index as a tuple with ``...`` replaced by ``:`` over the batch dims only."""
    if not isinstance(index, tuple):
        index = (index,)
    consumed = 0
    for item in index:
        if item is None or item is Ellipsis:
            continue
        if isinstance(item, torch.Tensor) and item.dtype is torch.bool:
            consumed += item.ndim
        else:
            consumed += 1
    out = []
    for item in index:
        if item is Ellipsis:
            out.extend([slice(None)] * (nb - consumed))
        else:
            out.append(item)
    if not any(item is Ellipsis for item in index):
        out.extend([slice(None)] * (nb - consumed))  # pad so trailing dims are features
    return tuple(out)


INDICES = [
    0,
    -1,
    1,
    slice(None),
    slice(1, None),
    slice(0, 2),
    slice(None, None, 2),
    Ellipsis,
    None,
    (0, 1),
    (0, 1, 2),
    (-1, -2, -3),
    (slice(None), 1),
    (Ellipsis, 0),
    (Ellipsis, 1, 2),
    (0, Ellipsis, 1),
    (Ellipsis, None),
    (None, Ellipsis),
    (None, 0),
    (1, None, Ellipsis, None),
    (slice(None), None, slice(0, 2)),
    (Ellipsis, slice(None, None, 2)),
    [0, 1],
    [1, 1, 0],
    (slice(None), [2, 0]),
    (0, [0, 2], slice(1, 3)),
    ([0, 1], [1, 2]),
    ([0, 1], slice(None), [1, 2]),
    torch.tensor([1, 0]),
    torch.tensor(1),
    (torch.tensor([[0, 1], [1, 0]]),),
    torch.tensor([True, False]),
    (slice(None), torch.tensor([True, False, True])),
    pytest.param((Ellipsis, torch.tensor([False, True, True, False]))),
    pytest.param((Ellipsis, 3)),
    pytest.param((Ellipsis, -4)),
    pytest.param((0, Ellipsis, 3)),
    (Ellipsis, 1),
    (Ellipsis, torch.tensor([3, 0])),
    torch.tensor([[True, False, True], [False, False, True]]),
    (torch.tensor([[True, False, True], [False, False, True]]), 2),
    [True, False],
    range(1, 2),
    np.array([1, 0]),
    (np.int64(1), slice(None)),
]


def idfn(index):
    if isinstance(index, type(pytest.param(0))):
        index = index.values[0]
    return repr(index).replace("\n", "").replace(" ", "")[:60]


@pytest.mark.parametrize("index", INDICES, ids=idfn)
def test_index_matches_leafwise(index):
    td = make_td()
    out = td[index]
    full = expand_ellipsis(index)
    exp_a = td["a"][full]
    assert out.batch_size == exp_a.shape
    assert torch.equal(out["a"], exp_a)
    assert torch.equal(out["f"], td["f"][full])
    assert torch.equal(out["n", "g"], td["n", "g"][full])
    exp_h = td["n", "deep", "h"][full]
    assert torch.equal(out["n", "deep", "h"], exp_h)
    assert out["n"].batch_size == exp_a.shape
    assert out["n", "deep"].batch_size == exp_h.shape[:-1]
    assert out["s"] == "shared"
    assert dict(out.items())["s"].batch_size == out.batch_size


def test_ellipsis_never_indexes_feature_dims():
    td = TensorDict({"x": torch.arange(2 * 3 * 7).reshape(2, 3, 7)}, [2, 3])
    out = td[..., 0]
    # the last *batch* dim is indexed, feature dim 7 is kept
    assert out["x"].shape == (2, 7)
    assert torch.equal(out["x"], td["x"][:, 0])


def test_basic_indexing_returns_views():
    td = make_td()
    sub = td[0, 1:]
    sub["a"].zero_()
    assert (td["a"][0, 1:] == 0).all()
    assert (td["a"][1] != 0).any()


def test_advanced_indexing_copies():
    td = make_td()
    sub = td[torch.tensor([0])]
    sub["a"].fill_(-1)
    assert (td["a"] >= 0).all()


def test_index_keeps_device_and_structure():
    td = TensorDict({"a": torch.zeros(3, 2), "n": {"b": torch.zeros(3)}}, [3], device="cpu")
    out = td[1:]
    assert out.device == torch.device("cpu")
    assert out["n"].device == torch.device("cpu")
    assert isinstance(out["n"], TensorDict)


def test_index_empty_batch():
    td = TensorDict({"a": torch.arange(3)}, [])
    assert td[...].batch_size == torch.Size([])
    assert torch.equal(td[...]["a"], td["a"])
    out = td[None]
    assert out.batch_size == torch.Size([1])
    assert torch.equal(out["a"], td["a"][None])


def test_index_td_without_leaves_computes_batch_size():
    td = TensorDict(batch_size=[4, 5])
    assert td[1:3].batch_size == torch.Size([2, 5])
    assert td[..., None, 0].batch_size == torch.Size([4, 1])
    assert td[torch.tensor([0, 0, 1])].batch_size == torch.Size([3, 5])
    assert td[torch.ones(4, 5, dtype=torch.bool)].batch_size == torch.Size([20])


def test_empty_bool_mask_gives_empty_batch():
    td = make_td()
    out = td[torch.zeros(2, dtype=torch.bool)]
    assert out.batch_size == torch.Size([0, 3, 4])
    assert out["f"].shape == (0, 3, 4, 5)


def test_iteration_over_first_dim():
    td = make_td()
    items = list(td)
    assert len(items) == 2 == len(td)
    for i, item in enumerate(items):
        assert item.batch_size == torch.Size([3, 4])
        assert torch.equal(item["a"], td["a"][i])


def test_iteration_without_batch_dims_raises():
    with pytest.raises(TypeError):
        iter(TensorDict({"a": torch.zeros(2)}))


def test_readme_indexing_example():
    data = TensorDict(
        {"key 1": torch.ones(3, 4, 5), "key 2": torch.zeros(3, 4, 5, dtype=torch.bool)},
        batch_size=[3, 4],
    )
    sub = data[..., :2]
    assert sub.shape == torch.Size([3, 2])
    assert sub["key 1"].shape == torch.Size([3, 2, 5])


def test_narrow():
    td = make_td()
    out = td.narrow(1, 1, 2)
    assert out.batch_size == torch.Size([2, 2, 4])
    assert torch.equal(out["f"], td["f"].narrow(1, 1, 2))
