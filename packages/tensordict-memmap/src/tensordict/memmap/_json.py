"""JSON files: ``TensorDict.to_json``/``from_json`` and the top-level :func:`from_json`
(no extra: Python's :mod:`json` writes and parses them).

A file holds one JSON object (a record) per element of the single batch dimension: a
list of records, or one record per line with ``lines=True`` (JSON Lines). A tensor gives
one number per record, or nested lists for trailing dims; a nested tensordict gives a
nested object, or flat ``"obs.x"`` fields with ``separator="."``; a non-tensor entry its
JSON values. Numbers are written with Python's shortest round-trip representation (NaN
and infinities as ``NaN``/``Infinity``, which :mod:`json` reads back), so int64, float64
and bool round-trip bit for bit and the other real dtypes come back exactly with
``dtype=``. Complex tensors and values that are not JSON are refused with a
:class:`TypeError` naming the key.

Reading gives bool tensors for columns of booleans, int64 for integers, float64 for
numbers, tensors with trailing dims for regular nested lists of numbers, a
:class:`~tensordict.NonTensorStack` for strings and anything else; nested objects become
nested tensordicts. A file written by ``pandas.DataFrame.to_json`` (records, or the
default column-oriented object) reads too. Parsing JSON never runs code.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tensordict._plugins.api import NonTensorData, NonTensorStack
from tensordict._plugins.api import kinds as _kinds
from tensordict._plugins.api import tabular as _tabular
from tensordict.memmap._codec import is_json_exact

_REAL = "bool, integer and floating-point dtypes"


def _columns(td: Any, separator: str | None, n: int) -> list[tuple[tuple[str, ...], list[Any]]]:
    """``(path in a record, one JSON value per row)`` for every leaf of ``td``."""
    out: list[tuple[tuple[str, ...], list[Any]]] = []

    def walk(level: Any, prefix: tuple[str, ...]) -> None:
        for name, value in level.items():
            key = (*prefix, name)
            if _kinds.is_tensorclass(value):
                value = value._tensordict
            if isinstance(value, _kinds.Base):
                walk(value, key)
                continue
            if separator is not None and separator in name:
                raise ValueError(
                    f"to_json: the key {_tabular.key_text(key)} contains the separator "
                    f"{separator!r}, so it would not read back as the same key."
                )
            path = key if separator is None else (separator.join(key),)
            out.append((path, _values(value, key, n)))

    walk(td, ())
    return out


def _values(value: Any, key: tuple[str, ...], n: int) -> list[Any]:
    if isinstance(value, (NonTensorData, NonTensorStack)):
        values = _tabular.non_tensor_values(value, n)
        if not is_json_exact(values):
            raise TypeError(
                f"to_json: the non-tensor entry {_tabular.key_text(key)} holds values that "
                "JSON does not give back unchanged (only str, int, float, bool, None, lists "
                "and dicts with str keys)."
            )
        return values
    if not isinstance(value, torch.Tensor):
        raise TypeError(
            f"to_json: the entry {_tabular.key_text(key)} is a {type(value).__name__}, which "
            "JSON cannot hold."
        )
    if value.is_nested:
        return [_tabular.plain_tensor(row).tolist() for row in value.unbind(0)]
    t = _tabular.plain_tensor(value)
    if t.is_complex() or t.is_quantized:
        _tabular.refuse_dtype("to_json", key, t.dtype, "JSON", _REAL)
    rows: list[Any] = t.tolist()
    return rows


def _records(columns: list[tuple[tuple[str, ...], list[Any]]], n: int) -> Iterator[dict[str, Any]]:
    for i in range(n):
        record: dict[str, Any] = {}
        for path, values in columns:
            level = record
            for part in path[:-1]:
                level = level.setdefault(part, {})
            level[path[-1]] = values[i]
        yield record


def td_to_json(
    td: Any,
    path: str | Path,
    *,
    separator: str | None = None,
    lines: bool = False,
    **kwargs: Any,
) -> None:
    """Write ``td`` (one batch dimension) as JSON: a list of records (one object per
    row), or with ``lines=True`` one record per line.

    Keyword Args:
        separator: write nested entries as flat fields named with it (``"obs.x"``);
            without it they are nested objects.
        lines: write JSON Lines.
        **kwargs: passed to :func:`json.dumps` (``indent=2`` …).

    >>> import os, tempfile, torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict(x=torch.tensor([[1, 2], [3, 4]]), obs=TensorDict(y=torch.tensor([0.5, 1.5]), batch_size=[2]),
    ...                 batch_size=[2])
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     td.to_json(os.path.join(tmp, "data.jsonl"), lines=True)
    ...     print(open(os.path.join(tmp, "data.jsonl")).read().strip())
    ...     back = TensorDict.from_json(os.path.join(tmp, "data.jsonl"), lines=True)
    {"x": [1, 2], "obs": {"y": 0.5}}
    {"x": [3, 4], "obs": {"y": 1.5}}
    >>> back["x"], back["obs", "y"]
    (tensor([[1, 2],
            [3, 4]]), tensor([0.5000, 1.5000], dtype=torch.float64))
    """
    td = _tabular.as_tensordict(td, "to_json")
    n = _tabular.rows(td, "to_json")
    records = _records(_columns(td, separator, n), n)
    if lines:
        text = "".join(json.dumps(record, **kwargs) + "\n" for record in records)
    else:
        text = json.dumps(list(records), **kwargs)
    if hasattr(path, "write"):
        path.write(text)
    else:
        Path(path).write_text(text, encoding="utf-8")


def from_json(
    path: Any,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: torch.device | None = None,
    batch_size: torch.Size | None = None,
    separator: str | None = None,
    dtype: torch.dtype | None = None,
    lines: bool = False,
    **kwargs: Any,
) -> Any:
    """Read a JSON file of records (see the module's documentation) into a tensordict of
    batch size ``[records]``.

    ``auto_batch_size``, ``batch_dims``, ``device``, ``batch_size``, ``separator`` and
    ``dtype`` work as in :func:`tensordict.from_pandas`.

    Keyword Args:
        lines: the file is JSON Lines (one record per line).
        **kwargs: passed to :func:`json.loads`.

    A field that is missing or ``null`` in some record raises a :class:`ValueError`
    naming it.

    >>> import io
    >>> from tensordict import from_json
    >>> td = from_json(io.StringIO('[{"a": 1, "o": {"b": [0.5, 1.5]}}, {"a": 2, "o": {"b": [2.5, 3.5]}}]'))
    >>> td["a"], td["o", "b"].shape
    (tensor([1, 2]), torch.Size([2, 2]))
    """
    _tabular.check_batch_keywords("from_json", auto_batch_size, batch_size)
    text = path.read() if hasattr(path, "read") else Path(path).read_text(encoding="utf-8")
    if lines:
        data: Any = [json.loads(line, **kwargs) for line in text.splitlines() if line.strip()]
    else:
        data = json.loads(text, **kwargs)
    records = _as_records(data)
    n = len(records)
    paths: dict[tuple[str, ...], None] = {}
    for record in records:
        for key in _leaf_paths(record, ()):
            paths.setdefault(key, None)
    entries = []
    for key in paths:
        values = [_lookup(record, key, i) for i, record in enumerate(records)]
        column = key if separator is None else _split(key, separator)
        entries.append((column, _column(values, column)))
    td = _tabular.build(entries, n)
    return _tabular.finish(
        td,
        auto_batch_size=auto_batch_size,
        batch_dims=batch_dims,
        device=device,
        batch_size=batch_size,
        dtype=dtype,
    )


def _as_records(data: Any) -> list[dict[str, Any]]:
    if isinstance(data, list) and all(isinstance(r, dict) for r in data):
        return data
    if isinstance(data, dict) and all(isinstance(c, (list, dict)) for c in data.values()):
        # column-oriented: {column: [values]} or pandas' {column: {index: value}}
        columns = {k: list(c.values()) if isinstance(c, dict) else c for k, c in data.items()}
        lengths = {len(c) for c in columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"from_json: the columns have different lengths {sorted(lengths)}.")
        n = lengths.pop() if lengths else 0
        return [{k: c[i] for k, c in columns.items()} for i in range(n)]
    raise ValueError(
        "from_json: the file must hold a list of records (JSON objects), one record per "
        "line (lines=True), or an object of columns."
    )


def _leaf_paths(record: dict[str, Any], prefix: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    for name, value in record.items():
        if isinstance(value, dict) and value:
            yield from _leaf_paths(value, (*prefix, name))
        else:
            yield (*prefix, name)


def _lookup(record: dict[str, Any], key: tuple[str, ...], i: int) -> Any:
    level: Any = record
    for part in key:
        if not isinstance(level, dict) or part not in level:
            level = None
            break
        level = level[part]
    if level is None:
        raise ValueError(
            f"from_json: the field {_tabular.key_text(key)} is missing or null in record {i}; "
            "a tensordict entry needs a value in every row."
        )
    return level


def _split(key: tuple[str, ...], separator: str) -> tuple[str, ...]:
    return tuple(part for name in key for part in _tabular.split_column(name, separator))


def _column(values: list[Any], key: tuple[str, ...]) -> Any:
    """One field's values as a tensor (numbers, booleans, regular nested lists of them)
    or a non-tensor stack."""
    kinds: set[type] = set()
    for value in values:
        _scalar_kinds(value, kinds)
    np_dtype: Any = None
    if kinds == {bool}:
        np_dtype = np.bool_
    elif kinds == {int}:
        np_dtype = np.int64
    elif kinds and kinds <= {int, float}:
        np_dtype = np.float64
    if values and np_dtype is not None:
        try:
            array = np.array(values, dtype=np_dtype)
        except OverflowError:
            try:
                array = np.array(values, dtype=np.uint64)
            except (OverflowError, ValueError):
                array = None
        except ValueError:  # ragged nested lists
            array = None
        if array is not None:
            return torch.from_numpy(np.ascontiguousarray(array))
    return NonTensorStack.from_list(values, ndim=1)


def _scalar_kinds(value: Any, kinds: set[type]) -> None:
    """Add the types of the scalars in ``value`` (nested lists walked) to ``kinds``."""
    if isinstance(value, list):
        for item in value:
            _scalar_kinds(item, kinds)
    else:
        kinds.add(type(value))
