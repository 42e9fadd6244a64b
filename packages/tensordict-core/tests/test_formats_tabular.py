"""Tables in and out of tensordicts, as the reference does them: categorical (pandas) and
dictionary-encoded (Arrow) columns, ``from_any`` of a DataFrame, the ``TypeError`` of
``batch_size`` with ``auto_batch_size=True``, and the error of a tensor a DataFrame column
cannot hold.

pandas and pyarrow are the oracles (``Series.cat.codes``, ``Array.to_pylist`` …). The
tests that need them skip without them (core's isolated session has neither).
"""

from __future__ import annotations

import collections
import dataclasses
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
import torch

import tensordict
from tensordict import NonTensorStack, TensorDict, from_arrow, from_pandas, to_arrow

Point = collections.namedtuple("Point", ["x"])


@dataclasses.dataclass
class Obs:
    x: torch.Tensor


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


def codes_of(series: Any) -> torch.Tensor:
    """What pandas says the codes of a categorical column are."""
    return torch.from_numpy(series.cat.codes.to_numpy().copy())


# ----------------------------------------------------------------------------- categoricals
def test_from_pandas_categorical_gives_its_codes(pd: Any) -> None:
    df = pd.DataFrame({"c": pd.Categorical(["a", "b", "a", None], categories=["b", "a", "z"])})
    out = from_pandas(df)["c"]
    assert isinstance(out, torch.Tensor)
    assert torch.equal(out, codes_of(df["c"]))
    assert out.dtype is torch.int8 and out[-1].item() == -1  # a missing value is -1


def test_from_pandas_categorical_of_ints_gives_codes_not_values(pd: Any) -> None:
    df = pd.DataFrame({"c": pd.Categorical([30, 10, 30, 20])})
    out = TensorDict.from_pandas(df)["c"]
    assert torch.equal(out, codes_of(df["c"]))
    assert out.tolist() != [30, 10, 30, 20]


def test_from_pandas_categorical_codes_widen_with_the_categories(pd: Any) -> None:
    df = pd.DataFrame({"c": pd.Categorical([f"k{i}" for i in range(300)])})
    out = from_pandas(df)["c"]
    assert out.dtype is torch.int16
    assert torch.equal(out, codes_of(df["c"]))


def test_from_pandas_categorical_edge_cases(pd: Any) -> None:
    empty = from_pandas(pd.DataFrame({"c": pd.Categorical([])}))
    assert empty.batch_size == (0,) and empty["c"].dtype is torch.int8
    missing = pd.DataFrame({"c": pd.Categorical([None, None], categories=["x"])})
    assert from_pandas(missing)["c"].tolist() == [-1, -1]
    ordered = pd.DataFrame(
        {"c": pd.Categorical(["hi", "lo"], categories=["lo", "hi"], ordered=True)}
    )
    assert torch.equal(from_pandas(ordered)["c"], codes_of(ordered["c"]))


def test_from_pandas_categorical_codes_are_a_copy(pd: Any) -> None:
    df = pd.DataFrame({"c": pd.Categorical(["a", "b"])})
    td = from_pandas(df)
    td["c"].fill_(5)
    assert df["c"].cat.codes.tolist() == [0, 1]


def test_from_pandas_categorical_with_keywords(pd: Any) -> None:
    df = pd.DataFrame({"o.c": pd.Categorical(["u", "v", "u"]), "x": [1.0, 2.0, 3.0]})
    td = from_pandas(df, separator=".", dtype=torch.float32, device="cpu", auto_batch_size=True)
    assert td["o", "c"].dtype is torch.float32
    assert td["o", "c"].tolist() == codes_of(df["o.c"]).float().tolist()
    assert td.device == torch.device("cpu") and td.batch_size == (3,)


def test_categorical_codes_go_back_to_pandas_and_rebuild_the_column(pd: Any) -> None:
    df = pd.DataFrame({"c": pd.Categorical(["a", None, "b", "a"], categories=["b", "a"])})
    back = from_pandas(df).to_pandas()
    assert back["c"].dtype == df["c"].cat.codes.dtype  # the codes, as the reference gives
    rebuilt = pd.Categorical.from_codes(back["c"], categories=df["c"].cat.categories)
    pd.testing.assert_series_equal(pd.Series(rebuilt, name="c"), df["c"])


def test_from_arrow_dictionary_gives_the_decoded_values(pa: Any) -> None:
    table = pa.table(
        {
            "s": pa.array(["x", "y", "x"]).dictionary_encode(),
            "i": pa.array([5, 6, 5]).dictionary_encode(),
        }
    )
    td = from_arrow(table)
    for name in ("s", "i"):  # numbers too stay Python values, as in the reference
        assert isinstance(td.get(name), NonTensorStack)
        assert td.get(name).tolist() == table.column(name).to_pylist()


def test_from_arrow_dictionary_nulls(pa: Any) -> None:
    column = pa.DictionaryArray.from_arrays(
        pa.array([0, 1, None, 0], type=pa.int8()), pa.array(["a", "b"])
    )
    table = pa.table({"d": column})
    with pytest.raises(ValueError, match="column 'd' has 1 null"):
        from_arrow(table)
    assert from_arrow(table, nulls="fill").get("d").tolist() == column.to_pylist()
    masked = from_arrow(table, nulls="mask")
    assert masked["_mask", "d"].tolist() == column.is_valid().to_pylist()


def test_from_arrow_dictionary_with_a_null_category_keeps_none(pa: Any) -> None:
    column = pa.DictionaryArray.from_arrays(
        pa.array([0, 1, 0], type=pa.int8()), pa.array(["a", None])
    )
    td = from_arrow(pa.table({"d": column}))  # no null row: nothing to raise for
    assert td.get("d").tolist() == ["a", None, "a"]


def test_to_arrow_of_a_dictionary_column_gives_the_plain_values(pa: Any) -> None:
    table = pa.table({"s": pa.array(["x", "y", "x"]).dictionary_encode()})
    back = to_arrow(from_arrow(table))
    assert back.column("s").type == pa.string()
    assert back.column("s").to_pylist() == table.column("s").to_pylist()


def test_from_arrow_of_a_pandas_categorical(pa: Any, pd: Any) -> None:
    df = pd.DataFrame({"c": pd.Categorical(["a", "b", None])})
    table = pa.Table.from_pandas(df)
    assert pa.types.is_dictionary(table.schema.field("c").type)
    td = from_arrow(table, nulls="fill")
    assert td.get("c").tolist() == ["a", "b", None]


# ----------------------------------------------------------------------------- from_any
def test_from_any_dataframe_is_from_pandas(pd: Any) -> None:
    df = pd.DataFrame({"x": [1.0, 2.0], "c": pd.Categorical(["u", "v"]), "s": ["p", "q"]})
    td = TensorDict.from_any(df)
    want = from_pandas(df)
    assert td.batch_size == want.batch_size == (2,)
    assert torch.equal(td["x"], torch.from_numpy(df["x"].to_numpy().copy()))
    assert torch.equal(td["c"], codes_of(df["c"]))
    assert td.get("s").tolist() == want.get("s").tolist() == ["p", "q"]
    assert tensordict.from_any(df)["x"].tolist() == [1.0, 2.0]


def test_from_any_dataframe_honours_device(pd: Any) -> None:
    df = pd.DataFrame({"x": [1.0, 2.0]})
    assert TensorDict.from_any(df).device is None
    td = TensorDict.from_any(df, device="cpu")
    assert td.device == torch.device("cpu") and td["x"].device == torch.device("cpu")


def test_from_any_dataframe_batch_keywords(pd: Any) -> None:
    df = pd.DataFrame({"x": [1.0, 2.0, 3.0]})
    assert TensorDict.from_any(df, batch_size=[]).batch_size == ()
    assert TensorDict.from_any(df, auto_batch_size=True).batch_size == (3,)
    # batch_dims alone does not turn auto_batch_size on for a DataFrame (as from_pandas)
    assert TensorDict.from_any(df, batch_dims=0).batch_size == (3,)
    assert TensorDict.from_any(df, auto_batch_size=True, batch_dims=0).batch_size == ()


def test_from_any_dataframe_inside_a_dict(pd: Any) -> None:
    df = pd.DataFrame({"x": [1.0, 2.0], "c": pd.Categorical(["u", "v"])})
    td = TensorDict.from_any({"table": df, "y": torch.zeros(2)}, auto_batch_size=True)
    assert td.batch_size == (2,) and td["table"].batch_size == (2,)
    assert torch.equal(td["table", "c"], codes_of(df["c"]))
    assert TensorDict.from_dict({"t": df}, batch_size=[2])["t", "x"].tolist() == [1.0, 2.0]


def test_from_any_does_not_import_pandas() -> None:
    code = (
        "import sys, torch, tensordict\n"
        "tensordict.TensorDict.from_any({'a': torch.zeros(2), 'b': (1, 'x')})\n"
        "assert 'pandas' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ----------------------------------------------------------------------------- batch keywords
CONFLICTING = {
    "from_tuple": lambda **kw: TensorDict.from_tuple((torch.zeros(3),), **kw),
    "from_namedtuple": lambda **kw: TensorDict.from_namedtuple(Point(torch.zeros(3)), **kw),
    "from_dataclass": lambda **kw: TensorDict.from_dataclass(Obs(torch.zeros(3)), **kw),
    "from_struct_array": lambda **kw: TensorDict.from_struct_array(
        np.zeros(3, dtype=[("x", "f4")]), **kw
    ),
}
ANY_OF = {
    "from_tuple": (torch.zeros(3),),
    "from_namedtuple": Point(torch.zeros(3)),
    "from_dataclass": Obs(torch.zeros(3)),
    "from_struct_array": np.zeros(3, dtype=[("x", "f4")]),
}


@pytest.mark.parametrize("name", sorted(CONFLICTING))
def test_batch_size_with_auto_batch_size_raises(name: str) -> None:
    with pytest.raises(TypeError, match=f"Conflicting batch sizes in {name}: batch_size and"):
        CONFLICTING[name](auto_batch_size=True, batch_size=[3])
    with pytest.raises(TypeError, match=f"in {name}"):  # through from_any too
        TensorDict.from_any(ANY_OF[name], auto_batch_size=True, batch_size=[3])
    # before anything else: a batch size that does not fit still gets the TypeError
    with pytest.raises(TypeError, match="cannot be both specified"):
        CONFLICTING[name](auto_batch_size=True, batch_size=[7])
    assert CONFLICTING[name](auto_batch_size=False, batch_size=[3]).batch_size == (3,)


def test_batch_size_with_auto_batch_size_raises_for_pandas(pd: Any) -> None:
    df = pd.DataFrame({"x": [1.0, 2.0, 3.0]})
    for call in (
        lambda: from_pandas(df, auto_batch_size=True, batch_size=[3]),
        lambda: TensorDict.from_pandas(df, auto_batch_size=True, batch_size=[3]),
        lambda: TensorDict.from_any(df, auto_batch_size=True, batch_size=[3]),
        lambda: tensordict.from_any(df, auto_batch_size=True, batch_size=[7]),
    ):
        with pytest.raises(TypeError, match="Conflicting batch sizes in from_pandas"):
            call()


def test_batch_size_wins_over_auto_batch_size_for_dicts_and_pytrees() -> None:
    data = {"x": torch.zeros(3, 4)}
    assert TensorDict.from_dict(data, auto_batch_size=True, batch_size=[3]).batch_size == (3,)
    assert TensorDict.from_any(data, auto_batch_size=True, batch_size=[3]).batch_size == (3,)
    assert TensorDict.from_pytree(data, auto_batch_size=True, batch_size=[3]).batch_size == (3,)


# ----------------------------------------------------------------------------- what a column holds
def test_to_pandas_refuses_a_multi_dim_tensor_naming_it(pd: Any) -> None:
    td = TensorDict(a=torch.zeros(4), img=torch.zeros(4, 2, 3), batch_size=[4])
    with pytest.raises(ValueError) as err:
        td.to_pandas()
    text = str(err.value)
    assert "Cannot convert tensor with shape torch.Size([4, 2, 3]) at key 'img'" in text
    assert "to a single DataFrame column" in text
    assert "Only 1D tensors (matching the batch size" in text


def test_to_pandas_multi_dim_error_names_the_nested_column(pd: Any) -> None:
    td = TensorDict(obs=TensorDict(img=torch.zeros(4, 1), batch_size=[4]), batch_size=[4])
    with pytest.raises(ValueError, match=r"torch.Size\(\[4, 1\]\) at key 'obs.img'"):
        td.to_pandas(separator=".")
    jagged = torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)], layout=torch.jagged)
    with pytest.raises(ValueError, match="at key 'j' to a single DataFrame column"):
        TensorDict(j=jagged, batch_size=[2]).to_pandas()
