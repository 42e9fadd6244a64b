"""The tree-map engine (``tree``: the one walker of leaves) and the method families
declared from tables (``ops``, ``ops_batch``, ``ops_reduce``, ``ops_state``), installed on
``TensorDictBase``. Imports ``tensordict.base`` and the folders below it.
"""
