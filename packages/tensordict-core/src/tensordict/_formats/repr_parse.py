"""``parse_tensor_dict_string``: rebuild a tensordict (zero-filled) from its printed form.

A debugging aid: paste the repr of a tensordict from a log and get one with the same keys,
shapes, dtypes, devices and batch sizes. Two forms are read: the multi-line form this
library prints (``TensorDict(fields={a: Tensor(shape=torch.Size([3]), ...), ...},
batch_size=torch.Size([3]), device=None, ...)``) and the compact one-line form
(``TensorDict(batch_size=[3], fields={a: f32[], next: {done: bool[1]}})``, where shapes are
the entries' shapes after the batch dimensions).
"""

from __future__ import annotations

import re
from typing import Any

import torch

from tensordict._kinds import kinds as _kinds

__all__ = ["parse_tensor_dict_string"]

_SHORT_DTYPES = {
    "bool": torch.bool,
    "u8": torch.uint8,
    "i8": torch.int8,
    "i16": torch.int16,
    "i32": torch.int32,
    "i64": torch.int64,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "f32": torch.float32,
    "f64": torch.float64,
    "c64": torch.complex64,
    "c128": torch.complex128,
}


def parse_tensor_dict_string(s: str) -> Any:
    """A zero-filled :class:`~tensordict.TensorDict` with the keys, shapes, dtypes, devices
    and batch sizes of the printed tensordict ``s`` (the values are not in a repr).

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict(obs=torch.ones(3, 4), next={"done": torch.ones(3, 1, dtype=torch.bool)}, batch_size=[3])
    >>> back = parse_tensor_dict_string(repr(td))
    >>> back["next", "done"].dtype, back.batch_size, back["obs"].sum()
    (torch.bool, torch.Size([3]), tensor(0.))
    >>> parse_tensor_dict_string("TensorDict(batch_size=[2], fields={a: f32[5], b: {c: i64[]}})")["b", "c"].shape
    torch.Size([2])
    """
    text = s.strip()
    value, end = _parse_td(text, 0, None)
    if text[end:].strip():
        raise ValueError(
            f"parse_tensor_dict_string: unexpected text after the tensordict: {text[end:]!r}."
        )
    return value


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \n\t,":
        i += 1
    return i


def _match_bracket(text: str, i: int, open_: str, close: str) -> int:
    depth = 0
    for j in range(i, len(text)):
        if text[j] == open_:
            depth += 1
        elif text[j] == close:
            depth -= 1
            if depth == 0:
                return j
    raise ValueError(f"parse_tensor_dict_string: unbalanced {open_!r} at {text[i : i + 40]!r}.")


def _size(text: str) -> torch.Size:
    inner = text.strip().removeprefix("torch.Size(").removesuffix(")").strip("[]() ")
    return torch.Size([int(x) for x in inner.split(",") if x.strip()])


def _device(text: str) -> torch.device | None:
    text = text.strip()
    return None if text in ("None", "") else torch.device(text)


def _parse_td(text: str, i: int, parent_bs: torch.Size | None) -> tuple[Any, int]:
    """Parse ``Name(...)`` starting at ``i``; return the tensordict and the index after it."""
    m = re.compile(r"\s*(\w+)\(").match(text, i)
    if not m:
        raise ValueError(
            f"parse_tensor_dict_string: expected a tensordict at {text[i : i + 40]!r}."
        )
    name = m.group(1)
    if name in ("LazyStackedTensorDict",) and "exclusive_fields" in text:
        raise ValueError("parse_tensor_dict_string: lazy stacks with exclusive keys are not read.")
    start = m.end() - 1
    end = _match_bracket(text, start, "(", ")")
    body = text[start + 1 : end]
    fields_at = body.find("fields={")
    if fields_at < 0:
        raise ValueError(f"parse_tensor_dict_string: no fields in {body[:60]!r}.")
    f_open = fields_at + len("fields=")
    f_close = _match_bracket(body, f_open, "{", "}")
    rest = body[:fields_at] + body[f_close + 1 :]
    opts = dict(re.findall(r"(\w+)=((?:torch\.Size\(\[[^\]]*\]\))|(?:\[[^\]]*\])|[^,\s]+)", rest))
    bs = _size(opts["batch_size"]) if "batch_size" in opts else (parent_bs or torch.Size([]))
    device = _device(opts.get("device", "None"))
    compact = "torch.Size" not in opts.get("batch_size", "torch.Size")
    out = _kinds.Dense(batch_size=bs, device=device)
    _parse_fields(body[f_open + 1 : f_close], out, bs, device, compact)
    return out, end + 1


def _parse_fields(text: str, out: Any, bs: torch.Size, device: Any, compact: bool) -> None:
    i = _skip(text, 0)
    while i < len(text):
        m = re.compile(r"([^:\s][^:]*?):\s*").match(text, i)
        if not m:
            raise ValueError(
                f"parse_tensor_dict_string: cannot read a field at {text[i : i + 40]!r}."
            )
        key = m.group(1).strip()
        j = m.end()
        if text.startswith("{", j):  # compact nested tensordict: the parent's batch size
            close = _match_bracket(text, j, "{", "}")
            sub = _kinds.Dense(batch_size=bs, device=device)
            _parse_fields(text[j + 1 : close], sub, bs, device, compact)
            out.set(key, sub)
            i = _skip(text, close + 1)
            continue
        if text.startswith("Tensor(", j):
            close = _match_bracket(text, j + len("Tensor"), "(", ")")
            attrs = text[j + len("Tensor(") : close]
            shape = _size(re.search(r"shape=(torch\.Size\(\[[^\]]*\]\))", attrs).group(1))  # type: ignore[union-attr]
            dtype = getattr(torch, re.search(r"dtype=torch\.(\w+)", attrs).group(1))  # type: ignore[union-attr]
            dev = _device(re.search(r"device=([^,\s)]+)", attrs).group(1))  # type: ignore[union-attr]
            out.set(key, torch.zeros(shape, dtype=dtype, device=dev))
            i = _skip(text, close + 1)
            continue
        short = re.compile(r"(\w+)\[([\d,\s]*)\]").match(text, j)
        if compact and short and short.group(1) in _SHORT_DTYPES:
            feature = torch.Size([int(x) for x in short.group(2).split(",") if x.strip()])
            out.set(
                key,
                torch.zeros((*bs, *feature), dtype=_SHORT_DTYPES[short.group(1)], device=device),
            )
            i = _skip(text, short.end())
            continue
        if re.compile(r"\w*TensorDict\(").match(text, j):
            sub, end = _parse_td(text, j, bs)
            out.set(key, sub)
            i = _skip(text, end)
            continue
        raise ValueError(
            f"parse_tensor_dict_string: field {key!r} is not a Tensor or a TensorDict "
            f"({text[j : j + 40]!r})."
        )
