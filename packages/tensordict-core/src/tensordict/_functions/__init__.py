"""Functions over tensordicts built on the engine: padding (``pad``), grouping and
collating (``grouping``), autograd and losses, and the test assertions (``testing``).
Imports ``_combine`` and below.
"""
