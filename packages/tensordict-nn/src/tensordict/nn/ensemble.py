"""``EnsembleModule``: several independently initialised copies of a module, run at
once with ``torch.vmap``."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch

from tensordict import TensorDictBase
from tensordict.nn._swap import entries_of, tree_to_td
from tensordict.nn._wrappers import DelegatedKeys
from tensordict.nn.common import TensorDictModuleBase, _is_collection
from tensordict.nn.functional_modules import td_from_module
from tensordict.nn.params import TensorDictParams

__all__ = ["EnsembleModule"]


def _tensor_tree(td: Any) -> dict[str, Any]:
    """The tensors of a tensordict as nested dicts (non-tensor entries left out)."""
    out: dict[str, Any] = {}
    for key, value in entries_of(td).items():
        if isinstance(value, torch.Tensor):
            out[key] = value
        elif _is_collection(value):
            out[key] = _tensor_tree(value)
    return out


def _weight_slots(params: Any, module: Any) -> tuple[list[tuple[Any, str]], list[Any]]:
    """The slots (``(mapping, name)``: the ``_parameters``, ``_buffers`` or ``__dict__``
    of the submodule holding it) of each tensor of ``params`` in ``module``, and those
    tensors, in the same order."""
    slots: list[tuple[Any, str]] = []
    tensors: list[Any] = []
    _collect(params, module, slots, tensors, ())
    return slots, tensors


def _collect(
    params: Any, module: Any, slots: list[Any], tensors: list[Any], path: tuple[str, ...]
) -> None:
    for key, value in entries_of(params).items():
        if isinstance(value, torch.Tensor):
            for owner in (module._parameters, module._buffers, module.__dict__):
                if key in owner:
                    slots.append((owner, key))
                    tensors.append(value)
                    break
            else:
                raise KeyError(
                    f"EnsembleModule: the module has no parameter or buffer "
                    f"{'.'.join((*path, key))!r}."
                )
        elif _is_collection(value):
            child = module._modules.get(key)
            if child is None:
                raise KeyError(
                    f"EnsembleModule: {'.'.join((*path, key))!r} names no submodule of "
                    f"{type(module).__name__}."
                )
            _collect(value, child, slots, tensors, (*path, key))


def _swapped(
    slots: list[Any], weights: list[Any], run: Callable[[Any], dict[str, Any]], data: Any
) -> dict[str, Any]:
    """``run(data)`` with ``weights`` in ``slots``; the slots are restored after."""
    olds = [owner[key] for owner, key in slots]
    for (owner, key), weight in zip(slots, weights, strict=True):
        owner[key] = weight
    try:
        return run(data)
    finally:
        for (owner, key), old in zip(slots, olds, strict=True):
            owner[key] = old


class EnsembleModule(DelegatedKeys):
    """Run ``num_copies`` copies of a tensordict module, each with its own parameters.

    The copies' parameters are stacked in ``params_td`` (a
    :class:`~tensordict.nn.TensorDictParams`, so they are trained like any parameter),
    each re-initialised with ``reset_parameters``. The call runs the module once per copy
    through ``torch.vmap``: outputs get a leading dimension of size ``num_copies``.

    Args:
        module: the tensordict module to copy.
        num_copies: how many copies.
        expand_input: expand the input along a new leading dimension (``False``: the
            input already has one, for instance the output of another ensemble).

    >>> import torch
    >>> from torch import nn
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import EnsembleModule, TensorDictModule
    >>> ensemble = EnsembleModule(
    ...     TensorDictModule(nn.Linear(3, 2), in_keys=["x"], out_keys=["y"]), num_copies=4)
    >>> ensemble(TensorDict(x=torch.randn(5, 3), batch_size=[5]))["y"].shape
    torch.Size([4, 5, 2])
    """

    def __init__(
        self, module: TensorDictModuleBase, num_copies: int, expand_input: bool = True
    ) -> None:
        super().__init__()
        if not isinstance(module, TensorDictModuleBase):
            raise TypeError(
                f"EnsembleModule needs a tensordict module (a TensorDictModuleBase, such as "
                f"TensorDictModule(module, in_keys=..., out_keys=...)); got a "
                f"{type(module).__name__}."
            )
        if num_copies < 1:
            raise ValueError(f"EnsembleModule needs num_copies >= 1; got {num_copies}.")
        params: Any = td_from_module(module).detach()
        stacked = params.expand(num_copies, *params.batch_size).clone()
        for i in range(num_copies):
            module.reset_parameters_recursive(stacked[i])
        # The template keeps the structure only: its own tensors move to the meta device.
        template = copy.deepcopy(module)
        meta: Any = td_from_module(template).detach()
        meta.to("meta").to_module(template, preserve_module_state=False)
        self.module = template
        self.params_td = TensorDictParams(stacked)
        self.num_copies = num_copies
        self.expand_input = expand_input

    def _key_owner(self) -> Any:
        return self._modules["module"]

    def forward(self, tensordict: Any) -> TensorDictBase:
        """Run every copy; the result has a leading dimension of size ``num_copies``."""
        if self.expand_input:  # every copy reads the same input: vmap does not split it
            inner_batch = tensordict.batch_size
        elif tensordict.batch_size[:1] != torch.Size([self.num_copies]):
            raise RuntimeError(
                f"EnsembleModule(expand_input=False) needs an input whose first batch "
                f"dimension is num_copies={self.num_copies}; got batch_size "
                f"{tuple(tensordict.batch_size)}."
            )
        else:
            inner_batch = tensordict.batch_size[1:]
        # torch.vmap sees a list of the weights (one pytree node; the floor of what it
        # walks), and the data as nested dicts of tensors (or not at all when every copy
        # reads the same input: a tensor the function closes over is not mapped over).
        # The tensordicts are rebuilt inside without validation, so nothing depends on
        # how vmap handles tensordicts (nor on tracing that), and the weights go straight
        # into the module's slots, found once per call.
        module = self.module
        slots, weights = _weight_slots(self.params_td, module)
        inputs = _tensor_tree(tensordict)

        def run(data: dict[str, Any]) -> dict[str, Any]:
            return _tensor_tree(module(tree_to_td(data, inner_batch)))

        if self.expand_input:

            def call_one(weights: list[Any]) -> dict[str, Any]:
                return _swapped(slots, weights, run, inputs)

            outputs = torch.vmap(call_one)(weights)
        else:

            def call_each(weights: list[Any], data: dict[str, Any]) -> dict[str, Any]:
                return _swapped(slots, weights, run, data)

            outputs = torch.vmap(call_each)(weights, inputs)
        return tree_to_td(outputs, torch.Size([self.num_copies, *inner_batch]))

    def reset_parameters_recursive(
        self, parameters: TensorDictBase | None = None
    ) -> TensorDictBase | None:
        """Re-initialise every copy (of ``parameters`` when given, else ``params_td``)."""
        target = self.params_td if parameters is None else parameters
        for i in range(target.batch_size[0]):
            self.module.reset_parameters_recursive(target[i])
        return parameters
