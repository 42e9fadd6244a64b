"""Where sibling distributions plug in: the registry of what they provide and the
forwarders that import them on first use (``siblings``, ``forwarders``), and ``api``, the one
module the siblings import of core's private code. ``siblings``/``forwarders`` import only
``_util``; ``api`` is a facade over all of core and is imported by siblings only.
"""
