"""The dense ``TensorDict`` (``td``) and its own mixins: dict ops, device ops, shape
ops, first-class-dim indexing (``first_class_index``), the lazy-legacy views. Imports
``_shared`` and below.
"""
