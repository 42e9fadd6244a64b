"""Utilities every other folder may use: errors, global modes, print options, the
lazy-legacy switch, futures, the class registry, ``LinkedList``, the ``NO_DEFAULT``
sentinel (``sentinels``). Imports nothing of ``tensordict`` outside this folder.
"""
