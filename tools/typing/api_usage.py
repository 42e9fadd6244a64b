"""User-side type check: the public ``tensordict`` API used the way user code uses it.

``mypy`` checks this file strictly (it is in ``[tool.mypy] files`` in pyproject.toml, so
``nox -s lint`` runs it). It is also a plain script: ``python tools/typing/api_usage.py``
runs every function below, so every line is real, working code.

Conventions:

* ``assert_type(expr, T)`` pins the type a return annotation gives to user code. These
  are the promises of the public API; a change to an annotation that breaks one is a
  change users see.
* ``x: T = expr`` is used where the library returns ``Any`` today: the line checks
  whether user code annotated with the natural type is accepted, not what the library
  promises.
* ``# type: ignore[...]  # GAP: <file>: <fix>`` marks a place where an imprecise library
  annotation makes natural user code fail strict checking. The assertion states the
  wanted type. mypy runs with ``warn_unused_ignores`` (part of ``strict``), so once the
  library annotation is fixed the ignore becomes unused, mypy reports it, and the comment
  must be deleted: the gap list cannot go stale.
* ``# type: ignore[...]  # TORCH: ...`` marks a limit of torch's own stubs that no
  tensordict annotation can lift.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import torch

import tensordict
from tensordict import NestedKey, NonTensorData, TensorDict, TensorDictBase
from tensordict.utils import (
    expand_as_right,
    expand_right,
    is_non_tensor,
    is_tensor_collection,
    isin,
    remove_duplicates,
    unravel_key,
    unravel_key_list,
)

if sys.version_info >= (3, 11):
    from typing import assert_type
else:  # pragma: no cover - python 3.10
    from typing_extensions import assert_type

FlatKey = str | tuple[str, ...]


def make(n_envs: int = 4) -> TensorDict:
    """A tensordict like the ones user code builds: nested, named, on a device."""
    return TensorDict(
        {
            "obs": torch.zeros(n_envs, 3),
            "action": torch.arange(n_envs),
            "next": {"reward": torch.ones(n_envs, 1), "done": torch.zeros(n_envs, 1).bool()},
            "env_name": "CartPole",
        },
        batch_size=[n_envs],
        device="cpu",
        names=["env"],
    )


def construction() -> None:
    td = make()
    assert_type(td, TensorDict)
    assert_type(TensorDict(), TensorDict)
    assert_type(TensorDict({"a": torch.zeros(2, 3)}, [2, 3]), TensorDict)
    assert_type(TensorDict(a=torch.zeros(2), batch_size=2, lock=True), TensorDict)
    assert_type(TensorDict(batch_size=torch.Size([2]), device=torch.device("cpu")), TensorDict)
    assert_type(TensorDict({"a": torch.zeros(2)}, (2,), names=[None]), TensorDict)

    assert_type(td.batch_size, torch.Size)
    assert_type(td.shape, torch.Size)
    assert_type(td.device, torch.device | None)
    assert_type(td.batch_dims, int)
    assert_type(td.ndim, int)
    assert_type(td.dim(), int)
    assert_type(td.numel(), int)
    assert_type(len(td), int)
    assert_type(td.is_empty(), bool)
    assert_type(td.is_locked, bool)
    assert_type(td.is_shared(), bool)
    assert_type(td.names, list[str | None])
    assert_type(td.size(), torch.Size)
    assert_type(td.size(0), int)
    assert_type(TensorDict.fromkeys(["a", ("b", "c")], 0), TensorDict)

    td.batch_size = torch.Size([4])
    td.names = ["batch"]
    assert_type(td.refine_names("batch"), TensorDict)
    assert_type(td.rename(batch="env"), TensorDict)
    assert_type(td.rename_("env"), TensorDict)


def get_and_set() -> None:
    td = make()
    obs: torch.Tensor = td["obs"]
    reward: torch.Tensor = td["next", "reward"]
    done: torch.Tensor = td.get(("next", "done"))
    missing: torch.Tensor | None = td.get("missing", None)
    assert missing is None
    name: str = td["env_name"]
    assert name == "CartPole" and obs.shape == (4, 3) and reward.shape == done.shape

    key: NestedKey = ("next", ("reward",))
    assert_type(unravel_key(key), FlatKey)
    assert_type(unravel_key_list(["a", ("b", ("c",))]), list[FlatKey])

    td["action"] = torch.zeros(4, dtype=torch.long)
    td["next", "truncated"] = torch.zeros(4, 1, dtype=torch.bool)
    td[("next", "info"), "step"] = torch.arange(4)
    assert_type(td.set("value", torch.zeros(4)), TensorDict)
    assert_type(td.set_("value", torch.ones(4)), TensorDict)
    assert_type(td.rename_key_("value", ("next", "value")), TensorDict)
    assert_type(td.del_(("next", "value")), TensorDict)
    count: torch.Tensor = td.setdefault("count", torch.zeros(4))
    assert count.shape == (4,)
    popped: torch.Tensor = td.pop("count")
    default_pop: torch.Tensor | None = td.pop("count", None)
    assert popped.shape == (4,) and default_pop is None
    del td["next", "truncated"]

    assert_type("obs" in td, bool)
    assert_type(("next", "reward") in td, bool)
    label = NonTensorData("cat", batch_size=[4])
    assert_type(label.batch_size, torch.Size)
    assert_type(is_non_tensor(label), bool)
    assert_type(is_tensor_collection(td), bool)


def indexing() -> None:
    td = make()
    first: TensorDict = td[0]
    tail: TensorDict = td[1:]
    masked: TensorDict = td[torch.tensor([True, False, True, False])]
    picked: TensorDict = td[[0, 2]]
    ellipsis: TensorDict = td[..., 0]
    assert first.batch_size == () and tail.batch_size == (3,)
    assert masked.batch_size == picked.batch_size == (2,) and ellipsis.batch_size == ()
    assert_type(td[0], TensorDict)
    td[0] = first
    td[1:3] = td[0:2].clone()
    td[0] = {"obs": torch.ones(3)}


def shape_ops() -> None:
    td = TensorDict({"a": torch.zeros(2, 3, 5)}, [2, 3])
    assert_type(td.reshape(-1), TensorDict)
    flat: TensorDict = td.reshape(-1)
    viewed: TensorDict = td.view(6)
    unsq: TensorDict = td.unsqueeze(0)
    sq: TensorDict = unsq.squeeze(0)
    perm: TensorDict = td.permute(1, 0)
    tr: TensorDict = td.transpose(0, 1)
    fl: TensorDict = td.flatten(0, 1)
    unfl: TensorDict = fl.unflatten(0, (2, 3))
    ex: TensorDict = td.expand(4, 2, 3)
    assert flat.batch_size == viewed.batch_size == fl.batch_size == (6,)
    assert unsq.batch_size == (1, 2, 3) and sq.batch_size == unfl.batch_size == (2, 3)
    assert perm.batch_size == tr.batch_size == (3, 2) and ex.batch_size == (4, 2, 3)

    assert_type(td.unbind(0), tuple[TensorDict, ...])
    parts: tuple[TensorDict, ...] = td.unbind(0)
    chunks: tuple[TensorDict, ...] = td.split(1, dim=1)
    halves: tuple[TensorDict, ...] = td.chunk(2)
    assert len(parts) == len(halves) == 2 and len(chunks) == 3
    assert_type(iter(td), Iterator[TensorDict])


def apply() -> None:
    td = make()
    assert_type(td.apply(lambda x: x * 2), TensorDict)
    assert_type(td.apply_(lambda x: x.zero_()), TensorDict)
    # named_apply returns None for an all-filtered nested ``prefix``: Optional is honest.
    named = td.named_apply(lambda k, v: v, nested_keys=True)
    assert_type(named, TensorDict | None)
    pair = td.select("obs")
    summed = pair.apply(lambda x, y: x + y, pair)
    assert summed is not None


def stack_and_cat() -> None:
    tds = [make(), make()]
    assert_type(tensordict.stack(tds, 0), TensorDict)
    assert_type(tensordict.cat(tds, 0), TensorDict)
    out = make(8)
    assert_type(tensordict.cat(tds, 0, out=out), TensorDict)
    stacked: TensorDict = tensordict.stack(tds, 1)
    joined: TensorDict = tensordict.cat(tds, 0)
    assert stacked.batch_size == (4, 2) and joined.batch_size == (8,)
    # torch.stack/torch.cat dispatch to tensordict at runtime (__torch_function__), but
    # torch's stubs only accept tensors and return a Tensor. Typed code uses
    # tensordict.stack/tensordict.cat.
    via_torch: object = torch.stack(tds, 0)  # type: ignore[arg-type]  # TORCH: stubs take only tensors
    assert isinstance(via_torch, TensorDictBase)


def keys_items_values() -> None:
    td = make()
    for key in td.keys(include_nested=True, leaves_only=True, sort=True):
        assert_type(key, FlatKey)
        dotted = key if isinstance(key, str) else ".".join(key)
        assert dotted
    for key in td.keys():
        assert_type(key, FlatKey)
    assert_type(len(td.keys()), int)
    assert_type("obs" in td.keys(), bool)
    assert_type(td.keys() == {"obs"}, bool)
    for item_key, value in td.items(include_nested=True, leaves_only=True):
        assert_type(item_key, FlatKey)
        assert value is not None
    leaves: list[torch.Tensor] = list(td.values(include_nested=True, leaves_only=True))[:-1]
    assert all(isinstance(leaf, torch.Tensor) for leaf in leaves)
    last_key, last_value = td.popitem()
    assert_type(last_key, FlatKey)
    assert last_value == "CartPole"


def update_select_exclude() -> None:
    td = make()
    assert_type(td.update({"extra": torch.zeros(4)}), TensorDict)
    assert_type(td.update(make(), keys_to_update=["obs"]), TensorDict)
    assert_type(td.update_({"extra": torch.ones(4)}), TensorDict)
    assert_type(td.select("obs", ("next", "reward")), TensorDict)
    assert_type(td.select("obs", strict=False), TensorDict)
    assert_type(td.exclude("extra", ("next", "done")), TensorDict)
    assert_type(td.flatten_keys("."), TensorDict)
    assert_type(td.flatten_keys(".").unflatten_keys("."), TensorDict)
    assert_type(td.empty(recurse=True), TensorDict)
    assert_type(td.clear(), TensorDict)


def locking() -> None:
    td = make()
    assert_type(td.lock_(), TensorDict)
    assert_type(td.is_locked, bool)
    with td.unlock_():
        td["added"] = torch.zeros(4)
    with td.unlock_() as unlocked:
        assert_type(unlocked, TensorDict)
        unlocked["added_too"] = torch.zeros(4)
    assert td.is_locked
    assert_type(td.unlock_(), TensorDict)
    with td.lock_():
        assert td.is_locked
    assert not td.is_locked


def devices_and_copies() -> None:
    td = make()
    assert_type(td.to("cpu"), TensorDict)
    assert_type(td.to(torch.device("cpu")), TensorDict)
    assert_type(td.to(torch.float64), TensorDict)
    assert_type(td.to("cpu", non_blocking=True), TensorDict)
    assert_type(td.cpu(), TensorDict)
    assert_type(td.clone(), TensorDict)
    assert_type(td.clone(recurse=False), TensorDict)
    assert_type(td.copy(), TensorDict)
    assert_type(td.clear_device_(), TensorDict)
    assert_type(td.auto_device_(), TensorDict)


def arithmetic() -> None:
    td = make().select("obs", ("next", "reward"))
    other = td.clone()
    assert_type(td + 1, TensorDict)
    assert_type(td * other, TensorDict)
    assert_type(2.0 * td, TensorDict)
    assert_type(td == other, TensorDict)
    assert_type(td.abs(), TensorDict)
    assert_type(td.float(), TensorDict)
    assert_type(td.add_(1), TensorDict)
    assert_type((td == other).all(), bool)


def reductions_and_batch_ops() -> None:
    td = make().select("obs", ("next", "reward"))
    assert_type(td.sum(), TensorDict)
    assert_type(td.mean(0, keepdim=True), TensorDict)
    assert_type(td.std(dim="feature", correction=0), TensorDict)
    assert_type(td.sum(reduce=True), torch.Tensor)
    assert_type(td.quantile(0.5, reduce=True), torch.Tensor)
    assert_type(td.amax(reduce=True), torch.Tensor)
    values = td.max(0, return_indices=False)
    assert values.batch_size == ()
    assert_type(td.isnan(), TensorDict)
    assert_type(td.roll(1), TensorDict)
    assert_type(td.softmax(0), TensorDict)
    assert_type(td.gather(0, torch.tensor([1, 0])), TensorDict)
    assert_type(td.new_zeros(2, 3), TensorDict)
    assert_type(td.where(torch.ones(4, dtype=torch.bool), 0.0), TensorDict)
    assert_type(td.masked_fill(torch.ones(4, dtype=torch.bool), 1.0), TensorDict)


def utilities() -> None:
    td = TensorDict({"k": torch.tensor([1, 2, 1, 3])}, [4])
    assert_type(expand_right(torch.tensor([1, 2]), (2, 3)), torch.Tensor)
    assert_type(expand_as_right(torch.tensor([1, 2]), torch.zeros(2, 3)), torch.Tensor)
    assert_type(isin(td, td[:2], "k"), torch.Tensor)
    assert_type(remove_duplicates(td, "k"), TensorDictBase)
    deduped, kept = remove_duplicates(td, "k", return_indices=True)
    assert_type(deduped, TensorDictBase)
    assert_type(kept, torch.Tensor)
    assert deduped.batch_size == (3,)


def conversions() -> None:
    td = make()
    assert_type(TensorDict.from_dict({"a": torch.zeros(2)}, auto_batch_size=True), TensorDict)
    assert_type(tensordict.from_dict({"a": torch.zeros(2)}, batch_size=[2]), TensorDict)
    assert_type(tensordict.make_tensordict(a=torch.zeros(2)), TensorDict)
    assert_type(tensordict.fromkeys(["a", "b"], 0), TensorDict)
    assert_type(TensorDict.from_tuple((torch.zeros(2),)), TensorDict)
    assert_type(TensorDict.from_list([{"a": 0}, {"a": 1}]), TensorDict)
    assert_type(TensorDict.from_pytree([torch.zeros(1)]), TensorDict)
    assert_type(td.to_dict(), dict[str, Any])
    assert_type(td.numpy(), dict[str, Any])
    as_dict: dict[str, Any] = td.exclude("env_name").to_pytree()
    assert set(as_dict) == {"obs", "action", "next"}
    struct = td.exclude("env_name").to_struct_array()
    assert_type(TensorDict.from_struct_array(struct), TensorDict)
    rows: list[dict[str, Any]] = td.tolist()
    assert len(rows) == 4


def sibling_forwarders() -> None:
    td = make()
    # Only looked up, not called: calling needs tensordict-memmap.
    memmap = td.memmap
    assert callable(memmap)


def normalized(td: TensorDictBase) -> TensorDictBase:
    """Library code annotated with the base class: every shared method is visible, typed."""
    out = td.apply(lambda x: x * 2)
    assert_type(out, TensorDictBase)
    picked = td.select("obs").exclude("missing").clone().to(torch.float64)
    assert_type(picked, TensorDictBase)
    parts = td.unbind(0)
    assert_type(parts, tuple[TensorDictBase, ...])
    assert_type(td.add(1, alpha=2), TensorDictBase)
    floats = td.exclude(("next", "done")).float()
    assert_type(floats.addcmul(floats, floats, value=0.5), TensorDictBase)
    assert_type(floats.lerp(floats, 0.5), TensorDictBase)
    assert_type(td.float().sum(dim=0), TensorDictBase)
    assert_type(td.update({"extra": torch.zeros(td.batch_size)}), TensorDictBase)
    assert_type(td.names, list[str | None])
    assert_type(td.is_locked, bool)
    assert_type(td.reshape(-1).unsqueeze(0), TensorDictBase)
    return out


def base_class_annotations() -> None:
    td = make()
    out = normalized(td)
    assert out.batch_size == td.batch_size
    lazy = tensordict.lazy_stack([td[0], td[1]])
    assert normalized(lazy).batch_size == lazy.batch_size


def main() -> None:
    for check in (
        construction,
        get_and_set,
        indexing,
        shape_ops,
        apply,
        stack_and_cat,
        keys_items_values,
        update_select_exclude,
        locking,
        devices_and_copies,
        arithmetic,
        reductions_and_batch_ops,
        utilities,
        conversions,
        sibling_forwarders,
        base_class_annotations,
    ):
        check()
    print("api_usage: every call ran.")


if __name__ == "__main__":
    main()
