"""The contract every storage-backed tensordict meets, as runnable cases.

Each backend's tests run :data:`READS` and :data:`WRITES` with the in-memory
:class:`~tensordict.TensorDict` as the oracle: the same call on a backed copy of
:func:`sample` and on the sample itself must give the same result, or the same
exception type, and a write must leave both holding the same content. Core has no
backend of its own; the cases live here once so that HDF5, zarr and Redis run the same.
:func:`missing_methods` lists the public ``TensorDictBase`` methods a class lacks.

>>> from tensordict import TensorDict
>>> from tensordict._backed.contract import missing_methods, sample
>>> missing_methods(TensorDict), sample().batch_size
([], torch.Size([3, 4]))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tensordict._backed.base import BackedTensorDict
from tensordict._base.kind_methods import KIND_METHODS, KIND_PROPERTIES
from tensordict._dense.td import TensorDict
from tensordict._leaves.nontensor import NonTensorData, NonTensorStack
from tensordict.base import TensorDictBase

Case = Callable[[Any], Any]


def sample() -> TensorDict:
    """A small tensordict with a nested level, two dtypes and a non-tensor entry."""
    return TensorDict(
        {
            "a": torch.arange(24, dtype=torch.float32).reshape(3, 4, 2),
            "n": TensorDict({"b": torch.arange(12).reshape(3, 4)}, [3, 4]),
            "label": NonTensorData("x", batch_size=[3, 4]),
        },
        [3, 4],
    )


def missing_methods(cls: type) -> list[str]:
    """The public methods of ``TensorDictBase`` that ``cls`` lacks or leaves to the
    base's ``NotImplementedError`` placeholder."""
    out = []
    for name in sorted(KIND_METHODS + KIND_PROPERTIES):
        attr = getattr(cls, name, None)
        fn = attr.fget if isinstance(attr, property) else attr
        if fn is None or getattr(fn, "__kind_method__", False):
            out.append(name)
    for name in dir(TensorDictBase):
        if not name.startswith("_") and not hasattr(cls, name):
            out.append(name)
    return out


#: reads: (name, call); the backed tensordict must give what the sample gives
READS: list[tuple[str, Case]] = [
    ("keys", lambda td: sorted(map(str, td.keys()))),
    ("keys_nested_leaves", lambda td: sorted(map(str, td.keys(True, True)))),
    ("keys_non_tensor", lambda td: sorted(map(str, td.keys(True, True, is_leaf=_non_tensor_leaf)))),
    ("contains", lambda td: (("n", "b") in td.keys(True), "zz" in td.keys())),
    ("get", lambda td: td.get("a")),
    ("get_nested", lambda td: td.get(("n", "b"))),
    ("get_default", lambda td: td.get("missing", None)),
    ("get_missing", lambda td: td.get("missing")),
    ("getitem_key", lambda td: td["n", "b"]),
    ("getitem_non_tensor", lambda td: td["label"]),
    ("get_at", lambda td: td.get_at("a", 1)),
    ("get_at_nested", lambda td: td.get_at(("n", "b"), slice(1, 3))),
    ("row", lambda td: td[1]),
    ("rows", lambda td: td[1:]),
    ("rows_list", lambda td: td[[2, 0]]),
    ("rows_mask", lambda td: td[torch.tensor([True, False, True])]),
    ("rows_2d", lambda td: td[:, 1:3]),
    ("to_tensordict", lambda td: td.to_tensordict()),
    ("clone", lambda td: td.clone()),
    ("select", lambda td: td.select("a")),
    ("select_nested", lambda td: td.select(("n", "b"))),
    ("select_missing", lambda td: td.select("missing")),
    ("exclude", lambda td: td.exclude("a")),
    ("empty", lambda td: td.empty(recurse=True)),
    ("batch", lambda td: (td.batch_size, td.batch_dims, td.ndim, td.shape, td.numel())),
    ("item_shape", lambda td: (td.get_item_shape("a"), td.get_item_shape(("n", "b")))),
    ("entry_class", lambda td: td.entry_class("a")),
    ("is_empty", lambda td: td.is_empty()),
    ("apply", lambda td: td.apply(lambda x: x * 2)),
    ("sum", lambda td: td.sum(dim=0)),
    ("float", lambda td: td.float()),
    ("to_dtype", lambda td: td.to(torch.float64)),
    ("reshape", lambda td: td.reshape(-1)),
    ("flatten_keys", lambda td: td.flatten_keys()),
    ("unbind", lambda td: td.unbind(0)),
    ("split", lambda td: td.split(1, 0)),
    ("chunk", lambda td: td.chunk(3, 1)),
    ("expand", lambda td: td.expand(2, 3, 4)),
    ("flip", lambda td: td.flip(0)),
    ("narrow", lambda td: td.narrow(1, 1, 2)),
    ("unflatten", lambda td: td.unflatten(1, (2, 2))),
    ("masked_fill", lambda td: td.masked_fill(torch.ones(3, 4, dtype=torch.bool), 0)),
    ("to_dict", lambda td: td.to_dict()),
    ("state_dict", lambda td: td.state_dict()),
    ("items_len", lambda td: (len(list(td.items(True, True))), len(td))),
    ("eq", lambda td: td == td.to_tensordict()),
    ("names", lambda td: td.names),
    ("bytes", lambda td: (td.bytes(), td.param_count())),
    ("contiguous", lambda td: td.contiguous()),
]

#: writes: (name, call); afterwards the backed tensordict must hold what the sample holds
WRITES: list[tuple[str, Case]] = [
    ("set_new", lambda td: td.set("c", torch.ones(3, 4))),
    ("set_nested_new", lambda td: td.set(("m", "d"), torch.ones(3, 4, 5))),
    ("set_replace", lambda td: td.set("a", torch.zeros(3, 4, 7))),
    ("set_", lambda td: td.set_("a", torch.ones(3, 4, 2))),
    ("set_wrong_batch", lambda td: td.set("c", torch.ones(2, 4))),
    ("set_wrong_shape_inplace", lambda td: td.set_("a", torch.ones(3, 4, 5))),
    ("setitem_key", lambda td: td.__setitem__(("n", "e"), torch.zeros(3, 4))),
    ("update", lambda td: td.update({"c": torch.ones(3, 4), "n": {"e": torch.ones(3, 4)}})),
    ("update_", lambda td: td.update_({"a": torch.full((3, 4, 2), 5.0)})),
    ("update_missing", lambda td: td.update_({"zz": torch.ones(3, 4)})),
    ("set_at_", lambda td: td.set_at_("a", torch.full((4, 2), -1.0), 1)),
    ("update_at_", lambda td: td.update_at_({"a": torch.full((2, 4, 2), 3.0)}, slice(1, 3))),
    ("setitem_row", lambda td: td.__setitem__(0, td[2].clone().exclude("label"))),
    ("setitem_rows", lambda td: td.__setitem__(slice(0, 2), td[1:3].clone().exclude("label"))),
    ("setitem_list", lambda td: td.__setitem__([2, 0], td[0:2].clone().exclude("label"))),
    ("del", lambda td: td.del_("a")),
    ("del_nested", lambda td: td.del_(("n", "b"))),
    ("del_missing", lambda td: td.del_("zz")),
    ("clear", lambda td: td.clear()),
    ("rename_key", lambda td: td.rename_key_("a", "z")),
    ("rename_key_nested", lambda td: td.rename_key_(("n", "b"), ("k", "b2"))),
    ("rename_key_safe", lambda td: td.rename_key_("a", ("n", "b"), safe=True)),
    ("select_inplace", lambda td: td.select("a", inplace=True)),
    ("exclude_inplace", lambda td: td.exclude("a", inplace=True)),
    ("add_", lambda td: td.add_(1)),
    ("mul_", lambda td: td.mul_(2)),
    ("zero_", lambda td: td.zero_()),
    ("apply_", lambda td: td.apply_(lambda x: x + 1)),
    ("copy_", lambda td: td.copy_(td.to_tensordict().apply(lambda x: x - 1))),
    ("names", lambda td: td.refine_names("x", "y")),
    ("names_bad", lambda td: td.refine_names("x", "y", "z")),
    ("lock_set", lambda td: td.lock_().set("c", torch.ones(3, 4))),
    ("lock_replace", lambda td: td.lock_().set("a", torch.ones(3, 4, 2))),
    ("lock_set_", lambda td: td.lock_().set_("a", torch.ones(3, 4, 2))),
    ("lock_add_", lambda td: td.lock_().add_(1)),
    ("lock_update_", lambda td: td.lock_().update_({"a": torch.ones(3, 4, 2)})),
    ("lock_row", lambda td: td.lock_().__setitem__(1, td[0].clone().exclude("label"))),
    ("lock_del", lambda td: td.lock_().del_("a")),
    ("lock_rename", lambda td: td.lock_().rename_key_("a", "z")),
    ("lock_clear", lambda td: td.lock_().clear()),
    ("lock_then_unlock", lambda td: td.lock_().unlock_().set("c", torch.ones(3, 4))),
]


def _non_tensor_leaf(cls: type) -> bool:
    return issubclass(cls, (torch.Tensor, NonTensorData, NonTensorStack))


def outcome(case: Case, td: Any) -> tuple[str, Any]:
    """``("ok", result)`` or ``("error", exception type)`` of ``case(td)``, a result in
    memory (backed tensordicts read, tuples and lists element-wise)."""
    try:
        result = case(td)
    except Exception as err:  # noqa: BLE001 - the type is the outcome
        return "error", _error_kind(err)
    return "ok", _in_memory(result)


def _error_kind(err: Exception) -> type:
    for kind in (KeyError, RuntimeError, TypeError, ValueError, NotImplementedError):
        if isinstance(err, kind):
            return kind
    return type(err)


def _in_memory(value: Any) -> Any:
    if isinstance(value, BackedTensorDict):
        return value.to_tensordict()
    if isinstance(value, (tuple, list)):
        return type(value)(_in_memory(v) for v in value)
    return value


def same(got: Any, expected: Any) -> bool:
    """Whether two outcomes' results agree (tensordicts key by key and value by value,
    non-tensor values by value, tensors exactly)."""
    if isinstance(expected, TensorDictBase):
        if not isinstance(got, TensorDictBase) or got.batch_size != expected.batch_size:
            return False
        keys = set(expected.keys(True, True, is_leaf=_non_tensor_leaf))
        if set(got.keys(True, True, is_leaf=_non_tensor_leaf)) != keys:
            return False
        return all(same(got.get(k), expected.get(k)) for k in keys)
    if isinstance(expected, (NonTensorData, NonTensorStack)):
        return (
            isinstance(got, (NonTensorData, NonTensorStack)) and got.tolist() == expected.tolist()
        )
    if isinstance(expected, torch.Tensor):
        return (
            isinstance(got, torch.Tensor)
            and got.shape == expected.shape
            and got.dtype == expected.dtype
            and bool((got == expected).all())
        )
    if isinstance(expected, (tuple, list)):
        return (
            isinstance(got, (tuple, list))
            and len(got) == len(expected)
            and all(same(g, e) for g, e in zip(got, expected))
        )
    if isinstance(expected, dict):
        return (
            isinstance(got, dict)
            and got.keys() == expected.keys()
            and all(same(got[k], expected[k]) for k in expected)
        )
    return bool(got == expected)
