"""Leaf types that are not plain tensors: ``TensorCollection`` (``collection``),
non-tensor data and stacks (``nontensor*``), ``UnbatchedTensor`` (``unbatched``). Imports
``_util``, ``_plugins``, ``_keys``.
"""
