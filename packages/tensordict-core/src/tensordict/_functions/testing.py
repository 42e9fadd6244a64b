"""Assertions for tests: compare two tensordicts leaf by leaf, naming the first difference."""

from __future__ import annotations

from typing import Any

import torch

from tensordict._keys.nested import key_as_tuple, unravel_key
from tensordict._kinds import kinds as _kinds
from tensordict._leaves.collection import data_of
from tensordict._leaves.nontensor import NonTensorData, is_non_tensor
from tensordict.base import TensorDictBase, is_tensor_collection


class KeyMismatchError(AssertionError, KeyError):
    """The two tensordicts have different keys (an ``AssertionError`` and a ``KeyError``)."""

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0]) if self.args else ""


def _leaves(td: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    out: dict[tuple[str, ...], Any] = {}
    store = td._tensordict if isinstance(td, _kinds.Dense) else None
    items = store.items() if store is not None else td.items()
    for key, value in items:
        path = prefix + (key,)
        if is_tensor_collection(value) and not is_non_tensor(value):
            value = data_of(value)  # a tensorclass: the tensordict it holds
            out[path] = value  # the container itself (its kind is compared)
            if not isinstance(value, _kinds.Lazy):  # lazy stacks: compared member by member
                out.update(_leaves(value, path))
        else:
            out[path] = (
                value.data
                if isinstance(value, NonTensorData)
                else value.tolist()
                if is_non_tensor(value)
                else value
            )
    return out


def _members(td: Any, sd: int) -> list[Any]:
    if isinstance(td, _kinds.Lazy) and td.stack_dim == sd:
        return list(td.tensordicts)
    return list(td.unbind(sd))


def assert_allclose_td(
    actual: TensorDictBase,
    expected: TensorDictBase,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = True,
    intersection: bool = False,
    msg: str = "",
    prefix: Any = (),
) -> bool:
    """Assert that two tensordicts hold the same keys and close values; returns ``True``.

    Checks the key sets (including nested ones; a mismatch raises
    :class:`KeyMismatchError`, both an ``AssertionError`` and a ``KeyError``), then each
    leaf in order with :func:`torch.testing.assert_close` (dtypes and shapes must match,
    values within ``atol + rtol * |expected|``; ``None`` takes torch's defaults for the
    dtype; nested tensors component by component); non-tensor values must be equal.
    Batch sizes are not compared, the leaves' shapes are (as the reference). With
    ``intersection=True`` only the keys
    both hold are compared. Lazy stacks are compared member by member, so entries whose
    shape differs across members are compared too; a tensorclass is compared by the
    tensordict it holds. The error names the first differing
    key (under ``prefix``); ``msg`` is appended to it.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> a = TensorDict({"x": torch.zeros(2), "y": {"z": torch.ones(2)}}, [2])
    >>> assert_allclose_td(a, a.clone())
    True
    >>> b = a.clone()
    >>> b["y", "z"][0] = 2.0
    >>> try:
    ...     assert_allclose_td(a, b)
    ... except AssertionError as err:
    ...     print(str(err).splitlines()[0])
    key ('y', 'z') does not match: Tensor-likes are not close!
    """
    if not is_tensor_collection(actual) or not is_tensor_collection(expected):
        raise TypeError(
            f"assert_allclose_td compares tensordicts, got {type(actual).__name__} and "
            f"{type(expected).__name__}."
        )
    actual, expected = data_of(actual), data_of(expected)  # tensorclasses: their data
    suffix = f"\n{msg}" if msg else ""
    base = key_as_tuple(prefix) if prefix else ()
    lazy = next((x for x in (actual, expected) if isinstance(x, _kinds.Lazy)), None)
    if lazy is not None and actual.batch_size == expected.batch_size:
        sd = lazy.stack_dim
        for a, e in zip(_members(actual, sd), _members(expected, sd), strict=True):
            assert_allclose_td(a, e, rtol, atol, equal_nan, intersection, msg, base)
        return True
    got, want = _leaves(actual, base), _leaves(expected, base)
    if intersection:
        common = got.keys() & want.keys()
        got = {k: v for k, v in got.items() if k in common}
        want = {k: v for k, v in want.items() if k in common}
    if got.keys() != want.keys():
        missing = [unravel_key(k) for k in want if k not in got]
        extra = [unravel_key(k) for k in got if k not in want]
        first = missing[0] if missing else extra[0]
        raise KeyMismatchError(
            f"key {first!r} is in one tensordict but not the other: missing from actual: "
            f"{missing}; only in actual: {extra}.{suffix}"
        )
    for path, exp in want.items():
        act = got[path]
        name = unravel_key(path)
        if is_tensor_collection(exp) and not is_non_tensor(exp):
            if not is_tensor_collection(act):
                raise AssertionError(
                    f"key {name!r} does not match: actual is a {type(act).__name__}, expected "
                    f"a tensordict.{suffix}"
                )
            if isinstance(act, _kinds.Lazy) or isinstance(exp, _kinds.Lazy):
                assert_allclose_td(act, exp, rtol, atol, equal_nan, intersection, msg, path)
        elif isinstance(exp, torch.Tensor):
            if not isinstance(act, torch.Tensor):
                raise AssertionError(
                    f"key {name!r} does not match: actual is a {type(act).__name__}, expected "
                    f"a tensor.{suffix}"
                )
            try:
                if act.is_nested and exp.is_nested:  # ragged dims: compare the components
                    if act.size(0) != exp.size(0):
                        raise AssertionError(
                            f"{act.size(0)} components in actual, {exp.size(0)} expected."
                        )
                    for a, e in zip(act.unbind(), exp.unbind(), strict=True):
                        torch.testing.assert_close(a, e, rtol=rtol, atol=atol, equal_nan=equal_nan)
                else:
                    torch.testing.assert_close(act, exp, rtol=rtol, atol=atol, equal_nan=equal_nan)
            except AssertionError as err:
                raise AssertionError(f"key {name!r} does not match: {err}{suffix}") from None
        elif isinstance(act, torch.Tensor) or not _equal(act, exp):
            raise AssertionError(
                f"key {name!r} does not match: actual {act!r}, expected {exp!r}.{suffix}"
            )
    return True


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # e.g. arrays: ambiguous truth value
        return a is b


def assert_close(
    actual: TensorDictBase,
    expected: TensorDictBase,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = True,
    intersection: bool = False,
    msg: str = "",
    prefix: Any = (),
) -> bool:
    """Alias of :func:`assert_allclose_td`.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> assert_close(TensorDict({"a": torch.ones(1)}, [1]), TensorDict({"a": torch.ones(1)}, [1]))
    True
    """
    return assert_allclose_td(actual, expected, rtol, atol, equal_nan, intersection, msg, prefix)
