"""Type-checked use of tensorclasses: mypy and pyright both check this file (``nox -s
lint``) and must report no error.

* ``assert_type(expr, T)`` pins what a type checker infers: fields keep their annotated
  types, and the tensordict methods that build a new instance return the class itself.
* A line that must be a type error carries both checkers' ignore comments
  (``# type: ignore[code]`` for mypy, ``# pyright: ignore[rule]`` for pyright). Both run
  with unused-ignore reporting on, so if the line stops being an error, the check fails.

It is also a plain script (``python packages/tensorclass/tests/typing/tensorclass_usage.py``)
and a test module imports and runs :func:`main`, so every line is working code.
"""

from __future__ import annotations

import sys
from typing import Any

import torch

import tensordict
from tensordict import TensorClass, TypedTensorDict, tensorclass

if sys.version_info >= (3, 11):
    from typing import assert_type
else:  # pragma: no cover - python 3.10
    from typing_extensions import assert_type


class Batch(TensorClass):
    obs: torch.Tensor
    reward: torch.Tensor
    label: str = "train"


class Frozen(TensorClass, frozen=True):
    x: torch.Tensor


@tensorclass
class Point:
    """The decorator form: type checkers see the fields and their types (the decorator is
    a ``dataclass_transform``); the tensordict methods and the ``batch_size`` keyword need
    the ``TensorClass`` base, which a decorator cannot add to what a checker sees."""

    x: torch.Tensor
    tag: str = "p"


class State(TypedTensorDict):
    eta: torch.Tensor
    X: torch.Tensor


def fields_and_constructor() -> Batch:
    b = Batch(obs=torch.zeros(4, 3), reward=torch.zeros(4, 1), batch_size=[4])
    assert_type(b.obs, torch.Tensor)
    assert_type(b.label, str)
    assert_type(b.batch_size, torch.Size)
    assert_type(b.device, torch.device | None)
    positional = Batch(torch.zeros(2, 3), torch.zeros(2, 1), "eval", batch_size=2, device="cpu")
    assert_type(positional, Batch)
    return b


def methods_return_the_class(b: Batch) -> None:
    assert_type(b[0], Batch)
    assert_type(b[1:3], Batch)
    assert_type(b.clone(), Batch)
    assert_type(b.to(torch.float64), Batch)
    assert_type(b.reshape(2, 2), Batch)
    assert_type(b.unbind(0), tuple[Batch, ...])
    assert_type(b + 1, Batch)
    assert_type(Batch.stack([b, b]), Batch)
    assert_type(Batch.cat([b, b]), Batch)
    stacked: Batch = torch.stack([b, b])  # type: ignore[assignment, list-item]  # pyright: ignore[reportArgumentType,reportAssignmentType]  # TORCH: torch.stack's stub takes tensors; at run time it returns a Batch
    assert isinstance(stacked, Batch)
    assert_type(tensordict.TensorDict.stack([b, b]).batch_size, torch.Size)


def errors(b: Batch) -> None:
    try:
        Batch(obs=torch.zeros(4, 3), batch_size=[4])  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]  # missing field
    except TypeError:
        pass
    try:
        Batch(obs=b.obs, reward=b.reward, rewards=b.reward)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]  # wrong keyword
    except TypeError:
        pass
    try:
        b.obs = "a string"  # type: ignore[assignment]  # pyright: ignore[reportAttributeAccessIssue]  # wrong field type
    except (TypeError, RuntimeError):
        pass


def decorated() -> None:
    p = Point(x=torch.zeros(3))
    assert_type(p.x, torch.Tensor)
    assert_type(p.tag, str)
    assert isinstance(p, Point)
    try:
        Point(tag="q")  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]  # missing field
    except TypeError:
        pass


def typed_tensordict() -> None:
    state = State(eta=torch.zeros(5, 3), X=torch.zeros(5, 4), batch_size=[5])
    assert_type(state.eta, torch.Tensor)
    assert_type(state[0], State)
    assert_type(state["eta"], Any)  # an entry read by key: not the class
    assert (state["eta"] == 0).all()
    assert_type(state.clone(), State)
    try:
        State(torch.zeros(5, 3), torch.zeros(5, 4))  # type: ignore[call-arg, arg-type]  # pyright: ignore[reportCallIssue]  # keyword-only fields
    except TypeError:
        pass
    frozen = Frozen(x=torch.zeros(2), batch_size=[2])
    assert_type(frozen.x, torch.Tensor)


def main() -> None:
    b = fields_and_constructor()
    methods_return_the_class(b)
    errors(b)
    decorated()
    typed_tensordict()


if __name__ == "__main__":
    main()
