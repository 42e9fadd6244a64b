"""pytest configuration of the tensordict-memmap tests: their shared helpers module
(``memmap_helpers``) is importable from every test file."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
