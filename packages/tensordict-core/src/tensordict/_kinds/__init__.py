"""The kinds of tensordict bound once (``kinds``: ``isinstance`` targets and the
typing views the mixins use), keys views and walkers (``views``), locks (``lock``), the
nesting limit (``nesting``), in-place shape ops (``inplace``). Imports the folders below.
"""
