"""Locking: a locked tensordict refuses new keys and deletions with a clear error, stays
unchanged when it refuses, still accepts in-place writes, and lock_/unlock_ work as context
managers."""

from __future__ import annotations

import pytest
import torch
from core_helpers import assert_unchanged, snapshot

from tensordict import TensorDict, lazy_stack


def make_td():
    return TensorDict(
        {"a": torch.zeros(2), "n": {"b": torch.ones(2), "m": {"c": torch.ones(2)}}}, [2]
    )


def test_lock_unlock_flags():
    td = make_td()
    assert td.is_locked is False
    assert td.lock_() is td
    assert td.is_locked is True
    assert td["n"].is_locked and td["n", "m"].is_locked
    assert td.unlock_() is td
    assert td.is_locked is False
    assert not td["n"].is_locked and not td["n", "m"].is_locked


def test_is_locked_setter():
    td = make_td()
    td.is_locked = True
    assert td.is_locked and td["n"].is_locked
    td.is_locked = False
    assert not td.is_locked and not td["n"].is_locked


REFUSED = {
    "set new": lambda td: td.set("new", torch.zeros(2)),
    "setitem new": lambda td: td.__setitem__("new", torch.zeros(2)),
    "set new nested leaf": lambda td: td.set(("n", "new"), torch.zeros(2)),
    "set new nested path": lambda td: td.set(("p", "q"), torch.zeros(2)),
    "set on nested directly": lambda td: td["n"].set("new", torch.zeros(2)),
    "set new tensordict": lambda td: td.set("sub", TensorDict({}, [2])),
    "setdefault new": lambda td: td.setdefault("new", torch.zeros(2)),
    "update new": lambda td: td.update({"a": torch.full((2,), 9.0), "new": torch.zeros(2)}),
    "update nested new": lambda td: td.update(
        {"n": {"b": torch.full((2,), 9.0), "new": torch.zeros(2)}}
    ),
    "update tuple-key new": lambda td: td.update({("p", "q"): torch.zeros(2)}),
    "update tensordict new": lambda td: td.update(TensorDict({"p": {"q": torch.zeros(2)}}, [2])),
    "index write new key": lambda td: td.__setitem__(
        0, {"a": torch.tensor(9.0), "new": torch.tensor(1.0)}
    ),
    "del": lambda td: td.del_("a"),
    "delitem nested": lambda td: td.__delitem__(("n", "b")),
    "pop": lambda td: td.pop("a"),
    "pop nested": lambda td: td.pop(("n", "m", "c")),
    "popitem": lambda td: td.popitem(),
    "clear": lambda td: td.clear(),
    "rename_key_": lambda td: td.rename_key_("a", "renamed"),
    "select inplace": lambda td: td.select("a", inplace=True),
    "exclude inplace": lambda td: td.exclude("a", inplace=True),
    "flatten_keys inplace": lambda td: td.flatten_keys(inplace=True),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_locked_refuses_with_clear_error_and_stays_unchanged(name):
    td = make_td().lock_()
    snap = snapshot(td)
    with pytest.raises(RuntimeError, match="locked") as info:
        REFUSED[name](td)
    assert "unlock_" in str(info.value)  # the message says how to fix it
    assert_unchanged(td, snap)
    assert td.is_locked


def test_locked_refuses_unflatten_keys_inplace():
    td = TensorDict({"a.b": torch.zeros(2), "c": torch.ones(2)}, [2]).lock_()
    with pytest.raises(RuntimeError, match="locked"):
        td.unflatten_keys(inplace=True)
    assert list(td.keys(include_nested=True)) == ["a.b", "c"]


def test_lock_error_names_the_key():
    td = make_td().lock_()
    with pytest.raises(RuntimeError, match="'brand_new'"):
        td["brand_new"] = torch.zeros(2)
    with pytest.raises(RuntimeError, match="'a'"):
        del td["a"]


def test_locked_allows_in_place_writes():
    td = make_td().lock_()
    a, b = td["a"], td["n", "b"]
    td.set_("a", torch.full((2,), 3.0))
    td.set(("n", "b"), torch.full((2,), 4.0), inplace=True)
    td.update_({"n": {"m": {"c": torch.full((2,), 5.0)}}})
    td[1] = {"a": torch.tensor(7.0)}
    td.apply_(lambda x: x + 1)
    td.zero_()
    td.fill_("a", 2.0)
    assert td["a"] is a and td["n", "b"] is b
    assert torch.equal(a, torch.full((2,), 2.0))
    assert (b == 0).all()


def test_unlock_context_manager_relocks():
    td = make_td().lock_()
    with td.unlock_():
        assert not td.is_locked and not td["n"].is_locked
        td["new"] = torch.zeros(2)
        del td["a"]
    assert td.is_locked and td["n"].is_locked
    assert set(td.keys()) == {"n", "new"}
    with pytest.raises(RuntimeError, match="locked"):
        td["other"] = torch.zeros(2)


def test_lock_context_manager_unlocks():
    td = make_td()
    with td.lock_():
        assert td.is_locked
        with pytest.raises(RuntimeError, match="locked"):
            td["new"] = torch.zeros(2)
    assert not td.is_locked and not td["n"].is_locked
    td["new"] = torch.zeros(2)
    assert "new" in td.keys()


def test_nested_context_managers():
    td = make_td()
    with td.lock_():
        with td.unlock_():
            assert not td.is_locked
        assert td.is_locked
    assert not td.is_locked


@pytest.mark.parametrize("kind", ["dense", "lazy"])
@pytest.mark.parametrize("locked_before", [False, True])
def test_lock_and_unlock_contexts_restore_the_state_before(kind, locked_before):
    td = make_td() if kind == "dense" else lazy_stack([make_td(), make_td()])
    if locked_before:
        td.lock_()
    with td.lock_() as same:
        assert same is td and td.is_locked
        with td.unlock_():
            assert not td.is_locked
        assert td.is_locked
    assert td.is_locked is locked_before
    with td.unlock_():
        assert not td.is_locked
    assert td.is_locked is locked_before


def test_lazy_stack_holding_one_member_twice_unlocks():
    member = make_td()
    lazy = lazy_stack([member, member])
    lazy.lock_()
    assert member.is_locked
    with pytest.raises(RuntimeError, match="nested in a locked"):
        member.unlock_()
    lazy.unlock_()
    assert not lazy.is_locked and not member.is_locked


def test_context_manager_restores_on_exception():
    td = make_td().lock_()
    with pytest.raises(ValueError):
        with td.unlock_():
            raise ValueError("boom")
    assert td.is_locked


def test_nested_tensordict_added_while_unlocked_is_locked_with_parent():
    td = make_td()
    td["sub"] = TensorDict({"x": torch.zeros(2)}, [2])
    td.lock_()
    assert td["sub"].is_locked
    with pytest.raises(RuntimeError, match="locked"):
        td["sub", "y"] = torch.zeros(2)
    assert list(td["sub"].keys()) == ["x"]


def test_new_tensordicts_from_a_locked_one_are_unlocked():
    # clone / apply / comparisons build new containers (views such as td[0] or .to() may
    # keep the lock in the reference, so they are not asserted here)
    td = make_td().lock_()
    for out in (td.clone(), td.apply(lambda x: x + 1), td == 1):
        assert not out.is_locked
        out["free"] = torch.zeros(out.batch_size)


def test_arithmetic_results_of_a_locked_tensordict_are_locked():
    # as the reference: pointwise arithmetic keeps the lock
    td = make_td().lock_()
    for out in (td + 1, td.mul(2), td.add(td)):
        assert out.is_locked and out is not td
    assert not (make_td() + 1).is_locked


def test_lock_at_construction_propagates():
    td = TensorDict({"n": {"b": torch.zeros(2)}}, [2], lock=True)
    assert td["n"].is_locked


def test_held_tensordict_is_released_when_its_locked_parent_dies():
    import copy
    import gc
    import pickle

    from tensordict import lazy_stack

    td = TensorDict(a=torch.zeros(3), some=TensorDict(x=torch.zeros(3)), batch_size=[3])
    td.lock_().unlock_()  # a parent locked again reuses its bookkeeping
    td.lock_()
    some = td["some"]
    with pytest.raises(RuntimeError, match="nested in a locked tensordict"):
        some.unlock_()
    # copies keep their own lock bookkeeping: unlocking one leaves the original's hold
    for clone in (copy.deepcopy(td), pickle.loads(pickle.dumps(td))):
        assert clone.is_locked and clone["some"].is_locked
        assert not clone.unlock_()["some"].is_locked
    with pytest.raises(RuntimeError, match="nested in a locked tensordict"):
        some.unlock_()
    del td
    gc.collect()
    assert not some.unlock_().is_locked
    stack = lazy_stack([TensorDict(a=torch.zeros(3), batch_size=[3]) for _ in range(2)])
    member = stack.lock_().tensordicts[0]
    with pytest.raises(RuntimeError, match="nested in a locked tensordict"):
        member.unlock_()
    del stack
    gc.collect()
    assert not member.unlock_().is_locked
