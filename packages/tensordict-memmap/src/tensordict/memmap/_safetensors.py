"""safetensors files (extra ``safetensors``): ``to_safetensors`` / ``from_safetensors``.

Tensors are stored under their nested keys joined with ``"."`` (the names of a model's
``state_dict``); the structure (batch sizes, dim names, non-tensor JSON values,
tensorclasses) goes in the file's metadata as one JSON string under ``"tensordict"``,
in the reference library's schema, so files move between the two libraries. A file
without that metadata (a model checkpoint) loads as nested tensordicts with an empty
batch size, splitting names on ``"."``. The ``safetensors`` package is imported only
when these functions are called.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from tensordict import LazyStackedTensorDict, NonTensorData, NonTensorStack, TensorDict
from tensordict._plugins.api import is_tensorclass
from tensordict.base import NO_DEFAULT, TensorDictBase
from tensordict.memmap import _classes, _codec

_EXTRA = "pip install tensordict-memmap[safetensors]"


def _safetensors_torch() -> Any:
    try:
        import safetensors.torch as st
    except ModuleNotFoundError as err:
        raise ModuleNotFoundError(
            f"safetensors support needs the 'safetensors' package: {_EXTRA}"
        ) from err
    return st


def to_safetensors(data: TensorDictBase, path: str | Path) -> None:
    """Save a tensordict (or tensorclass) to a safetensors file.

    >>> import tempfile, torch
    >>> from tensordict import TensorDict, to_safetensors, from_safetensors
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     to_safetensors(TensorDict({"w": {"b": torch.ones(2)}}, [2]), tmp + "/m.safetensors")
    ...     print(from_safetensors(tmp + "/m.safetensors")["w", "b"])
    tensor([1., 1.])
    """
    st = _safetensors_torch()
    tensors: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    root = _encode(data, (), tensors, seen)
    meta = {"tensordict": json.dumps({"version": 1, "root": root})}
    st.save_file(tensors, str(path), metadata=meta)


def _encode(
    data: Any, prefix: tuple[str, ...], tensors: dict[str, torch.Tensor], seen: set[int]
) -> dict[str, Any]:
    level: dict[str, Any] = {}
    cls_name = None
    if is_tensorclass(data):
        cls_name = _classes.qualified_name(type(data))
        data = data._tensordict
    if isinstance(data, LazyStackedTensorDict):
        try:
            data = torch.stack(list(data.tensordicts), data.stack_dim)
        except Exception as err:  # noqa: BLE001 - reported with the key
            raise TypeError(
                f"to_safetensors: the lazy stack at {'.'.join(prefix) or 'the root'} cannot be "
                f"stored as one tensor per key ({err})."
            ) from None
    if not isinstance(data, TensorDictBase):
        raise TypeError(f"to_safetensors expects a tensordict, got {type(data).__name__}")
    names = None
    try:
        names = list(data.names)
        if all(n is None for n in names):
            names = None
    except (AttributeError, RuntimeError):
        names = None
    keys: dict[str, Any] = {}
    for key in data.keys():
        value = data._get_str(key, NO_DEFAULT)
        nested = (*prefix, key)
        if isinstance(value, torch.Tensor):
            if value.is_nested or value.layout != torch.strided:
                raise TypeError(
                    f"to_safetensors: the entry {'.'.join(nested)!r} is not a dense tensor."
                )
            name = ".".join(nested)
            if name in tensors:
                raise ValueError(f"Two keys of the tensordict have the safetensors name {name!r}.")
            t = value.detach().as_subclass(torch.Tensor).to("cpu").contiguous()
            ptr = t.untyped_storage().data_ptr()
            if ptr in seen:
                t = t.clone()
            seen.add(t.untyped_storage().data_ptr())
            tensors[name] = t
            keys[key] = {"tensor": name}
        elif isinstance(value, NonTensorStack):
            raise TypeError(
                f"to_safetensors: {'.'.join(nested)!r} is a stack of non-tensor values, which "
                "safetensors cannot store."
            )
        elif isinstance(value, NonTensorData):
            if not _codec.is_json_exact(value.data):
                raise TypeError(
                    f"to_safetensors: the non-tensor value at {'.'.join(nested)!r} is not JSON "
                    f"({type(value.data).__name__})."
                )
            keys[key] = {"non_tensor": value.data}
        else:
            keys[key] = {"td": _encode(value, nested, tensors, seen)}
    level["batch_size"] = list(data.batch_size)
    level["names"] = names
    level["keys"] = keys
    if cls_name is not None:
        level["class"] = cls_name
    return level


def from_safetensors(path: str | Path, *, device: Any = None) -> TensorDictBase:
    """Load a safetensors file as a tensordict (structure from the file's metadata, or
    names split on ``"."`` for plain checkpoints).

    >>> import tempfile, torch
    >>> from safetensors.torch import save_file
    >>> from tensordict import from_safetensors
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     save_file({"layer.weight": torch.ones(2)}, tmp + "/ckpt.safetensors")
    ...     print(from_safetensors(tmp + "/ckpt.safetensors")["layer", "weight"])
    tensor([1., 1.])
    """
    st = _safetensors_torch()
    from safetensors import safe_open

    dev = "cpu" if device is None else str(torch.device(device))
    with safe_open(str(path), framework="pt", device=dev) as handle:
        metadata = handle.metadata() or {}
        tensors = {name: handle.get_tensor(name) for name in handle.keys()}
    del st
    raw = metadata.get("tensordict")
    if raw is None:
        return _from_flat(tensors, device)
    try:
        schema = json.loads(raw)
        root = schema["root"]
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{str(path)!r}: bad 'tensordict' metadata ({err})") from None
    return _decode(root, tensors, device, str(path))


def _from_flat(tensors: dict[str, torch.Tensor], device: Any) -> TensorDict:
    out = TensorDict({}, batch_size=[], device=device)
    for name, tensor in tensors.items():
        out.set(tuple(name.split(".")), tensor)
    return out


def _decode(
    level: dict[str, Any], tensors: dict[str, torch.Tensor], device: Any, where: str
) -> Any:
    if not isinstance(level, dict) or not isinstance(level.get("keys"), dict):
        raise ValueError(f"{where}: bad level in the 'tensordict' metadata: {level!r}")
    batch = level.get("batch_size", [])
    entries: dict[str, Any] = {}
    for key, entry in level["keys"].items():
        if "tensor" in entry:
            try:
                entries[key] = tensors[entry["tensor"]]
            except KeyError:
                raise ValueError(
                    f"{where}: the metadata names a missing tensor {entry['tensor']!r}"
                ) from None
        elif "non_tensor" in entry:
            entries[key] = NonTensorData(entry["non_tensor"], batch_size=batch)
        elif "td" in entry:
            entries[key] = _decode(entry["td"], tensors, device, where)
        else:
            raise ValueError(f"{where}: unknown entry {entry!r} for key {key!r}")
    out = TensorDict(entries, batch_size=batch, device=device)
    names = level.get("names")
    if names is not None:
        out.names = names
    cls_name = level.get("class")
    if isinstance(cls_name, str):
        cls = _classes.resolve(cls_name)
        if cls is not None:
            return _classes.rebuild(cls, out)
    return out
