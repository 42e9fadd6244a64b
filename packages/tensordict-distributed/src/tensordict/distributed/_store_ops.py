"""The ``TensorDict`` methods of the stores, in terms of their server primitives.

A store (:class:`~tensordict.TensorDictStore`, :class:`~tensordict.LazyStackedTensorDictStore`)
offers every method of a :class:`~tensordict.TensorDict`, under three rules:

* **Metadata questions** (``get_item_shape``, ``entry_class``, ``sorted_keys``, ``depth``,
  ``is_empty``, ``bytes``, ``param_count``) are answered from the keys, dtypes and shapes
  kept beside the data: nothing is downloaded.
* **Methods that make new data** (``to``, ``clone`` of the data, ``select``, ``reshape``,
  ``split``, ``unbind``, ``consolidate``, ``state_dict`` … see :data:`ON_LOCAL_COPY`)
  run on a local copy (:meth:`~TensorDictStore.to_local`) and return local results;
  ``select``/``exclude`` download only the entries they keep. Views (``view``,
  ``permute``, ``unsqueeze`` …) raise ``RuntimeError``: a tensor on a server has no view.
* **Methods that change the tensordict in place** (``update_``, ``copy_``,
  ``rename_key_``, ``clear``, ``load_state_dict``, ``separates``, ``split_keys(inplace=True)``
  … see :data:`IN_PLACE`) apply to a local copy, then write back what changed in one
  round trip (changed leaves are found by identity and by the tensors' version counter);
  row writes (``set_at_``, ``update_at_``, ``copy_at_``) are written in place on the
  server. ``lock_()`` makes the handle refuse new keys and deletions.

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
from tensordict._plugins.api import lazy_members, lock_error
from tensordict.base import NO_DEFAULT, TensorDictBase, _key_tuple

_Path = tuple[str, ...]

#: Methods that return new data: run on a local copy of the store.
ON_LOCAL_COPY = tuple(
    """broadcast_to chunk consolidate cpu cuda data_ptr empty expand expand_as flatten
    flatten_keys flip fliplr flipud narrow pad rename repeat replace reshape split
    state_dict tensor_split to to_padded_tensor unbind unflatten unflatten_keys""".split()
)
#: Methods that change the tensordict in place: applied to a local copy, written back.
IN_PLACE = tuple("""copy_ load_state_dict rename_key_ separates split_keys update_""".split())
#: Methods answered from the metadata (a skeleton of meta tensors), without downloading.
FROM_METADATA = tuple("bytes entry_class get_item_shape is_empty param_count".split())
#: Views: a tensor on a server has none.
VIEWS = tuple("movedim moveaxis permute squeeze swapaxes swapdims transpose unsqueeze view".split())


def _on_local_copy(name: str) -> Callable[..., Any]:
    method = getattr(TensorDict, name)

    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.to_local(), name)(*args, **kwargs)

    run.__doc__ = (
        f"``TensorDict.{name}`` on a local copy of the store (the result is local; the "
        "store is unchanged)."
    )
    return run


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


def _from_metadata(name: str) -> Callable[..., Any]:
    method = getattr(TensorDict, name)

    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._skeleton(), name)(*args, **kwargs)

    run.__doc__ = f"``TensorDict.{name}``, answered from the store's metadata (no download)."
    return run


def _no_view(name: str) -> Callable[..., Any]:
    method = getattr(TensorDict, name)

    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"{type(self).__name__}.{name}: a tensordict on a server has no views; call "
            f"store.to_local().{name}(...) for a local result."
        )

    run.__doc__ = f"Raises ``RuntimeError``: ``{name}`` makes a view, which a store cannot."
    return run


def _leaf_state(td: Any) -> dict[Any, Any]:
    """``{key: (id, version)}`` of every leaf (``-1`` as the version of non-tensor leaves);
    for a lazy stack, one such pair per member."""
    members = lazy_members(td)
    if members is not None:
        states = [_leaf_state(m) for m in members]
        keys = set().union(*states) if states else set()
        return {key: tuple(state.get(key) for state in states) for key in keys}
    return {
        key: (id(value), value._version if isinstance(value, torch.Tensor) else -1)
        for key, value in td.items(include_nested=True, leaves_only=True, is_leaf=is_leaf_nontensor)
    }


class StoreOps:
    """Mixin of the stores: the ``TensorDict`` methods beyond the primitives."""

    _locked = False
    _names: list[str | None] | None = None

    for _name in ON_LOCAL_COPY:
        locals()[_name] = _on_local_copy(_name)
    for _name in IN_PLACE:
        locals()[_name] = _in_place(_name)
    for _name in FROM_METADATA:
        locals()[_name] = _from_metadata(_name)
    for _name in VIEWS:
        locals()[_name] = _no_view(_name)
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
        self.update(local.select(*keys, strict=False))

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
    def __delitem__(self: Any, key: Any) -> None:
        self.del_(key)

    def clear(self: Any) -> Any:
        """Delete every entry on the server (the store itself stays: see
        :meth:`clear_redis` to delete it)."""
        self._delete([_key_tuple(k) for k in self.keys()])
        return self

    @property
    def sorted_keys(self: Any) -> list[str]:
        """The top-level keys, sorted."""
        return sorted(self.keys())

    @property
    def depth(self: Any) -> int:
        """The depth of the deepest entry (0 for top-level leaves only)."""
        return self._skeleton().depth

    # ------------------------------------------------------------------ locking
    @property
    def is_locked(self: Any) -> bool:
        """Whether this handle refuses new keys and deletions."""
        return self._locked

    @is_locked.setter
    def is_locked(self: Any, value: bool) -> None:
        self._locked = bool(value)

    def lock_(self: Any) -> Any:
        """Refuse new keys and deletions through this handle (writes into existing entries
        are allowed)."""
        self._locked = True
        return self

    def unlock_(self: Any) -> Any:
        """Allow new keys and deletions again."""
        self._locked = False
        return self

    def _check_unlocked(self: Any, paths: list[_Path], what: str) -> None:
        if self._locked and paths:
            raise lock_error(paths[0][0] if len(paths[0]) == 1 else paths[0], what)

    # ------------------------------------------------------------------ names and devices
    @property
    def names(self: Any) -> list[str | None]:
        """The names of the batch dimensions (kept on the server)."""
        return list(self._names) if self._names is not None else [None] * self.batch_dims

    @names.setter
    def names(self: Any, value: Any) -> None:
        probe = TensorDict(batch_size=self.batch_size, names=value)
        self._names = probe.names if value is not None else None
        self._write_info()

    def refine_names(self: Any, *names: Any) -> Any:
        """Name the batch dimensions (existing names cannot change)."""
        self.names = self._names_probe().refine_names(*names).names
        return self

    def rename_(self: Any, *names: Any, **rename_map: str) -> Any:
        """Rename the batch dimensions."""
        self.names = self._names_probe().rename_(*names, **rename_map).names
        return self

    def _names_probe(self: Any) -> TensorDict:
        return TensorDict(batch_size=self.batch_size, names=self._names)

    def auto_batch_size_(
        self: Any, batch_dims: int | None = None, keep_compliant_size: bool = False
    ) -> Any:
        """Set the batch size to the longest leading shape all entries share."""
        skeleton = self._skeleton()
        skeleton.auto_batch_size_(batch_dims, keep_compliant_size)
        self.batch_size = skeleton.batch_size
        return self

    def auto_device_(self: Any) -> Any:
        """Reads stay where they go (the server has no device): returns the store."""
        return self

    def clear_device_(self: Any) -> Any:
        """Reads go to the CPU from now on."""
        self._device = None
        return self

    # ------------------------------------------------------------------ memory
    def is_consolidated(self: Any) -> bool:
        """``False``: a store's leaves are separate strings on the server."""
        return False

    @classmethod
    def from_consolidated(cls, *args: Any, **kwargs: Any) -> Any:
        """:meth:`TensorDict.from_consolidated <tensordict.TensorDict.from_consolidated>`
        (a local tensordict)."""
        return TensorDict.from_consolidated(*args, **kwargs)

    def share_memory_(self: Any) -> Any:
        """Raises ``NotImplementedError``: a store's data is on the server."""
        raise NotImplementedError(
            f"{type(self).__name__}: the data is on the server, not in this process's memory; "
            "call store.to_local().share_memory_()."
        )

    def pin_memory(self: Any, num_threads: int | None = None, inplace: bool = False) -> Any:
        """Raises ``RuntimeError``: a store's data is on the server."""
        raise RuntimeError(
            f"{type(self).__name__}: the data is on the server and cannot be pinned; call "
            "store.to_local().pin_memory()."
        )

    def pin_memory_(self: Any, num_threads: int = 0) -> Any:
        """Raises ``RuntimeError``: a store's data is on the server."""
        return self.pin_memory(num_threads, inplace=True)

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
