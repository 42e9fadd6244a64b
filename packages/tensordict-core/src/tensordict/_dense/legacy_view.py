"""Lazy-legacy views: the reference's deprecated lazy shape operations.

In lazy-legacy mode (:func:`~tensordict.set_lazy_legacy` ``(True)``), ``permute``,
``transpose``, ``unsqueeze``, ``squeeze(dim)``, ``view`` … of a :class:`TensorDict`
return a :class:`LegacyView`: a tensordict of views of the source's tensors that

* writes every entry set on it (``set``, ``td[key] = …``) through to the source, with the
  inverse operation applied, so that the source holds it too;
* gives the source itself back when the inverse operation is called on it in that mode
  (``td.permute(1, 0).permute(1, 0) is td``);
* in that mode, takes further shape operations (views of the view, writing through
  both); outside it, refuses them (``RuntimeError``; make it dense first with
  :meth:`to_tensordict`), as the reference's lazy views do;
* is locked when its source is.

Every tensordict made from a view (arithmetic, indexing, ``clone`` …) is a plain
:class:`TensorDict`.
"""

from __future__ import annotations

from typing import Any

import torch

from tensordict._dense.td import TensorDict
from tensordict._keys import shape_context as _shape_context
from tensordict._torch import pytree as _pytree
from tensordict._util.legacy import lazy_legacy
from tensordict.base import _key_tuple


class LegacyView(TensorDict):
    """A shape operation's result in lazy-legacy mode (see :mod:`tensordict._dense.legacy_view`).

    >>> import torch
    >>> from tensordict import TensorDict, set_lazy_legacy
    >>> td = TensorDict({"a": torch.zeros(2, 3)}, [2, 3])
    >>> with set_lazy_legacy(True):
    ...     t = td.transpose(0, 1)
    ...     t["b"] = torch.ones(3, 2)
    ...     back = t.transpose(0, 1)
    >>> td["b"].shape, back is td
    (torch.Size([2, 3]), True)
    """

    @classmethod
    def _new_unsafe(
        cls,
        source: dict[str, Any],
        batch_size: torch.Size,
        device: torch.device | None = None,
        names: list[str | None] | None = None,
    ) -> TensorDict:
        return TensorDict._new_unsafe(source, batch_size, device, names)

    # ------------------------------------------------------------------ write-through
    def _write_through(self, key: str) -> None:
        """Write the entry ``key`` of this view into its source (inverse op applied)."""
        last = self.__dict__.get("_legacy_origin")
        source = last[3]() if last else None
        if source is None:
            return
        name, args = last[4](source, self, *last[5], **last[6])
        one = TensorDict._new_unsafe(
            {key: self._tensordict[key]}, self._batch_size, self._device, None
        )
        back = getattr(one, name)(*args)
        source._set_str(key, back._tensordict[key], inplace=False, validated=False)

    def _set_str(self, key: str, value: Any, *, inplace: bool, validated: bool, **kw: Any) -> Any:
        super()._set_str(key, value, inplace=inplace, validated=validated, **kw)
        if not inplace:
            self._write_through(key)
        return self

    def _set_tuple(self, key: tuple[str, ...], value: Any, *, inplace: bool, **kw: Any) -> Any:
        super()._set_tuple(key, value, inplace=inplace, **kw)
        if not inplace and len(key) > 1:
            self._write_through(key[0])
        return self

    def __setitem__(self, index: Any, value: Any) -> None:
        super().__setitem__(index, value)
        if type(index) is str:
            self._write_through(index)
        elif type(index) is tuple and index and isinstance(index[0], (str, tuple)):
            self._write_through(_key_tuple(index)[0])

    # ------------------------------------------------------------------ shape ops
    def _made_by(self) -> str:
        last = self.__dict__.get("_legacy_origin")
        return last[0] if last else "a shape operation"

    def _refused(self, name: str) -> RuntimeError:
        hint = "use reshape() or make it dense" if name == "view" else "Make it dense"
        return RuntimeError(
            f"Cannot call `{name}` on a lazy tensordict (the result of `{self._made_by()}` in "
            f"lazy-legacy mode, see set_lazy_legacy): {hint} first with td.to_tensordict()."
        )

    def _inverse_or_refuse(self, name: str, call: Any) -> Any:
        if not lazy_legacy():  # outside the mode a lazy view is not reshaped further
            raise self._refused(name)
        try:
            return call()  # another view (of this view), or the source for the inverse
        except (ValueError, IndexError):
            raise  # bad arguments (they are RuntimeErrors too, for torch's sake)
        except RuntimeError:
            raise self._refused(name) from None

    def to(self, *args: Any, **kwargs: Any) -> Any:
        """:meth:`TensorDict.to`; a view's batch size is not set by it (``TypeError``)."""
        if kwargs.get("batch_size") is not None:
            raise TypeError(
                f"to(batch_size=...): Cannot pass batch-size to a lazy view (the result of "
                f"`{self._made_by()}` in lazy-legacy mode); make it dense first with "
                "td.to_tensordict()."
            )
        return super().to(*args, **kwargs)

    # ------------------------------------------------------------------ lock
    @property
    def _is_locked(self) -> bool:  # type: ignore[override]
        """A view is locked when its source is (it writes through to it)."""
        last = self.__dict__.get("_legacy_origin")
        source = last[3]() if last else None
        if source is not None:
            return bool(source._is_locked)
        return bool(self.__dict__.get("_own_lock", False))

    @_is_locked.setter
    def _is_locked(self, value: bool) -> None:
        self.__dict__["_own_lock"] = value

    def permute(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        """Only the inverse permutation (in lazy-legacy mode), else ``RuntimeError``."""
        return self._inverse_or_refuse(
            "permute", lambda: super(LegacyView, self).permute(*args, **kwargs)
        )

    def transpose(self, dim0: int, dim1: int) -> Any:  # type: ignore[override]
        """Only the inverse transposition (in lazy-legacy mode), else ``RuntimeError``."""
        return self._inverse_or_refuse(
            "transpose", lambda: super(LegacyView, self).transpose(dim0, dim1)
        )

    def squeeze(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        """Only the inverse of an ``unsqueeze`` (in lazy-legacy mode), else ``RuntimeError``."""
        return self._inverse_or_refuse(
            "squeeze", lambda: super(LegacyView, self).squeeze(*args, **kwargs)
        )

    def unsqueeze(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        """Only the inverse of a ``squeeze`` (in lazy-legacy mode), else ``RuntimeError``."""
        return self._inverse_or_refuse(
            "unsqueeze", lambda: super(LegacyView, self).unsqueeze(*args, **kwargs)
        )

    def view(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        """Only the inverse ``view`` (in lazy-legacy mode), else ``RuntimeError``; a dtype
        view is a plain :class:`TensorDict` of the leaves viewed as that dtype."""
        if (len(args) == 1 and isinstance(args[0], torch.dtype)) or "dtype" in kwargs:
            return TensorDict.view(self, *args, **kwargs)
        return self._inverse_or_refuse(
            "view", lambda: super(LegacyView, self).view(*args, **kwargs)
        )


_shape_context.LEGACY_VIEW[0] = LegacyView
_pytree.register(LegacyView)  # torch.vmap & co. take it as a TensorDict
