"""Arrow and pandas interchange: ``to_arrow``/``from_arrow``, ``to_pandas``/``from_pandas``.

Checked against pyarrow and pandas themselves (tables and frames built independently
from NumPy), round trips (hypothesis over random nested tensordicts, compared bit for
bit), hand-computed null handling, and the errors for what a format cannot hold. The
tests that need pyarrow or pandas skip without them (the isolated core session); the
missing-extra errors are tested in every session.
"""

from __future__ import annotations

import datetime
import importlib.util
import re
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
import torch
from core_helpers import assert_bitwise, tabular_tds
from hypothesis import HealthCheck, given, settings

import tensordict
from tensordict import (
    LazyStackedTensorDict,
    NonTensorStack,
    TensorDict,
    from_arrow,
    from_pandas,
    to_arrow,
)

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
PANDAS_DTYPES = [*ARROW_DTYPES, torch.complex64, torch.complex128]
needs_pyarrow = pytest.mark.skipif(
    importlib.util.find_spec("pyarrow") is None,
    reason="pyarrow is not installed (extra: pip install tensordict-core[arrow])",
)
needs_pandas = pytest.mark.skipif(
    importlib.util.find_spec("pandas") is None,
    reason="pandas is not installed (extra: pip install tensordict-core[pandas])",
)
HYPOTHESIS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture
def pa() -> Any:
    return pytest.importorskip(
        "pyarrow", reason="pyarrow is not installed (extra: pip install tensordict-core[arrow])"
    )


@pytest.fixture
def pd() -> Any:
    return pytest.importorskip(
        "pandas", reason="pandas is not installed (extra: pip install tensordict-core[pandas])"
    )


def random_bits(dtype: torch.dtype, *shape: int, seed: int = 0) -> torch.Tensor:
    """Every bit pattern is fair game (NaN payloads, infinities, negative zero)."""
    g = torch.Generator().manual_seed(seed)
    if dtype is torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    raw = torch.randint(0, 256, (int(np.prod(shape)) * dtype.itemsize,), generator=g)
    return raw.to(torch.uint8).view(dtype).reshape(shape)


def buffer_address(table: Any, column: str) -> int:
    chunk = table.column(column).chunk(0)
    return int(chunk.buffers()[1].address + chunk.offset * chunk.type.bit_width // 8)


# ----------------------------------------------------------------------------- missing extras
def test_import_tensordict_imports_neither_pyarrow_nor_pandas() -> None:
    code = (
        "import sys, tensordict\n"
        "td = tensordict.TensorDict(a=[1, 2], batch_size=[2])\n"
        "bad = [m for m in ('pyarrow', 'pandas', 'zarr') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@pytest.mark.parametrize(
    "call, install",
    [
        (lambda: to_arrow(TensorDict(a=torch.zeros(2), batch_size=[2])), "tensordict-core[arrow]"),
        (lambda: from_arrow(object()), "tensordict-core[arrow]"),
        (
            lambda: TensorDict(a=torch.zeros(2), batch_size=[2]).to_pandas(),
            "tensordict-core[pandas]",
        ),
        (lambda: TensorDict.from_pandas(object()), "tensordict-core[pandas]"),
        (lambda: from_pandas(object()), "tensordict-core[pandas]"),
    ],
)
def test_missing_extra_names_the_pip_install(
    monkeypatch: pytest.MonkeyPatch, call: Any, install: str
) -> None:
    # a None entry in sys.modules is how Python itself marks a module as not importable
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ModuleNotFoundError, match=re.escape(f"pip install {install}")):
        call()


# ----------------------------------------------------------------------------- to_arrow
def test_to_arrow_matches_pyarrow_from_numpy(pa: Any) -> None:
    x = torch.arange(5, dtype=torch.float32)
    i = torch.tensor([3, -1, 7, 0, 2], dtype=torch.int16)
    b = torch.tensor([True, False, True, True, False])
    td = TensorDict(x=x, i=i, b=b, batch_size=[5])
    expected = pa.table({"x": x.numpy(), "i": i.numpy(), "b": b.numpy()})
    assert to_arrow(td).equals(expected)


def test_to_arrow_views_numeric_tensors(pa: Any) -> None:
    td = TensorDict(x=torch.arange(6, dtype=torch.float64), batch_size=[6])
    table = to_arrow(td)
    assert buffer_address(table, "x") == td["x"].data_ptr()


def test_to_arrow_trailing_dims_struct_and_strings(pa: Any) -> None:
    img = torch.arange(24, dtype=torch.uint8).view(3, 2, 4)
    td = TensorDict(
        img=img,
        obs=TensorDict(y=torch.tensor([1.0, 2.0, 3.0]), batch_size=[3]),
        name=NonTensorStack("a", "b", "c"),
        tag="shared",
        batch_size=[3],
    )
    table = to_arrow(td)
    assert table.num_rows == 3
    column = table.column("img").chunk(0)
    assert isinstance(column.type, pa.FixedShapeTensorType)
    np.testing.assert_array_equal(column.to_numpy_ndarray(), img.numpy())
    assert table.column("obs").type == pa.struct([("y", pa.float32())])
    assert table.column("obs").chunk(0).field("y").to_pylist() == [1.0, 2.0, 3.0]
    assert table.column("name").to_pylist() == ["a", "b", "c"]
    assert table.column("tag").to_pylist() == ["shared"] * 3


def test_to_arrow_jagged_and_lazy_stack(pa: Any) -> None:
    lazy = LazyStackedTensorDict(
        TensorDict(v=torch.tensor([1, 2])), TensorDict(v=torch.tensor([3])), stack_dim=0
    )
    table = to_arrow(lazy)
    assert table.column("v").to_pylist() == [[1, 2], [3]]
    back = from_arrow(table)
    assert [t.tolist() for t in back["v"].unbind(0)] == [[1, 2], [3]]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.complex64, torch.float8_e4m3fn])
def test_to_arrow_refuses_dtypes_it_cannot_hold(pa: Any, dtype: torch.dtype) -> None:
    td = TensorDict(n=TensorDict(w=torch.zeros(2, dtype=dtype), batch_size=[2]), batch_size=[2])
    with pytest.raises(TypeError, match=rf"\('n', 'w'\) has dtype {dtype}"):
        to_arrow(td)


@pytest.mark.parametrize("batch", [[], [2, 3]])
def test_to_arrow_needs_one_batch_dim(pa: Any, batch: list[int]) -> None:
    with pytest.raises(ValueError, match="one batch dimension"):
        to_arrow(TensorDict(a=torch.zeros(batch), batch_size=batch))


# ----------------------------------------------------------------------------- from_arrow
@pytest.mark.parametrize("dtype", ARROW_DTYPES)
def test_round_trip_is_bit_exact_for_every_arrow_dtype(pa: Any, dtype: torch.dtype) -> None:
    td = TensorDict(x=random_bits(dtype, 64), y=random_bits(dtype, 64, 3, seed=1), batch_size=[64])
    assert_bitwise(from_arrow(to_arrow(td)), td)


def test_from_arrow_is_zero_copy_for_primitive_columns(pa: Any) -> None:
    values = np.arange(10, dtype=np.int32)
    table = pa.table({"x": values[:5], "s": pa.array(values).slice(3, 5)})
    td = from_arrow(table)
    assert td["x"].data_ptr() == buffer_address(table, "x")
    assert td["s"].data_ptr() == buffer_address(table, "s")  # a slice: offset honoured
    assert td["s"].tolist() == [3, 4, 5, 6, 7]
    td["x"][0] = 100  # the tensor shares the Arrow buffer
    assert table.column("x").to_pylist()[0] == 100 and values[0] == 100  # numpy's, too
    copied = from_arrow(table, copy=True)
    assert copied["x"].data_ptr() != buffer_address(table, "x")
    assert copied["x"].tolist() == table.column("x").to_pylist()


def test_from_arrow_copies_read_only_buffers_unless_copy_false(pa: Any) -> None:
    raw = np.arange(4, dtype=np.int64).tobytes()
    arr = pa.Array.from_buffers(pa.int64(), 4, [None, pa.py_buffer(raw)])
    assert not arr.buffers()[1].is_mutable
    table = pa.table({"x": arr})
    assert from_arrow(table)["x"].data_ptr() != buffer_address(table, "x")
    assert from_arrow(table, copy=False)["x"].data_ptr() == buffer_address(table, "x")
    assert from_arrow(table)["x"].tolist() == [0, 1, 2, 3]


def test_from_arrow_column_types(pa: Any) -> None:
    table = pa.table(
        {
            "chunked": pa.chunked_array([[1, 2], [3]]),
            "flag": pa.array([True, False, True]),
            "fsl": pa.array([[[1, 2], [3, 4]]] * 3, type=pa.list_(pa.list_(pa.int8(), 2), 2)),
            "cat": pa.array(["a", "b", "a"]).dictionary_encode(),
            "when": pa.array([0, 1, 2], type=pa.timestamp("s")),
            "words": pa.array([["x"], [], ["y", "z"]]),
        }
    )
    td = from_arrow(table, device="cpu")
    assert td.batch_size == torch.Size([3]) and td.device == torch.device("cpu")
    assert td["chunked"].tolist() == [1, 2, 3]
    assert td["flag"].dtype is torch.bool and td["flag"].tolist() == [True, False, True]
    assert td["fsl"].shape == (3, 2, 2) and td["fsl"].dtype is torch.int8
    assert td["fsl"][0].tolist() == [[1, 2], [3, 4]]
    assert td["cat"] == ["a", "b", "a"]
    assert td["when"] == [datetime.datetime(1970, 1, 1, 0, 0, s) for s in range(3)]
    assert td["words"] == [["x"], [], ["y", "z"]]


def test_from_arrow_fixed_shape_tensor_with_permutation(pa: Any) -> None:
    kind = pa.fixed_shape_tensor(pa.int64(), [2, 3], permutation=[1, 0])
    storage = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(18)), 6)
    column = pa.ExtensionArray.from_storage(kind, storage)
    td = from_arrow(pa.table({"t": column}))
    np.testing.assert_array_equal(td["t"].numpy(), column.to_numpy_ndarray())


def test_from_arrow_record_batch_and_other_inputs(pa: Any) -> None:
    batch = pa.record_batch({"a": [1, 2]})
    assert from_arrow(batch)["a"].tolist() == [1, 2]
    assert from_arrow({"a": [1.5]})["a"].tolist() == [1.5]  # what pyarrow.table() accepts
    with pytest.raises(TypeError, match="pyarrow.Table"):
        from_arrow(42)


def test_from_arrow_nulls_raise_fill_mask(pa: Any) -> None:
    table = pa.table(
        {
            "i": pa.array([1, None, 3]),
            "f": pa.array([1.0, 2.0, None], type=pa.float32()),
            "b": pa.array([None, True, True]),
            "s": pa.array(["a", None, "c"]),
            "ok": pa.array([1, 2, 3]),
        }
    )
    with pytest.raises(ValueError, match=r"column 'i' has 1 null value"):
        from_arrow(table)
    filled = from_arrow(table, nulls="fill")
    assert filled["i"].tolist() == [1, 0, 3]
    assert filled["f"][:2].tolist() == [1.0, 2.0] and torch.isnan(filled["f"][2])
    assert filled["b"].tolist() == [False, True, True]
    assert filled["s"] == ["a", None, "c"]
    assert "_mask" not in filled.keys()
    masked = from_arrow(table, nulls="mask", mask_key=("m", "valid"))
    assert masked["m", "valid", "i"].tolist() == [True, False, True]
    assert masked["m", "valid", "f"].tolist() == [True, True, False]
    assert masked["m", "valid", "b"].tolist() == [False, True, True]
    assert masked["m", "valid", "s"].tolist() == [True, False, True]
    assert ("m", "valid", "ok") not in masked.keys(True)  # no nulls: no mask
    assert from_arrow(table, nulls="mask")["_mask", "i"].tolist() == [True, False, True]
    assert table.column("i").to_pylist() == [1, None, 3]  # filling never wrote into Arrow


def test_from_arrow_nulls_in_struct_lists_and_tensors(pa: Any) -> None:
    table = pa.table(
        {
            "st": pa.array([{"q": 1}, None, {"q": None}]),
            "fsl": pa.array([[1, 2], None, [3, None]], type=pa.list_(pa.int64(), 2)),
            "jag": pa.array([[1.0], None, [2.0, None]]),
        }
    )
    with pytest.raises(ValueError, match="null"):
        from_arrow(table)
    td = from_arrow(table, nulls="mask")
    assert td["st", "q"].tolist() == [1, 0, 0]
    assert td["_mask", "st", "q"].tolist() == [True, False, False]
    assert td["fsl"].tolist() == [[1, 2], [0, 0], [3, 0]]
    assert td["_mask", "fsl"].tolist() == [True, False, False]
    rows = td["jag"].unbind(0)
    assert rows[0].tolist() == [1.0] and rows[1].tolist() == [] and rows[2][0].item() == 2.0
    assert torch.isnan(rows[2][1])
    assert td["_mask", "jag"].tolist() == [True, False, False]


def test_from_arrow_bad_keywords(pa: Any) -> None:
    table = pa.table({"a": [1]})
    with pytest.raises(ValueError, match="nulls must be"):
        from_arrow(table, nulls="drop")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mask_key is only used"):
        from_arrow(table, mask_key="m")
    with pytest.raises(ValueError, match="clashes"):
        from_arrow(pa.table({"x": [1, None], "_mask": [1, 2]}), nulls="mask")


@needs_pyarrow
@HYPOTHESIS
@given(td=tabular_tds(ARROW_DTYPES))
def test_arrow_round_trip_random_nested(td: TensorDict) -> None:
    assert_bitwise(from_arrow(to_arrow(td)), td)


# ----------------------------------------------------------------------------- pandas
def test_to_pandas_matches_pandas_from_numpy(pd: Any) -> None:
    td = TensorDict(
        a=torch.arange(3),
        obs=TensorDict(x=torch.tensor([0.5, 1.5, 2.5], dtype=torch.float32), batch_size=[3]),
        name=NonTensorStack("u", "v", "w"),
        batch_size=[3],
    )
    expected = pd.DataFrame(
        {
            "a": np.arange(3),
            "obs/x": np.array([0.5, 1.5, 2.5], dtype=np.float32),
            "name": ["u", "v", "w"],
        }
    )
    pd.testing.assert_frame_equal(td.to_pandas(separator="/"), expected)


def test_from_pandas_columns(pd: Any) -> None:
    df = pd.DataFrame(
        {
            "obs.x": np.array([1, 2], dtype=np.uint16),
            "obs.y": [True, False],
            "z": np.array([1 + 2j, 3j]),
            "cat": pd.Categorical(["p", "q"]),
            "n": pd.array([1, 2], dtype="Int64"),
        }
    )
    td = TensorDict.from_pandas(df, separator=".")
    assert td["obs", "x"].dtype is torch.uint16 and td["obs", "x"].tolist() == [1, 2]
    assert td["obs", "y"].tolist() == [True, False]
    assert td["z"].dtype is torch.complex128
    assert td["cat"].tolist() == df["cat"].cat.codes.tolist()  # codes, as the reference
    assert td["n"].dtype is torch.int64 and td["n"].tolist() == [1, 2]
    flat = from_pandas(df)
    assert "obs.x" in flat.keys()
    cast = from_pandas(df[["obs.x"]], dtype=torch.float32, device="cpu")
    assert cast["obs.x"].dtype is torch.float32 and cast.device == torch.device("cpu")
    assert from_pandas(df[["obs.x"]], batch_size=[]).batch_size == torch.Size([])
    assert from_pandas(df[["obs.x"]], auto_batch_size=True).batch_size == torch.Size([2])


def test_from_pandas_refuses_missing_values(pd: Any) -> None:
    df = pd.DataFrame({"n": pd.array([1, None], dtype="Int64")})
    with pytest.raises(ValueError, match=r"column 'n' \(Int64\) has 1 missing value"):
        from_pandas(df)
    with pytest.raises(TypeError, match="DataFrame"):
        from_pandas([1, 2])


def test_to_pandas_errors(pd: Any) -> None:
    nested = TensorDict(n=TensorDict(x=torch.zeros(2), batch_size=[2]), batch_size=[2])
    with pytest.raises(ValueError, match="separator"):
        nested.to_pandas()
    with pytest.raises(ValueError, match=r"shape torch.Size\(\[2, 3\]\) at key 'b'"):
        TensorDict(b=torch.zeros(2, 3), batch_size=[2]).to_pandas()
    with pytest.raises(TypeError, match="'h' has dtype torch.bfloat16"):
        TensorDict(h=torch.zeros(2, dtype=torch.bfloat16), batch_size=[2]).to_pandas()
    with pytest.raises(ValueError, match="contains the separator"):
        TensorDict({"a.b": torch.zeros(2)}, batch_size=[2]).to_pandas(separator=".")


@pytest.mark.parametrize("dtype", PANDAS_DTYPES)
def test_pandas_round_trip_every_dtype(pd: Any, dtype: torch.dtype) -> None:
    td = TensorDict(x=random_bits(dtype, 32), batch_size=[32])
    assert_bitwise(TensorDict.from_pandas(td.to_pandas()), td)


@needs_pandas
@HYPOTHESIS
@given(td=tabular_tds(PANDAS_DTYPES, trailing=False))
def test_pandas_round_trip_random_nested(td: TensorDict) -> None:
    assert_bitwise(from_pandas(td.to_pandas(separator="."), separator="."), td)


def test_top_level_names() -> None:
    assert tensordict.from_arrow is from_arrow and tensordict.to_arrow is to_arrow
    assert tensordict.from_pandas is from_pandas
