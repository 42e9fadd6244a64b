"""Mixins that every concrete kind (dense ``TensorDict``, lazy stacks) uses: indexed
reads and writes, key sets, memory accounting, state dicts. Imports ``_functions`` and below.
"""
