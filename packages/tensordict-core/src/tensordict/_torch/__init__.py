"""torch integration below ``base``: the pytree nodes of tensordicts (``pytree_td``,
``pytree``) and ``torch.vmap``'s dims named as batch dims (``vmap_dims``). Imports the
folders below.
"""
