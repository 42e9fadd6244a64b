"""``torch.func.jacrev``/``jacfwd``/``hessian`` through tensordicts: the Jacobian of a
tensordict-valued function is a tensordict of tensordicts, with the input's batch size,
and equals the Jacobians torch computes on the plain tensors."""

from __future__ import annotations

import pytest
import torch
from torch.func import hessian, jacfwd, jacrev

from tensordict import TensorDict


def _f(td: TensorDict) -> TensorDict:
    return TensorDict(x=td["a"] ** 2, y=td["b"] ** 3 + td["a"], batch_size=td.batch_size)


def _plain(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return a**2, b**3 + a


@pytest.mark.parametrize("batch_size", [(), (2,), (2, 3)])
@pytest.mark.parametrize("transform", [jacrev, jacfwd])
def test_jacobian_matches_torch(batch_size: tuple, transform: object) -> None:
    torch.manual_seed(0)
    a, b = torch.randn(*batch_size, 4), torch.randn(*batch_size, 4)
    td = TensorDict(a=a, b=b, batch_size=batch_size)
    J = transform(_f)(td)  # type: ignore[operator]
    assert J.batch_size == td.batch_size
    expected = transform(_plain, argnums=(0, 1))(a, b)  # type: ignore[operator]
    for i, out in enumerate("xy"):
        for j, inp in enumerate("ab"):
            assert torch.allclose(J[out, inp], expected[i][j]), (out, inp)


@pytest.mark.parametrize("batch_size", [(), (2,)])
def test_hessian_matches_torch(batch_size: tuple) -> None:
    a = torch.randn(*batch_size, 3)
    td = TensorDict(a=a, batch_size=batch_size)

    def f(td: TensorDict) -> torch.Tensor:
        return (td["a"] ** 3).sum()

    H = hessian(f)(td)
    assert H.batch_size == td.batch_size
    assert torch.allclose(H["a", "a"], hessian(lambda x: (x**3).sum())(a))
