"""The dense ``TensorDict`` (``td``) and its own mixins: dict ops, device ops, shape
ops, the lazy-legacy views. Imports ``_shared`` and below.
"""
