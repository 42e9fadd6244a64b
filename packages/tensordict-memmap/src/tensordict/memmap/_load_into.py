"""Loading into an existing tensordict: ``load_memmap(..., out=td)``, ``td.load_memmap_``,
``td.load_``.

The target must have the structure of the saved tensordict: the same keys at every
level, the same batch sizes, and leaves of the same kind, shape and dtype. That is
checked on the loaded result before the target is touched, so a mismatch raises and
leaves the target as it was. Then each leaf of the target is replaced by the loaded
(memory-mapped) one, its nested tensordicts are kept, and every level records the folder
it now lives in (``saved_path``); a locked target stays locked.

>>> import tempfile, torch
>>> from tensordict import TensorDict
>>> tmp = tempfile.mkdtemp()
>>> _ = TensorDict({"a": torch.ones(2)}, [2]).memmap(tmp)
>>> TensorDict({"a": torch.zeros(2)}, [2]).load_memmap_(tmp)["a"]
MemoryMappedTensor([1., 1.])
>>> other = TensorDict({"b": torch.zeros(2)}, [2])
>>> other.load_memmap_(tmp)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
KeyError: "cannot load into the tensordict: its keys differ from the saved ones at the root (only in the saved data: ['a']; only in the target: ['b']). ..."
>>> other["b"]
tensor([0., 0.])
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from tensordict import LazyStackedTensorDict
from tensordict._plugins.api import NON_TENSOR, is_tensorclass, unravel_key
from tensordict.base import NO_DEFAULT, TensorDictBase
from tensordict.memmap import _writer

_HINT = (
    "Load into a tensordict of the same structure, or use TensorDict.load_memmap(prefix) "
    "to get a new one."
)


def load_into(out: Any, loaded: Any) -> Any:
    """Check that ``loaded`` fits ``out`` (nothing changed otherwise), then give ``out``
    the loaded leaves and folders; returns ``out``."""
    check_fits(out, loaded, ())
    out.update(loaded, ignore_lock=True)
    _copy_marks(out, loaded)
    return out


def _where(path: tuple[str, ...]) -> str:
    return f"at {unravel_key(path)!r}" if path else "at the root"


def _kind(value: Any) -> str:
    if isinstance(value, NON_TENSOR):
        return "non-tensor value"
    if isinstance(value, torch.Tensor):
        return "tensor"
    if isinstance(value, LazyStackedTensorDict):
        return "lazy stack"
    if isinstance(value, TensorDictBase) or is_tensorclass(value):
        return "tensordict"
    return type(value).__name__


def check_fits(out: Any, loaded: Any, path: tuple[str, ...]) -> None:
    """Raise (``KeyError`` for keys, ``RuntimeError`` for batch sizes, kinds, shapes and
    dtypes), naming the place, unless ``loaded`` has the structure of ``out``."""
    if is_tensorclass(out):
        out = out._tensordict
    if is_tensorclass(loaded):
        loaded = loaded._tensordict
    if tuple(out.batch_size) != tuple(loaded.batch_size):
        raise RuntimeError(
            f"cannot load into the tensordict: {_where(path)} it has batch size "
            f"{list(out.batch_size)}, the saved data {list(loaded.batch_size)}. {_HINT}"
        )
    if isinstance(out, LazyStackedTensorDict) and isinstance(loaded, LazyStackedTensorDict):
        if len(out.tensordicts) != len(loaded.tensordicts) or out.stack_dim != loaded.stack_dim:
            raise RuntimeError(
                f"cannot load into the tensordict: {_where(path)} it stacks "
                f"{len(out.tensordicts)} tensordicts along dim {out.stack_dim}, the saved data "
                f"{len(loaded.tensordicts)} along dim {loaded.stack_dim}. {_HINT}"
            )
        for i, (a, b) in enumerate(zip(out.tensordicts, loaded.tensordicts, strict=True)):
            check_fits(a, b, (*path, str(i)))
        return
    mine, saved = set(out.keys()), set(loaded.keys())
    if mine != saved:
        raise KeyError(
            f"cannot load into the tensordict: its keys differ from the saved ones "
            f"{_where(path)} (only in the saved data: {sorted(saved - mine)}; only in the "
            f"target: {sorted(mine - saved)}). {_HINT}"
        )
    for key in sorted(saved):
        here = (*path, key)
        a, b = out._get_str(key, NO_DEFAULT), loaded._get_str(key, NO_DEFAULT)
        kind_a, kind_b = _kind(a), _kind(b)
        if kind_a != kind_b:
            raise RuntimeError(
                f"cannot load into the tensordict: {_where(here)} it holds a {kind_a}, the "
                f"saved data a {kind_b}. {_HINT}"
            )
        if kind_a == "tensor" and (a.shape != b.shape or a.dtype != b.dtype):
            raise RuntimeError(
                f"cannot load into the tensordict: the entry {unravel_key(here)!r} has shape "
                f"{list(a.shape)} and dtype {a.dtype}, the saved one shape {list(b.shape)} and "
                f"dtype {b.dtype}. {_HINT}"
            )
        if kind_a in ("tensordict", "lazy stack"):
            check_fits(a, b, here)


def _copy_marks(out: Any, loaded: Any) -> None:
    """Record on every level of ``out`` the folder of the matching level of ``loaded``
    (none for an archive)."""
    if is_tensorclass(out):
        out = out._tensordict
    if is_tensorclass(loaded):
        loaded = loaded._tensordict
    prefix = _writer.saved_prefix(loaded)
    _writer.mark(out, None if prefix is None else Path(prefix), ())
    if isinstance(out, LazyStackedTensorDict) and isinstance(loaded, LazyStackedTensorDict):
        for a, b in zip(out.tensordicts, loaded.tensordicts, strict=True):
            _copy_marks(a, b)
        return
    for key in loaded.keys():
        a, b = out._get_str(key, None), loaded._get_str(key, None)
        if _kind(a) in ("tensordict", "lazy stack"):
            _copy_marks(a, b)
