"""torch integration below ``base``: the pytree nodes of tensordicts (``pytree_td``,
``pytree``). Imports the folders below.
"""
