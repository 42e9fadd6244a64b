"""Shared helpers of the tensordict-core tests (importable: ``conftest.py`` puts this folder
on ``sys.path``; tests are collected with ``--import-mode=importlib``).

* :func:`leaves` — ``{key tuple: value}`` of every leaf (non-tensors unwrapped);
* :func:`assert_same` — two tensordicts hold the same batch size, keys and values;
* :func:`snapshot` / :func:`assert_unchanged` — a refused call left a tensordict as it was;
* :func:`tensor_leaves` — the same, tensors only;
* :func:`check_leafwise` — a result holds ``fn(leaf)`` for every tensor leaf of its input;
* :func:`non_tensor_containers` — the stored non-tensor containers (to test sharing);
* :func:`make_any_td` / :data:`ANY_TD_KINDS` — the tensordicts of the ``any_td`` fixture:
  dense, nested, lazy stacks on dims 0 and 1, and an indexed view, each with non-tensors;
* :func:`make_table_td` and its companions — what the ``test_method_tables_*`` modules share;
* :func:`load_tool` — a script of the repository's ``tools/`` folder, as a module.
"""

from __future__ import annotations

import importlib.util
import sys
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from tensordict import (
    LazyStackedTensorDict,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    TensorDictBase,
    is_leaf_nontensor,
)
from tensordict._engine.tree import leaf_items

#: The kinds of tensordict the ``any_td`` fixture gives, all of batch size ``ANY_BS``.
ANY_TD_KINDS = ("dense", "nested", "lazy0", "lazy1", "indexed")
ANY_BS = torch.Size([2, 3])


def _key(key: Any) -> tuple[str, ...]:
    return key if isinstance(key, tuple) else (key,)


def leaves(td: Any, *, tensors_only: bool = False) -> dict[tuple[str, ...], Any]:
    """``{key tuple: leaf}`` for every leaf of ``td`` (stacked for lazy stacks); non-tensor
    leaves as Python values: one value as itself (a ``NonTensorData``, or a stack holding
    the same value at every element: its ``.data``), a stack of values as nested lists."""
    out = {}
    for key, value in td.items(True, True, is_leaf=is_leaf_nontensor):
        if isinstance(value, torch.Tensor):
            out[_key(key)] = value
        elif not tensors_only:
            out[_key(key)] = _non_tensor_value(value)
    return out


def _non_tensor_value(value: Any) -> Any:
    if isinstance(value, NonTensorData):
        return value.data
    try:
        return value.data  # a stack of one value
    except AttributeError:
        return value.tolist()


def _same_value(got: Any, want: Any, key: Any, check_dtype: bool = True) -> None:
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor), key
        assert got.shape == want.shape, (key, got.shape, want.shape)
        if check_dtype:
            assert got.dtype == want.dtype, (key, got.dtype, want.dtype)
        else:
            want = want.to(got.dtype)
        assert torch.equal(got, want) or torch.allclose(got, want, equal_nan=True), key
    else:
        assert got == want, (key, got, want)


def _elements(value: Any) -> Any:
    """A non-tensor leaf as one value per batch element (nested lists)."""
    return value.tolist() if isinstance(value, (NonTensorData, NonTensorStack)) else value


def assert_same(
    actual: Any, expected: Any, *, exact: bool = False, check_dtype: bool = True, path: str = "td"
) -> None:
    """``actual`` and ``expected`` hold the same data: for tensordicts the same batch size,
    leaf keys and leaves (tensors: shape, dtype, values; non-tensors: one value per
    element); tensors equal; tuples and lists element by element; other values ``==``.

    ``exact`` also asks for the same types, key order, dimension names and device (a
    compiled result against the eager one); ``check_dtype=False`` compares tensor values
    after casting to the actual dtype.
    """
    if exact:
        assert type(actual) is type(expected), (path, type(actual), type(expected))
    if isinstance(expected, TensorDictBase):
        assert isinstance(actual, TensorDictBase), (path, type(actual))
        assert actual.batch_size == expected.batch_size, (
            path,
            actual.batch_size,
            expected.batch_size,
        )
        if exact:
            assert actual.names == expected.names, path
            assert actual.device == expected.device, path
            assert list(actual.keys()) == list(expected.keys()), path
        for key, sub in expected.items(include_nested=True):
            if isinstance(sub, TensorDictBase):
                assert actual.get(key).batch_size == sub.batch_size, (path, key)
        got = dict(actual.items(include_nested=True, leaves_only=True))
        want = dict(expected.items(include_nested=True, leaves_only=True))
        assert set(got) == set(want), (path, sorted(map(str, got)), sorted(map(str, want)))
        for key, value in want.items():
            _same_value(_elements(got[key]), _elements(value), (path, key), check_dtype)
    elif isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected), path
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, exact=exact, check_dtype=check_dtype, path=f"{path}[{i}]")
    else:
        _same_value(actual, expected, path, check_dtype)


def snapshot(td: Any) -> tuple[list[Any], dict[tuple[str, ...], Any], torch.Size]:
    """The keys, a copy of every leaf and the batch size of ``td`` (see :func:`assert_unchanged`)."""
    values = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in leaves(td).items()}
    return list(td.keys(include_nested=True)), values, td.batch_size


def assert_unchanged(
    td: Any, snap: tuple[list[Any], dict[tuple[str, ...], Any], torch.Size]
) -> None:
    """``td`` has the keys, leaf values and batch size recorded by :func:`snapshot`."""
    keys, values, batch_size = snap
    assert list(td.keys(include_nested=True)) == keys
    assert td.batch_size == batch_size
    got = leaves(td)
    assert set(got) == set(values)
    for key, value in values.items():
        _same_value(got[key], value, key)


def tensor_leaves(td: Any) -> dict[tuple[str, ...], torch.Tensor]:
    """``{key tuple: tensor}`` for every tensor leaf of ``td`` (stacked for lazy stacks)."""
    return leaves(td, tensors_only=True)


def check_leafwise(
    result: Any,
    td: Any,
    fn: Any,
    batch_size: Any = "same",
    *,
    keyed: bool = False,
    non_tensors: bool = True,
    rtol: float = 0.0,
    atol: float = 0.0,
) -> None:
    """``result[key] == fn(td[key])`` (``fn(key, td[key])`` with ``keyed``) for every tensor
    leaf of ``td``: same shape, dtype and values (NaN equal to NaN; within ``rtol``/``atol``
    when given).

    The result's batch size is ``batch_size`` (``"same"``: that of ``td``; ``None``: not
    checked), every container it holds (nested tensordict, non-tensor entry) has a batch
    size starting with its holder's, and with ``non_tensors`` the non-tensor leaves of
    ``td`` are in ``result`` with the same values.
    """
    if batch_size is not None:
        expected_bs = td.batch_size if batch_size == "same" else torch.Size(batch_size)
        assert result.batch_size == expected_bs, (result.batch_size, expected_bs)
    got = leaves(result)
    expected = tensor_leaves(td)
    assert set(tensor_leaves(result)) == set(expected), (sorted(got), sorted(expected))
    for key, value in expected.items():
        want = fn(key, value) if keyed else fn(value)
        assert key in got, key
        out = got[key]
        assert isinstance(out, torch.Tensor), key
        assert out.shape == want.shape, (key, out.shape, want.shape)
        assert out.dtype == want.dtype, (key, out.dtype, want.dtype)
        if rtol or atol:
            torch.testing.assert_close(out, want, atol=atol, rtol=rtol, equal_nan=True)
        else:
            assert torch.equal(out, want) or torch.allclose(out, want, equal_nan=True), key
    for key, value in result.items(include_nested=True):
        holder = result if not isinstance(key, tuple) else result.get(key[:-1])
        if not isinstance(value, torch.Tensor):
            n = holder.batch_dims
            assert value.batch_size[:n] == holder.batch_size, (key, value.batch_size)
    if non_tensors:
        for key, value in leaves(td).items():
            if not isinstance(value, torch.Tensor):
                assert got.get(key) == value, (key, got.get(key), value)


def non_tensor_containers(td: Any) -> dict[int, tuple[str, ...]]:
    """``{id: key}`` of every stored non-tensor container of ``td`` (a lazy stack's
    members' included)."""
    return {id(v): k for k, v in leaf_items(td) if isinstance(v, (NonTensorData, NonTensorStack))}


# ---------------------------------------------------------------------- any_td
def _values(seed: int, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return (torch.rand(*shape, generator=g) + 0.5).to(dtype)
    return torch.randint(1, 7, shape, generator=g, dtype=dtype)


def _member(seed: int, batch: tuple[int, ...], label: str) -> TensorDict:
    """A tensordict of batch ``batch`` with float/double leaves, a nested tensordict and
    a non-tensor label (different per member: stacking makes a ``NonTensorStack``)."""
    return TensorDict(
        {
            "a": _values(seed, *batch),
            "b": _values(seed + 1, *batch, 4, dtype=torch.float64),
            "n": {"c": _values(seed + 2, *batch, 2)},
            "label": label,
        },
        batch,
    )


def make_any_td(kind: str) -> Any:
    """A tensordict of batch size ``(2, 3)`` of the given kind (see :data:`ANY_TD_KINDS`),
    with tensor leaves of two dtypes, a nested tensordict, one non-tensor value
    (``"tag"``) and one value per element (``"label"``, a ``NonTensorStack``)."""
    if kind == "dense":
        td = TensorDict(
            {"a": _values(0, 2, 3), "b": _values(1, 2, 3, 4, dtype=torch.float64)}, ANY_BS
        )
    elif kind == "nested":
        td = TensorDict(
            {
                "a": _values(0, 2, 3),
                "n": TensorDict(
                    {"c": _values(2, 2, 3, 5, 2), "m": {"d": _values(3, 2, 3, 5)}}, [2, 3, 5]
                ),
                "b": _values(1, 2, 3, 4, dtype=torch.float64),
            },
            ANY_BS,
        )
    elif kind == "lazy0":
        lazy = LazyStackedTensorDict(
            *[_member(10 * i, (3,), f"row{i}") for i in range(2)], stack_dim=0
        )
        lazy.set_non_tensor("tag", "t")
        return lazy
    elif kind == "lazy1":
        lazy = LazyStackedTensorDict(
            *[_member(10 * i, (2,), f"col{i}") for i in range(3)], stack_dim=1
        )
        lazy.set_non_tensor("tag", "t")
        return lazy
    elif kind == "indexed":
        big = TensorDict(
            {
                "a": _values(0, 4, 3),
                "b": _values(1, 4, 3, 4, dtype=torch.float64),
                "n": {"c": _values(2, 4, 3, 2)},
            },
            [4, 3],
        )
        big.set(
            "label", NonTensorStack.from_list([[f"e{i}{j}" for j in range(3)] for i in range(4)])
        )
        td = big[1:3]
        td.set_non_tensor("tag", "t")
        return td
    else:
        raise ValueError(f"unknown any_td kind {kind!r}; expected one of {ANY_TD_KINDS}")
    td.set("label", NonTensorStack.from_list([[f"e{i}{j}" for j in range(3)] for i in range(2)]))
    td.set_non_tensor("tag", "t")
    return td


# ---------------------------------------------------------------------- tabular formats
def tabular_tds(
    dtypes: Any,
    *,
    max_depth: int = 2,
    trailing: bool = True,
    strings: bool = True,
    max_rows: int = 5,
) -> Any:
    """A hypothesis strategy of random tensordicts of one batch dimension for the tabular
    formats: random keys, nesting up to ``max_depth``, tensors of the ``dtypes`` with random
    bits (NaN payloads included), trailing dims when ``trailing``, string stacks when
    ``strings``."""
    from hypothesis import strategies as st

    key = st.text(alphabet="abcdxyz_", min_size=1, max_size=3)
    text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=4)

    @st.composite
    def build(draw: Any) -> TensorDict:
        n = draw(st.integers(0, max_rows))

        def level(depth: int) -> dict[str, Any]:
            out: dict[str, Any] = {}
            kinds = ["tensor", "tensor"] + (["str"] if strings else [])
            if depth < max_depth:
                kinds.append("nested")
            for name in draw(st.lists(key, min_size=1, max_size=4, unique=True)):
                kind = draw(st.sampled_from(kinds))
                if kind == "nested":
                    out[name] = TensorDict(level(depth + 1), batch_size=[n])
                elif kind == "str":
                    out[name] = NonTensorStack.from_list(
                        draw(st.lists(text, min_size=n, max_size=n)), ndim=1
                    )
                else:
                    dtype = draw(st.sampled_from(dtypes))
                    inner = draw(st.lists(st.integers(1, 3), max_size=2)) if trailing else []
                    shape = (n, *inner)
                    count = int(torch.Size(shape).numel())
                    if dtype is torch.bool:
                        bits = draw(st.lists(st.booleans(), min_size=count, max_size=count))
                        out[name] = torch.tensor(bits, dtype=torch.bool).reshape(shape)
                    else:
                        size = count * dtype.itemsize
                        raw = draw(st.binary(min_size=size, max_size=size))
                        out[name] = (
                            torch.frombuffer(bytearray(raw) or bytearray(1), dtype=torch.uint8)[
                                :size
                            ]
                            .view(dtype)
                            .reshape(shape)
                            .clone()
                        )
            return out

        return TensorDict(level(0), batch_size=[n])

    return build()


def assert_bitwise(actual: Any, expected: Any) -> None:
    """Same batch size, keys, tensor dtypes and shapes, tensor bytes (NaNs compared by
    their bits) and non-tensor values."""
    assert actual.batch_size == expected.batch_size, (actual.batch_size, expected.batch_size)
    want = leaves(expected)
    got = leaves(actual)
    assert set(got) == set(want), (sorted(got), sorted(want))
    for key, value in want.items():
        if isinstance(value, torch.Tensor):
            out = got[key]
            assert isinstance(out, torch.Tensor), key
            assert (out.dtype, out.shape) == (value.dtype, value.shape), (key, out, value)
            if value.numel():
                a = out.contiguous().reshape(-1).view(torch.uint8)
                b = value.contiguous().reshape(-1).view(torch.uint8)
                assert torch.equal(a, b), (key, out, value)
        else:
            assert got[key] == value, (key, got[key], value)


# --------------------------------------------------------------------------- method tables
#: the ``pytestmark`` of the method-table modules: the warnings torch gives for some rows
#: (std/var over one element, complex32 and quantized dtypes)
TABLE_WARNINGS = [
    pytest.mark.filterwarnings("ignore:.*degrees of freedom:UserWarning"),
    pytest.mark.filterwarnings("ignore:ComplexHalf support:UserWarning"),
    pytest.mark.filterwarnings("ignore:.*quantize_per_tensor:UserWarning"),
]
#: the batch size of :func:`make_table_td`
TABLE_BS = (2, 3)
FLOAT, INT = "float", "int"
#: a mask over :data:`TABLE_BS`
TABLE_MASK = torch.tensor([[True, False, True], [False, False, True]])


def make_table_td(kind: str = FLOAT, seed: int = 0) -> TensorDict:
    """The tensordict the method-table tests run every row on: batch (2, 3), a nested
    tensordict with one extra batch dim (5), mixed dtypes (float32/float64 for ``FLOAT``,
    int64/int32 for ``INT``), a non-tensor entry."""
    g = torch.Generator().manual_seed(seed)
    first, second = (torch.float32, torch.float64) if kind == FLOAT else (torch.int64, torch.int32)

    def r(*shape: int, dtype: torch.dtype = first) -> torch.Tensor:
        if dtype.is_floating_point:
            return torch.rand(*shape, generator=g, dtype=dtype) + 0.5
        return torch.randint(1, 7, shape, generator=g, dtype=dtype)

    return TensorDict(
        {
            "a": r(2, 3),
            "b": r(2, 3, 4, dtype=second),
            "n": TensorDict({"c": r(2, 3, 5, 2), "m": {"d": r(2, 3, 5)}}, [2, 3, 5]),
            "s": "label",
        },
        TABLE_BS,
    )


def holder_dims(td: Any) -> dict[tuple[str, ...], int]:
    """Key -> batch dims of the tensordict holding that leaf."""
    return {k: (td if len(k) == 1 else td[k[:-1]]).batch_dims for k in tensor_leaves(td)}


def assert_leaf_close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Same shape, same dtype, values close (NaNs equal; float-reduction tolerances)."""
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    torch.testing.assert_close(actual, expected, equal_nan=True, rtol=1e-5, atol=1e-6)


#: the method-table checks: ``fn(key, leaf)``, tolerances of float reductions, any batch size
table_check_leafwise = partial(check_leafwise, keyed=True, batch_size=None, rtol=1e-5, atol=1e-6)
#: the method-table checks over ``any_td`` (dense, nested, lazy stacks, indexed; float leaves)
table_check_any = partial(check_leafwise, rtol=1e-5, atol=1e-6)


def raises_for_some_leaf(td: Any, fn: Any) -> bool:
    """Whether ``fn`` raises (as torch does for an unsupported dtype) on some leaf of ``td``."""
    for value in tensor_leaves(td).values():
        try:
            fn(value)
        except (RuntimeError, TypeError, ValueError, NotImplementedError):
            return True
    return False


# --------------------------------------------------------------------------- tools
#: the repository's ``tools/`` folder (absent when the tests run outside a source checkout)
TOOLS = Path(__file__).resolve().parents[3] / "tools"


def load_tool(name: str) -> ModuleType:
    """``tools/<name>.py`` loaded as the module ``name`` (the scripts are not a package)."""
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
