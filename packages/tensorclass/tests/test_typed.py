"""TypedTensorDict: the field machinery as a tensordict (``td["key"]``, keyword fields)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from tensordict import (
    LazyStackedTensorDict,
    NonTensorData,
    TensorDict,
    TensorDictBase,
    TypedTensorDict,
)


class State(TypedTensorDict):
    eta: torch.Tensor
    X: torch.Tensor
    label: str = "s"


def make_state() -> State:
    return State(eta=torch.randn(5, 3), X=torch.randn(5, 4), batch_size=[5])


def test_fields_and_keys():
    s = make_state()
    assert isinstance(s, TensorDictBase) and not getattr(State, "_is_tensorclass", False)
    assert s.eta is s["eta"] and s.X.shape == (5, 4)
    assert isinstance(s.label, NonTensorData) and s["label"] == "s"
    assert dict(**s).keys() == {"eta", "X", "label"}
    s["X"] = torch.zeros(5, 4)
    assert torch.equal(s.X, torch.zeros(5, 4))


def test_operations_keep_the_class():
    s = make_state()
    for out in (s[0], s[1:3], s.clone(), s + 1, torch.stack([s, s]), s.to(torch.float64)):
        assert type(out) is State
    assert torch.equal(s[2].eta, s.eta[2])


def test_constructor_is_keyword_only_and_checked():
    with pytest.raises(TypeError, match="positional"):
        State(torch.zeros(5, 3), torch.zeros(5, 4))
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'X'"):
        State(eta=torch.zeros(5, 3))
    with pytest.raises(TypeError, match="unexpected keyword argument 'Y'"):
        State(eta=torch.zeros(5, 3), X=torch.zeros(5, 4), Y=1)


def test_subclass_adds_fields():
    class Extended(State):
        extra: torch.Tensor = None

    e = Extended(eta=torch.zeros(2, 3), X=torch.zeros(2, 4), extra=torch.ones(2), batch_size=[2])
    assert [f.name for f in dataclasses.fields(Extended)] == ["eta", "X", "label", "extra"]
    assert torch.equal(e.extra, torch.ones(2))


def test_from_tensordict_shares_any_backend():
    td = TensorDict(eta=torch.zeros(3, 3), X=torch.zeros(3, 4), batch_size=[3])
    s = State.from_tensordict(td)
    s.eta += 1
    assert torch.equal(td["eta"], torch.ones(3, 3)) and s._tensordict is td
    with pytest.raises(TypeError, match=r"missing required field\(s\): X"):
        State.from_tensordict(TensorDict(eta=torch.zeros(3), batch_size=[3]))
    partial = State.from_tensordict(TensorDict(batch_size=[3]), check=False)
    assert partial.eta is None
    lazy = LazyStackedTensorDict(
        TensorDict(eta=torch.zeros(3), X=torch.zeros(1)),
        TensorDict(eta=torch.ones(3), X=torch.zeros(2)),
    )
    typed = State.from_tensordict(lazy)
    assert torch.equal(typed.eta, torch.stack([torch.zeros(3), torch.ones(3)]))


def test_options():
    class Frozen(TypedTensorDict["frozen"]):
        x: torch.Tensor

    f = Frozen(x=torch.zeros(2), batch_size=[2])
    assert f.is_locked
    with pytest.raises(RuntimeError, match="frozen"):
        f.x = torch.ones(2)

    class Shadow(TypedTensorDict, shadow=True):
        sum: torch.Tensor

    assert torch.equal(Shadow(sum=torch.ones(2)).sum, torch.ones(2))
    with pytest.warns(DeprecationWarning, match="no effect"):

        class Ignored(TypedTensorDict, autocast=True):
            x: torch.Tensor

    with pytest.raises(TypeError, match="TypedTensorDict"):
        TypedTensorDict["autocast"]


class Optionals(TypedTensorDict):
    x: torch.Tensor
    nested: TensorDict
    y: torch.Tensor | None = None


def make_optionals() -> Optionals:
    nested = TensorDict(a=torch.ones(3), batch_size=[3])
    return Optionals(x=torch.zeros(3), nested=nested, batch_size=[3])


def _entries(td: TensorDictBase) -> dict:
    return {k: v for k, v in td._tensordict.items(include_nested=True, leaves_only=True)}


@pytest.mark.parametrize(
    "write",
    [
        lambda s: s.set("z", torch.zeros(3)),
        lambda s: s.set(("z", "deep"), torch.zeros(3)),
        lambda s: s.__setitem__("z", torch.zeros(3)),
        lambda s: s.setdefault("z", torch.zeros(3)),
        lambda s: s.set_non_tensor("z", "text"),
        lambda s: s.rename_key_("y", "z"),
    ],
)
def test_keys_that_are_not_fields_are_refused(write):
    s = make_optionals()
    s.y = torch.ones(3)
    before = _entries(s)
    with pytest.raises(AttributeError, match=r"Optionals\.\w+: 'z' is not a field of Optionals"):
        write(s)
    after = _entries(s)
    assert after.keys() == before.keys() and all(after[k] is v for k, v in before.items())


def test_update_refuses_keys_that_are_not_fields():
    s = make_optionals()
    with pytest.raises(ValueError, match="Optionals.update: 'z' is not a field"):
        s.update({"x": torch.ones(3), "z": torch.ones(3)})
    assert (s.x == 0).all() and "z" not in s.keys()
    # writes inside a field are fine
    s.set(("nested", "b"), torch.zeros(3))
    s["nested", "c"] = torch.zeros(3)
    s.update({"y": torch.ones(3)})
    assert sorted(s["nested"].keys()) == ["a", "b", "c"] and (s.y == 1).all()


@pytest.mark.parametrize(
    "remove",
    [
        lambda s: s.del_("x"),
        lambda s: s.__delitem__("x"),
        lambda s: s.pop("x"),
        lambda s: s.pop(("x",), None),
        lambda s: s.popitem(),  # the last entry: "x" or "nested"
        lambda s: s.clear(),
        lambda s: s.rename_key_("nested", "y"),
        lambda s: delattr(s, "x"),
    ],
)
def test_required_fields_cannot_be_removed(remove):
    s = make_optionals()
    before = _entries(s)
    with pytest.raises(
        AttributeError,
        match=r"'(x|nested)'.* (is a required field|are required fields) of Optionals",
    ):
        remove(s)
    after = _entries(s)
    assert after.keys() == before.keys() and all(after[k] is v for k, v in before.items())


def test_optional_fields_and_nested_entries_can_be_removed():
    s = make_optionals()
    s.y = torch.ones(3)
    assert torch.equal(s.pop("y"), torch.ones(3)) and "y" not in s.keys()
    s.y = torch.ones(3)
    del s["y"]
    s.del_(("nested", "a"))
    assert sorted(s.keys()) == ["nested", "x"] and list(s["nested"].keys()) == []
