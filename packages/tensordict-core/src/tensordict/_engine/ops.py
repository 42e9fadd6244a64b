"""Families of tensor methods, declared from tables and installed on ``TensorDictBase``.

Every method here maps one torch operation over the tensor leaves. Leaves are gathered
into one flat list (``_flat_tensors``), the operation runs once over the list — as a
single ``torch._foreach_*`` call when torch has one — and the results are put back in
the same structure (``_rebuild``). Non-tensor values are carried over unchanged.

Tables:

* :data:`UNARY` — pointwise math, each with its in-place ``_`` twin;
* :data:`BINARY` — ops taking a tensordict, tensor or scalar operand, with ``_`` twins;
* :data:`BINARY_NO_INPLACE` — binary ops offered without an in-place twin;
* :data:`CASTS` — dtype conversion methods;
* :data:`OPERATORS` — Python operators and the method each one calls.
"""

from __future__ import annotations
import __future__

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from tensordict._engine import ops_state as _ops_state
from tensordict._engine.ops_state import _foreach_unsupported
from tensordict._engine.tree import leaf_items
from tensordict._keys.shape import broadcastable_to, normalize_dim
from tensordict._kinds import kinds as _kinds
from tensordict._leaves.nontensor import NON_TENSOR, RaggedNonTensorStack
from tensordict._leaves.nontensor_ops import compare
from tensordict.base import TensorDictBase, is_tensor_collection

_Tensor = torch.Tensor

UNARY: tuple[str, ...] = (
    "abs",
    "acos",
    "asin",
    "atan",
    "ceil",
    "cos",
    "cosh",
    "erf",
    "erfc",
    "exp",
    "expm1",
    "floor",
    "frac",
    "lgamma",
    "log",
    "log10",
    "log1p",
    "log2",
    "neg",
    "reciprocal",
    "round",
    "sigmoid",
    "sign",
    "sin",
    "sinh",
    "sqrt",
    "tan",
    "tanh",
    "trunc",
)

#: what a binary operand may be: a tensordict (matched by key), a tensor or a number.
OPERAND = "TensorDictBase | torch.Tensor | float"

#: the annotations of the options a binary method may take
_OPTION_ANNOTATIONS = {"alpha": "float | None", "value": "float | None", "default": "Any"}


@dataclass(frozen=True)
class Binary:
    """One row of :data:`BINARY` / :data:`BINARY_NO_INPLACE`: a torch operation applied leaf
    by leaf, with the parameters (after ``self``) of the method and of its in-place twin,
    as the reference library declares them.

    Parameters without a default are the operands (tensordicts matched by key, tensors
    or numbers); ``default`` fills the entries a tensordict operand lacks; the other
    options (``alpha``, ``value``) go to the torch operation. ``torch_name`` is the torch
    function where it differs from the method name.

    >>> BINARY["addcmul"].operands, BINARY["add"].options
    (('other1', 'other2'), ('alpha', 'default'))
    """

    params: str = "other, *, default=None"
    inplace_params: str = "other"
    torch_name: str | None = None

    @property
    def operands(self) -> tuple[str, ...]:
        """The operands' names."""
        return tuple(p for p in _split(self.params) if "=" not in p and p != "*")

    @property
    def options(self) -> tuple[str, ...]:
        """The options' names (``default`` included)."""
        return tuple(p.split("=")[0] for p in _split(self.params) if "=" in p)


def _split(params: str) -> list[str]:
    return [p.replace(" ", "") for p in params.split(",") if p.strip()]


BINARY: dict[str, Binary] = {
    "add": Binary("other, *, alpha=None, default=None", "other, *, alpha=None"),
    "sub": Binary("other, *, alpha=None, default=None", "other, alpha=None"),
    "mul": Binary(),
    "div": Binary(),
    "pow": Binary(),
    "maximum": Binary(),
    "minimum": Binary(),
    "clamp_min": Binary("other, default=None"),
    "clamp_max": Binary(),
    "lerp": Binary("end, weight", "end, weight"),
    "addcmul": Binary("other1, other2, *, value=1", "other1, other2, *, value=1"),
    "addcdiv": Binary("other1, other2, value=1", "other1, other2, *, value=1"),
}

BINARY_NO_INPLACE: dict[str, Binary] = {
    "mod": Binary("other", torch_name="remainder"),
    "bitwise_and": Binary(),
    "bitwise_or": Binary(),
    "bitwise_xor": Binary(),
    "logical_and": Binary(),
    "logical_or": Binary(),
    "logical_xor": Binary(),
    "eq": Binary(),
    "ne": Binary(),
    "lt": Binary(),
    "le": Binary(),
    "gt": Binary(),
    "ge": Binary(),
    "floor_divide": Binary(),
    "remainder": Binary(),
}

#: Ops whose ``torch._foreach_*`` kernels take the options (when the operands are lists).
_FOREACH_KWARGS = frozenset({"add", "sub", "addcmul", "addcdiv"})

CASTS: dict[str, torch.dtype] = {
    "float": torch.float32,
    "double": torch.float64,
    "half": torch.float16,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float32": torch.float32,
    "float64": torch.float64,
    "int": torch.int32,
    "int8": torch.int8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "long": torch.int64,
    "short": torch.int16,
    "uint8": torch.uint8,
    "uint16": torch.uint16,
    "uint32": torch.uint32,
    "uint64": torch.uint64,
    "bool": torch.bool,
    "complex32": torch.complex32,
    "complex64": torch.complex64,
    "complex128": torch.complex128,
}

#: quantized dtypes: ``td.qint8(scale=1.0, zero_point=0)`` quantizes every leaf per tensor
#: (``Tensor.to`` cannot produce quantized tensors).
QUANTIZED_CASTS: dict[str, torch.dtype] = {
    "qint8": torch.qint8,
    "qint32": torch.qint32,
    "quint8": torch.quint8,
    "quint4x2": torch.quint4x2,
}

#: elementwise tests returning a tensordict of booleans (no in-place twin).
PREDICATES: tuple[str, ...] = ("isfinite", "isinf", "isnan", "isneginf", "isposinf", "isreal")

#: Python operator -> (method name, reflected). Reflected ops swap the operands.
OPERATORS: dict[str, tuple[str, bool]] = {
    "__add__": ("add", False),
    "__radd__": ("add", False),
    "__iadd__": ("add_", False),
    "__sub__": ("sub", False),
    "__rsub__": ("sub", True),
    "__isub__": ("sub_", False),
    "__mul__": ("mul", False),
    "__rmul__": ("mul", False),
    "__imul__": ("mul_", False),
    "__truediv__": ("div", False),
    "__rtruediv__": ("div", True),
    "__itruediv__": ("div_", False),
    "__pow__": ("pow", False),
    "__rpow__": ("pow", True),
    "__ipow__": ("pow_", False),
    "__mod__": ("mod", False),
    "__rmod__": ("mod", True),
    "__floordiv__": ("floor_divide", False),
    "__rfloordiv__": ("floor_divide", True),
    "__and__": ("bitwise_and", False),
    "__rand__": ("bitwise_and", False),
    "__or__": ("bitwise_or", False),
    "__ror__": ("bitwise_or", False),
    "__xor__": ("bitwise_xor", False),
    "__rxor__": ("bitwise_xor", False),
    "__eq__": ("eq", False),
    "__ne__": ("ne", False),
    "__lt__": ("lt", False),
    "__le__": ("le", False),
    "__gt__": ("gt", False),
    "__ge__": ("ge", False),
}


def _torch_name(method: str) -> str:
    """The torch function a binary method calls."""
    row = BINARY.get(method) or BINARY_NO_INPLACE.get(method)
    return (row.torch_name if row is not None else None) or method


def _foreach(name: str) -> Callable[..., Any] | None:
    return getattr(torch, f"_foreach_{name}", None)


def _operands(td: TensorDictBase, other: Any, leaves: list[Any], default: Any = None) -> Any:
    """The operand matched to each leaf: a list for tensordicts, ``other`` otherwise. A
    tensor lines up with the batch dimensions (as the reference): it gets a trailing
    dimension of size 1 per feature dimension of each leaf."""
    if is_tensor_collection(other):
        return td._aligned_tensors(other, default)
    if isinstance(other, _Tensor) and other.ndim:
        nb = len(td.batch_size)
        shape = other.shape
        return [other.view(*shape, *(1,) * (x.ndim - nb)) if x.ndim > nb else other for x in leaves]
    return other


def _batch_broadcast(td: TensorDictBase, operands: tuple[Any, ...]) -> TensorDictBase:
    """``td`` expanded to the batch shape that its operands broadcast it to (a tensor's
    shape and a tensordict's batch size line up with the batch dimensions); ``td`` itself
    when they do not enlarge it."""
    bs = td.batch_size
    for o in operands:
        if isinstance(o, _Tensor):
            shape = o.shape
        elif is_tensor_collection(o):
            shape = o.batch_size
        else:
            continue
        if shape and shape != bs:
            try:
                new = torch.broadcast_shapes(shape, bs)  # type: ignore[no-untyped-call]
            except RuntimeError:
                raise RuntimeError(
                    f"an operand of shape {tuple(shape)} does not broadcast with the batch "
                    f"size {tuple(bs)} (operands line up with the batch dimensions)."
                ) from None
            if new != bs:
                td, bs = td.expand(new), new
    return td


def _tensor_keys_of(td: Any) -> list[Any]:
    return [k for k, v in td.items(True, True) if isinstance(v, _Tensor)]


def _key_union(
    td: TensorDictBase, others: tuple[Any, ...], default: Any
) -> tuple[Any, tuple[Any, ...]]:
    """``td`` and the tensordict operands on a common set of tensor leaves, for a binary
    op with ``default``: ``"intersection"`` keeps the leaves all of them hold; another
    value fills the leaves ``td`` lacks with it (the operands' own gaps are filled when
    they are aligned)."""
    colls = [o for o in others if is_tensor_collection(o)]
    if not colls:
        return td, others
    mine = set(_tensor_keys_of(td))
    if isinstance(default, str) and default == "intersection":
        keep = set(mine)
        for o in colls:
            keep &= set(_tensor_keys_of(o))
        drop = [k for k in mine if k not in keep]
        td = td.exclude(*drop) if drop else td
        others = tuple(
            o.exclude(*[k for k in _tensor_keys_of(o) if k not in keep])
            if is_tensor_collection(o)
            else o
            for o in others
        )
        return td, others
    missing: dict[Any, _Tensor] = {}
    for o in colls:
        for k, v in o.items(True, True):
            if isinstance(v, _Tensor) and k not in mine and k not in missing:
                fill = torch.as_tensor(default, device=v.device)
                missing[k] = fill.expand(v.shape) if fill.shape != v.shape else fill
    if missing:
        td = td.copy()
        for k, v in missing.items():
            td.set(k, v)
    return td, others


def _leafwise(func: Callable[..., Any], leaves: list[Any], operands: list[Any]) -> list[Any]:
    """Call ``func(leaf, *operand_i)`` with operands that may be per-leaf lists."""
    out = []
    for i, leaf in enumerate(leaves):
        out.append(func(leaf, *[o[i] if isinstance(o, list) else o for o in operands]))
    return out


def _make_unary(name: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    fe, fe_ = _foreach(name), _foreach(name + "_")
    op, op_ = getattr(torch, name), getattr(_Tensor, name + "_")

    def method(self: TensorDictBase) -> TensorDictBase:
        leaves = self._flat_tensors([])
        try:
            results = fe(leaves) if fe is not None else [op(x) for x in leaves]
        except RuntimeError:
            if not _foreach_unsupported():
                raise
            results = [op(x) for x in leaves]
        return self._rebuild(iter(results))

    def method_(self: TensorDictBase) -> TensorDictBase:
        leaves = self._flat_tensors([])
        if fe_ is not None:
            try:
                fe_(leaves)
                return self
            except RuntimeError:
                if not _foreach_unsupported():
                    raise
        for x in leaves:
            op_(x)
        return self

    method.__doc__ = (
        f"Apply :func:`torch.{name}` to every leaf and return a new tensordict.\n\n"
        + _example(name)
    )
    method_.__doc__ = f"In-place :meth:`{name}`: apply ``Tensor.{name}_`` to every leaf."
    return method, method_


def _example(name: str) -> str:
    return (
        "    >>> import torch\n"
        "    >>> from tensordict import TensorDict\n"
        "    >>> td = TensorDict({'a': torch.tensor([0.2, 0.5, 0.7])}, [3])\n"
        f"    >>> torch.allclose(td.{name}()['a'], torch.{name}(td['a']), equal_nan=True)\n"
        "    True\n"
    )


def _tensor_keys(td: TensorDictBase) -> list[Any]:
    """Keys of the tensor leaves, in ``_flat_tensors`` order (for error messages)."""
    return [k for k, v in td.items(True, True) if isinstance(v, _Tensor)]


def _explain(
    td: TensorDictBase,
    name: str,
    op: Callable[..., Any],
    leaves: list[Any],
    operands: list[Any],
    err: Exception,
) -> Exception:
    """Re-run ``op`` leaf by leaf to name the entry that made it fail."""
    keys = _tensor_keys(td)
    for i, leaf in enumerate(leaves):
        args = [o[i] if isinstance(o, list) else o for o in operands]
        try:
            op(leaf, *args)
        except Exception as leaf_err:  # noqa: BLE001 - re-raised with context below
            shapes = [tuple(a.shape) for a in args if isinstance(a, _Tensor)]
            return RuntimeError(
                f"{name}: failed for entry {keys[i]!r} of shape {tuple(leaf.shape)} with "
                f"operand shape(s) {shapes}: {leaf_err}"
            )
    return err


def _check_inplace(
    td: TensorDictBase,
    name: str,
    leaves: list[Any],
    operands: list[Any],
    kwargs: dict[str, Any] | None = None,
) -> None:
    """Refuse an in-place op before writing anything if an operand cannot fit its leaf:
    its shape does not broadcast to the leaf's, or the result's dtype cannot be cast to the
    leaf's (a float result for an integer leaf)."""
    if not any(isinstance(o, (list, _Tensor)) for o in operands):  # scalars: dtypes only
        need = 2 if _true_division(name, kwargs) else 0
        for o in operands:
            need = max(need, _SCALAR_CATEGORY.get(type(o), 0))
        if not need or {leaf.dtype for leaf in leaves} <= _AT_LEAST[need]:
            return
    castable: dict[tuple[Any, Any], bool] = {}
    for i, leaf in enumerate(leaves):
        for o in operands:
            t = o[i] if isinstance(o, list) else o
            if isinstance(t, _Tensor) and not broadcastable_to(t.shape, leaf.shape):
                raise RuntimeError(
                    f"{name}: the operand of shape {tuple(t.shape)} for entry "
                    f"{_tensor_keys(td)[i]!r} cannot be written in place into its shape "
                    f"{tuple(leaf.shape)}."
                )
            sig = (leaf.dtype, t.dtype if isinstance(t, _Tensor) else type(t))
            ok = castable.get(sig)
            if ok is None:
                ok = castable[sig] = _result_castable(name, leaf, t, kwargs)
            if not ok:
                raise RuntimeError(
                    f"{name}: the result for entry {_tensor_keys(td)[i]!r} has another dtype "
                    f"than the entry ({leaf.dtype}), which it cannot be cast to in place; "
                    "use the out-of-place op or cast the tensordict first."
                )


def _category(dtype: torch.dtype) -> int:
    """0 bool, 1 integer, 2 floating, 3 complex: a result can be cast in place into a dtype
    of its category or a higher one (torch's same-kind casting)."""
    if dtype.is_complex:
        return 3
    if dtype.is_floating_point:
        return 2
    return 0 if dtype == torch.bool else 1


_SCALAR_CATEGORY = {bool: 0, int: 1, float: 2, complex: 3}
_DTYPES = (  # the usual ones: a leaf of another dtype takes the leaf-by-leaf check
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
)
#: The usual dtypes a result of category ``c`` (or lower) can be written into in place.
_AT_LEAST = {c: frozenset(d for d in _DTYPES if _category(d) >= c) for c in range(4)}


def _true_division(name: str, kwargs: dict[str, Any] | None) -> bool:
    return name.rstrip("_") in ("div", "true_divide", "divide") and not (kwargs or {}).get(
        "rounding_mode"
    )


def _result_castable(name: str, leaf: _Tensor, operand: Any, kwargs: dict[str, Any] | None) -> bool:
    """Whether ``leaf.<name>(operand)`` gives a dtype that can be written into ``leaf``
    (decided from the dtypes' categories, without calling torch: traceable)."""
    if isinstance(operand, _Tensor):
        other = _category(operand.dtype)
    elif type(operand) in _SCALAR_CATEGORY:
        other = _SCALAR_CATEGORY[type(operand)]
    else:
        return True  # let the op itself judge
    mine = _category(leaf.dtype)
    result = max(mine, other)
    if _true_division(name, kwargs):
        result = max(result, 2)  # true division of integers gives floats
    return result <= mine


def _signed(name: str, params: str, impl: Callable[..., Any]) -> Callable[..., Any]:
    """``def name(self, <params>)`` calling ``impl(self, operands, default, options)``.

    Generated so that the method has the row's real, annotated signature (introspection,
    IDEs, the generated stub, keyword errors) without a per-call binding cost.
    """
    parsed = [p for p in _split(params) if p != "*"]
    operands = [p for p in parsed if "=" not in p]
    options = [p.split("=")[0] for p in parsed if "=" in p]
    annotated = []
    for p in _split(params):
        pname = p.split("=")[0]
        if p == "*":
            annotated.append(p)
        elif "=" in p:
            annotated.append(f"{pname}: {_OPTION_ANNOTATIONS[pname]} = {p.split('=')[1]}")
        else:
            annotated.append(f"{pname}: {OPERAND}")
    kwargs = ", ".join(f"{o!r}: {o}" for o in options if o != "default")
    default = "default" if "default" in options else "None"
    source = (
        f"def {name}(self, {', '.join(annotated)}) -> Self:\n"
        f"    return impl(self, ({', '.join(operands)},), {default}, {{{kwargs}}})\n"
    )
    namespace: dict[str, Any] = {"impl": impl}
    # annotations stay strings (postponed evaluation): the names need not exist here
    code = compile(
        source, f"<{name}>", "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True
    )
    exec(code, namespace)  # noqa: S102 - source built from the rows above
    method: Callable[..., Any] = namespace[name]
    return method


#: comparisons that non-tensor leaves take part in (their values compared element-wise)
_NON_TENSOR_COMPARISONS = {
    "eq": "eq",
    "ne": "ne",
    "bitwise_or": "or",
    "bitwise_xor": "xor",
    "bitwise_and": "and",
}


def _compare_non_tensors(out: TensorDictBase, td: TensorDictBase, other: Any, op: str) -> None:
    """Write into ``out`` the comparison of every non-tensor leaf of ``td`` with the entry
    of ``other`` (a tensordict) at the same key: a boolean tensor of its batch shape, as
    the reference gives (the tensor leaves were compared by the torch operation). Values
    without that operation (``"a" | "b"``) keep the entry carried over."""
    for path, leaf in _non_tensor_leaves(td, ()):
        if type(leaf) is RaggedNonTensorStack:
            _compare_members(out, path, leaf, other.get(path, None), op)
            continue
        try:
            result = compare(leaf, other.get(path, None), op)
        except TypeError:
            continue
        if result is not NotImplemented:
            out.set(path, result)


def _compare_members(
    out: TensorDictBase, path: tuple[str, ...], leaf: RaggedNonTensorStack, other: Any, op: str
) -> None:
    """A ragged stack (members of different batch sizes, read from a lazy stack) compared
    member by member: each member's boolean tensor goes into the matching member of the
    lazy result ``out``."""
    sd = leaf.stack_dim
    members = leaf.tensordicts
    if not (
        isinstance(out, _kinds.Lazy)
        and out.stack_dim == sd
        and len(out.tensordicts) == len(members)
    ):
        leaf._refuse("comparing it")
    split = isinstance(other, NON_TENSOR) and other.batch_dims > sd
    for j, (dest, mine) in enumerate(zip(out.tensordicts, members, strict=True)):
        theirs = other[(slice(None),) * sd + (j,)] if split else other
        try:
            result = compare(mine, theirs, op)
        except TypeError:
            continue
        if result is not NotImplemented:
            dest.set(path, result)


def _non_tensor_leaves(td: Any, prefix: tuple[str, ...]) -> list[tuple[tuple[str, ...], Any]]:
    """``(key path, leaf)`` of the non-tensor leaves of ``td`` (tensors skipped cheaply)."""
    store = getattr(td, "_tensordict", None)
    if type(store) is not dict:  # lazy stacks & co: only their non-tensor entries are read
        entry_class = getattr(td, "entry_class", None)
        if entry_class is not None:  # (tensors that differ across members are not stacked)
            every = td.keys(True, True, is_leaf=_kinds.is_leaf_nontensor)
            keys = [k if isinstance(k, tuple) else (k,) for k in every]
            return [
                (prefix + k, td._get_tuple(k, None))
                for k in keys
                if issubclass(entry_class(k), NON_TENSOR)
            ]
        return [
            (path, v)
            for path, v in leaf_items(td, prefix, members=False)
            if isinstance(v, NON_TENSOR)
        ]
    out = []
    for key, value in store.items():
        if type(value) is _Tensor:
            continue
        if isinstance(value, NON_TENSOR):
            out.append((prefix + (key,), value))
        elif is_tensor_collection(value):
            out.extend(_non_tensor_leaves(value, prefix + (key,)))
    return out


def _make_binary(
    name: str, row: Binary, with_inplace: bool
) -> tuple[Callable[..., Any], Callable[..., Any] | None]:
    n_operands = len(row.operands)
    fe = _foreach(name)
    fe_ = _foreach(name + "_") if with_inplace else None
    op = getattr(torch, row.torch_name or name)
    tensor_op_ = getattr(_Tensor, name + "_", None)

    def op_(x: _Tensor, *args: Any, **kwargs: Any) -> Any:
        if tensor_op_ is not None:
            return tensor_op_(x, *args, **kwargs)
        return op(x, *args, out=x, **kwargs)  # no Tensor.maximum_ & co: write through out=

    def gather(
        self: TensorDictBase, args: tuple[Any, ...], default: Any, kwargs: dict[str, Any]
    ) -> tuple[list[Any], list[Any], bool]:
        leaves = self._flat_tensors([])
        operands = [_operands(self, a, leaves, default) for a in args]
        # torch._foreach_* takes per-leaf lists or Python scalars, not broadcast tensors.
        foreach_ok = all(isinstance(o, (list, int, float, bool)) for o in operands)
        if default is not None:  # a default may put scalars inside the per-leaf lists
            foreach_ok = foreach_ok and all(
                isinstance(t, _Tensor) for o in operands if isinstance(o, list) for t in o
            )
        if n_operands == 2 or kwargs:
            foreach_ok = foreach_ok and all(isinstance(o, list) for o in operands[:2])
            foreach_ok = foreach_ok and (not kwargs or name in _FOREACH_KWARGS)
        return leaves, operands, foreach_ok

    def impl(
        self: TensorDictBase, args: tuple[Any, ...], default: Any, kwargs: dict[str, Any]
    ) -> TensorDictBase:
        if kwargs:
            kwargs = {k: v for k, v in kwargs.items() if v is not None}
        source = self
        if default is not None:
            self, args = _key_union(self, args, default)
        self = _batch_broadcast(self, args)
        leaves, operands, foreach_ok = gather(self, args, default, kwargs)
        try:
            if fe is not None and foreach_ok and leaves:
                results = fe(leaves, *operands, **kwargs)
            elif n_operands == 1 and not kwargs:  # no foreach kernel (eq, lt …): one map
                other = operands[0]
                if isinstance(other, list):
                    results = list(map(op, leaves, other))
                else:
                    results = [op(x, other) for x in leaves]
            else:
                results = _leafwise(lambda x, *o: op(x, *o, **kwargs), leaves, operands)
        except RuntimeError as err:
            if not _foreach_unsupported():
                raise _explain(
                    self, name, lambda x, *o: op(x, *o, **kwargs), leaves, operands, err
                ) from None
            results = _leafwise(lambda x, *o: op(x, *o, **kwargs), leaves, operands)
        out = self._rebuild(iter(results))
        compared = _NON_TENSOR_COMPARISONS.get(name)
        if compared is not None and isinstance(args[0], TensorDictBase):
            _compare_non_tensors(out, self, args[0], compared)
        if with_inplace and source.is_locked:  # arithmetic keeps the lock (as the reference)
            out.lock_()
        return out

    def impl_(
        self: TensorDictBase, args: tuple[Any, ...], default: Any, kwargs: dict[str, Any]
    ) -> TensorDictBase:
        if kwargs:
            kwargs = {k: v for k, v in kwargs.items() if v is not None}
        leaves, operands, foreach_ok = gather(self, args, default, kwargs)
        _check_inplace(self, name + "_", leaves, operands, kwargs)
        if fe_ is not None and foreach_ok and leaves:
            try:
                fe_(leaves, *operands, **kwargs)
                return self
            except RuntimeError:
                if not _foreach_unsupported():
                    raise
        _leafwise(lambda x, *o: op_(x, *o, **kwargs), leaves, operands)
        return self

    operands = ", ".join(f"``{o}``" for o in row.operands)
    method = _signed(name, row.params, impl)
    method.__doc__ = (
        f"Apply :func:`torch.{row.torch_name or name}` leaf by leaf; {operands} may be "
        "tensordicts (matched by key), tensors or numbers."
    )
    if not with_inplace:
        return method, None
    method_ = _signed(name + "_", row.inplace_params, impl_)
    method_.__doc__ = f"In-place :meth:`{name}`."
    return method, method_


def _cast(
    self: TensorDictBase, fn: Callable[..., Any], cast_filter: Callable[..., Any] | None
) -> TensorDictBase:
    """Map ``fn`` over the tensor leaves, or over those where ``cast_filter(key, leaf)``."""
    if cast_filter is None:
        return self._map_tensors(fn)
    keys = [k for k, v in leaf_items(self) if isinstance(v, _Tensor)]
    leaves = self._flat_tensors([])
    return self._rebuild(
        iter([fn(x) if cast_filter(k, x) else x for k, x in zip(keys, leaves, strict=True)])
    )


def _make_cast(name: str, dtype: torch.dtype) -> Callable[..., Any]:
    def method(
        self: TensorDictBase, *, cast_filter: Callable[..., Any] | None = None
    ) -> TensorDictBase:
        return _cast(self, lambda x: x.to(dtype), cast_filter)

    method.__doc__ = (
        f"Cast every tensor leaf to ``{dtype}``; with ``cast_filter``, only the leaves for "
        "which ``cast_filter(key, leaf)`` is true (``key`` is a tuple).\n\n"
        "    >>> import torch\n"
        "    >>> from tensordict import TensorDict\n"
        f"    >>> TensorDict({{'a': torch.zeros(1)}}, [1]).{name}()['a'].dtype\n"
        f"    {dtype}\n"
    )
    return method


def _make_quantized(name: str, dtype: torch.dtype) -> Callable[..., Any]:
    def method(
        self: TensorDictBase,
        *,
        cast_filter: Callable[..., Any] | None = None,
        scale: float = 1.0,
        zero_point: int = 0,
    ) -> TensorDictBase:
        return _cast(
            self,
            lambda x: torch.quantize_per_tensor(
                x if x.dtype is torch.float32 else x.float(), scale, zero_point, dtype
            ),
            cast_filter,
        )

    method.__doc__ = (
        f"Quantize every tensor leaf to ``{dtype}`` with :func:`torch.quantize_per_tensor` "
        "(``scale``, ``zero_point``); ``cast_filter`` as for the other casts.\n\n"
        "    >>> import torch\n"
        "    >>> from tensordict import TensorDict\n"
        f"    >>> TensorDict({{'a': torch.ones(1)}}, [1]).{name}()['a'].dtype\n"
        f"    {dtype}\n"
    )
    return method


def _make_predicate(name: str) -> Callable[..., Any]:
    op = getattr(torch, name)

    def method(self: TensorDictBase) -> TensorDictBase:
        return self._rebuild(iter([op(x) for x in self._flat_tensors([])]))

    method.__doc__ = (
        f"A tensordict of booleans: :func:`torch.{name}` of every leaf.\n\n"
        "    >>> import torch\n"
        "    >>> from tensordict import TensorDict\n"
        "    >>> x = torch.tensor([1.0, float('nan'), float('inf'), -float('inf')])\n"
        "    >>> td = TensorDict({'a': x}, [4])\n"
        f"    >>> torch.equal(td.{name}()['a'], torch.{name}(x))\n"
        "    True\n"
    )
    return method


def _cast_type(
    self: TensorDictBase,
    dst_type: torch.dtype | str,
    *,
    cast_filter: Callable[..., Any] | None = None,
) -> TensorDictBase:
    """Cast every tensor leaf with :meth:`torch.Tensor.type` (a dtype or a tensor type name);
    ``cast_filter(key, leaf)`` picks the leaves to cast.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> TensorDict({"a": torch.zeros(1)}, [1]).type(torch.int64)["a"].dtype
    torch.int64
    """
    return _cast(self, lambda x: x.type(dst_type), cast_filter)


#: what ``td == other`` compares leaf by leaf (besides tensordicts and dicts)
_COMPARABLE = (_Tensor, bool, int, float, complex)


def _make_operator(dunder: str, method_name: str, reflected: bool) -> Callable[..., Any]:
    if reflected:
        op = getattr(torch, _torch_name(method_name))

        def reflected_op(self: TensorDictBase, other: Any) -> TensorDictBase:
            leaves = self._flat_tensors([])
            if is_tensor_collection(other):
                others = self._aligned_tensors(other, None)
                results = [op(o, x) for x, o in zip(leaves, others, strict=False)]
            else:
                results = [op(other, x) for x in leaves]
            return self._rebuild(iter(results))

        reflected_op.__name__ = dunder
        return reflected_op

    if method_name in ("eq", "ne"):

        def compare(self: TensorDictBase, other: Any) -> Any:
            if isinstance(other, Mapping) and not is_tensor_collection(other):
                other = _kinds.Dense(other, batch_size=self.batch_size)  # a dict: compared by key
            elif not isinstance(other, _COMPARABLE) and not is_tensor_collection(other):
                return NotImplemented  # another object: never equal (as the reference)
            return getattr(self, method_name)(other)

        compare.__name__ = dunder
        return compare

    def forward(self: TensorDictBase, other: Any) -> Any:
        return getattr(self, method_name)(other)

    forward.__name__ = dunder
    return forward


def _neg(self: TensorDictBase) -> TensorDictBase:
    return self.neg()


def _abs(self: TensorDictBase) -> TensorDictBase:
    return self.abs()


def _invert(self: TensorDictBase) -> TensorDictBase:
    return self._rebuild(iter([torch.bitwise_not(x) for x in self._flat_tensors([])]))


def _pos(self: TensorDictBase) -> TensorDictBase:
    return self


def rsub(
    self: TensorDictBase, other: Any, *, alpha: Any = None, default: Any = None
) -> TensorDictBase:
    """``other - alpha * self`` leaf by leaf (``default`` fills entries missing from a
    tensordict ``other``).

    >>> import torch
    >>> from tensordict import TensorDict
    >>> TensorDict({"a": torch.ones(2)}, [2]).rsub(3)["a"]
    tensor([2., 2.])
    """
    self = _batch_broadcast(self, (other,))
    leaves = self._flat_tensors([])
    other = _operands(self, other, leaves, default)
    alpha = 1 if alpha is None else alpha
    return self._rebuild(
        iter(_leafwise(lambda x, o: torch.rsub(x, o, alpha=alpha), leaves, [other]))
    )


def clamp(
    self: TensorDictBase, min: Any = None, max: Any = None, *, out: Any = None
) -> TensorDictBase:
    """Clamp every leaf to ``[min, max]`` (either bound may be a tensordict); with ``out``
    the result is written into that tensordict, which is returned.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> TensorDict({"a": torch.tensor([-2., 0., 2.])}, [3]).clamp(-1, 1)["a"]
    tensor([-1.,  0.,  1.])
    """
    self = _batch_broadcast(self, (min, max))
    leaves = self._flat_tensors([])
    lo, hi = _operands(self, min, leaves), _operands(self, max, leaves)
    result = self._rebuild(iter(_leafwise(lambda x, a, b: torch.clamp(x, a, b), leaves, [lo, hi])))
    if out is None:
        return result
    return out.copy_(result)  # type: ignore[no-any-return]


def _reduce_bool(name: str) -> Callable[..., Any]:
    def method(self: TensorDictBase, dim: int | None = None) -> Any:
        leaves = self._flat_tensors([])
        if dim is None:
            fn = torch.all if name == "all" else torch.any
            results = [bool(fn(x)) for x in leaves]
            return all(results) if name == "all" else any(results)
        nb = self.batch_dims
        d = normalize_dim(dim, nb)
        bs = self.batch_size
        new = bs[:d] + bs[d + 1 :]
        fn = torch.all if name == "all" else torch.any
        names = self.names if self._has_names() else None  # type: ignore[attr-defined]
        return self._map_batch(
            lambda x: fn(x, dim=d) if isinstance(x, _Tensor) else getattr(x, name)(dim=d),
            new,
            None if names is None else names[:d] + names[d + 1 :],
        )

    method.__doc__ = (
        f"Whether {'all' if name == 'all' else 'any'} leaf value is true (a Python bool), or "
        f"along batch dimension ``dim`` (a tensordict).\n\n"
        "    >>> import torch\n"
        "    >>> from tensordict import TensorDict\n"
        "    >>> td = TensorDict({'a': torch.tensor([True, False])}, [2])\n"
        f"    >>> td.{name}(), td.{name}(0)['a']\n"
        f"    ({name == 'any'}, tensor({name == 'any'}))\n"
    )
    return method


def install(cls: type) -> None:
    """Add every method of the tables above to ``cls``."""
    for name, dtype in QUANTIZED_CASTS.items():
        method = _make_quantized(name, dtype)
        method.__name__ = name
        setattr(cls, name, method)
    for name in PREDICATES:
        method = _make_predicate(name)
        method.__name__ = name
        setattr(cls, name, method)
    for name in UNARY:
        method, method_ = _make_unary(name)
        method.__name__, method_.__name__ = name, name + "_"
        setattr(cls, name, method)
        setattr(cls, name + "_", method_)
    for table, inplace in ((BINARY, True), (BINARY_NO_INPLACE, False)):
        for name, row in table.items():
            binary, binary_ = _make_binary(name, row, inplace)
            binary.__name__ = name
            setattr(cls, name, binary)
            if binary_ is not None:
                binary_.__name__ = name + "_"
                setattr(cls, name + "_", binary_)
    for name, dtype in CASTS.items():
        cast_method = _make_cast(name, dtype)
        cast_method.__name__ = name
        setattr(cls, name, cast_method)
    for dunder, (method_name, reflected) in OPERATORS.items():
        setattr(cls, dunder, _make_operator(dunder, method_name, reflected))
    for name in ("all", "any"):
        reduce_method = _reduce_bool(name)
        reduce_method.__name__ = name
        setattr(cls, name, reduce_method)
    _cast_type.__name__ = "type"
    setattr(cls, "type", _cast_type)  # noqa: B010 - installed on a class given at run time
    for func in (rsub, clamp):
        setattr(cls, func.__name__, func)
    installed: dict[str, Any] = {
        "__neg__": _neg,
        "__abs__": _abs,
        "__invert__": _invert,
        "__pos__": _pos,
        "__hash__": object.__hash__,
    }
    for name, value in installed.items():
        setattr(cls, name, value)
    _ops_state.install(cls)
