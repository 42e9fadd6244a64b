"""TypedTensorDict: the field machinery as a tensordict (``td["key"]``, keyword fields)."""

from __future__ import annotations

import dataclasses
import pickle
import warnings
from typing import ClassVar

import pytest
import torch
from typing_extensions import NotRequired

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


def test_constructor_is_keyword_only():
    with pytest.raises(TypeError, match="positional"):
        State(torch.zeros(5, 3), torch.zeros(5, 4))


def test_missing_required_field_is_named():
    with pytest.raises(TypeError, match=r"^State\(\) missing required field\(s\): X; State"):
        State(eta=torch.zeros(5, 3))
    # in declaration order; a missing field is reported before an unexpected one
    with pytest.raises(TypeError, match=r"missing required field\(s\): eta, X;"):
        State(label="t", Y=1, batch_size=[5])


def test_unexpected_field_is_named():
    # lock= and non_blocking= are constructor keywords, as in the reference
    with pytest.raises(TypeError, match=r"^State\(\) got unexpected field\(s\): Y, Z;"):
        State(eta=torch.zeros(5, 3), X=torch.zeros(5, 4), Y=1, Z=2, lock=True)


def test_errors_raised_while_building_are_not_renamed():
    with pytest.raises(TypeError, match=r"State\.eta is annotated Tensor.*got a str"):
        State(eta="abc", X=torch.zeros(5, 4), batch_size=[5])
    with pytest.raises(RuntimeError, match="batch"):
        State(eta=torch.zeros(4, 3), X=torch.zeros(5, 4), batch_size=[5])


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

    # accepted and ignored, as in brackets (the reference's deprecated options)
    with warnings.catch_warnings():  # a DeprecationWarning the first time
        warnings.simplefilter("ignore", DeprecationWarning)
        assert issubclass(TypedTensorDict["autocast", "frozen"], TypedTensorDict)


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


# ------------------------------------------------------------------ class creation checks
@pytest.mark.parametrize("name", ["batch_size", "keys", "apply", "device"])
def test_field_shadowing_a_member_is_refused(name):
    with pytest.raises(
        AttributeError, match=rf"^Bad: field '{name}' shadows a TensorDictBase attribute"
    ):
        type("Bad", (TypedTensorDict,), {"__annotations__": {"x": "torch.Tensor", name: "int"}})
    assert callable(TypedTensorDict.keys) and "batch_size" in dir(TypedTensorDict)


def test_shadow_option_allows_the_field_and_it_is_required():
    class Shadowing(TypedTensorDict, shadow=True):
        keys: torch.Tensor
        apply: torch.Tensor | None = None

    assert Shadowing.__required_keys__ == {"keys"} and Shadowing.__optional_keys__ == {"apply"}
    with pytest.raises(TypeError, match=r"Shadowing\(\) missing required field\(s\): keys"):
        Shadowing(batch_size=[2])
    assert torch.equal(Shadowing(keys=torch.ones(2), batch_size=[2]).keys, torch.ones(2))


def test_class_variables_are_not_fields():
    class Counted(TypedTensorDict):
        x: torch.Tensor
        made: ClassVar[int] = 0

    assert Counted.__required_keys__ == {"x"} and Counted.__optional_keys__ == frozenset()
    assert Counted.made == 0


@pytest.mark.parametrize("keyword", ["total", "autocast_typo"])
def test_unknown_class_keyword_is_refused(keyword):
    with pytest.raises(TypeError, match=rf"Bad: unknown TypedTensorDict option\(s\) '{keyword}'"):
        type("Bad", (TypedTensorDict,), {"__annotations__": {"x": "torch.Tensor"}}, **{keyword: 1})


@pytest.mark.parametrize("option", ["foo", 1, ("frozen", "total")])
def test_unknown_option_in_brackets_is_refused(option):
    with pytest.raises(ValueError, match="^Unknown TypedTensorDict option: "):
        TypedTensorDict[option]


# ------------------------------------------------------------------ required / optional keys
class WithNotRequired(TypedTensorDict):
    x: torch.Tensor
    maybe: NotRequired[torch.Tensor]
    tag: NotRequired[str]
    opt: torch.Tensor | None  # Optional without a default: still required
    y: torch.Tensor | None = None


def make_with_not_required() -> WithNotRequired:
    return WithNotRequired(x=torch.zeros(3), opt=torch.zeros(3), batch_size=[3])


def test_required_and_optional_keys():
    assert TypedTensorDict.__required_keys__ == frozenset() == TypedTensorDict.__optional_keys__
    assert TypedTensorDict["frozen"].__required_keys__ == frozenset()
    assert type(State.__required_keys__) is frozenset is type(State.__optional_keys__)
    assert State.__required_keys__ == {"eta", "X"} and State.__optional_keys__ == {"label"}
    assert WithNotRequired.__required_keys__ == {"x", "opt"}
    assert WithNotRequired.__optional_keys__ == {"maybe", "tag", "y"}


def test_subclasses_add_required_and_optional_keys():
    class Once(State):
        extra: torch.Tensor
        note: NotRequired[str]

    class Twice(Once):
        more: torch.Tensor
        later: torch.Tensor = None

    assert Once.__required_keys__ == {"eta", "X", "extra"}
    assert Once.__optional_keys__ == {"label", "note"}
    assert Twice.__required_keys__ == {"eta", "X", "extra", "more"}
    assert Twice.__optional_keys__ == {"label", "note", "later"}
    assert State.__required_keys__ == {"eta", "X"}  # the bases are unchanged
    with pytest.raises(TypeError, match=r"Twice\(\) missing required field\(s\): extra, more"):
        Twice(eta=torch.zeros(2, 3), X=torch.zeros(2, 4), batch_size=[2])
    t = Twice(eta=torch.zeros(2, 3), X=torch.zeros(2, 4), extra=torch.ones(2), more=torch.ones(2))
    assert sorted(t.keys()) == ["X", "eta", "extra", "label", "more"]


def test_redeclared_field_keeps_its_default_or_lack_of_one():
    class Base(TypedTensorDict):
        a: torch.Tensor
        b: torch.Tensor = None
        c: NotRequired[torch.Tensor]
        d: torch.Tensor

    class Again(Base):
        a: torch.Tensor  # required as before (no default taken from the class attribute)
        b: torch.Tensor  # keeps its default
        c: torch.Tensor  # declared again without NotRequired: required
        d: NotRequired[torch.Tensor]  # now optional

    assert Again.__required_keys__ == {"a", "c"} and Again.__optional_keys__ == {"b", "d"}
    again = Again(a=torch.zeros(1), c=torch.zeros(1), batch_size=[1])
    assert again.b is None and "d" not in again.keys()


def test_not_required_field_left_out_then_set():
    s = make_with_not_required()
    assert sorted(s.keys()) == ["opt", "x"]
    with pytest.raises(AttributeError, match=r"WithNotRequired\.maybe is not set.*NotRequired"):
        s.maybe
    assert not hasattr(s, "tag") and s.get("maybe", "default") == "default"
    assert s.y is None  # a field with a default reads its default
    s.maybe = torch.ones(3)
    s["tag"] = "t"
    assert torch.equal(s.maybe, torch.ones(3)) and s["tag"] == "t"
    with pytest.raises(TypeError, match=r"WithNotRequired\.maybe is annotated Tensor"):
        s.maybe = "not a tensor"  # NotRequired[Tensor] is checked as a Tensor field
    assert torch.equal(s.maybe, torch.ones(3))
    del s["maybe"]  # optional: can be removed, then reads as unset again
    with pytest.raises(AttributeError, match="is not set"):
        s.maybe
    s.maybe = torch.zeros(3)
    del s.maybe
    with pytest.raises(AttributeError, match="maybe"):
        s.maybe
    s.maybe = torch.full((3,), 2.0)
    assert torch.equal(s.maybe, torch.full((3,), 2.0))


def test_not_required_field_given_at_construction():
    s = WithNotRequired(x=torch.zeros(3), opt=None, maybe=torch.ones(3), tag="t", batch_size=[3])
    assert torch.equal(s.maybe, torch.ones(3)) and s["tag"] == "t"


def test_not_required_annotation_objects():
    """The same without ``from __future__ import annotations`` (annotation objects)."""
    Obj = type(
        "Obj",
        (TypedTensorDict,),
        {"__annotations__": {"x": torch.Tensor, "m": NotRequired[torch.Tensor]}},
    )
    assert Obj.__required_keys__ == {"x"} and Obj.__optional_keys__ == {"m"}
    obj = Obj(x=torch.zeros(2), batch_size=[2])
    assert "m" not in obj.keys() and not hasattr(obj, "m")


def test_unset_not_required_field_survives_operations():
    s = make_with_not_required()
    for out in (s[0], s.clone(), torch.stack([s, s]), s.to(torch.float64)):
        assert type(out) is WithNotRequired and not hasattr(out, "maybe")
    assert "WithNotRequired" in repr(s)
    td = s.to_tensordict()
    assert type(td) is TensorDict and sorted(td.keys()) == ["opt", "x"]
    back = WithNotRequired.from_tensordict(td)
    assert sorted(back.keys()) == ["opt", "x"] and not hasattr(back, "maybe")
    loaded = pickle.loads(pickle.dumps(s))
    assert type(loaded) is WithNotRequired and sorted(loaded.keys()) == ["opt", "x"]
    assert not hasattr(loaded, "maybe")


def test_pickle_and_to_tensordict_round_trip():
    s = make_state()
    loaded = pickle.loads(pickle.dumps(s))
    assert type(loaded) is State and torch.equal(loaded.eta, s.eta) and loaded["label"] == "s"
    back = State.from_tensordict(s.to_tensordict())
    assert type(back) is State and torch.equal(back.X, s.X)
    assert State.__required_keys__ == loaded.__required_keys__


def test_assigning_an_undeclared_attribute_is_refused():
    s = make_state()
    before = _entries(s)
    with pytest.raises(AttributeError, match=r"Cannot set the attribute 'foo': State has no"):
        s.foo = 1
    with pytest.raises(AttributeError, match=r"Cannot set the attribute '_foo'"):
        s._foo = 1
    assert not hasattr(s, "foo") and _entries(s).keys() == before.keys()
    assert all(_entries(s)[k] is v for k, v in before.items())


def test_constructor_takes_a_mapping_and_the_references_keywords():
    class Pair(TypedTensorDict):
        x: torch.Tensor
        y: torch.Tensor

    x, y = torch.arange(3.0), torch.ones(3)
    from_map = Pair({"x": x, "y": y}, batch_size=[3])
    assert torch.equal(from_map.x, x) and torch.equal(from_map.y, y)
    mixed = Pair({"x": x}, y=y * 2, batch_size=[3])  # keywords complete the mapping
    assert torch.equal(mixed.y, y * 2)
    from_td = Pair(TensorDict(x=x, y=y, batch_size=[3]), batch_size=[3])
    assert torch.equal(from_td.x, x)
    locked = Pair(x=x, y=y, batch_size=[3], lock=True, non_blocking=False)
    assert locked.is_locked and not Pair(x=x, y=y, batch_size=[3]).is_locked
    with pytest.raises(TypeError, match="missing required field"):
        Pair({"x": x}, batch_size=[3])
    with pytest.raises(TypeError, match="unexpected field"):
        Pair({"x": x, "y": y, "z": y}, batch_size=[3])
