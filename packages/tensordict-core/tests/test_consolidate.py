"""consolidate / from_consolidated / is_consolidated, and pickling of consolidated tensordicts."""

from __future__ import annotations

import copy
import json
import pickle

import pytest
import torch
import torch.multiprocessing as mp
from hypothesis import given, settings
from hypothesis import strategies as st

import tensordict
from tensordict import NonTensorData, TensorDict, from_consolidated


def _ptr(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _tensor_leaves(td):
    return {k: v for k, v in td.items(True, True) if isinstance(v, torch.Tensor)}


@pytest.fixture
def td():
    return TensorDict(
        {
            "a": torch.arange(6, dtype=torch.float32).reshape(2, 3),
            "b": {
                "c": torch.tensor([3, -4], dtype=torch.int64),
                "d": {"e": torch.tensor([[True], [False]])},
            },
            "h": torch.tensor([1.5, -2.5], dtype=torch.float16),
            "i8": torch.tensor([[1, -2, 3], [4, 5, -6]], dtype=torch.int8),
            "cx": torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex128),
            "bf": torch.tensor([0.5, 2.0], dtype=torch.bfloat16),
            "label": "cat",
            "cfg": NonTensorData({"lr": 0.1, "layers": [1, 2]}),
        },
        batch_size=[2],
        names=["env"],
    )


def test_leaves_are_views_of_one_storage(td, assert_td_equal):
    out = td.consolidate()
    buffer = out._consolidated["storage"]
    assert buffer.dtype == torch.uint8 and buffer.ndim == 1
    ptrs = {_ptr(v) for v in _tensor_leaves(out).values()}
    assert ptrs == {_ptr(buffer)}
    assert_td_equal(out, td)
    for key, value in _tensor_leaves(td).items():
        assert out[key].dtype == value.dtype
        assert out[key].data_ptr() != value.data_ptr()  # a copy, not the input
    assert out.names == ["env"] and out["b"].names == ["env"]
    assert out["cfg"] == {"lr": 0.1, "layers": [1, 2]} and out["label"] == "cat"


def test_buffer_size_is_the_sum_of_aligned_leaves(td):
    out = td.consolidate()
    leaves = list(_tensor_leaves(td).values())
    raw = sum(v.numel() * v.element_size() for v in leaves)
    assert raw <= out._consolidated["storage"].numel() <= raw + 16 * len(leaves)


def test_writes_go_through_to_the_buffer(td):
    out = td.consolidate()
    out["a"][0, 0] = 100.0
    buffer = out._consolidated["storage"]
    meta = out._consolidated["metadata"]
    assert from_consolidated(buffer, meta)["a"][0, 0] == 100.0
    assert td["a"][0, 0] == 0.0


def test_metadata_is_plain_json(td):
    meta = td.consolidate()._consolidated["metadata"]
    assert json.loads(json.dumps(meta)) == meta
    entry = meta["td"]["entries"]["a"]
    assert entry == {
        "kind": "tensor",
        "dtype": "float32",
        "shape": [2, 3],
        "stride": [3, 1],
        "offset": 0,
        "nbytes": 24,
        "requires_grad": False,
    }
    assert meta["td"]["batch_size"] == [2] and meta["td"]["names"] == ["env"]
    assert meta["td"]["entries"]["label"] == {"kind": "json", "value": "cat"}


def test_from_consolidated_with_json_round_tripped_metadata(td, assert_td_equal):
    out = td.consolidate()
    meta = json.loads(json.dumps(out._consolidated["metadata"]))
    back = from_consolidated(out._consolidated["storage"], meta)
    assert_td_equal(back, td)
    assert back.is_consolidated()
    assert TensorDict.from_consolidated(out._consolidated["storage"], meta)["label"] == "cat"


def test_embedded_metadata(td, assert_td_equal):
    out = td.consolidate(metadata=True)
    buffer = out._consolidated["storage"]
    back = from_consolidated(buffer)
    assert_td_equal(back, td)
    assert _ptr(back["b", "c"]) == _ptr(buffer)


def test_file_round_trip_is_memory_mapped(td, tmp_path, assert_td_equal):
    path = tmp_path / "sub" / "td.bin"
    out = td.consolidate(path)
    assert_td_equal(out, td)
    assert not list(path.parent.glob(".*tmp*"))
    back = from_consolidated(path)
    assert_td_equal(back, td)
    assert back.names == ["env"]
    back["a"][1, 2] = -7.0  # shared mapping: the file changes
    assert from_consolidated(str(path))["a"][1, 2] == -7.0


def test_strides_dense_permutations_kept_others_made_contiguous():
    x = torch.arange(24.0).reshape(2, 3, 4).permute(0, 2, 1)  # dense, permuted
    y = torch.arange(2.0).reshape(2, 1).expand(2, 5)  # stride 0
    z = torch.arange(20.0).reshape(2, 10)[:, ::2]  # gaps
    td = TensorDict({"x": x, "y": y, "z": z}, [2])
    out = td.consolidate()
    assert out["x"].stride() == x.stride()
    assert out["y"].stride() == (5, 1) and out["z"].stride() == (5, 1)
    for key in "xyz":
        assert torch.equal(out[key], td[key])
    back = pickle.loads(pickle.dumps(out))
    assert back["x"].stride() == x.stride() and torch.equal(back["x"], x)


def test_empty_and_scalar_leaves():
    td = TensorDict({"e": torch.zeros(2, 0), "s": torch.tensor(5.0), "n": {}}, [])
    out = td.consolidate()
    assert out["e"].shape == (2, 0) and out["s"] == 5.0 and out.is_consolidated()
    assert "n" in out.keys() and out["n"].is_empty()
    back = pickle.loads(pickle.dumps(out))
    assert back["e"].shape == (2, 0) and back["s"] == 5.0


def test_empty_tensordict():
    out = TensorDict(batch_size=[3]).consolidate()
    assert out.batch_size == (3,) and out._consolidated["storage"].numel() == 0
    assert pickle.loads(pickle.dumps(out)).batch_size == (3,)


def test_consolidated_copies_leave_the_graph_lock_and_device_kept():
    w = torch.ones(2, requires_grad=True)
    td = TensorDict({"w": w * 2}, [2], device="cpu").lock_()
    out = td.consolidate()
    # as the reference: the copies do not require grad and carry no history
    assert not out["w"].requires_grad and out["w"].grad_fn is None
    assert torch.equal(out["w"], torch.full((2,), 2.0))
    assert out.is_locked and out.device == torch.device("cpu")
    back = pickle.loads(pickle.dumps(out))
    assert not back["w"].requires_grad and back.is_locked and back.device == torch.device("cpu")
    # the source keeps its graph: gradients still reach w
    td["w"].sum().backward()
    assert torch.equal(w.grad, torch.full((2,), 2.0))
    # a tensordict pickled with a leaf requiring grad gets the flag back
    leaf = TensorDict({"p": torch.ones(2, requires_grad=True)}, [2])
    assert pickle.loads(pickle.dumps(leaf))["p"].requires_grad


def test_pickle_round_trip_stays_consolidated(td, assert_td_equal):
    out = td.consolidate()
    back = pickle.loads(pickle.dumps(out))
    assert back.is_consolidated()
    assert_td_equal(back, td)
    buffer = back._consolidated["storage"]
    assert {_ptr(v) for v in _tensor_leaves(back).values()} == {_ptr(buffer)}
    assert json.loads(json.dumps(back._consolidated["metadata"])) == out._consolidated["metadata"]


def test_pickle_sends_one_buffer():
    leaves = {f"k{i}": torch.full((4,), float(i)) for i in range(200)}
    td = TensorDict(leaves, [4])
    plain, cons = pickle.dumps(td), pickle.dumps(td.consolidate())
    assert len(cons) < len(plain) / 2
    # what is pickled: one uint8 tensor and a dict
    reduce_fn, (buffer, meta) = td.consolidate().__reduce_ex__(2)
    assert buffer.dtype == torch.uint8 and isinstance(meta, dict)


def test_deepcopy_of_consolidated(td, assert_td_equal):
    out = td.consolidate()
    deep = copy.deepcopy(out)
    assert deep.is_consolidated()
    assert _ptr(deep["a"]) != _ptr(out["a"])
    assert_td_equal(deep, td)


def test_not_consolidated_after_new_entry(td):
    out = td.consolidate()
    out["a"].add_(1)  # in place: still consolidated
    assert out.is_consolidated() and out.is_locked  # locked, as the reference
    out.unlock_()["new"] = torch.zeros(2)
    assert not out.is_consolidated()
    back = pickle.loads(pickle.dumps(out))  # plain pickling then
    assert not back.is_consolidated() and torch.equal(back["a"], td["a"] + 1)
    assert not td.is_consolidated() and not out.clone().is_consolidated()


def test_inplace_consolidate(td, assert_td_equal):
    expected = td.clone()
    same = td.consolidate(inplace=True)
    assert same is td and td.is_consolidated()
    assert_td_equal(td, expected)


def test_non_json_non_tensor_in_memory_is_carried_as_it_is():
    values = {"obj": (1, 2), "c": NonTensorData(1 + 2j), "nested": {"s": {3}}}
    td = TensorDict({"a": torch.zeros(2), **values}, [2])
    out = td.consolidate()  # nothing leaves the process: no JSON needed (the reference too)
    assert out.is_consolidated() and out["obj"] == (1, 2) and out["c"] == 1 + 2j
    assert out["nested", "s"] == {3}
    assert out.to(torch.float64)["c"] == 1 + 2j
    assert pickle.loads(pickle.dumps(out))["obj"] == (1, 2)
    assert td.consolidate(return_early=True).result()["obj"] == (1, 2)


def test_non_json_non_tensor_in_bytes_raises_unless_opted_in(tmp_path):
    td = TensorDict({"a": torch.zeros(2), "obj": (1, 2)}, [2])
    for kwargs in ({"metadata": True}, {"filename": tmp_path / "x.bin"}):
        with pytest.raises(TypeError, match=r"'obj'.*tuple.*allow_pickle=True"):
            td.consolidate(**kwargs)
        assert not td.is_consolidated() and td["obj"] == (1, 2)
    assert not (tmp_path / "x.bin").exists()
    out = td.consolidate(metadata=True, allow_pickle=True)
    assert out["obj"] == (1, 2)
    buffer, meta = out._consolidated["storage"], out._consolidated["metadata"]
    assert meta["td"]["entries"]["obj"]["kind"] == "pickle"
    with pytest.raises(ValueError, match=r"'obj'.*allow_pickle=True"):
        from_consolidated(buffer, meta)
    assert from_consolidated(buffer, meta, allow_pickle=True)["obj"] == (1, 2)


def test_pickling_carries_any_non_tensor():
    out = TensorDict({"a": torch.zeros(1), "obj": (1, 2)}, [1]).consolidate(allow_pickle=True)
    out.unlock_().set_non_tensor("obj", {3})  # not JSON, replaced after consolidation
    back = pickle.loads(pickle.dumps(out))
    assert back["obj"] == {3} and back.is_consolidated()
    assert json.dumps(back._consolidated["metadata"])


def test_mixed_devices_need_a_device():
    td = TensorDict({"a": torch.zeros(2), "b": torch.zeros(2, device="meta")}, [2])
    with pytest.raises(ValueError, match="several devices"):
        td.consolidate()
    out = td.consolidate(device="meta")
    assert {v.device.type for v in _tensor_leaves(out).values()} == {"meta"}


def test_device_argument_sets_the_result_device():
    td = TensorDict({"a": torch.zeros(2), "b": {"c": torch.ones(2)}}, [2], device="cpu")
    out = td.consolidate(device="meta")
    assert out.device == torch.device("meta") and out["b"].device == torch.device("meta")


def test_to_same_device_keeps_consolidated(td):
    out = td.consolidate()
    assert out.to("cpu").is_consolidated()
    cast = td.select("a").consolidate().to(torch.float64)
    assert cast["a"].dtype == torch.float64 and not cast.is_consolidated()


def test_to_other_device_is_one_buffer_copy(td):
    out = td.consolidate().to("meta")
    assert out.device == torch.device("meta") and out.is_consolidated()
    assert out["label"] == "cat"
    assert {v.device.type for v in _tensor_leaves(out).values()} == {"meta"}


def test_bad_sources_and_metadata(td, tmp_path):
    out = td.consolidate()
    buffer, meta = out._consolidated["storage"], out._consolidated["metadata"]
    with pytest.raises(TypeError, match="1-d uint8"):
        from_consolidated(buffer.view(torch.int8), meta)
    with pytest.raises(TypeError, match="tensor or a file path"):
        from_consolidated(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="does not end with"):
        from_consolidated(buffer)
    with pytest.raises(ValueError, match="not that of a consolidated"):
        from_consolidated(buffer, {"td": {}})
    bad = copy.deepcopy(meta)
    bad["td"]["entries"]["a"]["offset"] = buffer.numel()
    with pytest.raises(ValueError, match=r"'a'.*does not fit"):
        from_consolidated(buffer, bad)
    bad = copy.deepcopy(meta)
    bad["td"]["entries"]["b"]["entries"]["c"]["dtype"] = "Tensor"
    with pytest.raises(ValueError, match=r"invalid dtype 'Tensor'.*\('b', 'c'\)"):
        from_consolidated(buffer, bad)
    bad = copy.deepcopy(meta)
    bad["nbytes"] = buffer.numel() + 1
    with pytest.raises(ValueError, match="holds"):
        from_consolidated(buffer, bad)
    with pytest.raises(FileNotFoundError):
        from_consolidated(tmp_path / "missing.bin")
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"x" * 100)
    with pytest.raises(ValueError, match="does not end with"):
        from_consolidated(junk)
    good = tmp_path / "td.bin"
    td.consolidate(good)
    data = good.read_bytes()
    (tmp_path / "cut.bin").write_bytes(data[:20] + data[-16:])
    with pytest.raises(ValueError, match="truncated"):
        from_consolidated(tmp_path / "cut.bin")


@pytest.mark.parametrize("cut", [16, 64])
def test_a_truncated_data_region_with_an_intact_trailer_is_refused(td, tmp_path, cut):
    # the metadata trailer (json, its length, the magic) survives: before, the last leaves
    # read the trailer's bytes as data
    good = tmp_path / "td.bin"
    td.consolidate(filename=good)
    data = good.read_bytes()
    nbytes = td.consolidate()._consolidated["metadata"]["nbytes"]
    bad = tmp_path / "cut.bin"
    bad.write_bytes(data[: nbytes - cut] + data[nbytes:])
    before = bad.read_bytes()
    message = (
        f"the file '{bad}' is truncated: its data region holds {nbytes - cut} bytes .* "
        f"describes {nbytes} bytes"
    )
    with pytest.raises(ValueError, match=message):
        from_consolidated(bad)
    with pytest.raises(ValueError, match=message):
        TensorDict.from_consolidated(bad)
    assert bad.read_bytes() == before
    buffer = torch.frombuffer(bytearray(before), dtype=torch.uint8)  # the same bytes in memory
    with pytest.raises(ValueError, match=f"buffer is truncated: .* {nbytes - cut} bytes"):
        from_consolidated(buffer)
    assert (from_consolidated(good) == td).all()  # the intact file loads


def test_unsupported_entries_raise_clearly():
    sparse = torch.eye(2).to_sparse()
    with pytest.raises(NotImplementedError, match="'x'.*sparse.*strided"):
        TensorDict({"x": sparse}, [2]).consolidate()


def _worker(q_in, q_out):
    try:
        td = q_in.get()
        ptrs = {_ptr(v) for v in _tensor_leaves(td).values()}
        td["a"].add_(1)  # the buffer is in shared memory: the parent sees it
        q_out.put((td.is_consolidated(), len(ptrs), td["s"], td["b", "c"].sum().item()))
    except Exception as err:  # report instead of leaving the parent waiting
        q_out.put(repr(err))


def test_multiprocessing_queue_sends_one_shared_buffer():
    ctx = mp.get_context("fork")
    td = TensorDict(
        {"a": torch.zeros(3, 4), "b": {"c": torch.ones(3, 2)}, "s": "hi"}, [3]
    ).consolidate()
    q_in, q_out = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(target=_worker, args=(q_in, q_out))
    proc.start()
    try:
        q_in.put(td)
        assert q_out.get(timeout=30) == (True, 1, "hi", 6.0)
    finally:
        proc.join(timeout=60)
    assert torch.equal(td["a"], torch.ones(3, 4))


# ---------------------------------------------------------------------- property test
_DTYPES = [torch.float32, torch.float64, torch.int64, torch.int8, torch.bool, torch.float16]


@st.composite
def _entries(draw, batch, depth):
    source = {}
    kinds = ["tensor", "tensor", "nested", "text"] if depth < 2 else ["tensor", "text"]
    for i in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(kinds))
        if kind == "tensor":
            extra = draw(st.lists(st.integers(0, 3), max_size=2))
            dtype = draw(st.sampled_from(_DTYPES))
            t = torch.randint(-5, 5, (*batch, *extra)).to(dtype)
            if draw(st.booleans()) and t.ndim >= 2:
                t = t.transpose(-1, -2).contiguous().transpose(-1, -2)  # dense, permuted
            source[f"t{i}"] = t
        elif kind == "nested":
            source[f"n{i}"] = TensorDict(draw(_entries(batch, depth + 1)), batch)
        else:
            source[f"s{i}"] = draw(st.text(max_size=5))
    return source


@st.composite
def _tds(draw):
    batch = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
    return TensorDict(draw(_entries(batch, 0)), batch)


@settings(max_examples=40, deadline=None)
@given(_tds())
def test_property_consolidate_round_trips(td):
    out = td.consolidate()
    buffer = out._consolidated["storage"]
    for back in (
        out,
        pickle.loads(pickle.dumps(out)),
        from_consolidated(buffer, json.loads(json.dumps(out._consolidated["metadata"]))),
    ):
        assert back.batch_size == td.batch_size
        assert list(back.keys(True, True)) == list(td.keys(True, True))
        for key, value in td.items(True, True):
            got = back[key]
            if isinstance(value, torch.Tensor):
                assert got.dtype == value.dtype and got.shape == value.shape
                assert torch.equal(got, value)
            elif isinstance(value, str):
                assert got == value
        ptrs = {_ptr(v) for v in _tensor_leaves(back).values() if v.numel()}
        assert len(ptrs) <= 1


# ---------------------------------------------------------------------- non-tensor stacks
from tensordict._leaves import nontensor as _nontensor  # noqa: E402  (a rename must fail, not skip)

needs_stack = pytest.mark.skipif(
    not hasattr(_nontensor, "NonTensorStack"), reason="needs NonTensorStack"
)


@needs_stack
def test_non_tensor_stack_and_metadata_entries():
    rows = [
        TensorDict({"s": s, "x": torch.full((2,), float(i)), "m": _nontensor.MetaData("run")}, [])
        for i, s in enumerate("ab")
    ]
    td = torch.stack([torch.stack(rows), torch.stack(rows[::-1])], 1)  # batch [2, 2]
    out = td.consolidate()
    assert out.is_consolidated() and out["s"] == [["a", "b"], ["b", "a"]]
    assert out._consolidated["metadata"]["td"]["entries"]["s"]["kind"] == "stack"
    for back in (
        pickle.loads(pickle.dumps(out)),
        from_consolidated(
            out._consolidated["storage"], json.loads(json.dumps(out._consolidated["metadata"]))
        ),
    ):
        assert type(back.get("s")).__name__ == "NonTensorStack"
        assert back["s"] == [["a", "b"], ["b", "a"]] and back.batch_size == (2, 2)
        assert type(dict(back.items())["m"]).__name__ == "MetaData" and back["m"] == "run"
        assert torch.equal(back["x"], td["x"])


@pytest.mark.skipif(not hasattr(tensordict, "lazy_stack"), reason="needs lazy stacks")
def test_lazy_stacks_heterogeneous_members():
    from tensordict._wire.consolidate import consolidate, consolidated_buffer

    a = TensorDict({"x": torch.zeros(3), "n": {"y": torch.ones(3, 2)}, "s": "a"}, [3])
    b = TensorDict(
        {"x": torch.ones(3), "n": {"y": torch.full((3, 2), 2.0), "z": torch.zeros(3)}, "s": "b"},
        [3],
    )
    lazy = tensordict.lazy_stack([a, b], 1)
    root = consolidate(lazy)  # a lazy stack itself
    assert type(root).__name__ == "LazyStackedTensorDict" and root.stack_dim == 1
    assert consolidated_buffer(root) is not None
    outer = TensorDict({"lz": lazy, "w": torch.zeros(3, 2)}, [3, 2]).consolidate()
    assert outer.is_consolidated()
    for back in (
        pickle.loads(pickle.dumps(outer)),
        from_consolidated(
            outer._consolidated["storage"], json.loads(json.dumps(outer._consolidated["metadata"]))
        ),
    ):
        inner = back.get("lz")
        assert type(inner).__name__ == "LazyStackedTensorDict" and inner.stack_dim == 1
        assert torch.equal(back["lz", "x"], lazy["x"])
        assert torch.equal(inner.tensordicts[1]["n", "z"], torch.zeros(3))
        assert "z" not in inner.tensordicts[0]["n"].keys()


def test_share_memory(td):
    out = td.consolidate(share_memory=True)
    assert out._consolidated["storage"].is_shared() and out.is_shared()
    assert td.consolidate(share_memory=True, metadata=True).is_shared()


cuda = pytest.mark.cuda
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@cuda
@needs_cuda
def test_cuda_buffer_and_one_copy_moves(td, assert_td_equal):
    gpu = td.consolidate(device="cuda")
    assert gpu._consolidated["storage"].is_cuda and gpu.is_consolidated()
    assert {v.device.type for v in _tensor_leaves(gpu).values()} == {"cuda"}
    back = gpu.to("cpu")
    assert back.is_consolidated() and back.device == torch.device("cpu")
    assert_td_equal(back, td)
    moved = td.consolidate().to("cuda", non_blocking=True)
    torch.cuda.synchronize()
    assert moved.is_consolidated() and moved.device.type == "cuda"
    assert_td_equal(moved.cpu(), td)
    pinned = td.consolidate(pin_memory=True)
    assert pinned._consolidated["storage"].is_pinned()


def test_packing_refills_current_values_and_zeroes_every_gap():
    from tensordict._wire.consolidate import Packing

    td = TensorDict(
        {
            "a": torch.arange(3, dtype=torch.float32),  # 12 bytes: a 4-byte gap after it
            "a2": torch.arange(5, dtype=torch.float32),  # joins a's run across the gap
            "b": torch.arange(3, dtype=torch.int16),  # 6 bytes: a gap no int16 run closes
            "c": torch.arange(6.0).reshape(2, 3).t(),  # not contiguous: its own copy
            "d": torch.tensor([True, False, True]),
        },
        [],
    )
    packing = Packing(td)
    buffer = torch.full((packing.nbytes,), 0xFF, dtype=torch.uint8)  # dirty, as reused ones
    packing.fill(lambda n, dev: buffer)
    covered = torch.zeros(packing.nbytes, dtype=torch.bool)
    for key, entry in packing.meta["td"]["entries"].items():
        start, stop = entry["offset"], entry["offset"] + entry["nbytes"]
        covered[start:stop] = True
        got = buffer[start:stop].view(td[key].dtype)
        assert torch.equal(got, td[key].t().reshape(-1) if key == "c" else td[key]), key
    assert (buffer[~covered] == 0).all()  # alignment gaps and the tail are zeroed
    td["a"].add_(10)  # the same leaves, new values: a refill copies them
    td["c"].mul_(2)
    again = packing.fill()
    out = from_consolidated(again, packing.meta)
    for key in td.keys():
        assert torch.equal(out[key], td[key]), key
