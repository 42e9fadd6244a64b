"""Lock state of nested tensordicts: a tensordict locked as part of a locked parent.

Locking a tensordict locks its nested tensordicts (and the members of nested lazy stacks).
Each nested one counts the locked tensordicts (or lazy stacks, for their members) that
hold it (``_lock_parents``), so that:

* it cannot be unlocked on its own while a parent is locked — that would let writes reach
  a locked tree (``td.lock_(); td["nest"].unlock_()`` raises ``RuntimeError``);
* unlocking a root unlocks what it holds, except a tensordict that another locked
  tensordict also holds: that unlock is refused as a whole, before anything changes;
* a locked parent that is garbage-collected releases its holds (through a
  weak reference watching it while it holds any), so what it held can then be unlocked.

>>> import torch
>>> from tensordict import TensorDict
>>> td = TensorDict(nest=TensorDict(x=torch.zeros(2), batch_size=[2]), batch_size=[2]).lock_()
>>> try:
...     td["nest"].unlock_()
... except RuntimeError:
...     print("refused")
refused
>>> td.unlock_()["nest"].is_locked
False
"""

from __future__ import annotations

import warnings
import weakref
from functools import partial
from typing import Any

import torch

from tensordict._kinds import kinds as _kinds
from tensordict._leaves.collection import data_of

_Tensor = torch.Tensor


def _children(td: Any) -> list[Any]:
    """The dense tensordicts whose lock ``td`` holds: its nested tensordicts (of
    tensorclasses too) and the members of its nested lazy stacks."""
    dense, tensor = _kinds.Dense, _Tensor
    out: list[Any] = []
    for value in td._tensordict.values():
        if type(value) is tensor:  # the common case, skipped at once
            continue
        if isinstance(value, dense):
            out.append(value)
        else:
            _add_held(data_of(value), out)
    return out


def _add_held(sub: Any, out: list[Any]) -> None:
    """Add to ``out`` the dense tensordict ``sub`` or, for a lazy stack, its members."""
    if isinstance(sub, _kinds.Dense):
        out.append(sub)
    elif isinstance(sub, _kinds.Lazy):
        stack = list(sub.tensordicts)
        while stack:  # members of nested stacks, flattened
            member = stack.pop()
            if isinstance(member, _kinds.Lazy):
                stack.extend(member.tensordicts)
            elif isinstance(member, _kinds.Dense):
                out.append(member)


#: The weak references that watch parents for garbage collection. A weak reference only
#: calls back while it is alive itself, so the watchers live here until their parent dies.
#: A parent keeps its watcher across lock/unlock cycles (unlocking empties its list).
_WATCHERS: set[weakref.ref[Any]] = set()


def _count_hold(parent: Any, child: Any) -> None:
    """``parent`` (locked) holds ``child``: count it, and remember it so that the hold is
    released if ``parent`` is garbage-collected while locked."""
    child._lock_parents = child._lock_parents + 1
    holds = parent._lock_holds
    if holds is None:
        held: list[Any] = []
        watcher = weakref.ref(parent, partial(_parent_died, held))
        _WATCHERS.add(watcher)
        holds = parent._lock_holds = (watcher, held)
    holds[1].append(child)  # the locked parent holds it anyway: no weak reference needed


def _parent_died(held: list[Any], watcher: weakref.ref[Any]) -> None:
    """A parent died: the tensordicts it held locked lose that hold."""
    _WATCHERS.discard(watcher)
    for child in held:
        if child._lock_parents > 0:
            child._lock_parents = child._lock_parents - 1
    held.clear()


def _held(parent: Any) -> list[Any]:
    """The tensordicts the locked ``parent`` holds: those its lock counted (the walk that
    locked it found them), or, when none were counted (a lock taken in compiled code, or
    nothing nested), its children now."""
    holds = parent._lock_holds
    if holds is not None and holds[1]:
        held: list[Any] = holds[1]
        return held  # (callers copy it: extend, or list() for the first level)
    return _children(parent)


def drop_holds(parent: Any) -> None:
    """``parent`` is unlocked: its holds were released by the unlock itself."""
    holds = parent._lock_holds
    if holds is not None:
        holds[1].clear()


def lock(td: Any) -> None:
    """Lock the dense ``td`` and what it holds (each held tensordict counts it once).
    Walks without recursion, so any depth of nesting locks."""
    if td._is_locked:
        return
    if torch.compiler.is_compiling():
        _lock_compiled(td)
        return
    td._is_locked = True
    parents = [td]  # locked here, their children not yet counted (no comprehension: cheaper)
    while parents:
        parent = parents.pop()
        for child in _children(parent):
            _count_hold(parent, child)
            if not child._is_locked:
                child._is_locked = True
                parents.append(child)


def _compiled_lock_warning() -> bool:
    warnings.warn(
        "lock_() in compiled code locks the tensordict and its nested tensordicts, but "
        "does not record that the parent holds them: unlocking a nested one on its own is "
        "not refused there. Lock outside the compiled function to keep that check.",
        UserWarning,
        stacklevel=2,
    )
    return True


# Run while Dynamo traces, its result taken as a constant: warns once per compile. This is
# what ``torch._dynamo.assume_constant_result`` does (it sets this one attribute); calling
# it would import Dynamo with tensordict, a second of import time.
_compiled_lock_warning._dynamo_marked_constant = True  # type: ignore[attr-defined]
_warn_compiled_lock = _compiled_lock_warning


def _lock_compiled(td: Any) -> None:
    """Lock ``td`` and its nested tensordicts in compiled code, without counting which
    parent holds which (the weak references that release the holds cannot be traced):
    writes are refused as in eager code, but a nested tensordict locked here can be
    unlocked on its own. Warns when the function is compiled."""
    _warn_compiled_lock()
    stack = [td]
    while stack:
        node = stack.pop()
        if not node._is_locked:
            node._is_locked = True
            stack.extend(_children(node))


def hold(parent: Any, child: Any) -> None:
    """``child`` (a dense tensordict) was just stored in the locked ``parent``."""
    _count_hold(parent, child)
    lock(child)


def plan_unlock(td: Any, held_by_caller: int = 0) -> list[tuple[Any, int]]:
    """What unlocking ``td`` releases: ``(nested tensordict, holds from inside td)``.
    Raises ``RuntimeError`` (nothing changed) if a locked tensordict outside ``td``
    holds ``td`` or one of them (``held_by_caller``: the holds of the caller, a lazy stack
    unlocking its members, that do not count)."""
    if not td._is_locked:
        return []
    if td._lock_parents > held_by_caller:
        raise RuntimeError(
            "cannot unlock this tensordict: it is nested in a locked tensordict "
            f"({td._lock_parents} locked parent(s)), whose tree would then take writes. "
            "Unlock the root tensordict instead."
        )
    plan: list[tuple[Any, int]] = []
    stack = list(_held(td))
    if not stack:
        return plan
    held: dict[int, int] = {}  # tensordicts held more than once: counted
    nodes: dict[int, Any] = {}
    while stack:
        child = stack.pop()
        if child._lock_parents == 1:  # held by this parent only: released with it
            plan.append((child, 1))
            if child._is_locked:
                stack.extend(_held(child))
            continue
        key = id(child)
        held[key] = held.get(key, 0) + 1
        if key not in nodes:
            nodes[key] = child
            if child._is_locked:
                stack.extend(_held(child))
    for key, count in held.items():
        if nodes[key]._lock_parents > count:
            raise RuntimeError(
                "cannot unlock this tensordict: one of its nested tensordicts is also held by "
                "another locked tensordict. Unlock that one first, or group both under one "
                "root and unlock the root."
            )
        plan.append((nodes[key], count))
    return plan


def unlock(td: Any, plan: list[tuple[Any, int]] | None = None) -> None:
    """Unlock the dense ``td`` and what only it keeps locked, as :func:`plan_unlock`
    checked (planned here when not given). Walks without recursion."""
    if plan is None:
        plan = plan_unlock(td)
    td._is_locked = False
    drop_holds(td)
    for child, count in plan:
        left = child._lock_parents - count
        child._lock_parents = left if left > 0 else 0
        if left <= 0:
            child._is_locked = False
            drop_holds(child)
