"""The one codec for bytes: consolidation (``format``, ``read``, ``consolidate``), the
wire form of a tensordict (``wire``), gathering across processes (``gather``). Imports the
folders below.
"""
