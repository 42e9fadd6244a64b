"""Storage-backed tensordicts: :class:`~tensordict._backed.base.BackedTensorDict`, the
base of every tensordict whose entries live in a backend (an HDF5 file, a zarr store, a
Redis server); its shared writes (:mod:`~tensordict._backed.writes`); the tables of
methods it runs on the content read into memory (:mod:`~tensordict._backed.families`);
and the contract every backend's tests run (:mod:`~tensordict._backed.contract`). A
backend implements a handful of primitives (list, read, write, remove); everything else
of the ``TensorDictBase`` interface is here, once. The top of core's private tree with
``_dense`` and ``_lazy``: may import everything below.
"""
