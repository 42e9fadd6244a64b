"""Keys, shapes and indices: nested keys (``nested``), batch-size and device helpers
(``shape``), index normalisation (``index``), first-class-dim indices (``first_class``),
shape-op contexts (``shape_context``). Imports ``_util`` only.
"""
