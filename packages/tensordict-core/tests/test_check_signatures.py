"""``tools/check_signatures.py``: its parser and comparison, and core against the
reference's list (no difference that the allowlist does not justify)."""

from __future__ import annotations

import pytest
from core_helpers import TOOLS, load_tool

pytestmark = pytest.mark.skipif(
    not (TOOLS / "check_signatures.py").exists(), reason="runs from a source checkout"
)


@pytest.fixture(scope="module")
def tool():
    return load_tool("check_signatures")


def test_parse_entry(tool) -> None:
    entry = tool._parse_entry(
        "TensorDict",
        "- `apply(self, fn: 'Callable', *others: 'T', device: 'x' = <_NoDefault.ZERO: 0>, "
        "**kw) -> 'Self | None'`",
        "method",
    )
    assert entry.name == "apply" and entry.kind == "method"
    assert [(p.name, p.kind, p.default) for p in entry.params] == [
        ("self", "positional", None),
        ("fn", "positional", None),
        ("others", "*args", None),
        ("device", "keyword", "NO_DEFAULT"),
        ("kw", "**kwargs", None),
    ]
    prop = tool._parse_entry("TensorDict", "- `batch_size` — property (settable)", "method")
    assert prop.kind == "property" and prop.settable


def test_compare_params_names_each_difference(tool) -> None:
    ref = tool._parse_params("self, a, b: 'int' = 1, *, c=None")

    def mine(self, a, b=2, *, d=None):  # noqa: ANN001, ANN202
        pass

    diffs = tool.compare_params("f", ref, tool._installed_params(mine))
    assert "f: parameter 'b' default 2 (reference: 1)" in diffs
    assert "f: missing parameter c=None" in diffs
    assert "f: extra parameter d=None" in diffs
    assert len(diffs) == 3


def test_core_has_no_unjustified_difference(tool) -> None:
    reference = tool._default_reference()
    allow = tool.read_allowlist()
    report = tool.run(reference)
    new = [d for d in report.differences.get("tensordict-core", []) if d not in allow]
    assert new == []
