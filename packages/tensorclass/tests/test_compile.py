"""torch.compile(fullgraph=True) of the common operations on instances, equal to eager."""

from __future__ import annotations

import pytest
import torch
from tc_helpers import assert_same_data

from tensordict import TensorClass, TensorDict

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


class Pair(TensorClass):
    obs: torch.Tensor
    reward: torch.Tensor
    label: str = "x"


class Shadowing(TensorClass, shadow=True):
    names: torch.Tensor
    sum: torch.Tensor


def construct(obs: torch.Tensor, reward: torch.Tensor) -> Pair:
    return Pair(obs=obs, reward=reward, batch_size=[4])


def read(p: Pair) -> torch.Tensor:
    return p.obs * 2 + p.reward


def write(p: Pair, x: torch.Tensor) -> Pair:
    p.obs = x + 1
    return p


CASES = {
    "construct": (construct, lambda: (torch.randn(4, 3), torch.randn(4, 1))),
    "read": (read, lambda: (construct(torch.randn(4, 3), torch.randn(4, 1)),)),
    "write": (write, lambda: (construct(torch.randn(4, 3), torch.randn(4, 1)), torch.randn(4, 3))),
    "clone": (lambda p: p.clone(), lambda: (construct(torch.randn(4, 3), torch.randn(4, 1)),)),
    "index": (lambda p: p[1:3], lambda: (construct(torch.randn(4, 3), torch.randn(4, 1)),)),
    "index_int": (lambda p: p[0], lambda: (construct(torch.randn(4, 3), torch.randn(4, 1)),)),
    "stack": (
        lambda p: torch.stack([p, p], 1),
        lambda: (construct(torch.randn(4, 3), torch.randn(4, 1)),),
    ),
    "to": (
        lambda p: p.to(torch.float64),
        lambda: (construct(torch.randn(4, 3), torch.randn(4, 1)),),
    ),
    "shadow": (
        lambda x: Shadowing(names=x, sum=x * 2, batch_size=[4]).clone()[1:].sum,
        lambda: (torch.randn(4, 3),),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiles_without_graph_breaks_and_matches_eager(name):
    fn, make_args = CASES[name]
    torch._dynamo.reset()
    eager_args, compiled_args = make_args(), None
    compiled_args = tuple(a.clone() if hasattr(a, "clone") else a for a in eager_args)
    expected = fn(*eager_args)
    got = torch.compile(fn, fullgraph=True)(*compiled_args)
    assert type(got) is type(expected)
    if isinstance(expected, torch.Tensor):
        assert torch.equal(got, expected)
    else:
        assert_same_data(got, expected)


class Scaled(TensorClass):
    obs: torch.Tensor
    scaled: torch.Tensor = None
    nested: TensorDict = None

    def __post_init__(self):
        self.scaled = self.obs * 2


@pytest.mark.parametrize(
    "fn",
    [
        lambda o: Scaled(obs=o, batch_size=[4]).scaled,  # written by __post_init__
        lambda o: _reassigned(Scaled(obs=o, batch_size=[4]), o).obs,
        lambda o: _nested(Scaled(obs=o, batch_size=[4]), o).nested["z"],
    ],
    ids=["post_init", "reassigned", "nested"],
)
def test_fields_written_inside_compiled_code_read_back(fn):
    obs = torch.randn(4, 3)
    torch._dynamo.reset()
    got = torch.compile(fn, fullgraph=True)(obs)
    assert torch.equal(got, fn(obs))


def _reassigned(p, o):
    p.obs = o.double() + 1
    return p


def _nested(p, o):
    p.nested = TensorDict(z=o * 3, batch_size=[4])
    return p


def test_nested_compile_region_takes_and_returns_instances():
    # the region flattens the instance as a pytree; the class and its non-tensor field
    # come back (the eager call is the expectation)
    def step(pair):
        return pair.apply(lambda x: x * 2 + 1)

    region = torch.compiler.nested_compile_region(step)

    @torch.compile(fullgraph=True, backend="eager")
    def twice(pair):
        return region(region(pair))

    pair = Pair(obs=torch.arange(3.0), reward=torch.ones(3, 2), label="run", batch_size=[3])
    out = twice(pair)
    expected = step(step(pair))
    assert type(out) is Pair and out.label == "run"
    assert_same_data(out, expected)
