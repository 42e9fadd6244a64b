"""tensordict.distributed: tensordicts across processes (``tensordict-distributed``).

* Point to point — ``td.send``/``td.recv``, ``td.isend``/``td.irecv``, ``td.init_remote`` /
  ``TensorDict.from_remote_init`` — and collectives — ``td.broadcast``, ``td.all_gather``,
  ``td.reduce``, ``td.all_reduce``, :func:`td_scatter` — over ``torch.distributed``. A
  tensordict crosses as buffer plus a small JSON description, whatever its number of leaves
  (the codec is core's ``consolidate``); nothing received is ever unpickled; receivers
  check what arrives; every blocking call takes a ``timeout`` and a dead peer raises.
* ``td.map``/``td.map_iter``: a function over chunks of a tensordict in worker
  processes (any ``multiprocessing.Pool``-like pool), chunks in shared memory.
* :class:`TensorDictStore` and :class:`LazyStackedTensorDictStore`: a tensordict kept on a
  Redis server (extra ``redis``: ``pip install tensordict-distributed[redis]``).

The ``TensorDict`` methods are core forwarders to the ``td_*`` hooks below. It depends on
``tensordict-core`` only; ``tensordict.memmap`` (extra ``memmap``) and ``redis`` (extra
``redis``) are imported only when used.
"""

from typing import Any

from tensordict.distributed._collectives import td_all_gather, td_broadcast, td_scatter
from tensordict.distributed._map import WorkerDiedError, td_map, td_map_iter
from tensordict.distributed._p2p import (
    Transfer,
    from_remote_init,
    td_arecv,
    td_asend,
    td_init_remote,
    td_irecv,
    td_isend,
    td_recv,
    td_send,
)
from tensordict.distributed._peers import (
    DistributedTimeoutError,
    PeerClosedError,
    RemoteError,
)
from tensordict.distributed._redis import StoreDataLostError
from tensordict.distributed._reductions import td_all_reduce, td_reduce
from tensordict.distributed._store import td_to_store

__version__ = "0.1.0"

__all__ = [
    "DistributedTimeoutError",
    "LazyStackedTensorDictStore",
    "PeerClosedError",
    "RemoteError",
    "StoreDataLostError",
    "TensorDictStore",
    "Transfer",
    "WorkerDiedError",
    "from_remote_init",
    "td_all_gather",
    "td_all_reduce",
    "td_arecv",
    "td_asend",
    "td_broadcast",
    "td_init_remote",
    "td_irecv",
    "td_isend",
    "td_map",
    "td_map_iter",
    "td_recv",
    "td_reduce",
    "td_scatter",
    "td_send",
    "td_to_store",
]


def __getattr__(name: str) -> Any:
    # The stores import redis only when first used (extra ``redis``).
    if name == "TensorDictStore":
        from tensordict.distributed._store import TensorDictStore

        return TensorDictStore
    if name == "LazyStackedTensorDictStore":
        from tensordict.distributed._store_lazy import LazyStackedTensorDictStore

        return LazyStackedTensorDictStore
    raise AttributeError(f"module 'tensordict.distributed' has no attribute {name!r}")
