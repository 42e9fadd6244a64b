"""``tools/check_imports.py``: every import circle is reported (not only the first one
found), stub-only modules count as type-checking imports, and ARCHITECTURE.md's core map is
the one the code gives."""

from __future__ import annotations

import pytest
from core_helpers import TOOLS, load_tool

ROOT = TOOLS.parent
pytestmark = pytest.mark.skipif(
    not (TOOLS / "check_imports.py").exists(), reason="runs from a source checkout"
)


@pytest.fixture(scope="module")
def tool():
    return load_tool("check_imports")


def test_every_circle_is_reported(tool) -> None:
    # two separate circles and a module that only reaches them: both circles, once each
    edges = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"a", "c"}}
    cycles = tool.find_cycles(edges)
    assert sorted(sorted(set(c)) for c in cycles) == [["a", "b"], ["c", "d", "e"]]
    for cycle in cycles:  # each is a real path that closes on itself
        assert cycle[0] == cycle[-1]
        assert all(nxt in edges[cur] for cur, nxt in zip(cycle, cycle[1:], strict=False))
    assert tool.find_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_stub_only_modules_count_as_type_checking_imports(tool, tmp_path) -> None:
    pkg = tmp_path / "tensordict"
    (pkg / "low").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low" / "__init__.py").write_text("")
    (pkg / "low" / "mod.py").write_text("from typing import TYPE_CHECKING\n")
    (pkg / "top.py").write_text("from tensordict.low import mod\n")
    (pkg / "_stub.pyi").write_text("from tensordict.top import Thing\n")
    (pkg / "both.py").write_text("")
    (pkg / "both.pyi").write_text("from tensordict.top import Thing\n")  # has a .py: skipped
    modules = tool.core_modules(pkg)
    assert modules["_stub"].suffix == ".pyi" and modules["both"].suffix == ".py"
    edges, typing_edges, _deferred = tool.scan(modules, "tensordict")
    assert typing_edges["_stub"] == {"top"} and edges["_stub"] == set()
    assert edges["top"] == {"low.mod"} and typing_edges["both"] == set()


def test_first_sentence_is_markdown(tool) -> None:
    doc = "Storage: :class:`~tensordict._backed.base.BackedTensorDict`, ``x``/\n``y``. More."
    assert tool._first_sentence(doc) == "Storage: ``BackedTensorDict``, ``x``/``y``."
    assert tool._first_sentence("Keys and shapes: nested keys") == "Keys and shapes."
    doc = "The base (:class:`~a.b.C`) and ``x``/\n``y``. More."
    assert tool._first_sentence(doc) == "The base (``C``) and ``x``/``y``."


def test_architecture_map_follows_the_code(tool) -> None:
    text = (ROOT / "ARCHITECTURE.md").read_text()
    block = text.split(tool.MAP_START, 1)[1].split(tool.MAP_END, 1)[0]
    assert block == "\n" + tool.core_map()
    core = ROOT / "packages/tensordict-core/src/tensordict"
    for folder in sorted(p.parent for p in core.glob("_*/__init__.py")):
        row = next(line for line in block.splitlines() if f"| `{folder.name}/` |" in line)
        for module in folder.glob("*.py"):
            if module.stem != "__init__":
                assert f"`{module.stem}`" in row, (folder.name, module.stem)
