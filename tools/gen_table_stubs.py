"""Generate ``tensordict/_table_api.pyi``: type declarations for the methods that
``tensordict._engine.ops.install`` (with ``_ops_reduce`` and ``_ops_batch``) and
``tensordict._plugins.forwarders.install`` add to
``TensorDictBase`` from their tables at import time, and for the shared interface that
every tensordict kind implements (the methods ``TensorDict`` and ``LazyStackedTensorDict``
both define), so that code annotated with ``TensorDictBase`` sees every method.

Type checkers cannot see methods added with ``setattr``; ``TensorDictBase`` therefore
derives (for type checkers only) from the ``TableMethods`` class declared in the
generated stub. The stub is built from the same tables, so it cannot drift from them:

    python tools/gen_table_stubs.py           # rewrite the stub
    python tools/gen_table_stubs.py --check   # fail if it is stale (run by `nox -s lint`)
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STUB = ROOT / "packages/tensordict-core/src/tensordict/_table_api.pyi"


_SHADOWED = re.compile(r"(?<![\w.])(int|float|bool|str|complex|type)\b")


def _annotation(ann: object) -> str:
    """A signature annotation (a string under ``from __future__ import annotations``) as
    stub text; builtins shadowed by cast methods (``int()``, ``float()``…) are qualified."""
    text = ann if isinstance(ann, str) else getattr(ann, "__name__", repr(ann))
    text = re.sub(r"(?<![\w.])Callable(?!\[)", "Callable[..., Any]", text)
    return _SHADOWED.sub(r"builtins.\1", text)


def _def(name: str, params: list[str], ret: str) -> str:
    """A stub ``def`` laid out as ``ruff format`` lays it out (lines of at most 100)."""
    one = f"    def {name}({', '.join(params)}) -> {ret}: ..."
    if len(one) <= 100:
        return one
    middle = f"        {', '.join(params)}"
    if len(middle) <= 100:
        return f"    def {name}(\n{middle}\n    ) -> {ret}: ..."
    body = "".join(f"        {p},\n" for p in params)
    return f"    def {name}(\n{body}    ) -> {ret}: ..."


def _params(func: object) -> list[str]:
    """``[self, a: T = ..., *, b: U = ...]`` from the runtime signature of an installed method."""
    sig = inspect.signature(func)  # type: ignore[arg-type]
    out = []
    star = False
    for i, p in enumerate(sig.parameters.values()):
        if i == 0:
            out.append("self")
            continue
        ann = "Any" if p.annotation is p.empty else _annotation(p.annotation)
        if p.kind is p.VAR_POSITIONAL:
            out.append(f"*{p.name}: {ann}")
            star = True
            continue
        if p.kind is p.VAR_KEYWORD:
            out.append(f"**{p.name}: {ann}")
            continue
        if p.kind is p.KEYWORD_ONLY and not star:
            out.append("*")
            star = True
        out.append(f"{p.name}: {ann}" + ("" if p.default is p.empty else " = ..."))
    return out


def _reduction_overloads(name: str, method: object, add: Callable[[str], None]) -> None:
    """``reduce=True`` returns one tensor; otherwise a tensordict (or values/indices)."""
    params = _params(method)
    i = params.index("reduce: builtins.bool | None = ...")
    other = "Any" if name in ("max", "min") else "Self"
    add("    @overload")
    add(_def(name, params[:i] + ["reduce: Literal[True]"] + params[i + 1 :], "torch.Tensor"))
    add("    @overload")
    add(_def(name, params[:i] + ["reduce: Literal[False] | None = ..."] + params[i + 1 :], other))


#: shared methods whose result is a dense ``TensorDict`` whatever the input's kind.
_DENSE_RESULT = {"data_ptr", "pad", "to_padded_tensor"}


def _annotation_text(text: str, dense: bool) -> str:
    """An implementation's annotation for the stub: ``TensorDict`` results become ``Self``
    (a lazy stack's method returns a lazy stack) unless ``dense``; bare ``Callable`` gets
    its parameters."""
    for alias, cls in _KIND_NAMES.items():  # core's lower layers name the kinds this way
        text = re.sub(rf"(?<![\w.]){re.escape(alias)}(?![\w])", cls, text)
    if not dense:
        text = re.sub(r"(?<![\w.])TensorDict(?![\w])", "Self", text)
    return re.sub(r"(?<![\w.])Callable(?!\[)", "Callable[..., Any]", text)


#: the kinds as ``tensordict._kinds.kinds`` binds them -> the classes the stub imports
_KIND_NAMES = {
    "_kinds.Dense": "TensorDict",
    "_kinds.Base": "TensorDictBase",
    "_kinds.Lazy": "LazyStackedTensorDict",
}


def _shared_interface(add: Callable[[str], None]) -> None:
    """The methods every tensordict kind implements (``TensorDict`` and
    ``LazyStackedTensorDict`` both define them) that ``TensorDictBase`` does not define
    itself, with the dense implementation's parameters: the interface users and siblings
    annotate with ``TensorDictBase``."""
    from tensordict import LazyStackedTensorDict, TensorDict

    names = sorted(
        n
        for n in set(dir(TensorDict)) & set(dir(LazyStackedTensorDict))
        if not n.startswith("_") and (_declared_at_run_time(n) or not _on_base(n))
    )
    for name in names:
        attr = inspect.getattr_static(TensorDict, name)
        dense = name in _DENSE_RESULT
        if isinstance(attr, property):
            ret = _annotation_text(str(inspect.signature(attr.fget).return_annotation), dense)
            add("    @property")
            add(f"    def {name}(self) -> {_annotation(ret)}: ...")
            if attr.fset is not None:
                value = list(inspect.signature(attr.fset).parameters.values())[1]
                ann = _annotation(_annotation_text(str(value.annotation), dense))
                add(f"    @{name}.setter")
                add(f"    def {name}(self, value: {ann}) -> None: ...")
            continue
        func = attr.__func__ if isinstance(attr, classmethod) else attr
        sig = inspect.signature(func)
        params = [_annotation_text(p, dense) for p in _params(func)]
        ret = _annotation(_annotation_text(str(sig.return_annotation), dense))
        if isinstance(attr, classmethod):
            add("    @classmethod")
            params[0] = "cls"
        add(_def(name, params, ret))


def _declared_at_run_time(name: str) -> bool:
    """Whether ``TensorDictBase`` gets ``name`` when ``import tensordict`` runs (a shared
    method installed from a mixin, or a placeholder of a kind method): type checkers see
    it only through the stub."""
    from tensordict._base.kind_methods import is_placeholder
    from tensordict._shared.install import INSTALLED
    from tensordict.base import TensorDictBase

    return name in INSTALLED or is_placeholder(TensorDictBase.__dict__.get(name))


def _on_base(name: str) -> bool:
    """Whether a class of ``TensorDictBase``'s own MRO (its mixins) defines ``name``."""
    from tensordict.base import TensorDictBase

    return any(name in cls.__dict__ for cls in TensorDictBase.__mro__)


def render() -> str:
    from tensordict._engine import ops as _ops
    from tensordict._engine import ops_batch as _ops_batch
    from tensordict._engine import ops_reduce as _ops_reduce
    from tensordict._plugins import forwarders as _forwarders
    from tensordict.base import TensorDictBase

    lines = [
        "# Generated by tools/gen_table_stubs.py from the tables in tensordict._engine.ops and",
        "# tensordict._plugins.forwarders. Do not edit by hand. (Annotations say builtins.bool and",
        "# builtins.int because the cast methods bool() and int() shadow them here.)",
        "import builtins",
        "from collections import OrderedDict",
        "from collections.abc import Callable, Mapping, Sequence",
        "from pathlib import Path",
        "from typing import Any, Literal, overload",
        "",
        "import torch",
        "from typing_extensions import Self",
        "",
        "from tensordict._keys.nested import NestedKey",
        "",
        "# the classes as tensordict._kinds.kinds binds them: a stub of base's layer imports",
        "# no layer above it (tools/check_imports.py)",
        "from tensordict._kinds.kinds import Base as TensorDictBase",
        "from tensordict._kinds.kinds import Dense as TensorDict",
        "",
        "class TableMethods:",
    ]
    add = lines.append
    for name in _ops.UNARY:
        add(f"    def {name}(self) -> Self: ...")
        add(f"    def {name}_(self) -> Self: ...")
    for table, inplace in ((_ops.BINARY, True), (_ops.BINARY_NO_INPLACE, False)):
        for name in table:
            add(_def(name, _params(getattr(TensorDictBase, name)), "Self"))
            if inplace:
                add(_def(name + "_", _params(getattr(TensorDictBase, name + "_")), "Self"))
    for name in _ops.CASTS:
        add(_def(name, _params(getattr(TensorDictBase, name)), "Self"))
    for dunder in _ops.OPERATORS:
        ignore = "  # type: ignore[override]" if dunder in ("__eq__", "__ne__") else ""
        arg = "object" if ignore else "Any"
        add(f"    def {dunder}(self, other: {arg}) -> Self: ...{ignore}")
    for name in ("__neg__", "__abs__", "__invert__", "__pos__"):
        add(f"    def {name}(self) -> Self: ...")
    for name in ("all", "any"):
        add("    @overload")
        add(f"    def {name}(self, dim: None = None) -> builtins.bool: ...")
        add("    @overload")
        add(f"    def {name}(self, dim: builtins.int) -> Self: ...")
    add(_def("rsub", _params(TensorDictBase.rsub), "Self"))  # type: ignore[attr-defined]
    add(_def("clamp", _params(TensorDictBase.clamp), "Self"))  # type: ignore[attr-defined]
    add("    def zero_(self) -> Self: ...")
    add("    def fill_(self, key: Any, value: Any) -> Self: ...")
    add("    def detach(self) -> Self: ...")
    add("    def detach_(self) -> Self: ...")
    add("    def contiguous(self) -> TensorDictBase: ...")  # a lazy stack's is dense
    add("    def is_contiguous(self) -> builtins.bool: ...")
    add("    def requires_grad_(self, requires_grad: builtins.bool = True) -> Self: ...")
    add("    def is_floating_point(self) -> builtins.bool: ...")
    add("    def zero_grad(self, set_to_none: builtins.bool = True) -> Self: ...")
    flags = ("use_global_sum", "retain_graph", "create_graph")
    defaults = ("True", "False", "False")
    backward = [f"{f}: builtins.bool = {d}" for f, d in zip(flags, defaults)]
    add(_def("backward", ["self", *backward], "None"))
    add("    def as_tensor(self) -> Self: ...")
    add("    @property")
    add("    def grad(self) -> Self: ...")
    add("    @property")
    add("    def requires_grad(self) -> builtins.bool: ...")
    add("    @property")
    add("    def data(self) -> Self: ...")
    add("    @property")
    add("    def dtype(self) -> Any: ...")
    for name in _ops.QUANTIZED_CASTS:
        add(_def(name, _params(getattr(TensorDictBase, name)), "Self"))
    for name in _ops.PREDICATES:
        add(f"    def {name}(self) -> Self: ...")
    add(_def("type", _params(TensorDictBase.type), "Self"))  # type: ignore[attr-defined]
    for name in _ops_reduce.REDUCTIONS:
        _reduction_overloads(name, getattr(TensorDictBase, name), add)
    for name in _ops_reduce.CUMULATIVE:
        add(_def(name, _params(getattr(TensorDictBase, name)), "Any"))
    for name in (*_ops_batch.BATCH_OPS, *_ops_batch.NEW, *_ops_batch.METHODS):
        add(_def(name, _params(getattr(TensorDictBase, name)), "Self"))
    _shared_interface(add)
    for name, _sub, _hook, kind, _doc in _forwarders.FORWARDERS:
        if kind == "classmethod":
            add("    @classmethod")
            add(f"    def {name}(cls, *args: Any, **kwargs: Any) -> Any: ...")
        elif kind == "property":
            add("    @property")
            add(f"    def {name}(self) -> Any: ...")
        else:
            add(f"    def {name}(self, *args: Any, **kwargs: Any) -> Any: ...")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if the stub is stale")
    args = parser.parse_args()
    text = render()
    if args.check:
        if not STUB.exists() or STUB.read_text() != text:
            print(f"{STUB.relative_to(ROOT)} is stale: run python tools/gen_table_stubs.py")
            return 1
        print(f"{STUB.relative_to(ROOT)} is up to date")
        return 0
    STUB.write_text(text)
    print(f"wrote {STUB.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
