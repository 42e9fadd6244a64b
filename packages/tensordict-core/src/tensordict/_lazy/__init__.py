"""``LazyStackedTensorDict`` (``stack``) and its mixins: member-wise ops, indexing, the
list interface, dense forms, repr. The top of core's private tree: imports everything below.
"""
