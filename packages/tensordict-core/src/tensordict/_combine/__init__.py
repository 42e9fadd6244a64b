"""Combining several tensordicts: ``stack``/``cat``/``lazy_stack``/
``maybe_dense_stack`` and the ``torch.*`` function table (``functional``), ragged stacking
(``ragged``). Imports ``_engine`` and below.
"""
