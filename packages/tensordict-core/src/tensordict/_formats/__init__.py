"""Conversions to and from other structures and formats: the ``from_*``/``to_*`` methods
(``convert``: the ``ConversionOps`` mixin), reading Python objects in (``from_python``:
dicts, namedtuples, dataclasses, lists) and writing them out (``to_python``: ``tolist``,
``numpy``), numpy struct arrays, Arrow, pandas, the tabular column model, packing, and the
printed form (``repr``, ``repr_parse``). Imports the folders below.
"""
