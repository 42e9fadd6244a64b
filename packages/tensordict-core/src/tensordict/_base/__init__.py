"""The mixins of ``TensorDictBase`` (``tensordict.base``): ``apply`` and its family
(``apply_ops``), the holders of the methods installed at import (``installed``),
attributes, leaves combined into one tensor, the reference's extra surface, and the names
clients import although the reference keeps them private (``client_compat``). Imports the
folders below.
"""
