"""The consolidated format: its constants and how non-tensor values are written in the
metadata (JSON, or base64 pickles when allowed). See :mod:`tensordict._wire.consolidate`.

>>> MAGIC, ALIGN
(b'TDCONS01', 16)
"""

from __future__ import annotations

import base64
import pickle
from typing import Any

from tensordict._keys.nested import unravel_key

#: Last bytes of a buffer or file that carries its metadata.
MAGIC = b"TDCONS01"
_TRAILER = 8 + len(MAGIC)
FORMAT_VERSION = 1
#: Every leaf starts at a multiple of this many bytes (the largest element size).
ALIGN = 16


# ---------------------------------------------------------------------- non-tensor values
def _is_json_exact(value: Any) -> bool:
    """Whether ``json.loads(json.dumps(value)) == value`` holds with the same types."""
    if value is None or type(value) in (bool, int, float, str):
        return True
    if type(value) is list:
        return all(_is_json_exact(v) for v in value)
    if type(value) is dict:
        return all(type(k) is str and _is_json_exact(v) for k, v in value.items())
    return False


def _encode_non_tensor(
    path: tuple[str, ...], value: Any, allow_pickle: bool, for_pickle: bool, in_memory: bool = False
) -> dict[str, Any]:
    """One non-tensor value as a metadata entry: JSON when it is JSON data; else pickled
    (``allow_pickle``) or, when the metadata never leaves the process as bytes
    (``for_pickle``: pickle is the transport; ``in_memory``: it only rebuilds the result),
    the object itself; else a TypeError naming the key."""
    if for_pickle:  # the transport is pickle already: carry the object itself
        return {"kind": "object", "value": value}
    if _is_json_exact(value):
        return {"kind": "json", "value": value}
    if allow_pickle:
        data = base64.b64encode(pickle.dumps(value)).decode("ascii")
        return {"kind": "pickle", "value": data}
    if in_memory:
        return {"kind": "object", "value": value}
    raise TypeError(
        f"consolidate: the non-tensor entry {unravel_key(path)!r} holds a "
        f"{type(value).__name__}, which is not plain JSON data (None, bool, int, float, str, "
        "and lists / str-keyed dicts of them). Consolidated metadata is JSON so that loading "
        "it never unpickles; pass allow_pickle=True to store it pickled instead."
    )


def _decode_non_tensor(path: tuple[str, ...], entry: dict[str, Any], allow_pickle: bool) -> Any:
    kind = entry.get("kind")
    if kind in ("json", "object"):
        return entry["value"]
    if kind == "pickle":
        if not allow_pickle:
            raise ValueError(
                f"from_consolidated: the non-tensor entry {unravel_key(path)!r} was stored "
                "pickled; unpickling can run arbitrary code, so it needs allow_pickle=True "
                "(only for data from a trusted source)."
            )
        return pickle.loads(base64.b64decode(entry["value"]))
    raise ValueError(
        f"from_consolidated: unknown entry kind {kind!r} at {unravel_key(path)!r} in the metadata."
    )
