"""``CudaGraphModule``: replay a module's CUDA work as one captured CUDA graph.

After ``warmup`` eager calls, the next call copies its inputs into static buffers and
captures the module's kernels in a ``torch.cuda.CUDAGraph``; later calls copy their
inputs into the same buffers and replay the graph. The inputs must keep their structure,
shapes, dtypes and devices (a change raises a :class:`ValueError` naming it). Off CUDA the
module runs eagerly, with a warning the first time.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from tensordict import TensorDict, TensorDictBase, is_tensor_collection
from tensordict.nn._keys import as_key_list

__all__ = ["CudaGraphModule"]


def _signature(leaves: list[Any]) -> list[Any]:
    return [
        (tuple(x.shape), x.dtype, x.device) if isinstance(x, torch.Tensor) else ("value", x)
        for x in leaves
    ]


def _describe(sig: Any) -> str:
    if sig[0] == "value":
        return f"the value {sig[1]!r}"
    shape, dtype, device = sig
    return f"a tensor of shape {list(shape)}, {dtype}, on {device}"


class CudaGraphModule:
    """Wrap a module (or any callable) so that its CUDA work is captured and replayed.

    Args:
        module: a tensordict module (called with a tensordict, returning one) or a
            callable of tensors.
        warmup: eager calls before the capture (CUDA needs a few to settle allocations).
        in_keys, out_keys: for a tensordict module, the entries copied into the static
            input and read from the output (default: the module's keys; all entries when
            it has none).
        device: the CUDA device (default: the current one).

    The captured call returns new tensors (copies of the graph's static outputs), so
    results of earlier calls are not overwritten by later ones.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import CudaGraphModule, TensorDictModule
    >>> module = TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"])
    >>> graphed = CudaGraphModule(module, warmup=2)
    >>> out = graphed(TensorDict(x=torch.zeros(3)))  # doctest: +SKIP
    """

    _warned_eager = False

    def __init__(
        self,
        module: Callable[[list[torch.Tensor] | TensorDictBase], Any],
        warmup: int = 2,
        in_keys: list[Any] | None = None,
        out_keys: list[Any] | None = None,
        device: torch.device | None = None,
    ) -> None:
        self.module = module
        self.warmup = warmup
        self.in_keys = (
            as_key_list(in_keys, "in_keys")
            if in_keys is not None
            else getattr(module, "in_keys", None)
        )
        self.out_keys = (
            as_key_list(out_keys, "out_keys")
            if out_keys is not None
            else getattr(module, "out_keys", None)
        )
        self.device = torch.device(device) if device is not None else None
        self.counter = 0
        self._graph: torch.cuda.CUDAGraph | None = None
        self._static_in: list[Any] = []
        self._static_out: Any = None
        self._in_spec: Any = None
        self._signature: list[Any] | None = None

    # ------------------------------------------------------------------ helpers
    def _use_cuda(self) -> bool:
        if not torch.cuda.is_available():
            return False
        return self.device is None or self.device.type == "cuda"

    def _flatten_inputs(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[list[Any], Any]:
        if args and is_tensor_collection(args[0]) and not kwargs and len(args) == 1:
            td = args[0]
            keys = self.in_keys if self.in_keys else list(td.keys(True, True))
            leaves = [td.get(key) for key in keys]
            return leaves, ("td", keys, td.batch_size, td.device)
        leaves, spec = tree_flatten((args, kwargs))
        return leaves, ("tree", spec)

    def _rebuild_inputs(
        self, leaves: list[Any], spec: Any
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if spec[0] == "td":
            _, keys, batch_size, device = spec
            td = TensorDict(batch_size=batch_size, device=device)
            for key, value in zip(keys, leaves):
                td.set(key, value)
            return (td,), {}
        args, kwargs = tree_unflatten(leaves, spec[1])
        return args, kwargs

    def _read_outputs(self, out: Any) -> Any:
        if is_tensor_collection(out):
            keys = self.out_keys if self.out_keys else list(out.keys(True, True))
            return out.select(*keys)
        return out

    @staticmethod
    def _clone(out: Any) -> Any:
        if is_tensor_collection(out):
            return out.clone()
        leaves, spec = tree_flatten(out)
        return tree_unflatten(
            [x.clone() if isinstance(x, torch.Tensor) else x for x in leaves], spec
        )

    def _check(self, leaves: list[Any], spec: Any) -> None:
        sig = _signature(leaves)
        if spec[0] != self._in_spec[0] or (spec[0] == "tree" and spec[1] != self._in_spec[1]):
            raise ValueError(
                "CudaGraphModule: the inputs changed structure since the graph was captured "
                f"(captured {self._in_spec[1] if spec[0] == 'tree' else 'a tensordict'}); "
                "a captured graph replays fixed inputs only."
            )
        if spec[0] == "td" and spec[1] != self._in_spec[1]:
            raise ValueError(
                f"CudaGraphModule: the input keys changed from {self._in_spec[1]} to {spec[1]}."
            )
        assert self._signature is not None
        for i, (now, then) in enumerate(zip(sig, self._signature)):
            if now != then:
                where = spec[1][i] if spec[0] == "td" else f"input #{i}"
                raise ValueError(
                    f"CudaGraphModule: {where!r} is {_describe(now)} but the graph was captured "
                    f"with {_describe(then)}. Shapes, dtypes and devices must not change "
                    "after capture; build a new CudaGraphModule for other shapes."
                )

    # ------------------------------------------------------------------ call
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self._use_cuda():
            if not CudaGraphModule._warned_eager:
                warnings.warn(
                    "CudaGraphModule: CUDA is not available (or the device is not a CUDA "
                    "device); the module runs eagerly.",
                    UserWarning,
                    stacklevel=2,
                )
                CudaGraphModule._warned_eager = True
            return self.module(*args, **kwargs)
        if self._graph is None:
            self.counter += 1
            if self.counter <= self.warmup:
                stream = torch.cuda.Stream()  # type: ignore[no-untyped-call]
                stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(stream):
                    out = self.module(*args, **kwargs)
                torch.cuda.current_stream().wait_stream(stream)
                return out
            return self._capture(args, kwargs)
        leaves, spec = self._flatten_inputs(args, kwargs)
        self._check(leaves, spec)
        for static, value in zip(self._static_in, leaves):
            if isinstance(static, torch.Tensor):
                static.copy_(value)
        self._graph.replay()
        out = self._clone(self._static_out)
        if spec[0] == "td" and args[0] is not None:
            return args[0].update(out)
        return out

    def _capture(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        leaves, spec = self._flatten_inputs(args, kwargs)
        device = self.device or torch.device("cuda", torch.cuda.current_device())
        self._static_in = [
            x.detach().to(device).clone() if isinstance(x, torch.Tensor) else x for x in leaves
        ]
        self._in_spec = spec
        self._signature = _signature(self._static_in)
        static_args, static_kwargs = self._rebuild_inputs(self._static_in, spec)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = self.module(*static_args, **static_kwargs)
            self._static_out = self._read_outputs(out)
        self._graph = graph
        graph.replay()
        out = self._clone(self._static_out)
        if spec[0] == "td":
            return args[0].update(out)
        return out

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        """The wrapped module's state dict."""
        return self.module.state_dict(*args, **kwargs)  # type: ignore[attr-defined]

    def load_state_dict(self, *args: Any, **kwargs: Any) -> Any:
        """Load into the wrapped module (in place, so a captured graph sees the values)."""
        return self.module.load_state_dict(*args, **kwargs)  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        state = "captured" if self._graph is not None else f"warmup {self.counter}/{self.warmup}"
        return f"CudaGraphModule(module={self.module!r}, {state})"
