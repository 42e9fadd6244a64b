"""Conversions to and from other structures and formats: dicts, namedtuples,
dataclasses, pytrees (``convert``), numpy struct arrays, Arrow, pandas, the tabular column
model, packing, and the printed form (``repr``, ``repr_parse``). Imports the folders below.
"""
