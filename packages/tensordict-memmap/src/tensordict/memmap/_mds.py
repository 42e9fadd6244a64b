"""MosaicML Streaming (MDS) shards: ``TensorDict.to_mds`` (extra ``mds``:
``pip install tensordict-memmap[mds]``, which brings ``mosaicml-streaming``; it is imported
only when ``to_mds`` has to create the writer itself).

Each element of the first batch dimension is one sample (a tensordict without batch
dimensions is one sample): a ``{column: value}`` dict handed to the writer's
``write(sample)``. Tensors are written as NumPy arrays with the ``"ndarray"`` encoding
(dtype and shape kept exactly, zero-dimensional ones included); strings as ``"str"``,
bytes as ``"bytes"``, Python ints and floats as ``"int"``/``"float64"``, other JSON values
as ``"json"``. Other Python objects need an explicit encoding in ``columns`` (``"pkl"``:
reading them back will unpickle). Nested keys are refused: call ``flatten_keys()`` first.

Any object with the ``write(sample)``/``finish()`` interface of ``streaming.MDSWriter``
can be passed as ``writer=``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from tensordict._plugins.api import NonTensorData, NonTensorStack, import_extra
from tensordict._plugins.api import kinds as _kinds
from tensordict._plugins.api import tabular as _tabular
from tensordict.memmap._codec import is_json_exact

MDS_INSTALL = "tensordict-memmap[mds]"


def _columns_of(td: Any) -> list[tuple[str, Any]]:
    out = []
    for name, value in td.items():
        if _kinds.is_tensorclass(value):
            value = value._tensordict
        if isinstance(value, _kinds.Base):
            raise ValueError(
                f"to_mds: the entry {name!r} is a nested tensordict, which MDS columns cannot "
                "hold. Call td.flatten_keys('.') first (and unflatten_keys('.') after reading)."
            )
        out.append((name, value))
    if not out:
        raise ValueError("to_mds: the tensordict has no entries, so there is nothing to write.")
    return out


def _encoding(name: str, value: Any) -> str:
    if isinstance(value, np.ndarray):
        return "ndarray"
    if isinstance(value, str):
        return "str"
    if isinstance(value, bytes):
        return "bytes"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if value is not None and is_json_exact(value):
            return "json"
        raise TypeError(
            f"to_mds: the column {name!r} holds a {type(value).__name__}, which has no MDS "
            "encoding that reads back without unpickling. Give its encoding in columns= "
            "(e.g. columns={..., " + repr(name) + ": 'pkl'})."
        )
    return "int" if isinstance(value, int) else "float64"


def _row_getters(td: Any, rows: int | None) -> list[tuple[str, Any]]:
    """``(column, function row -> value)``; ``rows`` is ``None`` for a single sample."""
    getters: list[tuple[str, Any]] = []
    for name, value in _columns_of(td):
        if isinstance(value, torch.Tensor):
            if value.is_nested:
                parts = [_tabular.plain_tensor(row).numpy() for row in value.unbind(0)]
                getters.append((name, parts.__getitem__))
                continue
            array = _tabular.plain_tensor(value).numpy()
            if rows is None:
                getters.append((name, lambda _i, a=array: a))
            else:
                getters.append((name, lambda i, a=array: np.asarray(a[i])))
        elif isinstance(value, NonTensorData):
            getters.append((name, lambda _i, v=value.data: v))
        elif isinstance(value, NonTensorStack):
            items = value.tolist()
            getters.append(
                (name, lambda _i, v=items: v) if rows is None else (name, items.__getitem__)
            )
        else:
            getters.append((name, lambda _i, v=value: v))
    return getters


def td_to_mds(
    td: Any,
    *,
    columns: dict[str, str] | None = None,
    out: str | tuple[str, str],
    keep_local: bool = False,
    compression: str | None = None,
    hashes: list[str] | None = None,
    size_limit: int | str | None = 1 << 26,
    writer: Any = None,
    finish_writer: bool | None = None,
    **kwargs: Any,
) -> None:
    """Write each row of ``td`` as one sample of an MDS dataset.

    ``out``, ``keep_local``, ``compression``, ``hashes``, ``size_limit`` and the other
    keywords are passed to ``streaming.MDSWriter`` when ``to_mds`` creates it (they are
    ignored with ``writer``).

    Keyword Args:
        columns: the MDS encoding of each column (default: inferred from the first
            sample, see the module's documentation).
        writer: a writer to write through (``streaming.MDSWriter`` or any object with its
            ``write(sample)``/``finish()`` methods).
        finish_writer: whether to call ``writer.finish()`` afterwards. A writer created
            here is always finished; a given one is finished by default unless ``td``
            has no batch dimension (one sample: more are expected).

    >>> import torch
    >>> from tensordict import NonTensorStack, TensorDict
    >>> class Recorder:  # the MDSWriter interface
    ...     def __init__(self): self.samples, self.finished = [], False
    ...     def write(self, sample): self.samples.append(sample)
    ...     def finish(self): self.finished = True
    >>> rec = Recorder()
    >>> td = TensorDict(x=torch.arange(4).view(2, 2), s=NonTensorStack("a", "b"), batch_size=[2])
    >>> td.to_mds(out="unused", writer=rec)
    >>> rec.samples[1]["x"], rec.samples[1]["s"], rec.finished
    (array([2, 3]), 'b', True)
    """
    data = _tabular.as_tensordict(td, "to_mds")
    rows = int(data.batch_size[0]) if data.batch_dims else None
    getters = _row_getters(data, rows)
    own = writer is None
    if rows == 0:
        raise ValueError("to_mds: the tensordict has no rows (batch size [0]), so no sample.")
    if own:
        streaming = import_extra("streaming", MDS_INSTALL, "to_mds")
        if columns is None:
            first = {name: get(0) for name, get in getters}
            columns = {name: _encoding(name, value) for name, value in first.items()}
        writer = streaming.MDSWriter(
            columns=columns,
            out=out,
            keep_local=keep_local,
            compression=compression,
            hashes=hashes,
            size_limit=size_limit,
            **kwargs,
        )
    elif columns is None and getters:
        # check the samples have MDS encodings even when the writer was built elsewhere
        for name, get in getters:
            _encoding(name, get(0))
    for i in range(rows if rows is not None else 1):
        writer.write({name: get(i) for name, get in getters})
    if own or (finish_writer if finish_writer is not None else rows is not None):
        writer.finish()
