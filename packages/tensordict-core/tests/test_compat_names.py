"""Names of the reference 0.15 surface: ``group_by``, ``collate``, ``unpad_sequence``,
``pack``/``PackLayout``, ``rename_keys``, ``from_schema``, ``is_meta``,
``clear_refs_for_compile_`` and ``parse_tensor_dict_string``."""

from __future__ import annotations

import tempfile

import pytest
import torch
from torch.utils.data import DataLoader

import tensordict
from tensordict import (
    NonTensorStack,
    PackLayout,
    TensorDict,
    collate,
    group_by,
    pad_sequence,
    parse_tensor_dict_string,
    unpad_sequence,
)


def test_group_by_tensor_entry_matches_masks() -> None:
    uid = torch.tensor([2, 0, 2, 1, 0])
    td = TensorDict(uid=uid, r=torch.arange(5.0), batch_size=[5])
    values, groups = group_by(td, "uid")
    assert values.tolist() == [0, 1, 2]
    for value, group in zip(values.tolist(), groups, strict=True):
        assert torch.equal(group["r"], td[uid == value]["r"])


def test_group_by_rows_and_non_tensor_values() -> None:
    td = TensorDict(p=torch.tensor([[1, 0], [0, 1], [1, 0]]), r=torch.arange(3.0), batch_size=[3])
    values, groups = group_by(td, "p")
    assert values.tolist() == [[0, 1], [1, 0]]
    assert [g["r"].tolist() for g in groups] == [[1.0], [0.0, 2.0]]
    td = TensorDict(r=torch.arange(5.0), batch_size=[5])
    td["s"] = NonTensorStack.from_list(["a", "b", "a", "c", "b"])
    values, groups = group_by(td, "s")
    assert values == ["a", "b", "c"]
    assert [g["r"].tolist() for g in groups] == [[0.0, 2.0], [1.0, 4.0], [3.0]]


def test_group_by_errors() -> None:
    with pytest.raises(ValueError, match="batch dimension"):
        group_by(TensorDict(a=torch.zeros(2)), "a")
    with pytest.raises(KeyError, match="'zz'"):
        group_by(TensorDict(a=torch.zeros(2), batch_size=[2]), "zz")
    with pytest.raises(TypeError, match="tensordict"):
        group_by(TensorDict(n={"a": torch.zeros(2)}, batch_size=[2]), "n")


def test_collate_in_a_dataloader() -> None:
    samples = [(TensorDict(x=torch.full((3,), float(i))), i) for i in range(10)]
    td, label = next(iter(DataLoader(samples, batch_size=4, collate_fn=collate)))
    assert td.batch_size == torch.Size([4])
    assert torch.equal(td["x"][:, 0], torch.arange(4.0))
    assert label.tolist() == [0, 1, 2, 3]
    clouds = [TensorDict(points=torch.randn(n, 3)) for n in (5, 2)]
    assert type(collate(clouds)).__name__ == "LazyStackedTensorDict"
    assert collate("not a list") == "not a list"


def test_collate_pads_and_nests() -> None:
    samples = [
        TensorDict(
            ids=torch.ones(n, dtype=torch.long),
            points=torch.randn(n + 1, 3),
            score=torch.tensor(float(n)),
        )
        for n in (2, 3)
    ]
    batch = collate(samples, pad_keys={"ids": 7}, nested_keys=["points"], mask_key="mask")
    assert batch["ids"].tolist() == [[1, 1, 7], [1, 1, 1]]
    assert batch["mask", "ids"].tolist() == [[True, True, False], [True, True, True]]
    assert batch["points"].is_nested
    assert [t.shape[0] for t in batch["points"].unbind()] == [3, 4]
    assert batch["score"].tolist() == [2.0, 3.0]
    with pytest.raises(ValueError, match="both"):
        collate(samples, pad_keys={"ids": 0}, nested_keys=["ids"])
    with pytest.raises(ValueError, match="mask_key"):
        collate(samples, mask_key="m")
    with pytest.raises(KeyError, match="'nope'"):
        collate(samples, pad_keys={"nope": 0})


@pytest.mark.parametrize("side", ["right", "left"])
def test_unpad_sequence_inverts_pad_sequence(side: str) -> None:
    tds = [
        TensorDict(a=torch.arange(n), b=torch.full((n, 2), float(n)), batch_size=[n])
        for n in (3, 5, 1)
    ]
    samples = unpad_sequence(pad_sequence(tds, return_mask=True, padding_side=side))
    assert [s.batch_size for s in samples.tensordicts] == [td.batch_size for td in tds]
    for got, want in zip(samples.tensordicts, tds, strict=True):
        assert torch.equal(got["a"], want["a"]) and torch.equal(got["b"], want["b"])
        assert "masks" not in got.keys()


def test_unpad_sequence_with_a_tensor_mask_and_errors() -> None:
    tds = [TensorDict(a=torch.arange(n)) for n in (2, 4)]
    padded = pad_sequence(tds)
    mask = torch.tensor([[True, True, False, False], [True] * 4])
    samples = unpad_sequence(padded, mask)
    assert [s["a"].tolist() for s in samples.tensordicts] == [[0, 1], [0, 1, 2, 3]]
    with pytest.raises(ValueError, match="masks"):
        unpad_sequence(padded)
    with pytest.raises(ValueError, match="contiguous"):
        unpad_sequence(padded, torch.tensor([[True, False, True, False], [True] * 4]))
    with pytest.raises(ValueError, match="shape"):
        unpad_sequence(padded, torch.ones(2, 4, 1, dtype=torch.bool))


def test_pack_and_unpack() -> None:
    td = TensorDict(
        p=torch.arange(5.0),
        v=torch.arange(15.0).reshape(5, 3),
        n={"s": torch.arange(45.0).reshape(5, 3, 3)},
        batch_size=[5],
    )
    flat, layout = td.pack()
    assert isinstance(layout, PackLayout)
    assert layout.keys == (("n", "s"), "p", "v")
    assert layout.offsets == (0, 9, 10) and layout.numel == 13
    expected = torch.cat([td["n", "s"].reshape(5, 9), td["p"][:, None], td["v"]], -1)
    assert torch.equal(flat, expected)
    out = layout.unpack(flat.index_select(0, torch.tensor([0, 2])))
    assert out.batch_size == torch.Size([2])
    assert torch.equal(out["n", "s"], td["n", "s"][[0, 2]])
    again, same = td.pack(layout=layout)
    assert torch.equal(again, flat) and same == layout and hash(same) == hash(layout)
    first, _ = td.pack(0)
    assert torch.equal(first, flat.T)
    with pytest.raises(TypeError, match="dtype"):
        TensorDict(a=torch.zeros(2), b=torch.zeros(2, dtype=torch.long), batch_size=[2]).pack()
    with pytest.raises(KeyError):
        td.exclude("p").pack(layout=layout)


def test_rename_keys() -> None:
    a, b = torch.zeros(()), torch.ones(())
    td = TensorDict(a=a, b=b)
    out = td.rename_keys({"a": "b", "b": "a"})
    assert out["a"] is b and out["b"] is a and td["a"] is a
    td = TensorDict(raw=TensorDict(p=torch.zeros(3), u=torch.ones(3)), keep={})
    out = td.rename_keys({("raw", "p"): "p", ("raw", "u"): "u"})
    assert sorted(out.keys(include_nested=True)) == ["keep", "p", "u"]  # emptied raw removed
    assert set(td.keys(include_nested=True)) == {"keep", "raw", ("raw", "p"), ("raw", "u")}
    assert sorted(td.rename_keys({"raw": "sol"}).keys(True, True)) == [("sol", "p"), ("sol", "u")]
    assert td.rename_keys({("raw", "zz"): "z"}, strict=False).keys() == td.keys()
    with pytest.raises(KeyError):
        td.rename_keys({"zz": "z"})
    with pytest.raises(ValueError, match="same destination"):
        td.rename_keys({"raw": "x", "keep": "x"})
    with pytest.raises(ValueError, match="already"):
        td.rename_keys({"raw": "keep"})


def test_from_schema() -> None:
    td = TensorDict.from_schema(
        {"obs": ([4, 4], torch.uint8), "r": ([], torch.float32)}, batch_size=[10]
    )
    assert td["obs"].shape == (10, 4, 4) and td["obs"].dtype == torch.uint8
    assert td["r"].shape == (10,) and not td["r"].any()
    assert TensorDict.from_schema({"a": ([2], torch.float32)}, storage="shared").is_shared()
    with pytest.raises(ValueError, match="storage"):
        TensorDict.from_schema({}, storage="bogus")
    pytest.importorskip("tensordict.memmap", reason="storage='memmap' needs tensordict-memmap")
    with tempfile.TemporaryDirectory() as d:
        mm = TensorDict.from_schema(
            {"a": ([4], torch.float32)}, batch_size=[8], storage="memmap", prefix=d
        )
        assert mm.is_memmap() and mm["a"].shape == (8, 4) and not mm["a"].any()


def test_from_schema_redis_needs_the_distributed_sibling() -> None:
    import importlib.util

    if importlib.util.find_spec("tensordict.distributed") is not None:
        pytest.skip("tensordict-distributed is installed: its tests run a real Redis server")
    with pytest.raises(ModuleNotFoundError, match="tensordict-distributed"):
        TensorDict.from_schema({"a": ([2], torch.float32)}, storage="redis")


def test_is_meta_and_clear_refs() -> None:
    assert TensorDict(a=torch.zeros(2, device="meta"), device="meta").is_meta
    assert not TensorDict(a=torch.zeros(2), device="cpu").is_meta
    assert not TensorDict(a=torch.zeros(2)).is_meta
    view = TensorDict(a=torch.zeros(2, 3), batch_size=[2, 3]).transpose(1, 0)
    assert view._last_op is not None
    assert view.clear_refs_for_compile_() is view and view._last_op is None


def test_parse_tensor_dict_string() -> None:
    td = TensorDict(
        obs=torch.ones(3, 4),
        nxt={"done": torch.ones(3, 1, dtype=torch.bool)},
        deep=TensorDict(x=torch.zeros(3, 2, 5, dtype=torch.int64), batch_size=[3, 2]),
        batch_size=[3],
        device="cpu",
    )
    back = parse_tensor_dict_string(repr(td))
    assert back.batch_size == td.batch_size and back.device == td.device
    for key in td.keys(True, True):
        assert back[key].shape == td[key].shape and back[key].dtype == td[key].dtype
        assert not back[key].any()
    assert back["deep"].batch_size == torch.Size([3, 2])
    compact = parse_tensor_dict_string(
        "TensorDict(batch_size=[2], fields={a: f32[5], b: {c: i64[]}})"
    )
    assert compact["a"].shape == (2, 5) and compact["b", "c"].dtype == torch.int64
    with pytest.raises(ValueError, match="'s'"):
        parse_tensor_dict_string(repr(TensorDict(s="text")))
    assert tensordict.utils.parse_tensor_dict_string is parse_tensor_dict_string
