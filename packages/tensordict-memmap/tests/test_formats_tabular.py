"""The file formats on the reference's table rules: categorical columns through Parquet and
CSV, the ``TypeError`` of ``batch_size`` with ``auto_batch_size=True`` in ``from_csv``,
``from_parquet`` and ``from_json``, and the error of a tensor a CSV column cannot hold.

pandas and pyarrow are the oracles; the tests that need them skip without them (the
isolated memmap session).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import tensordict
from tensordict import TensorDict


@pytest.fixture
def pd() -> Any:
    return pytest.importorskip("pandas", reason="pandas is not installed (extra: csv)")


@pytest.fixture
def pq() -> Any:
    return pytest.importorskip(
        "pyarrow.parquet", reason="pyarrow is not installed (extra: parquet)"
    )


def _codes(series: Any) -> list[int]:
    return [int(c) for c in series.cat.codes]


# ----------------------------------------------------------------------------- categoricals
def test_categorical_codes_go_to_parquet(tmp_path: Path, pd: Any, pq: Any) -> None:
    df = pd.DataFrame({"c": pd.Categorical(["a", None, "b"], categories=["b", "a"])})
    TensorDict.from_pandas(df).to_parquet(tmp_path / "c.parquet")
    column = pd.read_parquet(tmp_path / "c.parquet")["c"]
    assert column.dtype == df["c"].cat.codes.dtype and column.tolist() == _codes(df["c"])
    back = TensorDict.from_parquet(tmp_path / "c.parquet")
    assert back["c"].dtype is torch.int8 and back["c"].tolist() == _codes(df["c"])


def test_parquet_written_by_pandas_gives_the_category_labels(
    tmp_path: Path, pd: Any, pq: Any
) -> None:
    df = pd.DataFrame({"c": pd.Categorical(["u", "v", "u"]), "x": [1.0, 2.0, 3.0]})
    df.to_parquet(tmp_path / "p.parquet")
    td = tensordict.from_parquet(tmp_path / "p.parquet")
    assert td.get("c").tolist() == df["c"].astype(str).tolist()
    assert td["x"].tolist() == df["x"].tolist()


def test_parquet_categorical_with_missing_values(tmp_path: Path, pd: Any, pq: Any) -> None:
    df = pd.DataFrame({"c": pd.Categorical(["u", None])})
    df.to_parquet(tmp_path / "m.parquet")
    with pytest.raises(ValueError, match="column 'c' has 1 null"):
        tensordict.from_parquet(tmp_path / "m.parquet")
    assert tensordict.from_parquet(tmp_path / "m.parquet", nulls="fill").get("c").tolist() == [
        "u",
        None,
    ]


def test_categorical_codes_go_to_csv(tmp_path: Path, pd: Any) -> None:
    df = pd.DataFrame({"c": pd.Categorical(["q", "p", None])})
    TensorDict.from_pandas(df).to_csv(tmp_path / "c.csv")
    assert pd.read_csv(tmp_path / "c.csv")["c"].tolist() == _codes(df["c"])
    assert TensorDict.from_csv(tmp_path / "c.csv")["c"].tolist() == _codes(df["c"])


def test_categorical_codes_go_to_json(tmp_path: Path, pd: Any) -> None:
    df = pd.DataFrame({"c": pd.Categorical(["q", "p"])})
    TensorDict.from_pandas(df).to_json(tmp_path / "c.json")
    assert pd.read_json(tmp_path / "c.json")["c"].tolist() == _codes(df["c"])


# ----------------------------------------------------------------------------- batch keywords
READERS: dict[str, Callable[..., Any]] = {
    "from_csv": TensorDict.from_csv,
    "from_parquet": TensorDict.from_parquet,
    "from_json": TensorDict.from_json,
}


@pytest.mark.parametrize("name", sorted(READERS))
def test_batch_size_with_auto_batch_size_raises(tmp_path: Path, name: str) -> None:
    # raised before the file is read: this one does not exist
    with pytest.raises(TypeError, match=f"Conflicting batch sizes in {name}: batch_size and"):
        READERS[name](tmp_path / "missing", auto_batch_size=True, batch_size=[3])
    with pytest.raises(TypeError, match=f"in {name}"):
        getattr(tensordict, name)(tmp_path / "missing", auto_batch_size=True, batch_size=[3])


def test_reader_batch_keywords_alone_still_work(tmp_path: Path) -> None:
    td = TensorDict(x=torch.arange(3), batch_size=[3])
    td.to_json(tmp_path / "a.json")
    assert TensorDict.from_json(tmp_path / "a.json", batch_size=[]).batch_size == ()
    assert TensorDict.from_json(tmp_path / "a.json", auto_batch_size=True).batch_size == (3,)


# ----------------------------------------------------------------------------- what a column holds
def test_to_csv_refuses_a_multi_dim_tensor_naming_it(tmp_path: Path, pd: Any) -> None:
    td = TensorDict(obs=TensorDict(img=torch.zeros(4, 2, 3), batch_size=[4]), batch_size=[4])
    with pytest.raises(ValueError) as err:
        td.to_csv(tmp_path / "a.csv", separator=".")
    text = str(err.value)
    assert "Cannot convert tensor with shape torch.Size([4, 2, 3]) at key 'obs.img'" in text
    assert "Only 1D tensors (matching the batch size" in text
    assert not (tmp_path / "a.csv").exists()
