"""What the stores do beyond their storage-backed base, in terms of their server primitives.

The stores (:class:`~tensordict.TensorDictStore`, :class:`~tensordict.LazyStackedTensorDictStore`)
are storage-backed tensordicts: their base (``BackedTensorDict``, from core) answers
metadata questions, refuses views, reads into memory what makes new data and carries
locking, names and devices. A server adds three things of its own:

* ``to``/``cpu``/``cuda``, ``state_dict``, ``pad`` … (:data:`ON_LOCAL_COPY`) run on a
  local copy (:meth:`~TensorDictStore.to_local`) and return local results;
  ``select``/``exclude`` download only the entries they keep in one round trip.
* **Methods that change the tensordict in place** (``update_``, ``copy_``,
  ``rename_key_``, ``load_state_dict``, ``separates``, ``split_keys(inplace=True)``
  … see :data:`IN_PLACE`) apply to a local copy, then write back what changed in one
  round trip (changed leaves are found by identity and by the tensors' version counter);
  row writes (``set_at_``, ``update_at_``, ``copy_at_``) are written in place on the
  server.
* ``clone`` makes a copy under a new ``td_id`` on the same server.

.. code-block:: python

    store = TensorDictStore.from_tensordict(td, port=6379)
    store.get_item_shape("obs")   # from the metadata
    store.select("obs")           # a local TensorDict, only "obs" downloaded
    store.rename_key_("obs", "observation")  # on the server
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from tensordict import TensorDict, is_leaf_nontensor
from tensordict._plugins.api import backed_families, lazy_members, lock_error
from tensordict.base import NO_DEFAULT, TensorDictBase, _key_tuple

_Path = tuple[str, ...]

#: Methods that return new data, beyond the storage-backed base's families: run on a
#: local copy of the store (``to``/``cpu``/``cuda`` included: the result is local).
ON_LOCAL_COPY = tuple("cpu cuda data_ptr pad replace state_dict to to_padded_tensor".split())
#: Methods that change the tensordict in place: applied to a local copy, written back.
IN_PLACE = tuple("""copy_ load_state_dict rename_key_ separates split_keys update_""".split())


def _in_place(name: str) -> Callable[..., Any]:
    method = getattr(TensorDict, name)

    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        local = self.to_local()
        before = _leaf_state(local)
        result = getattr(local, name)(*args, **kwargs)
        self._write_back(local, before)
        return self if result is local else result

    run.__doc__ = (
        f"``TensorDict.{name}``, applied to the store: what changes is written back to the "
        "server in one round trip."
    )
    return run


def _leaf_state(td: Any) -> dict[Any, Any]:
    """``{key: (id, version)}`` of every leaf; a non-tensor leaf's version is its values
    (written in place, it keeps its identity); for a lazy stack, one pair per member."""
    members = lazy_members(td)
    if members is not None:
        states = [_leaf_state(m) for m in members]
        keys = set().union(*states) if states else set()
        return {key: tuple(state.get(key) for state in states) for key in keys}
    return {
        key: (id(value), value._version if isinstance(value, torch.Tensor) else _values(value))
        for key, value in td.items(include_nested=True, leaves_only=True, is_leaf=is_leaf_nontensor)
    }


def _values(value: Any) -> str:
    """A non-tensor leaf's values, as text (compared before and after an in-place op)."""
    return repr(value.tolist() if hasattr(value, "tolist") else value)


class StoreOps:
    """Mixin of the stores: the ``TensorDict`` methods beyond the primitives."""

    _names: list[str | None] | None = None

    for _name in ON_LOCAL_COPY:
        locals()[_name] = backed_families.in_memory(_name, getattr(TensorDict, _name))
    for _name in IN_PLACE:
        locals()[_name] = _in_place(_name)
    del _name

    # ------------------------------------------------------------------ writing back
    def _write_back(self: Any, local: Any, before: dict[Any, tuple[int, int]]) -> None:
        """Write to the server the leaves of ``local`` (a modified local copy) that are new
        or changed since ``before`` (:func:`_leaf_state`), and delete those it lost."""
        after = _leaf_state(local)
        gone = [key for key in before if key not in after]
        changed = [key for key, state in after.items() if before.get(key) != state]
        if gone:
            self._delete([_key_tuple(k) for k in gone])
        if changed:
            self._write_changed(local, changed)

    def _write_changed(self: Any, local: Any, keys: list[Any]) -> None:
        """Upload the leaves ``keys`` of the local copy ``local`` (one round trip)."""
        # locked: written in place (allowed), so a new key or another shape still raises
        self.update(local.select(*keys, strict=False), inplace=self._is_locked)

    # ------------------------------------------------------------------ new handles
    def clone(self: Any, recurse: bool = True, **kwargs: Any) -> Any:
        """A copy of the store on the same server, under a new ``td_id``
        (``recurse=False``: a new handle on the same data, as :meth:`copy`)."""
        if not recurse:
            return self._reopen(self.td_id)
        return type(self).from_tensordict(self.to_local(), **self._connection_kwargs())

    def copy(self: Any) -> Any:
        """A new handle on the same data (a shallow copy: writes through one are seen
        through the other)."""
        return self.clone(recurse=False)

    def select(
        self: Any,
        *keys: Any,
        inplace: bool = False,
        strict: bool = True,
        as_tensordict: bool = False,
    ) -> Any:
        """The entries ``keys`` as a local :class:`~tensordict.TensorDict` (only they are
        downloaded); ``inplace=True`` deletes the others on the server instead."""
        kept = self._skeleton().select(*keys, strict=strict)
        return self._keep(
            list(kept.keys(include_nested=True, leaves_only=True, is_leaf=is_leaf_nontensor)),
            inplace,
        )

    def exclude(self: Any, *keys: Any, inplace: bool = False) -> Any:
        """All entries but ``keys``, as a local :class:`~tensordict.TensorDict` (only they
        are downloaded); ``inplace=True`` deletes ``keys`` on the server instead."""
        kept = self._skeleton().exclude(*keys)
        return self._keep(
            list(kept.keys(include_nested=True, leaves_only=True, is_leaf=is_leaf_nontensor)),
            inplace,
        )

    def _keep(self: Any, keys: list[Any], inplace: bool) -> Any:
        """The leaves ``keys`` as a local copy, or (``inplace``) delete the others."""
        paths = {_key_tuple(k) for k in keys}
        if inplace:
            self._delete([p for p in self._entries() if p not in paths])
            return self
        return self._local_of(sorted(paths))

    # ------------------------------------------------------------------ row writes
    def set_at_(self: Any, key: Any, value: Any, index: Any, *, non_blocking: bool = False) -> Any:
        """Write ``value`` into the rows ``index`` of the entry ``key``, on the server."""
        self._check_keys([key])
        self[index] = {key: value} if isinstance(key, str) else _nested(key, value)
        return self

    def get_at(self: Any, key: Any, index: Any, default: Any = NO_DEFAULT) -> Any:
        """The rows ``index`` of the entry ``key`` (only those rows are downloaded)."""
        if key not in self.keys(include_nested=True):
            if default is NO_DEFAULT:
                self._check_keys([key])
            return default
        return self[index].get(key)

    def update_at_(
        self: Any,
        input_dict_or_td: Any,
        idx: Any,
        clone: bool = False,
        *,
        non_blocking: bool = False,
        keys_to_update: Any = None,
    ) -> Any:
        """Write the entries of ``input_dict_or_td`` into the rows ``idx``, on the server."""
        source = input_dict_or_td
        if not isinstance(source, TensorDictBase):
            source = TensorDict(source)
        if keys_to_update is not None:
            source = source.select(*keys_to_update, strict=False)
        self._check_keys(
            list(source.keys(include_nested=True, leaves_only=True, is_leaf=is_leaf_nontensor))
        )
        self[idx] = source
        return self

    def copy_at_(
        self: Any, tensordict: Any, idx: Any, non_blocking: bool = False, *, fast: bool = True
    ) -> Any:
        """Write ``tensordict`` into the rows ``idx``, on the server."""
        return self.update_at_(tensordict, idx)

    def _check_keys(self: Any, keys: list[Any]) -> None:
        present = {_key_tuple(k) for k in self.keys(include_nested=True)}
        for key in keys:
            if _key_tuple(key) not in present:
                raise KeyError(
                    f"key {key!r} is not in the {type(self).__name__} (keys: "
                    f"{sorted(map(str, self.keys(True, True)))}); in-place writes need "
                    "existing keys."
                )

    # ------------------------------------------------------------------ keys
    def clear(self: Any) -> Any:
        """Delete every entry on the server (the store itself stays: see
        :meth:`clear_redis` to delete it)."""
        self._delete([_key_tuple(k) for k in self.keys()])
        return self

    # ------------------------------------------------------------------ locking
    def _check_paths_unlocked(self: Any, paths: list[_Path], what: str) -> None:
        """Refuse adding or removing ``paths`` while locked (writes into existing entries
        stay allowed, as for a locked ``TensorDict``)."""
        if self._is_locked and paths:
            raise lock_error(paths[0][0] if len(paths[0]) == 1 else paths[0], what)

    # ------------------------------------------------------------------ memory
    def is_consolidated(self: Any) -> bool:
        """``False``: a store's leaves are separate strings on the server."""
        return False

    @classmethod
    def from_consolidated(cls, *args: Any, **kwargs: Any) -> Any:
        """:meth:`TensorDict.from_consolidated <tensordict.TensorDict.from_consolidated>`
        (a local tensordict)."""
        return TensorDict.from_consolidated(*args, **kwargs)

    def record_stream(self: Any, stream: Any) -> Any:
        """Raises ``RuntimeError``: a store's data is on the server."""
        raise RuntimeError(
            f"{type(self).__name__}: the data is on the server; there is no stream to record."
        )

    def create_nested(self: Any, key: Any) -> Any:
        """Raises ``RuntimeError``: a store holds leaves; an empty nested tensordict has none.
        Write the nested entries directly (``store["a", "b"] = tensor``)."""
        raise RuntimeError(
            f"{type(self).__name__}.create_nested({key!r}): a store keeps leaves only, so an "
            "empty nested tensordict cannot be stored; write its entries directly."
        )


def _nested(key: Any, value: Any) -> dict[str, Any]:
    path = _key_tuple(key)
    out: Any = value
    for part in reversed(path):
        out = {part: out}
    return out  # type: ignore[no-any-return]
