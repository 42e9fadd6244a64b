"""Functions over several tensordicts (stack, cat) and the ``torch.*`` functions they serve."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    from tensordict._td import TensorDict

import torch

from tensordict._nontensor import NonTensorData
from tensordict._shape import normalize_dim
from tensordict.base import TensorDictBase, implements_for_td

_Tensor = torch.Tensor
_T = TypeVar("_T", bound=TensorDictBase)


def _keys_error(tds: Sequence[TensorDictBase], op: str, prefix: tuple) -> KeyError:
    first = tds[0]._tensordict.keys()
    where = f" in the nested tensordict at {prefix!r}" if prefix else ""
    for i, td in enumerate(tds[1:], 1):
        keys = td._tensordict.keys()
        if keys != first:
            return KeyError(
                f"{op}: tensordict 0 and tensordict {i} have different keys{where}: "
                f"only in 0: {sorted(first - keys)}, only in {i}: {sorted(keys - first)}."
            )
    return KeyError(f"{op}: the tensordicts have different keys{where}.")  # pragma: no cover


def _merge_names(tds: Sequence[TensorDictBase]) -> list | None:
    names = tds[0]._names
    if names is None or any(td._names != names for td in tds[1:]):
        return None
    return list(names)


def _as_dense(tds: Sequence[Any]) -> list:
    from tensordict._td import TensorDict

    out = []
    for td in tds:
        if isinstance(td, TensorDict):
            out.append(td)
        elif isinstance(td, TensorDictBase):
            out.append(td.to_tensordict())
        elif isinstance(td, dict):
            out.append(TensorDict(td))
        else:
            raise TypeError(f"expected tensordicts, got {type(td).__name__}.")
    return out


def _nontensor_same(key: str, values: list, op: str) -> NonTensorData:
    first = values[0]
    for v in values[1:]:
        if v.data is not first.data and v.data != first.data:
            raise NotImplementedError(
                f"{op}: the non-tensor entry {key!r} differs across tensordicts "
                f"({first.data!r} vs {v.data!r}); stacking different non-tensor values "
                "needs a NonTensorStack, which is not supported yet."
            )
    return first


def _check_batch_sizes(
    tds: Sequence[TensorDictBase], op: str, cat_dim: int | None, prefix: tuple[str, ...] = ()
) -> None:
    """Stack needs equal batch sizes; cat needs them equal except along ``cat_dim``."""
    bs = tds[0].batch_size
    for i, td in enumerate(tds[1:], 1):
        other = td.batch_size
        if other == bs:
            continue
        if (
            cat_dim is not None
            and len(other) == len(bs)
            and all(a == b for j, (a, b) in enumerate(zip(bs, other, strict=True)) if j != cat_dim)
        ):
            continue
        what = "be equal" if cat_dim is None else f"match except along dim {cat_dim}"
        where = f" (nested tensordict at {prefix!r})" if prefix else ""
        raise RuntimeError(
            f"{op}: batch sizes must {what}; tensordict 0 has {tuple(bs)} and tensordict {i} "
            f"has {tuple(other)}{where}."
        )


def _combine(
    tds: list, op: str, tensor_fn: Callable, dim: int, new_bs: torch.Size, prefix: tuple = ()
) -> Any:
    """Combine the entries of ``tds`` key by key with ``tensor_fn(values, dim)``."""
    from tensordict._td import TensorDict

    first = tds[0]
    n = len(first._tensordict)
    device = first._device
    for td in tds:
        if len(td._tensordict) != n:
            raise _keys_error(tds, op, prefix)
        if td._device != device:
            device = None
    out = {}
    for key, value in first._tensordict.items():
        try:
            values = [td._tensordict[key] for td in tds]
        except KeyError:
            raise _keys_error(tds, op, prefix) from None
        if isinstance(value, _Tensor):
            try:
                out[key] = tensor_fn(values, dim)
            except RuntimeError as err:
                shapes = [tuple(v.shape) for v in values]
                raise RuntimeError(
                    f"{op}: cannot combine entry {prefix + (key,)!r} with shapes {shapes}: {err}"
                ) from None
        elif type(value) is NonTensorData:
            out[key] = _nontensor_same(key, values, op)._with(new_bs)
        else:
            sub = _as_dense(values)
            _check_batch_sizes(sub, op, dim if op == "cat" else None, prefix + (key,))
            nb = len(first.batch_size)
            sub_bs = new_bs + sub[0].batch_size[nb:]
            out[key] = _combine(sub, op, tensor_fn, dim, sub_bs, prefix + (key,))
    return TensorDict._new_unsafe(out, new_bs, device)


def _combine_all(list_of_tensordicts: Sequence[TensorDictBase], op: str, dim: int, out: Any) -> Any:
    """The body of :func:`stack` and :func:`cat`: validate, combine entries, keep names."""
    tds = _as_dense(list_of_tensordicts)
    if not tds:
        raise RuntimeError(f"{op} expects a non-empty sequence of tensordicts.")
    bs = tds[0].batch_size
    if op == "stack":
        _check_batch_sizes(tds, op, None)
        d = normalize_dim(dim, len(bs), extra=1)
        new_bs = bs[:d] + torch.Size([len(tds)]) + bs[d:]
        fn = torch.stack
    else:
        if not bs:
            raise RuntimeError("cat: cannot concatenate tensordicts with no batch dimension.")
        d = normalize_dim(dim, len(bs))
        _check_batch_sizes(tds, op, d)
        new_bs = bs[:d] + torch.Size([sum(td.batch_size[d] for td in tds)]) + bs[d + 1 :]
        fn = torch.cat
    result = _combine(tds, op, fn, d, new_bs)
    names = _merge_names(tds)
    if names is not None:
        if op == "stack":
            names.insert(d, None)
        if any(n is not None for n in names):
            result._names = names
    if out is not None:
        out.update_(result)
        return out
    return result


@overload
def stack(
    list_of_tensordicts: Sequence[TensorDictBase], dim: int = 0, *, out: None = None
) -> TensorDict: ...
@overload
def stack(list_of_tensordicts: Sequence[TensorDictBase], dim: int = 0, *, out: _T) -> _T: ...
@implements_for_td(torch.stack)
def stack(
    list_of_tensordicts: Sequence[TensorDictBase],
    dim: int = 0,
    *,
    out: TensorDictBase | None = None,
) -> TensorDictBase:
    """Stack tensordicts with the same keys and batch size along a new batch dimension.

    Also reached through ``torch.stack``.

    >>> import torch
    >>> from tensordict import TensorDict, stack
    >>> tds = [TensorDict({"a": torch.zeros(3, 4)}, [3]) for _ in range(2)]
    >>> torch.stack(tds, 1)["a"].shape
    torch.Size([3, 2, 4])
    """
    return _combine_all(list_of_tensordicts, "stack", dim, out)


@overload
def cat(
    list_of_tensordicts: Sequence[TensorDictBase], dim: int = 0, *, out: None = None
) -> TensorDict: ...
@overload
def cat(list_of_tensordicts: Sequence[TensorDictBase], dim: int = 0, *, out: _T) -> _T: ...
@implements_for_td(torch.cat)
def cat(
    list_of_tensordicts: Sequence[TensorDictBase],
    dim: int = 0,
    *,
    out: TensorDictBase | None = None,
) -> TensorDictBase:
    """Concatenate tensordicts with the same keys along an existing batch dimension.

    Also reached through ``torch.cat``.

    >>> import torch
    >>> from tensordict import TensorDict, cat
    >>> tds = [TensorDict({"a": torch.zeros(3, 4)}, [3]) for _ in range(2)]
    >>> torch.cat(tds, 0).batch_size
    torch.Size([6])
    """
    return _combine_all(list_of_tensordicts, "cat", dim, out)


def _method_forwarder(name: str) -> Callable:
    def impl(td: TensorDictBase, *args: Any, **kwargs: Any) -> Any:
        return getattr(td, name)(*args, **kwargs)

    impl.__name__ = name
    return impl


#: torch functions that simply call the tensordict method of the same name.
TORCH_METHODS: tuple[str, ...] = (
    "unbind",
    "split",
    "chunk",
    "clone",
    "permute",
    "reshape",
    "squeeze",
    "unsqueeze",
    "flatten",
    "unflatten",
    "transpose",
    "swapaxes",
    "movedim",
    "narrow",
    "tensor_split",
    "flip",
    "detach",
    "abs",
    "neg",
    "exp",
    "log",
    "sqrt",
    "sigmoid",
    "tanh",
    "sin",
    "cos",
    "add",
    "sub",
    "mul",
    "div",
    "pow",
    "maximum",
    "minimum",
    "clamp",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "all",
    "any",
    "numel",
)

for _name in TORCH_METHODS:
    implements_for_td(getattr(torch, _name))(_method_forwarder(_name))


def _like(fill: Callable[[_Tensor], _Tensor]) -> Callable:
    def impl(td: TensorDictBase, *args: Any, **kwargs: Any) -> TensorDictBase:
        return td._map_tensors(lambda x: fill(x, *args, **kwargs))

    return impl


for _fn in (
    torch.zeros_like,
    torch.ones_like,
    torch.empty_like,
    torch.full_like,
    torch.rand_like,
    torch.randn_like,
):
    implements_for_td(_fn)(_like(_fn))
