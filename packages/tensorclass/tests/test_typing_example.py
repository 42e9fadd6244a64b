"""The typing example (checked by mypy and pyright in ``nox -s lint``) also runs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def test_typing_example_runs():
    path = Path(__file__).parent / "typing" / "tensorclass_usage.py"
    spec = importlib.util.spec_from_file_location("tensorclass_usage", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up while processing
    try:
        spec.loader.exec_module(module)
        module.main()
    finally:
        del sys.modules[spec.name]
