"""The wire codec: a tensordict crosses a process boundary as one buffer plus JSON.

Every transfer of a tensordict between processes (``gather_and_stack`` here, and
``send``/``recv``/``broadcast``/``all_gather``… in ``tensordict.distributed``) uses this
one codec, built on :meth:`~tensordict.TensorDict.consolidate`:

* :func:`encode` gives the consolidated metadata (plain JSON data: keys, dtypes, shapes,
  strides, offsets, batch sizes, lazy-stack members, non-tensor values) and the ``uint8``
  data buffer holding every tensor leaf. A tensordict that is consolidated already is
  sent from its own buffer, without a copy.
* :func:`dumps` / :func:`loads` turn the metadata into UTF-8 JSON bytes and back.
* :func:`decode` rebuilds a tensordict viewing a received buffer, through
  :func:`~tensordict.from_consolidated`: every offset is checked against the buffer and
  nothing is ever unpickled (non-tensor values are JSON; others cannot be sent).
* :func:`mismatches` lists how a received tensordict differs from the one a receiver
  expected (keys, kinds, shapes, dtypes, batch sizes, lazy-stack members), and
  :func:`write_into` copies it in, once it fits.

>>> import torch
>>> from tensordict import TensorDict
>>> td = TensorDict({"a": torch.arange(3), "b": {"c": torch.ones(3, 2)}, "s": "hi"}, [3])
>>> meta, data = encode(td)
>>> out = decode(loads(dumps(meta)), data.clone())
>>> out["s"], out["b", "c"].shape, mismatches(td, out)
('hi', torch.Size([3, 2]), [])
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import torch

from tensordict._kinds.kinds import lazy_members as _lazy_members
from tensordict._leaves.nontensor import is_non_tensor
from tensordict._wire.consolidate import Packing, consolidated_buffer, current_metadata
from tensordict._wire.read import from_consolidated

#: Mismatches listed in one error message.
MAX_PROBLEMS = 10

_Path = tuple[Any, ...]


# ---------------------------------------------------------------------- encode / decode
def encode(
    td: Any,
    device: torch.device | str | None = None,
    out: Callable[[int, torch.device], torch.Tensor | None] | None = None,
) -> tuple[dict[str, Any], torch.Tensor]:
    """``(metadata, data)``: ``td`` as consolidated metadata and one ``uint8`` buffer.

    ``data`` lives on ``device`` (default: where :meth:`consolidate` puts it). A
    consolidated ``td`` is described as it is and sent from its own buffer, without a
    copy. Non-tensor values must be JSON data (``TypeError`` otherwise: nothing is
    pickled). ``out(nbytes, device)`` may supply the buffer to fill (see
    :func:`~tensordict._wire.consolidate.pack`).

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict({"a": torch.zeros(2, dtype=torch.int64)}, [2]).consolidate()
    >>> meta, data = encode(td)
    >>> data.untyped_storage().data_ptr() == td["a"].untyped_storage().data_ptr()
    True
    """
    target = None if device is None else torch.device(device)
    buffer = consolidated_buffer(td)
    if buffer is not None:
        try:
            meta = current_metadata(td, buffer, for_pickle=False, allow_pickle=False)
        except TypeError as err:
            raise _not_json(err) from None
        data = buffer[: meta["nbytes"]]
    else:
        packing = plan(td, target)
        meta, data = packing.meta, packing.fill(out)
    if target is not None and data.device != target:
        data = data.to(target)
    return meta, data


def plan(td: Any, device: torch.device | None = None) -> Packing:
    """How ``td`` is laid out on the wire (``TypeError`` for values that are not JSON);
    ``plan(td).fill()`` makes the data buffer."""
    try:
        return Packing(td, device)
    except TypeError as err:
        raise _not_json(err) from None


def _not_json(err: TypeError) -> TypeError:
    return TypeError(
        f"{err} (tensordicts cross processes as a buffer plus JSON, never pickled: "
        "a non-tensor value that is not JSON data cannot be sent; exclude it or store "
        "a JSON value instead)"
    )


def dumps(meta: dict[str, Any]) -> bytes:
    """The metadata as compact UTF-8 JSON."""
    return json.dumps(meta, separators=(",", ":")).encode("utf-8")


def loads(blob: bytes, where: str = "the received description") -> dict[str, Any]:
    """Parse metadata written by :func:`dumps` (``ValueError`` when it is not that).

    >>> loads(b"[1]")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ValueError: the received description is not tensordict metadata
    """
    try:
        meta = json.loads(blob.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{where} is not valid UTF-8 JSON: {err}") from None
    if not isinstance(meta, dict) or meta.get("format") != "tensordict-consolidated":
        raise ValueError(f"{where} is not tensordict metadata (no consolidated format tag)")
    return meta


def decode(meta: dict[str, Any], data: torch.Tensor) -> Any:
    """The tensordict ``meta`` describes, viewing ``data`` (checked, never unpickled)."""
    return from_consolidated(data, meta, allow_pickle=False)


# ---------------------------------------------------------------------- bytes on the wire
def bytes_tensor(data: bytes, device: torch.device, size: int | None = None) -> torch.Tensor:
    """``data`` as a ``uint8`` tensor on ``device``, zero-padded to ``size`` bytes.

    >>> bytes_tensor(b"ab", torch.device("cpu"), 4).tolist()
    [97, 98, 0, 0]
    """
    size = len(data) if size is None else size
    out = torch.zeros(size, dtype=torch.uint8)
    if data:
        out[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    return out.to(device)


def tensor_bytes(t: torch.Tensor) -> bytes:
    """The bytes of a ``uint8`` tensor (copied to the CPU)."""
    return bytes(t.cpu().numpy().tobytes())


def padded(t: torch.Tensor, size: int) -> torch.Tensor:
    """``t`` zero-padded to ``size`` elements (``t`` itself when it has that size)."""
    if t.numel() == size:
        return t
    out = torch.zeros(size, dtype=t.dtype, device=t.device)
    out[: t.numel()] = t
    return out


# ---------------------------------------------------------------------- checks
def _fmt(path: _Path) -> str:
    """A path as the user writes it: ``'a'``, ``('a', 'b')``; ``[i]`` for lazy members."""
    if not path:
        return "the root"
    if all(isinstance(p, str) for p in path):
        return repr(path[0] if len(path) == 1 else path)
    return "/".join(p if isinstance(p, str) else f"[{p}]" for p in path)


def _kind(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return "tensor"
    if is_non_tensor(value):
        return "non-tensor value"
    if _lazy_members(value) is not None:
        return "lazy stack"
    return "tensordict" if hasattr(value, "_tensordict") else type(value).__name__


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)} and dtype {value.dtype}"
    return f"a {_kind(value)}"


def mismatches(expected: Any, got: Any, *, batch_sizes: bool = True) -> list[str]:
    """How ``got`` differs from ``expected`` (empty when it fits): missing or unexpected
    keys, a tensor where a tensordict was expected, shapes, dtypes, batch sizes (unless
    ``batch_sizes=False``) and the members of lazy stacks. Non-tensor values may differ.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> a = TensorDict({"x": torch.zeros(2), "y": {"z": torch.zeros(2)}}, [2])
    >>> b = TensorDict({"x": torch.zeros(3, dtype=torch.int64), "w": 1}, [])
    >>> for line in mismatches(a, b):
    ...     print(line)
    the root: batch size (2,) expected, got ()
    missing key(s) ['y']
    unexpected key(s) ['w']
    'x': expected a tensor of shape (2,) and dtype torch.float32, got a tensor of shape (3,) and dtype torch.int64
    """
    problems: list[str] = []
    _walk(expected, got, (), batch_sizes, problems)
    return problems


def _walk(exp: Any, got: Any, path: _Path, batch_sizes: bool, problems: list[str]) -> None:
    if batch_sizes and exp.batch_size != got.batch_size:
        problems.append(
            f"{_fmt(path)}: batch size {tuple(exp.batch_size)} expected, "
            f"got {tuple(got.batch_size)}"
        )
    exp_members, got_members = _lazy_members(exp), _lazy_members(got)
    if exp_members is not None or got_members is not None:
        if exp_members is None or got_members is None:
            problems.append(f"{_fmt(path)}: expected {_describe(exp)}, got {_describe(got)}")
        elif len(exp_members) != len(got_members) or exp.stack_dim != got.stack_dim:
            problems.append(
                f"{_fmt(path)}: expected a lazy stack of {len(exp_members)} along dim "
                f"{exp.stack_dim}, got one of {len(got_members)} along dim {got.stack_dim}"
            )
        else:
            for i, (e, g) in enumerate(zip(exp_members, got_members)):
                _walk(e, g, path + (i,), batch_sizes, problems)
        return
    exp_store, got_store = exp._tensordict, got._tensordict
    missing = [k for k in exp_store if k not in got_store]
    extra = [k for k in got_store if k not in exp_store]
    where = "" if not path else f" in {_fmt(path)}"
    if missing:
        problems.append(f"missing key(s){where} {missing}")
    if extra:
        problems.append(f"unexpected key(s){where} {extra}")
    for key, e in exp_store.items():
        g = got_store.get(key)
        if g is None:
            continue
        sub = path + (key,)
        ek, gk = _kind(e), _kind(g)
        if ek != gk:
            problems.append(f"{_fmt(sub)}: expected {_describe(e)}, got {_describe(g)}")
        elif ek == "tensor":
            if e.shape != g.shape or e.dtype != g.dtype:
                problems.append(f"{_fmt(sub)}: expected {_describe(e)}, got {_describe(g)}")
        elif ek in ("tensordict", "lazy stack"):
            _walk(e, g, sub, batch_sizes, problems)


def problems_text(problems: list[str]) -> str:
    """The first :data:`MAX_PROBLEMS` problems joined by ``"; "`` (and how many more)."""
    shown = problems[:MAX_PROBLEMS]
    if len(problems) > MAX_PROBLEMS:
        shown.append(f"... and {len(problems) - MAX_PROBLEMS} more")
    return "; ".join(shown)


# ---------------------------------------------------------------------- writing
def write_into(dst: Any, src: Any) -> None:
    """Copy ``src`` into ``dst`` in place: tensors with ``copy_``, non-tensor values
    replaced. ``src`` must fit (``mismatches(dst, src) == []``); a leaf that already
    views the same memory is skipped."""
    pairs, replace = copy_plan(dst, src)
    copy_pairs(pairs)
    for store, key, value in replace:
        store[key] = value


def copy_plan(dst: Any, src: Any) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], list[Any]]:
    """What :func:`write_into` does: ``(tensor pairs (dst, src), non-tensor writes
    (store, key, value))``."""
    pairs: list[tuple[torch.Tensor, torch.Tensor]] = []
    replace: list[Any] = []
    _plan(dst, src, pairs, replace)
    return pairs, replace


def _plan(dst: Any, src: Any, pairs: list[Any], replace: list[Any]) -> None:
    members = _lazy_members(dst)
    if members is not None:
        for d, s in zip(members, _lazy_members(src) or ()):
            _plan(d, s, pairs, replace)
        return
    store = dst._tensordict
    src_store = src._tensordict
    for key, d in store.items():
        s = src_store[key]
        if isinstance(d, torch.Tensor):
            if d.data_ptr() != s.data_ptr() or d.stride() != s.stride():
                pairs.append((d, s))
        elif is_non_tensor(d):
            replace.append((store, key, s))
        else:
            _plan(d, s, pairs, replace)


def copy_pairs(pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    """``d.copy_(s)`` for every pair, in one ``torch._foreach_copy_`` where possible."""
    if not pairs:
        return
    with torch.no_grad():
        dsts = [d for d, _ in pairs]
        srcs = [s for _, s in pairs]
        try:
            torch._foreach_copy_(dsts, srcs)
        except RuntimeError:
            for d, s in pairs:
                d.copy_(s)


def landing_buffer(template: Any, meta: dict[str, Any]) -> torch.Tensor | None:
    """The part of ``template``'s own consolidated buffer that received data described
    by ``meta`` can be written to directly (same tensor layout), or ``None``."""
    buffer = consolidated_buffer(template)
    if buffer is None or buffer.storage_offset() % 16 or not buffer.is_contiguous():
        return None
    mine = current_metadata(template, buffer, for_pickle=True)
    if mine["nbytes"] != meta.get("nbytes") or _layout(mine["td"]) != _layout(meta.get("td")):
        return None
    return buffer[: mine["nbytes"]]


def _layout(node: Any) -> list[Any]:
    """The tensor entries of a metadata node, in order (key, dtype, shape, stride, offset)."""
    out: list[Any] = []
    if not isinstance(node, dict):
        return [None]
    for member in node.get("members") or ():
        out.extend(_layout(member))
    entries = node.get("entries")
    if not isinstance(entries, dict):
        return [None]
    for key, entry in entries.items():
        if not isinstance(entry, dict):
            return [None]
        if entry.get("kind") == "tensor":
            out.append(
                (
                    key,
                    entry.get("dtype"),
                    entry.get("shape"),
                    entry.get("stride"),
                    entry.get("offset"),
                )
            )
        elif entry.get("kind") == "tensordict":
            out.append((key, _layout(entry)))
    return out
