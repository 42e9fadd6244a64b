"""Functions over several tensordicts (stack, cat) and the ``torch.*`` functions they serve."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import FunctionType
from typing import Any, TypeVar, overload

import torch

from tensordict._base.kind_methods import is_placeholder
from tensordict._combine.ragged import RAGGED_OPTIONS, check_options, stack_ragged
from tensordict._engine.ops import BINARY, BINARY_NO_INPLACE, OPERATORS, UNARY
from tensordict._keys.shape import normalize_dim, parse_device
from tensordict._kinds import kinds as _kinds
from tensordict._leaves.collection import data_of, mixing_error, wrapped
from tensordict._leaves.nontensor import (
    NON_TENSOR,
    NonTensorData,
    NonTensorStack,
    RaggedNonTensorStack,
    cat_non_tensor,
    stack_non_tensor,
)
from tensordict._leaves.nontensor_ragged import makes_ragged
from tensordict._leaves.unbatched import UNBATCHED_TYPES, combine_unbatched
from tensordict._util import legacy as _legacy
from tensordict._util.errors import ExclusiveKeysError
from tensordict.base import (
    NO_DEFAULT,
    TD_HANDLED_BY_NAME,
    TD_HANDLED_FUNCTIONS,
    TensorDictBase,
    implements_for_td,
)

_Tensor = torch.Tensor
_T = TypeVar("_T", bound=TensorDictBase)


def _keys_error(tds: Sequence[TensorDictBase], op: str, prefix: tuple) -> ExclusiveKeysError:
    first = tds[0]._tensordict.keys()
    where = f" in the nested tensordict at {prefix!r}" if prefix else ""
    # the reference's first words, which clients (TorchRL's rollout) match
    head = f"The sets of keys in the tensordicts to {op} are exclusive"
    for i, td in enumerate(tds[1:], 1):
        keys = td._tensordict.keys()
        if keys != first:
            return ExclusiveKeysError(
                f"{head}: tensordict 0 and tensordict {i} have different keys{where}: "
                f"only in 0: {sorted(first - keys)}, only in {i}: {sorted(keys - first)}."
            )
    return ExclusiveKeysError(f"{head}{where}.")  # pragma: no cover


def _merge_names(tds: Sequence[TensorDictBase]) -> list | None:
    names = tds[0]._names
    if names is None or any(td._names != names for td in tds[1:]):
        return None
    return list(names)


def _as_dense(tds: Sequence[Any]) -> list:
    out = []
    for td in tds:
        if isinstance(td, _kinds.Dense):
            out.append(td)
        elif isinstance(td, TensorDictBase):
            out.append(td.to_tensordict())
        elif isinstance(td, dict):
            out.append(_kinds.Dense(td))
        else:
            raise TypeError(f"expected tensordicts, got {type(td).__name__}.")
    return out


def _combine_non_tensor(
    key: tuple, values: list, op: str, dim: int, new_bs: torch.Size
) -> NonTensorData | NonTensorStack:
    """Stack/cat non-tensor entries: one value if they agree, a NonTensorStack otherwise."""
    for i, v in enumerate(values):
        if not isinstance(v, NON_TENSOR):
            raise RuntimeError(
                f"{op}: entry {key!r} is a non-tensor value in tensordict 0 but a "
                f"{type(v).__name__} in tensordict {i}."
            )
    if op == "stack":
        return stack_non_tensor(values, dim, new_bs)
    return cat_non_tensor(values, dim, new_bs)


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
        if type(value) in UNBATCHED_TYPES:
            out[key] = combine_unbatched(values, new_bs, prefix + (key,))
        elif isinstance(value, _Tensor):
            try:
                out[key] = tensor_fn(values, dim)
            except RuntimeError as err:
                shapes = [tuple(v.shape) for v in values]
                raise RuntimeError(  # the reference's first words, which clients match
                    f"The shapes of the tensors to {op} is incompatible: entry "
                    f"{prefix + (key,)!r} has shapes {shapes}: {err}"
                ) from None
        elif isinstance(value, NON_TENSOR):
            out[key] = _combine_non_tensor(prefix + (key,), values, op, dim, new_bs)
        else:
            inner = wrapped(values)  # nested tensorclasses: combine their data, same class
            sub = _as_dense(values if inner is None else inner[0])
            _check_batch_sizes(sub, op, dim if op == "cat" else None, prefix + (key,))
            nb = len(first.batch_size)
            sub_bs = new_bs + sub[0].batch_size[nb:]
            out[key] = _combine(sub, op, tensor_fn, dim, sub_bs, prefix + (key,))
            if inner is not None:
                out[key] = inner[1](out[key])
    return type(first)._new_unsafe(out, new_bs, device)


def _combine_all(list_of_tensordicts: Sequence[TensorDictBase], op: str, dim: int, out: Any) -> Any:
    """The body of :func:`stack` and :func:`cat`: validate, combine entries, keep names."""
    inner = wrapped(list_of_tensordicts)
    if inner is not None:  # tensorclasses: combine their data, give the same class back
        target = data_of(out) if type(out) is type(list_of_tensordicts[0]) else out
        result = _combine_all(inner[0], op, dim, target)
        return out if out is not None else inner[1](result)
    mixed = mixing_error(list_of_tensordicts, op)
    if mixed is not None:
        raise mixed
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
    input: Sequence[TensorDictBase],
    dim: int = 0,
    *,
    out: None = None,
    contiguous: bool = True,
) -> _kinds.Dense: ...
@overload
def stack(
    input: Sequence[TensorDictBase], dim: int = 0, *, out: _T, contiguous: bool = True
) -> _T: ...
@implements_for_td(torch.stack)
def stack(
    input: Sequence[TensorDictBase],
    dim: int = 0,
    *,
    out: TensorDictBase | None = None,
    contiguous: bool = True,
) -> TensorDictBase:
    """Stack tensordicts with the same keys and batch size along a new batch dimension.

    Also reached through ``torch.stack``. ``contiguous=False`` (or
    :class:`~tensordict.set_lazy_legacy`) stacks lazily, as :func:`lazy_stack`.

    >>> import torch
    >>> from tensordict import TensorDict, stack
    >>> tds = [TensorDict({"a": torch.zeros(3, 4)}, [3]) for _ in range(2)]
    >>> torch.stack(tds, 1)["a"].shape
    torch.Size([3, 2, 4])

    A tensordict given instead of a sequence is the sequence of its rows (along its first
    batch dimension), as when iterating over it: ``torch.stack(td)`` rebuilds ``td``.
    """
    if isinstance(input, TensorDictBase):
        input = _rows(input)
    if _legacy.LAZY_LEGACY or not contiguous:
        return lazy_stack(input, dim, out=out)
    lazy = _stack_member_wise(input, dim, stack, out)
    if lazy is not None:
        return lazy
    return _combine_all(input, "stack", dim, out)


def _rows(td: TensorDictBase) -> tuple[TensorDictBase, ...]:
    """The rows of a tensordict given to ``stack`` as its sequence of tensordicts."""
    if not td.batch_dims:
        raise RuntimeError(
            f"stack: got a {type(td).__name__} with no batch dimension instead of a sequence "
            "of tensordicts; a tensordict stands for the sequence of its rows along its first "
            "batch dimension, and this one has none. Pass a list of tensordicts."
        )
    return td.unbind(0)


def _stack_member_wise(items: Sequence[Any], dim: int, combine: Callable, out: Any) -> Any:
    """Stack lazy stacks of one layout (stack dimension, batch size) member by member: a
    lazy stack along the same dimension whose member ``i`` combines member ``i`` of every
    input, so members whose entries differ in shape never need to be read as one tensor.
    ``None`` when the inputs are not such lazy stacks."""
    items = list(items)
    first = items[0] if items else None
    if not isinstance(first, _kinds.Lazy) or not first.tensordicts:
        return None
    s, bs = first.stack_dim, first.batch_size
    if not all(
        isinstance(td, _kinds.Lazy) and td.stack_dim == s and td.batch_size == bs for td in items
    ):
        return None
    d = normalize_dim(dim, len(bs), extra=1)
    member_dim, new_s = (d, s + 1) if d <= s else (d - 1, s)
    members = [
        combine([td.tensordicts[i] for td in items], member_dim)
        for i in range(len(first.tensordicts))
    ]
    result = _kinds.Lazy(*members, stack_dim=new_s)
    if out is not None:
        out.update_(result)
        return out
    return result


@overload
def cat(input: Sequence[TensorDictBase], dim: int = 0, *, out: None = None) -> _kinds.Dense: ...
@overload
def cat(input: Sequence[TensorDictBase], dim: int = 0, *, out: _T) -> _T: ...
@implements_for_td(torch.cat)
def cat(
    input: Sequence[TensorDictBase],
    dim: int = 0,
    *,
    out: TensorDictBase | None = None,
) -> TensorDictBase:
    """Concatenate tensordicts with the same keys along an existing batch dimension.

    Also reached through ``torch.cat``. When one of them is a lazy stack the result is a
    lazy stack along its stack dimension (dense inputs are split into members): along the
    stack dimension the members are chained; along another one, member ``i`` of the result
    concatenates member ``i`` of every input.

    >>> import torch
    >>> from tensordict import TensorDict, cat
    >>> tds = [TensorDict({"a": torch.zeros(3, 4)}, [3]) for _ in range(2)]
    >>> torch.cat(tds, 0).batch_size
    torch.Size([6])
    """
    items = list(input)
    if any(isinstance(td, _kinds.Lazy) for td in items):
        return _cat_lazy(items, dim, out)
    return _combine_all(items, "cat", dim, out)


def _cat_lazy(items: list, dim: int, out: Any) -> Any:
    """``cat`` when some inputs are lazy stacks: a lazy stack along the first one's
    stack dimension."""
    sd = next(td for td in items if isinstance(td, _kinds.Lazy)).stack_dim
    nb = len(items[0].batch_size)
    d = normalize_dim(dim, nb)
    stacks = [
        td if isinstance(td, _kinds.Lazy) and td.stack_dim == sd else td.to_lazystack(sd)
        for td in items
        if not (d == sd and td.batch_size[sd] == 0)  # empty along the chained dim
    ]
    if d == sd:
        members = [m for td in stacks for m in td.tensordicts]
    else:
        counts = {len(td.tensordicts) for td in stacks}
        if len(counts) != 1:
            raise RuntimeError(
                f"cat along dim {d}: the lazy stacks must have the same number of stacked "
                f"tensordicts along their stack dim {sd}, got {[len(td.tensordicts) for td in stacks]}."
            )
        md = d if d < sd else d - 1
        members = [cat([td.tensordicts[i] for td in stacks], md) for i in range(counts.pop())]
    result = _kinds.Lazy(*members, stack_dim=sd)
    if out is not None:
        out.update_(result)
        return out
    return result


#: torch functions that call the tensordict method of the same name (the method's own
#: argument checks and errors apply). A name whose method a tensordict type lacks raises a
#: clear ``TypeError`` when called. Reductions are registered by :mod:`tensordict._engine.ops_reduce`,
#: ``where``/``gather``/``masked_*`` by :mod:`tensordict._engine.ops`.
TORCH_METHODS: tuple[str, ...] = (
    # splitting and batch-shape operations
    "unbind",
    "split",
    "chunk",
    "tensor_split",
    "permute",
    "reshape",
    "squeeze",
    "unsqueeze",
    "flatten",
    "unflatten",
    "transpose",
    "swapaxes",
    "swapdims",
    "movedim",
    "narrow",
    "flip",
    "fliplr",
    "flipud",
    "roll",
    "rot90",
    "tile",
    "repeat_interleave",
    "broadcast_to",
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    # copies, autograd, size
    "clone",
    "detach",
    "detach_",
    "numel",
    "is_floating_point",
    # pointwise math (with the in-place twins torch exposes as functions)
    *UNARY,
    *(name + "_" for name in UNARY),
    *BINARY,
    *BINARY_NO_INPLACE,
    "clamp",
    "rsub",
    "softmax",
    "log_softmax",
    "isnan",
    "isinf",
    "isfinite",
    "isneginf",
    "isposinf",
    "isreal",
    "all",
    "any",
)

#: torch aliases -> the method they call.
TORCH_ALIASES: dict[str, str] = {
    "moveaxis": "movedim",
    "absolute": "abs",
    "negative": "neg",
    "clip": "clamp",
    "multiply": "mul",
    "subtract": "sub",
    "divide": "div",
    "true_divide": "div",
    "greater": "gt",
    "greater_equal": "ge",
    "less": "lt",
    "less_equal": "le",
    "not_equal": "ne",
}

#: Functions applied leaf by leaf, so a tensordict may be any of their tensor operands
#: (``torch.sub(tensor, td)`` computes ``torch.sub(tensor, leaf)`` for every leaf).
_POINTWISE: frozenset[str] = frozenset(
    (
        *BINARY,
        *BINARY_NO_INPLACE,
        "clamp",
        "rsub",
        *(k for k, v in TORCH_ALIASES.items() if v in BINARY or v in BINARY_NO_INPLACE),
    )
)

#: torch keyword -> method keyword, where the names differ (``None``: pass positionally).
_KWARGS: dict[str, dict[str, str | None]] = {
    "split": {"split_size_or_sections": "split_size"},
    "unflatten": {"sizes": "unflattened_size"},
    "permute": {"dims": None},
    "flip": {"dims": None},
    "reshape": {"shape": None},
    "tile": {"dims": None},
    "broadcast_to": {"size": "shape"},
}


def _leafwise_torch(func: Callable, args: tuple, kwargs: dict) -> Any:
    """``func`` with a tensordict as a later operand: call it once per leaf of that tensordict."""
    td = next(a for a in (*args, *kwargs.values()) if isinstance(a, TensorDictBase))
    pos = [i for i, a in enumerate(args) if a is td]
    kw = [k for k, v in kwargs.items() if v is td]
    if len(pos) + len(kw) != 1 or any(
        isinstance(a, TensorDictBase) and a is not td for a in (*args, *kwargs.values())
    ):
        raise TypeError(
            f"{func.__name__}(): a tensordict must come first when several operands are "
            "tensordicts."
        )
    results = []
    for leaf in td._flat_tensors([]):
        a = list(args)
        k = dict(kwargs)
        if pos:
            a[pos[0]] = leaf
        else:
            k[kw[0]] = leaf
        results.append(func(*a, **k))
    return td._rebuild(iter(results))


def _method_forwarder(torch_name: str, method: str) -> Callable:
    func = getattr(torch, torch_name)
    pointwise = torch_name in _POINTWISE
    renames = _KWARGS.get(method, {"other": None} if pointwise else None)

    def impl(*args: Any, **kwargs: Any) -> Any:
        if not args:  # torch.add(input=td, ...), torch.split(tensor=td, ...)
            args = (kwargs.pop("input") if "input" in kwargs else kwargs.pop("tensor", None),)
        td = args[0]
        if not isinstance(td, TensorDictBase):
            if pointwise:
                return _leafwise_torch(func, args, kwargs)
            raise TypeError(
                f"torch.{torch_name}() got a {type(td).__name__} as its input; a tensordict "
                "can only be its first argument."
            )
        declared = getattr(type(td), method, None)
        bound = None if is_placeholder(declared) else getattr(td, method, None)
        if bound is None:
            raise TypeError(
                f"torch.{torch_name}() is not supported for {type(td).__name__}: it has no "
                f"{method}() method."
            )
        if renames and kwargs:
            extra = []
            for old, new in renames.items():
                if old in kwargs:
                    value = kwargs.pop(old)
                    if new is None:
                        extra.append(value)
                    else:
                        kwargs[new] = value
            args = (*args, *extra)
        return bound(*args[1:], **kwargs)

    impl.__name__ = torch_name
    impl.__qualname__ = f"torch_{torch_name}"
    return impl


def _tensor_method_forwarder(func: Callable, name: str) -> Callable:
    """``Tensor.<name>`` (a binary method or operator) reached with a tensordict operand.

    ``tensor + td`` in eager Python ends in ``td.__radd__``; under ``torch.compile``
    dynamo dispatches it as ``Tensor.__add__``/``Tensor.add`` with a tensordict argument
    instead, which lands here.
    """

    def impl(*args: Any, **kwargs: Any) -> Any:
        first = args[0]
        if isinstance(first, TensorDictBase):
            return getattr(first, name)(*args[1:], **kwargs)
        return _leafwise_torch(func, args, kwargs)

    impl.__name__ = name
    return impl


def _install_torch_methods() -> None:
    names = [(n, n) for n in TORCH_METHODS] + list(TORCH_ALIASES.items())
    for torch_name, method in names:
        func = getattr(torch, torch_name, None)
        if func is not None:
            # The owning module's registration wins whatever the import order.
            TD_HANDLED_FUNCTIONS.setdefault(func, _method_forwarder(torch_name, method))
    for name in (*BINARY, *BINARY_NO_INPLACE, *OPERATORS):
        func = getattr(_Tensor, name, None)
        if func is not None:
            impl = TD_HANDLED_FUNCTIONS.setdefault(func, _tensor_method_forwarder(func, name))
            if isinstance(func, FunctionType):  # written in Python: see TD_HANDLED_BY_NAME
                TD_HANDLED_BY_NAME.setdefault(func.__name__, impl)


_install_torch_methods()


def _like(fn: Callable[..., _Tensor]) -> Callable:
    """``torch.*_like`` for tensordicts: the function on every tensor leaf.

    A ``device=`` argument also becomes the result's device; a leaf the function cannot
    handle (``rand_like`` of an integer leaf, say) is named in the error.
    """

    def impl(input: TensorDictBase, *args: Any, **kwargs: Any) -> TensorDictBase:
        device = kwargs.get("device", NO_DEFAULT)
        if device is not NO_DEFAULT:
            device = parse_device(device)
        try:
            return input._map_tensors(lambda x: fn(x, *args, **kwargs), device)
        except (RuntimeError, TypeError) as err:
            for key, value in input.items(True, True):
                if isinstance(value, _Tensor):
                    try:
                        fn(value, *args, **kwargs)
                    except (RuntimeError, TypeError) as leaf_err:
                        raise type(err)(
                            f"torch.{fn.__name__}: failed for entry {key!r} of dtype "
                            f"{value.dtype} and shape {tuple(value.shape)}: {leaf_err}"
                        ) from None
            raise

    impl.__name__ = fn.__name__
    return impl


for _fn in (
    torch.zeros_like,
    torch.ones_like,
    torch.empty_like,
    torch.full_like,
    torch.rand_like,
    torch.randn_like,
    torch.randint_like,
):
    implements_for_td(_fn)(_like(_fn))


def lazy_stack(
    input: Sequence[Any], dim: int = 0, *, out: TensorDictBase | None = None, **kwargs: Any
) -> Any:
    """Stack tensordicts lazily: a :class:`LazyStackedTensorDict` that keeps them as they are.

    Members may hold different keys, entries of different shapes and batch sizes of
    different sizes (shown as ``-1``; ``strict_shape=True`` refuses them).
    ``stack_dim_name`` names the new dimension. Non-tensor values (``NonTensorData``)
    stack into a :class:`~tensordict.NonTensorStack`. Tensors are stacked with
    :func:`torch.stack`, or with the ragged options ``as_list``/``as_padded_tensor``/
    ``as_nested_tensor`` (``layout``, ``padding_side``, ``padding_value``).

    >>> import torch
    >>> from tensordict import TensorDict, lazy_stack
    >>> lazy = lazy_stack([TensorDict({"a": torch.zeros(2)}), TensorDict({"a": torch.ones(3)})])
    >>> lazy.batch_size, [td["a"].shape for td in lazy]
    (torch.Size([2]), [torch.Size([2]), torch.Size([3])])
    >>> lazy_stack([torch.ones(1), torch.ones(2)], as_padded_tensor=True)
    tensor([[1., 0.],
            [1., 1.]])
    """
    items = list(input)
    if not items:
        raise RuntimeError("lazy_stack expects a non-empty sequence of tensordicts.")
    if all(isinstance(x, torch.Tensor) for x in items):
        ragged = {k: v for k, v in kwargs.items() if k in RAGGED_OPTIONS}
        check_options(ragged, "lazy_stack()")
        return stack_ragged(items, dim, **ragged)
    unknown = set(kwargs) - {"strict_shape", "stack_dim_name", "device"}
    if unknown:
        raise TypeError(f"lazy_stack() got unexpected keyword arguments {sorted(unknown)}.")
    if all(isinstance(x, NON_TENSOR) for x in items):
        if makes_ragged(items):  # leaves of different batch sizes
            return RaggedNonTensorStack._of(items, dim, items[0].device)
        return NonTensorStack(*items, stack_dim=dim)
    inner = wrapped(items)
    if inner is not None:  # tensorclasses: a lazy stack of their data, in the same class
        return inner[1](lazy_stack(inner[0], dim, out=getattr(out, "_tensordict", out), **kwargs))
    result = _kinds.Lazy(
        *items,
        stack_dim=dim,
        strict_shape=kwargs.get("strict_shape", False),
        stack_dim_name=kwargs.get("stack_dim_name"),
    )
    if out is not None:
        out.update_(result)
        return out
    return result


def _dense_layout(td: Any, prefix: tuple[str, ...], out: list[Any]) -> bool:
    """Append ``(key, kind, shape)`` of every leaf of a dense tree to ``out``; ``False``
    when the tree holds a tensordict that is not dense (a nested lazy stack is stacked
    member by member, see :func:`maybe_dense_stack`)."""
    for key, value in td._tensordict.items():
        if isinstance(value, _kinds.Dense):
            if not _dense_layout(value, (*prefix, key), out):
                return False
        elif isinstance(value, _kinds.Base):
            return False
        else:
            out.append(((*prefix, key), type(value), getattr(value, "shape", None)))
    return True


def _same_structure(tds: Sequence[TensorDictBase]) -> bool:
    """Whether dense tensordicts, dense all the way down, have the same keys, leaf kinds
    and leaf shapes."""
    layouts = []
    for td in tds:
        layout: list[Any] = []
        if not isinstance(td, _kinds.Dense) or not _dense_layout(td, (), layout):
            return False
        if layouts and layout != layouts[0]:
            return False
        layouts.append(layout)
    return True


def maybe_dense_stack(
    input: Sequence[TensorDictBase],
    dim: int = 0,
    *,
    out: TensorDictBase | None = None,
    **kwargs: Any,
) -> TensorDictBase:
    """Stack densely when the tensordicts share keys and shapes, lazily otherwise: dense
    tensordicts with the same keys and tensor shapes whose nested tensordicts differ give
    a dense stack holding lazy stacks of those.

    >>> import torch
    >>> from tensordict import TensorDict, maybe_dense_stack
    >>> same = [TensorDict({"a": torch.zeros(2)}, [2])] * 2
    >>> other = [TensorDict({"a": torch.zeros(2)}, [2]), TensorDict({"a": torch.zeros(2, 5)}, [2])]
    >>> type(maybe_dense_stack(same)).__name__, type(maybe_dense_stack(other)).__name__
    ('TensorDict', 'LazyStackedTensorDict')
    """
    items = list(input)
    inner = wrapped(items)
    if inner is not None:  # tensorclasses: stack their data, in the same class
        target = getattr(out, "_tensordict", out)
        return inner[1](maybe_dense_stack(inner[0], dim, out=target, **kwargs))
    if items and _same_structure(items):
        return _combine_all(items, "stack", dim, out)  # type: ignore[no-any-return]
    best = _stack_best_effort(items, dim) if out is None and not kwargs else None
    if best is not None:
        return best
    if items and all(isinstance(td, _kinds.Lazy) for td in items):
        keys = set(items[0].keys(True))
        if all(set(td.keys(True)) == keys for td in items[1:]):  # else: a stack of the stacks
            lazy = _stack_member_wise(items, dim, maybe_dense_stack, out)
            if lazy is not None:
                return lazy  # type: ignore[no-any-return]
    return lazy_stack(items, dim, out=out, **kwargs)  # type: ignore[no-any-return]


def _stack_best_effort(items: list[Any], dim: int) -> _kinds.Dense | None:
    """Dense tensordicts with the same keys, whose tensor entries agree in shape (and
    non-tensor entries in kind): a dense stack whose nested entries are stacked by
    :func:`maybe_dense_stack` (lazily where they differ). ``None`` when the top level
    itself cannot be dense."""
    if not items or not all(type(td) is _kinds.Dense for td in items):
        return None
    first = items[0]
    bs, keys = first.batch_size, first._tensordict.keys()
    if any(td.batch_size != bs or td._tensordict.keys() != keys for td in items[1:]):
        return None
    d = normalize_dim(dim, len(bs), extra=1)
    new_bs = bs[:d] + torch.Size([len(items)]) + bs[d:]
    out: dict[str, Any] = {}
    for key, value in first._tensordict.items():
        values = [td._tensordict[key] for td in items]
        if type(value) is _Tensor:
            if any(type(v) is not _Tensor or v.shape != value.shape for v in values):
                return None
            out[key] = torch.stack(values, d)
        elif isinstance(value, NON_TENSOR):
            if not all(isinstance(v, NON_TENSOR) for v in values):
                return None
            out[key] = _combine_non_tensor((key,), values, "stack", d, new_bs)
        elif isinstance(value, TensorDictBase):
            if not all(isinstance(v, TensorDictBase) for v in values):
                return None
            out[key] = maybe_dense_stack(values, d)
        else:
            return None
    devices = {td.device for td in items}
    return _kinds.Dense._new_unsafe(out, new_bs, devices.pop() if len(devices) == 1 else None)


def dense_stack_tds(
    td_list: Sequence[TensorDictBase] | TensorDictBase, dim: int | None = None
) -> _kinds.Dense:
    """Stack tensordicts of identical structure into one dense tensordict.

    Unlike ``torch.stack`` (which may return a lazy stack), the result is dense at the
    top level; nested lazy stacks stay lazy. ``td_list`` may be a lazy stack (its
    members and stack dimension are used), a dense tensordict (returned as it is) or a
    sequence of tensordicts with ``dim``.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> tds = [TensorDict({"a": torch.full((2,), float(i))}, [2]) for i in range(3)]
    >>> out = dense_stack_tds(tds, dim=1)
    >>> out.batch_size, out["a"][0]
    (torch.Size([2, 3]), tensor([0., 1., 2.]))
    """
    if isinstance(td_list, _kinds.Lazy):
        if dim is None:
            dim = td_list.stack_dim
        td_list = list(td_list.tensordicts)
    elif isinstance(td_list, TensorDictBase):  # already dense: as it is, as the reference
        return td_list  # type: ignore[return-value]
    elif dim is None:
        raise ValueError("dense_stack_tds: pass dim= when stacking a list of tensordicts.")
    tds: list[Any] = list(td_list)
    if not tds:
        raise ValueError("dense_stack_tds needs at least one tensordict.")
    first = tds[0]
    shape = list(first.batch_size)
    ndim = len(shape) + 1
    if not -ndim <= dim < ndim:
        raise IndexError(
            f"dense_stack_tds: dim {dim} is out of range for stacking tensordicts of batch size "
            f"{tuple(first.batch_size)} (expected -{ndim} <= dim < {ndim})."
        )
    dim = dim % ndim
    for i, td in enumerate(tds[1:], 1):
        if td.batch_size != first.batch_size:
            raise RuntimeError(
                f"dense_stack_tds: tensordict {i} has batch size {tuple(td.batch_size)}, "
                f"tensordict 0 has {tuple(first.batch_size)}."
            )
    shape.insert(dim, len(tds))
    out = first.unsqueeze(dim).expand(shape).clone()
    for i, td in enumerate(tds):
        out[(slice(None),) * dim + (i,)] = td
    return out  # type: ignore[no-any-return]
