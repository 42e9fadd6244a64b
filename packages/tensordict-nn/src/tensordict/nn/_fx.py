"""FX graphs of tensordict modules: :func:`symbolic_trace` and :class:`TDGraphModule`.

A :class:`~tensordict.nn.TensorDictModule` reads its ``in_keys``, calls a module and
writes its ``out_keys``; a :class:`~tensordict.nn.TensorDictSequential` chains such
modules through the keys. Tracing turns that into one :class:`torch.fx.Graph` whose only
input is the tensordict: every read of a key becomes ``tensordict[key]`` (once per key),
the wrapped modules' traced nodes are inlined, and a value written by one module and read
by a later one flows between their nodes directly. :class:`TDGraphModule` runs the graph
and writes the outputs back at the out_keys. The reference's module path is
``tensordict.prototype.fx``.
"""

from __future__ import annotations

import operator
from typing import Any

from torch import fx, nn

from tensordict import TensorDictBase
from tensordict._plugins.api import NestedKey
from tensordict.nn.common import TensorDictModule
from tensordict.nn.sequence import TensorDictSequential

__all__ = ["TDGraphModule", "symbolic_trace"]


class TDGraphModule(nn.Module):
    """A traced tensordict module: reads the in_keys, runs ``graph_module``, writes the
    outputs at ``out_keys`` (into ``tensordict_out`` when given, else the input).

    ``graph`` and ``code`` are those of the underlying :class:`torch.fx.GraphModule`.
    See :func:`symbolic_trace` for an example.
    """

    def __init__(self, graph_module: fx.GraphModule, out_keys: list[NestedKey]) -> None:
        super().__init__()
        self._gm = graph_module
        self.out_keys = list(out_keys)

    @property
    def graph(self) -> fx.Graph:
        return self._gm.graph

    @property
    def code(self) -> str:
        return self._gm.code

    def forward(
        self,
        tensordict: TensorDictBase,
        tensordict_out: TensorDictBase | None = None,
        **kwargs: Any,
    ) -> TensorDictBase:
        outputs = self._gm(tensordict, **kwargs)
        if not isinstance(outputs, (tuple, list)):
            outputs = (outputs,)
        if len(outputs) != len(self.out_keys):
            raise RuntimeError(
                f"the traced graph returned {len(outputs)} values for {len(self.out_keys)} "
                f"out_keys {self.out_keys}."
            )
        out = tensordict if tensordict_out is None else tensordict_out
        for key, value in zip(self.out_keys, outputs):
            if key != "_":  # the reference's "discard this output" key
                out.set(key, value)
        return out


def symbolic_trace(td_module: TensorDictModule | TensorDictSequential) -> TDGraphModule:
    """Trace a :class:`~tensordict.nn.TensorDictModule` or a
    :class:`~tensordict.nn.TensorDictSequential` (of such modules, nested sequences
    included) into a :class:`TDGraphModule` giving the same outputs. The wrapped modules
    must be traceable by :func:`torch.fx.symbolic_trace`.

    >>> import torch
    >>> from torch import nn
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import TensorDictModule, TensorDictSequential
    >>> seq = TensorDictSequential(
    ...     TensorDictModule(nn.Linear(3, 4), in_keys=["x"], out_keys=["h"]),
    ...     TensorDictModule(nn.Tanh(), in_keys=["h"], out_keys=["y"]),
    ... )
    >>> traced = symbolic_trace(seq)
    >>> out = traced(TensorDict(x=torch.ones(2, 3), batch_size=[2]))
    >>> torch.equal(out["y"], seq(TensorDict(x=torch.ones(2, 3), batch_size=[2]))["y"])
    True
    """
    if not isinstance(td_module, (TensorDictModule, TensorDictSequential)):
        raise TypeError(
            f"symbolic_trace traces a TensorDictModule or a TensorDictSequential; got "
            f"{type(td_module).__name__}."
        )
    graph = fx.Graph()
    tracer = _Inliner(td_module, graph)
    tracer.inline(td_module)
    out_keys = list(td_module.out_keys)
    missing = [key for key in out_keys if key not in tracer.written]
    if missing:
        raise RuntimeError(f"symbolic_trace: the out_keys {missing} are never written.")
    results = tuple(tracer.written[key] for key in out_keys)
    graph.output(results[0] if len(results) == 1 else results)
    return TDGraphModule(fx.GraphModule(td_module, graph), out_keys)


class _Inliner:
    """Builds one graph for a tree of tensordict modules, rooted at ``root``."""

    def __init__(self, root: nn.Module, graph: fx.Graph) -> None:
        self.graph = graph
        self.tensordict = graph.placeholder("tensordict")
        self.read: dict[Any, fx.Node] = {}  # key -> the node reading it from the input
        self.written: dict[Any, fx.Node] = {}  # key -> the node that computed its value
        self.paths = {id(m): name for name, m in root.named_modules()}

    def value_of(self, key: Any) -> fx.Node:
        if key in self.written:
            return self.written[key]
        if key not in self.read:
            self.read[key] = self.graph.call_function(operator.getitem, (self.tensordict, key))
        return self.read[key]

    def inline(self, module: nn.Module) -> None:
        if isinstance(module, TensorDictSequential):
            for child in module._module_list():
                self.inline(child)
            return
        if not isinstance(module, TensorDictModule):
            raise TypeError(
                f"symbolic_trace: cannot trace a {type(module).__name__} inside a sequence "
                f"(only TensorDictModule and TensorDictSequential)."
            )
        inner = module.module
        if not isinstance(inner, nn.Module):
            raise TypeError(
                f"symbolic_trace: the TensorDictModule with out_keys {module.out_keys} wraps "
                f"a {type(inner).__name__}, not an nn.Module; wrap it in an nn.Module to trace it."
            )
        traced = fx.Tracer().trace(inner)
        prefix = self.paths[id(inner)]
        env: dict[fx.Node, fx.Node] = {}
        placeholders = [n for n in traced.nodes if n.op == "placeholder"]
        for node, key in zip(placeholders, module.in_keys):
            env[node] = self.value_of(key)
        for node in traced.nodes:
            if node.op == "placeholder":
                continue
            if node.op == "output":
                outputs = node.args[0]
                if not isinstance(outputs, (tuple, list)):
                    outputs = (outputs,)
                for key, out in zip(module.out_keys, outputs):
                    self.written[key] = env[out]
                continue
            new = self.graph.node_copy(node, lambda n: env[n])
            if node.op in ("call_module", "get_attr") and prefix:
                new.target = f"{prefix}.{node.target}"
            env[node] = new
