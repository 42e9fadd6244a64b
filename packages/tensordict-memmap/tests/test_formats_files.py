"""File formats of data pipelines: Parquet, CSV, JSON, zarr, MDS shards.

Each format is checked against the library it wraps (files read or written by pyarrow,
pandas, :mod:`json` or zarr directly), by round trips (hypothesis over random nested
tensordicts, compared bit for bit where the format holds the dtype), and by its errors
(dtypes the format cannot hold, nulls, pickled values refused on loading). Tests that need
pyarrow, pandas or zarr skip without them (the isolated memmap session); the
missing-extra errors are tested in every session.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memmap_helpers import needs_h5py

import tensordict
from tensordict import LazyStackedTensorDict, NonTensorData, NonTensorStack, TensorDict

ARROW_DTYPES = [
    torch.bool,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint8,
    torch.uint16,
    torch.uint32,
    torch.uint64,
    torch.float16,
    torch.float32,
    torch.float64,
]
ZARR_DTYPES = [*ARROW_DTYPES, torch.complex64, torch.complex128]
HYPOTHESIS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


needs_pyarrow = pytest.mark.skipif(
    not _has("pyarrow"),
    reason="pyarrow is not installed (extra: pip install tensordict-memmap[parquet])",
)
needs_pandas = pytest.mark.skipif(
    not _has("pandas"), reason="pandas is not installed (extra: pip install tensordict-memmap[csv])"
)
needs_zarr = pytest.mark.skipif(
    not _has("zarr"), reason="zarr is not installed (extra: pip install tensordict-memmap[zarr])"
)


# ----------------------------------------------------------------------------- helpers
def random_bits(dtype: torch.dtype, *shape: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if dtype is torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    raw = torch.randint(0, 256, (int(np.prod(shape)) * dtype.itemsize,), generator=g)
    return raw.to(torch.uint8).view(dtype).reshape(shape)


def finite(t: torch.Tensor) -> torch.Tensor:
    """``t`` with NaNs replaced (text formats keep NaN, not its payload bits)."""
    return torch.where(torch.isnan(t), torch.zeros_like(t), t) if t.is_floating_point() else t


def leaves(td: Any) -> dict[tuple[str, ...], Any]:
    out = {}
    for key, value in td.items(include_nested=True, leaves_only=True):
        key = key if isinstance(key, tuple) else (key,)
        if isinstance(value, torch.Tensor):
            out[key] = value
        else:
            out[key] = value.data if isinstance(value, NonTensorData) else value.tolist()
    return out


def assert_bitwise(actual: Any, expected: Any) -> None:
    """Same batch size, keys, dtypes, shapes, tensor bytes and non-tensor values."""
    assert actual.batch_size == expected.batch_size
    got, want = leaves(actual), leaves(expected)
    assert set(got) == set(want), (sorted(got), sorted(want))
    for key, value in want.items():
        if isinstance(value, torch.Tensor):
            out = got[key]
            assert (out.dtype, out.shape) == (value.dtype, value.shape), (key, out, value)
            if value.numel():
                a = out.contiguous().reshape(-1).view(torch.uint8)
                assert torch.equal(a, value.contiguous().reshape(-1).view(torch.uint8)), key
        else:
            assert got[key] == value, (key, got[key], value)


@st.composite
def nested_tds(
    draw: Any, dtypes: list[torch.dtype], trailing: bool = True, nan: bool = True
) -> TensorDict:
    """Random tensordicts of one batch dimension: nested keys, random bits."""
    n = draw(st.integers(1, 4))
    key = st.text(alphabet="abxyz_", min_size=1, max_size=3)
    text = st.text(alphabet="abcdefgh éλ", min_size=1, max_size=4)

    def level(depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in draw(st.lists(key, min_size=1, max_size=3, unique=True)):
            kind = draw(st.sampled_from(["t", "t", "s", "n"] if depth < 2 else ["t", "s"]))
            if kind == "n":
                out[name] = TensorDict(level(depth + 1), batch_size=[n])
            elif kind == "s":
                out[name] = NonTensorStack.from_list(
                    draw(st.lists(text, min_size=n, max_size=n)), ndim=1
                )
            else:
                dtype = draw(st.sampled_from(dtypes))
                inner = draw(st.lists(st.integers(1, 3), max_size=2)) if trailing else []
                t = random_bits(dtype, n, *inner, seed=draw(st.integers(0, 2**31)))
                out[name] = t if nan else finite(t)
        return out

    return TensorDict(level(0), batch_size=[n])


# ----------------------------------------------------------------------------- extras
@pytest.mark.parametrize(
    "call, install",
    [
        (lambda p: TensorDict(a=torch.zeros(2), batch_size=[2]).to_parquet(p), "parquet"),
        (lambda p: TensorDict.from_parquet(p), "parquet"),
        (lambda p: tensordict.from_parquet(p), "parquet"),
        (lambda p: TensorDict(a=torch.zeros(2), batch_size=[2]).to_csv(p), "csv"),
        (lambda p: TensorDict.from_csv(p), "csv"),
        (lambda p: TensorDict(a=torch.zeros(2), batch_size=[2]).to_zarr(p), "zarr"),
        (lambda p: TensorDict.from_zarr(p), "zarr"),
        (lambda p: tensordict.from_zarr(p), "zarr"),
        (lambda p: TensorDict(a=torch.zeros(2), batch_size=[2]).to_mds(out=str(p)), "mds"),
    ],
)
def test_missing_extra_names_the_pip_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, call: Any, install: str
) -> None:
    for module in ("pyarrow", "pandas", "zarr", "streaming"):
        monkeypatch.setitem(sys.modules, module, None)  # how Python marks "not importable"
    pattern = re.escape(f"pip install tensordict-memmap[{install}]")
    with pytest.raises(ModuleNotFoundError, match=pattern):
        call(tmp_path / "f")


def test_json_needs_no_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for module in ("pyarrow", "pandas", "zarr"):
        monkeypatch.setitem(sys.modules, module, None)
    td = TensorDict(a=torch.arange(3), batch_size=[3])
    td.to_json(tmp_path / "a.json")
    assert tensordict.from_json(tmp_path / "a.json")["a"].tolist() == [0, 1, 2]


# ----------------------------------------------------------------------------- Parquet
@needs_pyarrow
@pytest.mark.parametrize("separator", [None, "."])
def test_parquet_round_trip_every_dtype(tmp_path: Path, separator: str | None) -> None:
    td = TensorDict(
        {f"d{i}": random_bits(dt, 16, seed=i) for i, dt in enumerate(ARROW_DTYPES)},
        batch_size=[16],
    )
    td["n"] = TensorDict(img=random_bits(torch.float16, 16, 2, 3), batch_size=[16])
    td["s"] = NonTensorStack.from_list([f"row {i}" for i in range(16)], ndim=1)
    td.to_parquet(tmp_path / "d.parquet", separator=separator)
    assert_bitwise(TensorDict.from_parquet(tmp_path / "d.parquet", separator=separator), td)


@needs_pyarrow
def test_parquet_file_is_what_pyarrow_writes(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    x, k = np.arange(5, dtype=np.float32), np.arange(5, dtype=np.int64) * 3
    td = TensorDict(
        x=torch.from_numpy(x), n=TensorDict(k=torch.from_numpy(k), batch_size=[5]), batch_size=[5]
    )
    td.to_parquet(tmp_path / "ours.parquet", separator="/")
    assert pq.read_table(tmp_path / "ours.parquet").equals(pa.table({"x": x, "n/k": k}))
    pq.write_table(pa.table({"x": x, "n/k": k}), tmp_path / "theirs.parquet")
    back = tensordict.from_parquet(tmp_path / "theirs.parquet", separator="/")
    assert back["x"].tolist() == x.tolist() and back["n", "k"].tolist() == k.tolist()


@needs_pyarrow
def test_parquet_reads_only_the_requested_columns(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    path = tmp_path / "d.parquet"
    td = TensorDict(small=torch.arange(1000), big=torch.randn(1000, 16), batch_size=[1000])
    td.to_parquet(path, write_page_checksum=True, use_dictionary=False)
    meta = pq.ParquetFile(path).metadata.row_group(0)
    names = [meta.column(i).path_in_schema for i in range(meta.num_columns)]
    chunk = meta.column(names.index("big.list.element"))
    raw = bytearray(path.read_bytes())
    start = chunk.data_page_offset + chunk.total_compressed_size // 2
    raw[start : start + 64] = b"\xff" * 64  # damage the middle of the column 'big'
    path.write_bytes(bytes(raw))
    only = tensordict.from_parquet(path, columns=["small"], page_checksum_verification=True)
    assert list(only.keys()) == ["small"] and only["small"].tolist() == list(range(1000))
    with pytest.raises(OSError):  # the damaged column is read when asked for
        tensordict.from_parquet(path, page_checksum_verification=True)


@needs_pyarrow
def test_parquet_struct_columns_and_column_selection(tmp_path: Path) -> None:
    td = TensorDict(
        a=torch.arange(3),
        n=TensorDict(b=torch.ones(3), c=torch.zeros(3), batch_size=[3]),
        batch_size=[3],
    )
    td.to_parquet(tmp_path / "s.parquet")
    assert set(TensorDict.from_parquet(tmp_path / "s.parquet", columns=["n"]).keys(True, True)) == {
        ("n", "b"),
        ("n", "c"),
    }
    back = TensorDict.from_parquet(tmp_path / "s.parquet", dtype=torch.float64, device="cpu")
    assert back["a"].dtype is torch.float64 and back.device == torch.device("cpu")
    assert TensorDict.from_parquet(tmp_path / "s.parquet", batch_size=[]).batch_size == torch.Size(
        []
    )
    empty = TensorDict(a=torch.arange(3), e=TensorDict(batch_size=[3]), batch_size=[3])
    with pytest.raises(ValueError, match="'e' is empty"):
        empty.to_parquet(tmp_path / "e.parquet")


@needs_pyarrow
def test_parquet_errors_and_nulls(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    with pytest.raises(TypeError, match=r"\('n', 'h'\) has dtype torch.bfloat16"):
        TensorDict(
            n=TensorDict(h=torch.zeros(2, dtype=torch.bfloat16), batch_size=[2]), batch_size=[2]
        ).to_parquet(tmp_path / "b.parquet")
    assert not (tmp_path / "b.parquet").exists()
    pq.write_table(pa.table({"v": pa.array([1.0, None])}), tmp_path / "n.parquet")
    with pytest.raises(ValueError, match="'v' has 1 null"):
        tensordict.from_parquet(tmp_path / "n.parquet")
    masked = tensordict.from_parquet(tmp_path / "n.parquet", nulls="mask")
    assert masked["_mask", "v"].tolist() == [True, False]


@needs_pyarrow
@HYPOTHESIS
@given(td=nested_tds(ARROW_DTYPES), separator=st.sampled_from([None, "."]))
def test_parquet_round_trip_random_nested(tmp_path: Path, td: TensorDict, separator: Any) -> None:
    td.to_parquet(tmp_path / "h.parquet", separator=separator)
    assert_bitwise(tensordict.from_parquet(tmp_path / "h.parquet", separator=separator), td)


# ----------------------------------------------------------------------------- CSV
@needs_pandas
def test_csv_is_what_pandas_writes_and_reads(tmp_path: Path) -> None:
    import pandas as pd

    i, f = np.array([3, -1, 2**62]), np.array([0.1, -0.0, 1 / 3])
    td = TensorDict(
        i=torch.from_numpy(i),
        n=TensorDict(f=torch.from_numpy(f), batch_size=[3]),
        s=NonTensorStack("a", "b", "c"),
        batch_size=[3],
    )
    td.to_csv(tmp_path / "ours.csv", separator=".")
    pd.DataFrame({"i": i, "n.f": f, "s": ["a", "b", "c"]}).to_csv(
        tmp_path / "theirs.csv", index=False
    )
    assert (tmp_path / "ours.csv").read_text() == (tmp_path / "theirs.csv").read_text()
    assert_bitwise(tensordict.from_csv(tmp_path / "theirs.csv", separator="."), td)


@needs_pandas
@pytest.mark.parametrize("dtype", ARROW_DTYPES)
def test_csv_values_round_trip_exactly(tmp_path: Path, dtype: torch.dtype) -> None:
    t = finite(random_bits(dtype, 200))
    TensorDict(x=t, batch_size=[200]).to_csv(tmp_path / "x.csv")
    back = TensorDict.from_csv(
        tmp_path / "x.csv", dtype=dtype if dtype is not torch.uint64 else None
    )
    assert_bitwise(
        back if dtype is not torch.uint64 else back.to(torch.uint64),
        TensorDict(x=t, batch_size=[200]),
    )
    if dtype in (torch.int64, torch.float64, torch.bool):  # what CSV infers: no dtype= needed
        assert_bitwise(TensorDict.from_csv(tmp_path / "x.csv"), TensorDict(x=t, batch_size=[200]))


@needs_pandas
def test_csv_errors_and_options(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="separator"):
        TensorDict(n=TensorDict(x=torch.zeros(2), batch_size=[2]), batch_size=[2]).to_csv(
            tmp_path / "a.csv"
        )
    with pytest.raises(ValueError, match=r"shape torch.Size\(\[2, 2\]\) at key 'm'"):
        TensorDict(m=torch.zeros(2, 2), batch_size=[2]).to_csv(tmp_path / "a.csv")
    with pytest.raises(TypeError, match="'h' has dtype torch.bfloat16"):
        TensorDict(h=torch.zeros(2, dtype=torch.bfloat16), batch_size=[2]).to_csv(
            tmp_path / "a.csv"
        )
    TensorDict(a=torch.tensor([1.5, 2.5]), batch_size=[2]).to_csv(tmp_path / "b.csv", sep=";")
    assert (tmp_path / "b.csv").read_text().splitlines()[0] == "a"
    assert TensorDict.from_csv(tmp_path / "b.csv", sep=";")["a"].tolist() == [1.5, 2.5]
    (tmp_path / "nan.csv").write_text("v\n1.0\n\n")
    assert torch.isnan(tensordict.from_csv(tmp_path / "nan.csv", skip_blank_lines=False)["v"][1])


# ----------------------------------------------------------------------------- JSON
def test_json_layout_is_records(tmp_path: Path) -> None:
    td = TensorDict(
        x=torch.tensor([[1, 2], [3, 4]]),
        obs=TensorDict(y=torch.tensor([0.5, float("nan")]), batch_size=[2]),
        s=NonTensorStack("a", "b"),
        flag=torch.tensor([True, False]),
        batch_size=[2],
    )
    td.to_json(tmp_path / "r.json")
    records = json.loads((tmp_path / "r.json").read_text())
    assert records[0] == {"x": [1, 2], "obs": {"y": 0.5}, "s": "a", "flag": True}
    assert np.isnan(records[1]["obs"]["y"])
    td.to_json(tmp_path / "l.jsonl", lines=True, separator=".")
    lines = (tmp_path / "l.jsonl").read_text().splitlines()
    assert [json.loads(line)["obs.y"] for line in lines][0] == 0.5 and len(lines) == 2
    back = TensorDict.from_json(tmp_path / "l.jsonl", lines=True, separator=".")
    assert back["x"].tolist() == [[1, 2], [3, 4]] and back["flag"].dtype is torch.bool
    assert back["s"] == ["a", "b"] and back["obs", "y"][0] == 0.5


@pytest.mark.parametrize("dtype", [torch.int64, torch.float64, torch.bool])
def test_json_round_trip_is_bit_exact(tmp_path: Path, dtype: torch.dtype) -> None:
    td = TensorDict(x=finite(random_bits(dtype, 100, 2)), batch_size=[100])
    td.to_json(tmp_path / "x.json")
    assert_bitwise(TensorDict.from_json(tmp_path / "x.json"), td)


@pytest.mark.parametrize(
    "dtype", [torch.float16, torch.bfloat16, torch.float32, torch.uint64, torch.int8]
)
def test_json_other_dtypes_come_back_with_dtype(tmp_path: Path, dtype: torch.dtype) -> None:
    td = TensorDict(x=finite(random_bits(dtype, 100)), batch_size=[100])
    td.to_json(tmp_path / "x.json", lines=True)
    assert_bitwise(TensorDict.from_json(tmp_path / "x.json", lines=True, dtype=dtype), td)


def test_json_reads_what_pandas_writes(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas", reason="pandas is not installed")
    df = pd.DataFrame({"a": [1, 2], "b": ["x", "y"], "c": [0.25, 0.5]})
    for orient in ("records", "columns"):
        df.to_json(tmp_path / "p.json", orient=orient)
        td = tensordict.from_json(tmp_path / "p.json")
        assert (
            td["a"].tolist() == [1, 2] and td["b"] == ["x", "y"] and td["c"].tolist() == [0.25, 0.5]
        )


def test_json_errors(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="'z' has dtype torch.complex64"):
        TensorDict(z=torch.zeros(2, dtype=torch.complex64), batch_size=[2]).to_json(
            tmp_path / "z.json"
        )
    with pytest.raises(TypeError, match="'o'"):
        TensorDict(o=NonTensorData((1, 2), batch_size=[2]), batch_size=[2]).to_json(
            tmp_path / "o.json"
        )
    (tmp_path / "m.json").write_text('[{"a": 1}, {"b": 2}]')
    with pytest.raises(ValueError, match="'a' is missing or null in record 1"):
        tensordict.from_json(tmp_path / "m.json")
    (tmp_path / "n.json").write_text("3")
    with pytest.raises(ValueError, match="list of records"):
        tensordict.from_json(tmp_path / "n.json")
    (tmp_path / "mixed.json").write_text('[{"a": true}, {"a": 2}]')
    assert tensordict.from_json(tmp_path / "mixed.json")["a"] == [True, 2]  # no bool -> int cast


@HYPOTHESIS
@given(
    td=nested_tds([torch.int64, torch.float64, torch.bool], nan=False),
    separator=st.sampled_from([None, "."]),
    lines=st.booleans(),
)
def test_json_round_trip_random_nested(
    tmp_path: Path, td: TensorDict, separator: Any, lines: bool
) -> None:
    td.to_json(tmp_path / "h.json", separator=separator, lines=lines)
    assert_bitwise(tensordict.from_json(tmp_path / "h.json", separator=separator, lines=lines), td)


# ----------------------------------------------------------------------------- zarr
@needs_zarr
def test_zarr_round_trip_every_dtype_and_layout(tmp_path: Path) -> None:
    import zarr

    td = TensorDict(
        {f"d{i}": random_bits(dt, 8, 3, seed=i) for i, dt in enumerate(ZARR_DTYPES)},
        batch_size=[8],
    )
    td["n"] = TensorDict(k=random_bits(torch.int16, 8), batch_size=[8])
    td["s"] = NonTensorStack.from_list([f"r{i}" for i in range(8)], ndim=1)
    td["meta"] = NonTensorData({"lr": 0.1, "tags": ["a"]}, batch_size=[8])
    stored = td.to_zarr(tmp_path / "t.zarr")
    assert type(stored).__name__ == "ZarrTensorDict"
    assert_bitwise(TensorDict.from_zarr(tmp_path / "t.zarr").to_tensordict(), td)
    group = zarr.open_group(str(tmp_path / "t.zarr"), mode="r")  # zarr itself reads the arrays
    np.testing.assert_array_equal(group["d4"][...], td["d4"].numpy())
    np.testing.assert_array_equal(group["n"]["k"][...], td["n", "k"].numpy())
    assert group["s"][...].tolist() == td["s"]
    with pytest.raises(TypeError, match="'b' has dtype torch.bfloat16"):
        TensorDict(b=torch.zeros(2, dtype=torch.bfloat16), batch_size=[2]).to_zarr(
            tmp_path / "b.zarr"
        )


@needs_zarr
def test_zarr_writes_chunks_and_reads_lazily(tmp_path: Path) -> None:
    import zarr

    td = TensorDict(x=torch.arange(60.0).view(10, 6), batch_size=[10])
    td.to_zarr(tmp_path / "c.zarr", chunks=(2,))
    array = zarr.open_array(str(tmp_path / "c.zarr" / "x"), mode="r")
    assert array.chunks == (2, 6)
    chunk_files = sorted(p.name for p in (tmp_path / "c.zarr" / "x" / "c").iterdir())
    assert chunk_files == ["0", "1", "2", "3", "4"]
    (tmp_path / "c.zarr" / "x" / "c" / "0" / "0").write_bytes(b"not a chunk")  # rows 0-1
    z = tensordict.from_zarr(tmp_path / "c.zarr")
    assert z[4:6]["x"].tolist() == td["x"][4:6].tolist()  # only chunk 2 is read
    assert z[torch.tensor([9, 2])]["x"].tolist() == td["x"][[9, 2]].tolist()
    with pytest.raises(Exception):  # noqa: B017 - reading the damaged chunk fails (zarr's error)
        z["x"]


@needs_zarr
def test_zarr_writes_through_and_read_only(tmp_path: Path) -> None:
    td = TensorDict(x=torch.zeros(4, 2), batch_size=[4])
    td.to_zarr(tmp_path / "w.zarr")
    z = TensorDict.from_zarr(tmp_path / "w.zarr", mode="r+")
    z[1:3] = TensorDict(x=torch.ones(2, 2), batch_size=[2])
    z.set(("n", "y"), torch.arange(4))
    again = tensordict.from_zarr(tmp_path / "w.zarr")
    assert again["x"].sum(1).tolist() == [0, 2, 2, 0] and again["n", "y"].tolist() == [0, 1, 2, 3]
    with pytest.raises(RuntimeError, match="read-only"):
        again.set("z", torch.zeros(4))


@needs_zarr
def test_zarr_store_written_by_zarr(tmp_path: Path) -> None:
    import zarr

    group = zarr.open_group(str(tmp_path / "raw.zarr"), mode="w")
    group.create_array("a", data=np.arange(12).reshape(3, 4))
    group.create_array("b", data=np.ones((3, 4, 5), dtype=np.float32))
    # nothing recorded: the common leading dims, as the reference reads such a store
    assert tensordict.from_zarr(tmp_path / "raw.zarr").batch_size == (3, 4)
    assert tensordict.from_zarr(tmp_path / "raw.zarr", auto_batch_size=True).batch_size == (3, 4)
    assert tensordict.from_zarr(
        tmp_path / "raw.zarr", auto_batch_size=True, batch_dims=1
    ).batch_size == (3,)
    assert tensordict.from_zarr(tmp_path / "raw.zarr", batch_size=[3])["b"].shape == (3, 4, 5)
    strings = zarr.open_group(str(tmp_path / "str.zarr"), mode="w")
    arr = strings.create_array("s", shape=(2,), dtype=str)
    arr[...] = np.array(["p", "q"], dtype=object)
    assert tensordict.from_zarr(tmp_path / "str.zarr", batch_size=[2]).get_non_tensor("s") == [
        "p",
        "q",
    ]
    stack = tensordict.from_zarr(tmp_path / "str.zarr", batch_size=[2], non_tensor_as_stack=True)
    assert isinstance(stack.get("s"), NonTensorStack)


@needs_zarr
def test_zarr_never_unpickles_without_allow_pickle(tmp_path: Path) -> None:
    td = TensorDict(a=torch.arange(2), o=NonTensorData((1, 2), batch_size=[2]), batch_size=[2])
    with pytest.raises(TypeError, match="allow_pickle=False"):
        td.to_zarr(tmp_path / "p.zarr", allow_pickle=False)
    written = td.to_zarr(tmp_path / "p.zarr")  # pickled by default, as the reference
    with pytest.raises(RuntimeError, match="pickled data"):
        written["o"]  # reading back goes through the store: no unpickling unasked
    z = tensordict.from_zarr(tmp_path / "p.zarr")
    assert z["a"].tolist() == [0, 1]  # the rest still reads
    with pytest.raises(RuntimeError, match="pickled data"):
        z["o"]
    assert tensordict.from_zarr(tmp_path / "p.zarr", allow_pickle=True)["o"] == (1, 2)


@needs_zarr
def test_from_schema_zarr_allocates_without_writing(tmp_path: Path) -> None:
    schema = {"obs": ([8, 8], torch.uint8), ("info", "r"): ([], torch.float32)}
    z = TensorDict.from_schema(
        schema, batch_size=[100], storage="zarr", filename=tmp_path / "s.zarr", chunks=(10,)
    )
    assert (
        z.batch_size == (100,)
        and z["obs"].shape == (100, 8, 8)
        and z["info", "r"].dtype is torch.float32
    )
    assert not (tmp_path / "s.zarr" / "obs" / "c").exists()  # zeros are zarr's fill value
    z[20:30] = TensorDict(obs=torch.ones(10, 8, 8, dtype=torch.uint8), batch_size=[10])
    assert [p.name for p in (tmp_path / "s.zarr" / "obs" / "c").iterdir()] == ["2"]
    assert z["obs"].sum().item() == 640


@needs_h5py
def test_from_schema_h5(tmp_path: Path) -> None:
    h5 = TensorDict.from_schema(
        {"a": ([2], torch.int32)}, batch_size=[3], storage="h5", filename=tmp_path / "s.h5"
    )
    assert h5["a"].shape == (3, 2) and h5["a"].dtype is torch.int32
    h5.close()


@needs_zarr
@HYPOTHESIS
@given(td=nested_tds(ZARR_DTYPES))
def test_zarr_round_trip_random_nested(tmp_path: Path, td: TensorDict) -> None:
    td.to_zarr(tmp_path / "h.zarr")
    z = tensordict.from_zarr(tmp_path / "h.zarr")
    assert_bitwise(z.to_tensordict(), td)
    assert_bitwise(z[1:], td[1:])


# ----------------------------------------------------------------------------- MDS
class RecordingWriter:
    """The ``streaming.MDSWriter`` interface, recording what it is given."""

    def __init__(self) -> None:
        self.samples: list[dict[str, Any]] = []
        self.finished = 0

    def write(self, sample: dict[str, Any]) -> None:
        self.samples.append(sample)

    def finish(self) -> None:
        self.finished += 1


def test_to_mds_writes_one_sample_per_row() -> None:
    td = TensorDict(
        x=torch.arange(6, dtype=torch.int16).view(3, 2),
        r=torch.tensor([0.5, 1.5, 2.5]),
        s=NonTensorStack("a", "b", "c"),
        tag="shared",
        batch_size=[3],
    )
    writer = RecordingWriter()
    td.to_mds(out="unused", writer=writer)
    assert writer.finished == 1 and len(writer.samples) == 3
    for i, sample in enumerate(writer.samples):
        assert set(sample) == {"x", "r", "s", "tag"}
        assert sample["x"].dtype == np.int16 and sample["x"].tolist() == td["x"][i].tolist()
        assert sample["r"].shape == () and sample["r"].item() == td["r"][i].item()
        assert sample["s"] == "abc"[i] and sample["tag"] == "shared"


def test_to_mds_finish_and_errors() -> None:
    writer = RecordingWriter()
    TensorDict(a=torch.zeros(2)).to_mds(out="unused", writer=writer)  # one sample: left open
    TensorDict(a=torch.ones(2)).to_mds(out="unused", writer=writer)
    assert writer.finished == 0 and len(writer.samples) == 2
    TensorDict(a=torch.ones(1, 2), batch_size=[1]).to_mds(
        out="unused", writer=writer, finish_writer=False
    )
    assert writer.finished == 0
    lazy = LazyStackedTensorDict(TensorDict(a=torch.zeros(2)), TensorDict(a=torch.zeros(3)))
    lazy.to_mds(out="unused", writer=writer, finish_writer=True)
    assert writer.finished == 1 and [s["a"].shape for s in writer.samples[-2:]] == [(2,), (3,)]
    with pytest.raises(ValueError, match="flatten_keys"):
        TensorDict(n=TensorDict(a=torch.zeros(1), batch_size=[1]), batch_size=[1]).to_mds(
            out="u", writer=writer
        )
    with pytest.raises(ValueError, match="no entries"):
        TensorDict(batch_size=[1]).to_mds(out="u", writer=writer)
    with pytest.raises(TypeError, match="'o' holds a tuple"):
        TensorDict(o=NonTensorData((1,), batch_size=[1]), batch_size=[1]).to_mds(
            out="u", writer=writer
        )


def test_top_level_names_resolve_to_memmap() -> None:
    from tensordict import memmap

    for name in ("from_parquet", "from_csv", "from_json", "from_zarr"):
        assert getattr(tensordict, name) is getattr(memmap, name)


@needs_zarr
def test_zarr_rows_read_and_written_as_in_the_references_example(tmp_path: Path) -> None:
    # the reference docs' zarr walk-through: write a tensordict, reopen it, read rows with
    # get_at, write rows in place with set_at_/update_at_ (mode="r+")
    td = TensorDict(
        a=torch.arange(10.0), s=TensorDict(c=torch.zeros(10, 2), batch_size=[10]), batch_size=[10]
    )
    td.to_zarr(tmp_path / "z.zarr")
    store = TensorDict.from_zarr(tmp_path / "z.zarr")
    assert store.get_at("a", 3).item() == 3.0
    assert torch.equal(store.get_at(("s", "c"), slice(2, 4)), torch.zeros(2, 2))
    with pytest.raises(RuntimeError, match="read-only"):
        store.set_at_("a", torch.tensor(100.0), 3)
    writable = TensorDict.from_zarr(tmp_path / "z.zarr", mode="r+")
    writable.set_at_("a", torch.tensor(100.0), 3)
    writable.update_at_({"a": torch.tensor(-1.0), "s": {"c": torch.ones(2)}}, 1)
    reread = TensorDict.from_zarr(tmp_path / "z.zarr")
    expected = torch.arange(10.0)
    expected[3], expected[1] = 100.0, -1.0
    assert torch.equal(reread.get("a"), expected)
    assert torch.equal(reread.get(("s", "c"))[:2], torch.tensor([[0.0, 0.0], [1.0, 1.0]]))
    with pytest.raises(RuntimeError, match=r"shape \(3,\) into entry 'a' at index 1"):
        writable.set_at_("a", torch.ones(3), 1)
    assert torch.equal(TensorDict.from_zarr(tmp_path / "z.zarr").get("a"), expected)
