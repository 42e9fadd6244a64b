"""The column model shared by the tabular formats (Arrow, pandas, and the Parquet, CSV and
JSON files of ``tensordict-memmap``).

A table has one row per element of the tensordict's single batch dimension and one
column per entry. Nested keys become column names joined with ``separator`` (``("obs",
"x")`` -> ``"obs.x"`` with ``separator="."``) and are split back on reading. Tensors keep
their dtype where the format holds it; a dtype it cannot hold is refused with a
:class:`TypeError` naming the key and the dtype, never cast silently. Non-tensor entries
(a :class:`~tensordict.NonTensorStack` of strings, …) are one Python value per row.

Nothing here imports a third-party format library: the modules of each format do, inside
their functions (see :func:`tensordict._plugins.siblings.import_extra`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import torch

from tensordict._keys.nested import NestedKey, key_as_tuple
from tensordict._kinds import kinds as _kinds
from tensordict._leaves.nontensor import NonTensorData, NonTensorStack

#: Install hints of core's extras.
ARROW_INSTALL = "tensordict-core[arrow]"
PANDAS_INSTALL = "tensordict-core[pandas]"


def as_tensordict(data: Any, what: str) -> Any:
    """``data`` as a tensordict whose entries read as whole tensors: a tensorclass gives
    its tensordict, a lazy stack of members of different shapes a dense copy with jagged
    tensors (``densify(layout=torch.jagged)``)."""
    if _kinds.is_tensorclass(data):
        data = data._tensordict
    if not isinstance(data, _kinds.Base):
        raise TypeError(f"{what} needs a tensordict, got {type(data).__name__}.")
    if isinstance(data, _kinds.Lazy):
        try:
            return data.to_tensordict()
        except RuntimeError:
            return data.densify(layout=torch.jagged)
    return data


def rows(td: Any, what: str) -> int:
    """The number of rows of ``td``: its batch size must have exactly one dimension."""
    if td.batch_dims != 1:
        raise ValueError(
            f"{what} needs a tensordict with one batch dimension (one row per element), got "
            f"the batch size {list(td.batch_size)}. Call td.reshape(-1) first to flatten it, "
            "or td.unsqueeze(0) to make a single row."
        )
    return int(td.batch_size[0])


def key_text(key: tuple[str, ...]) -> str:
    """A key as users write it: ``'a'`` or ``('a', 'b')``."""
    return repr(key[0]) if len(key) == 1 else repr(key)


def refuse_dtype(what: str, key: tuple[str, ...], dtype: torch.dtype, fmt: str, hint: str) -> None:
    """Raise the :class:`TypeError` of an entry whose dtype ``fmt`` cannot hold."""
    raise TypeError(
        f"{what}: the entry {key_text(key)} has dtype {dtype}, which {fmt} cannot hold "
        f"(it holds {hint}). Cast it first, e.g. td[{key_text(key)}] = "
        f"td[{key_text(key)}].float(); no silent cast is made."
    )


def plain_tensor(value: torch.Tensor) -> torch.Tensor:
    """``value`` detached, on the CPU, as a plain ``torch.Tensor`` (memory-mapped and other
    subclasses included), sharing its memory where it can."""
    out = value.detach()
    if out.device.type != "cpu":
        out = out.cpu()
    if type(out) is not torch.Tensor:
        out = out.as_subclass(torch.Tensor)
    if out.is_conj():
        out = out.resolve_conj()
    if out.is_neg():
        out = out.resolve_neg()
    return out


def non_tensor_values(value: NonTensorData | NonTensorStack, n: int) -> list[Any]:
    """One Python value per row of a non-tensor entry (a shared value is repeated)."""
    if isinstance(value, NonTensorData):
        return [value.data] * n
    return list(value.tolist())


def flat_columns(
    td: Any, separator: str | None, what: str
) -> Iterator[tuple[str, tuple[str, ...], Any]]:
    """``(column name, key tuple, leaf)`` for every leaf of ``td``, nested keys joined with
    ``separator``. A nested tensordict without a separator, or a key that contains the
    separator (it would not split back into the same key), raises a :class:`ValueError`."""

    def walk(level: Any, prefix: tuple[str, ...]) -> Iterator[tuple[str, tuple[str, ...], Any]]:
        for name, value in level.items():
            key = (*prefix, name)
            if separator is not None and separator in name:
                raise ValueError(
                    f"{what}: the key {key_text(key)} contains the separator {separator!r}, so "
                    "the column would not read back as the same key. Rename it, or pick "
                    "another separator."
                )
            if _kinds.is_tensorclass(value):
                value = value._tensordict
            if isinstance(value, _kinds.Base):
                if separator is None:
                    raise ValueError(
                        f"{what}: the entry {key_text(key)} is a nested tensordict; pass "
                        "separator='.' (or another string) to write it as columns named "
                        f"'{name}.<key>'."
                    )
                yield from walk(value, key)
            else:
                column = key[0] if separator is None else separator.join(key)
                yield column, key, value

    return walk(td, ())


def split_column(name: Any, separator: str | None) -> tuple[str, ...]:
    """The key of a column: its name (as a string), split at ``separator``."""
    text = name if isinstance(name, str) else str(name)
    if separator is None:
        return (text,)
    parts = tuple(text.split(separator))
    if any(not part for part in parts):
        raise ValueError(
            f"the column {text!r} does not split into a key with separator {separator!r} "
            "(an empty part)."
        )
    return parts


def build(entries: Sequence[tuple[tuple[str, ...], Any]], n: int) -> Any:
    """A :class:`~tensordict.TensorDict` of batch size ``[n]`` from ``(key, value)`` pairs
    (nested keys create nested tensordicts); a key given twice, or a key through another
    entry, raises a :class:`ValueError`."""
    if all(len(key) == 1 for key, _ in entries):
        flat = {key[0]: value for key, value in entries}
        if len(flat) == len(entries) and all(
            type(v) is torch.Tensor or isinstance(v, NonTensorStack) for v in flat.values()
        ):  # flat columns of ``n`` rows each (what a table holds): no per-entry checks
            return _kinds.Dense._new_unsafe(flat, torch.Size([n]))
    out = _kinds.Dense(batch_size=[n])
    seen: set[tuple[str, ...]] = set()
    prefixes: set[tuple[str, ...]] = set()  # the nested tensordicts the keys go through
    for key, value in entries:
        for cut in range(1, len(key) + 1):
            if key[:cut] in seen:
                raise ValueError(
                    f"the column of key {key_text(key)} clashes with the column of key "
                    f"{key_text(key[:cut])}."
                )
        if key in prefixes:
            raise ValueError(f"the key {key_text(key)} is both a column and a prefix of one.")
        seen.add(key)
        prefixes.update(key[:cut] for cut in range(1, len(key)))
        out.set(key if len(key) > 1 else key[0], value)
    return out


def check_batch_keywords(what: str, auto_batch_size: Any, batch_size: Any) -> None:
    """Raise the :class:`TypeError` of a ``from_*`` reader given both ``batch_size`` and
    ``auto_batch_size=True`` (the reference refuses the pair; ``from_dict`` and
    ``from_pytree`` are the exceptions, where ``batch_size`` wins)."""
    if auto_batch_size and batch_size is not None:
        raise TypeError(
            f"Conflicting batch sizes in {what}: batch_size and auto_batch_size cannot be "
            f"both specified (got batch_size={batch_size!r} and auto_batch_size=True). Pass "
            "one of them."
        )


def finish(
    td: Any,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Sequence[int] | torch.Size | None = None,
    dtype: torch.dtype | None = None,
) -> Any:
    """The common keywords of the ``from_<format>`` readers, applied to ``td`` (batch
    size ``[rows]``): ``dtype`` casts every tensor, ``batch_size`` sets the batch size,
    ``auto_batch_size`` (at most ``batch_dims`` dimensions) computes it from the entries,
    ``device`` moves the result."""
    if dtype is not None:
        td = td.to(dtype)
    if batch_size is not None:
        td.batch_size = torch.Size(batch_size)
    elif auto_batch_size:
        td.batch_size = torch.Size([])
        td.auto_batch_size_(batch_dims)
    if device is not None:
        td = td.to(device)
    return td


def mask_key_tuple(nulls: str, mask_key: NestedKey | None) -> tuple[str, ...]:
    """Check ``nulls``/``mask_key`` (``from_arrow``'s keywords); the mask key as a tuple."""
    if nulls not in ("raise", "fill", "mask"):
        raise ValueError(f"nulls must be 'raise', 'fill' or 'mask', got {nulls!r}.")
    if mask_key is not None and nulls != "mask":
        raise ValueError(f"mask_key is only used with nulls='mask' (got nulls={nulls!r}).")
    return ("_mask",) if mask_key is None else key_as_tuple(mask_key)
