"""Device and memory operations of the dense ``TensorDict``: to, cpu, cuda, shared and pinned memory."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import torch

from tensordict._base.attrs import holds_tensor_attrs, to_tensor_attrs
from tensordict._keys.shape import parse_device
from tensordict._keys.shape_context import write_back
from tensordict._kinds.inplace import adopt
from tensordict._kinds.inplace import check as check_inplace
from tensordict.base import TensorDictBase

if TYPE_CHECKING:  # pragma: no cover
    from tensordict._dense.td import TensorDict

_Tensor = torch.Tensor


class DeviceOps:
    """Mixin: device moves, dtype casts through ``to``, shared and pinned memory."""

    _last_op: Any

    def to(self, *args: Any, **kwargs: Any) -> TensorDict:
        """Move and/or cast every leaf, like :meth:`torch.Tensor.to`.

        Used as a context manager, a device move writes back on exit: ``with
        td.to(device) as t:`` updates ``td`` with what ``t`` holds (moved to ``td``'s
        device, when it has one), entries added inside the block included.

        Accepts a device, a dtype, a tensor or a tensordict (``other=``: its device, and its
        dtype when all its tensors share one), and
        ``non_blocking``/``batch_size`` keywords; ``inplace=True`` makes the tensordict
        itself hold the result, ``non_blocking_pin=True`` pins host memory before a copy
        to CUDA, ``num_threads`` is accepted for compatibility. A tensordict of
        :class:`~tensordict._base.attrs.TensorAttrs` leaves (made by :meth:`attrs`) casts each
        leaf to the device and dtype recorded for its key instead. Returns ``self`` when
        nothing changes.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2)}, [2])
        >>> td.to(torch.float64)["a"].dtype, td.to("cpu").device
        (torch.float64, device(type='cpu'))
        >>> td.to(TensorDict({"a": torch.zeros(2, dtype=torch.int8)}).attrs())["a"].dtype
        torch.int8
        """
        batch_size = kwargs.pop("batch_size", None)
        non_blocking = kwargs.pop("non_blocking", False)
        inplace = kwargs.pop("inplace", False)
        kwargs.pop("num_threads", None)  # one thread does the copies here
        pin = kwargs.pop("non_blocking_pin", False)
        if inplace:
            check_inplace(self, "to", keeps_structure=True)
            result = self.to(
                *args,
                batch_size=batch_size,
                non_blocking=non_blocking,
                non_blocking_pin=pin,
                **kwargs,
            )
            return adopt(self, result, "to", keeps_structure=True)  # type: ignore[no-any-return]
        result = self
        if "other" in kwargs and not args:  # to(other=tensordict), as the reference
            args = (kwargs.pop("other"),)
        if args and isinstance(args[0], TensorDictBase):
            other = args[0]
            args = args[1:]
            if args or kwargs:
                raise TypeError(
                    "to(other_tensordict) does not accept additional positional or keyword "
                    "arguments: the other tensordict gives the device (and dtype)."
                )
            if holds_tensor_attrs(other):  # leaf by leaf, as recorded by td.attrs()
                if pin:
                    raise NotImplementedError(
                        "to(attrs_tensordict) does not support non_blocking_pin=True: the "
                        "leaves are cast one by one to their recorded device and dtype."
                    )
                result = to_tensor_attrs(self, other, non_blocking=non_blocking)
                device = dtype = None
            else:  # its device, and its dtype when all its tensors share one
                device, dtype = other.device, other.dtype
        else:
            device, dtype, nb, _ = torch._C._nn._parse_to(*args, **kwargs)
            non_blocking = non_blocking or nb
        if dtype is not None:
            if non_blocking:
                result = result._map_tensors(lambda x: x.to(dtype=dtype, non_blocking=True))
            else:  # (an extra keyword costs ~0.5 µs per leaf)
                result = result._map_tensors(lambda x: x.to(dtype=dtype))
        if device is not None:
            device = parse_device(device)
            if device != result._device or any(
                v.device != device for v in result._flat_tensors([])
            ):
                if pin and device.type == "cuda":  # pinned host memory: asynchronous copies

                    def move(x: torch.Tensor) -> torch.Tensor:
                        if x.device.type == "cpu":
                            x = x.pin_memory()
                        return x.to(device, non_blocking=True)
                else:

                    def move(x: torch.Tensor) -> torch.Tensor:
                        return x.to(device, non_blocking=non_blocking)

                result = result._map_tensors(move, device=device)
                if dtype is None and not torch.compiler.is_dynamo_compiling():
                    # `with td.to(device) as t:` writes what t holds back into td on exit
                    result._last_op = (
                        "to",
                        write_back,
                        weakref.ref(result),
                        weakref.ref(self),
                        _inverse_to,
                        (),
                        {},
                    )
        if batch_size is not None:
            if result is self:
                result = self.copy()
            result.batch_size = batch_size
        if result is not self and self._is_locked and not result._is_locked:
            result.lock_()  # as in the reference: a moved or cast locked tensordict is locked
        return result

    def cpu(self, **kwargs: Any) -> TensorDict:
        """Move every leaf to the CPU."""
        return self.to("cpu", **kwargs)

    def cuda(self, device: int | torch.device | None = None, **kwargs: Any) -> TensorDict:
        """Move every leaf to a CUDA device."""
        if device is None:
            device = "cuda"
        elif isinstance(device, int):
            device = torch.device("cuda", device)
        return self.to(device, **kwargs)

    def share_memory_(self) -> TensorDict:
        """Move every leaf to shared memory (for inter-process use); locks the tensordict.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.zeros(2)}, [2]).share_memory_().is_shared()
        True
        """
        for value in self._flat_tensors([]):
            value.share_memory_()
        self.lock_()
        self._last_op = None
        return self

    def is_shared(self) -> bool:
        """Whether every tensor leaf is in shared memory (or on CUDA).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.zeros(2)}, [2]).is_shared()
        False
        """
        leaves = self._flat_tensors([])
        return bool(leaves) and all(v.is_shared() or v.is_cuda for v in leaves)

    def pin_memory(self, num_threads: int | None = None, inplace: bool = False) -> TensorDict:
        """Pin every leaf in page-locked memory (needs a CUDA-enabled PyTorch)."""
        out = self._map_tensors(lambda x: x.pin_memory())
        if inplace:
            self._tensordict = out._tensordict
            return self
        return out

    def pin_memory_(self, num_threads: int = 0) -> TensorDict:
        """In-place :meth:`pin_memory`."""
        return self.pin_memory(num_threads, inplace=True)


def _inverse_to(source: Any, result: Any) -> tuple[str, tuple[Any, ...]]:
    """How the result of ``source.to(device)`` goes back: to the source's device, or as it
    is when the source has none."""
    if source.device is None:
        return "copy", ()
    return "to", (source.device,)
