"""``EnsembleModule``: several independently initialised copies of a module, run at
once with ``torch.vmap``."""

from __future__ import annotations

import copy
from typing import Any

import torch

from tensordict import TensorDictBase
from tensordict.nn._swap import Swapper, entries_of, tree_to_td
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
        # torch.vmap sees nested dicts of tensors: the tensordicts are rebuilt inside
        # without validation, so nothing depends on how vmap handles tensordicts (nor on
        # tracing that), and the weights go straight into the module (no tensordict).
        params = _tensor_tree(self.params_td)
        inputs = _tensor_tree(tensordict)
        module = self.module

        def call_one(weights: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
            swapper = Swapper()
            swapper.write(weights, module, {})
            try:
                out = module(tree_to_td(data, inner_batch))
            finally:
                swapper.rollback()
            return _tensor_tree(out)

        in_dims = (0, None if self.expand_input else 0)
        outputs = torch.vmap(call_one, in_dims)(params, inputs)
        return tree_to_td(outputs, torch.Size([self.num_copies, *inner_batch]))

    def reset_parameters_recursive(
        self, parameters: TensorDictBase | None = None
    ) -> TensorDictBase | None:
        """Re-initialise every copy (of ``parameters`` when given, else ``params_td``)."""
        target = self.params_td if parameters is None else parameters
        for i in range(target.batch_size[0]):
            self.module.reset_parameters_recursive(target[i])
        return parameters
