"""Check the import structure of tensordict-core (run by ``nox -s lint``).

Two rules keep core's modules free of import circles:

1. The module-level imports between core modules form no cycle (imports under
   ``if TYPE_CHECKING:`` do not count: they never run).
2. A core module imports another core module inside a function only where listed in
   :data:`FORWARDERS` below: the documented upward forwarders (``stack``/``cat``/``pad``
   and friends, whose implementations sit above the module that offers them).
   Telling kinds apart or building a ``TensorDict`` never needs such an import: the
   concrete classes are bound once in ``tensordict._kinds``.

    python tools/check_imports.py        # exit status 1 and one line per problem
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "packages/tensordict-core/src/tensordict"

#: (importing module, imported module) -> why the import must wait for a call.
FORWARDERS: dict[tuple[str, str], str] = {
    ("base", "_functional"): "TensorDictBase.stack/cat/lazy_stack/maybe_dense_stack",
    ("_convert", "_functional"): "TensorDict.from_list stacks its rows",
}


def _module_of(node: ast.ImportFrom | ast.Import, names: set[str]) -> list[str]:
    """The core modules an import statement names (``tensordict`` itself excluded)."""
    out = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            parts = alias.name.split(".")
            if parts[0] == "tensordict" and len(parts) > 1 and parts[1] in names:
                out.append(parts[1])
        return out
    if node.level or not node.module or node.module.split(".")[0] != "tensordict":
        return out
    parts = node.module.split(".")
    if len(parts) > 1:
        if parts[1] in names:
            out.append(parts[1])
        return out
    for alias in node.names:  # from tensordict import _kinds, ...
        if alias.name in names:
            out.append(alias.name)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return "TYPE_CHECKING" in ast.unparse(test)


def scan(core: Path = CORE) -> tuple[dict[str, set[str]], list[tuple[str, str, int]]]:
    """Module-level import edges, and function-level imports ``(module, target, line)``."""
    names = {p.stem for p in core.glob("*.py")} - {"__init__"}
    edges: dict[str, set[str]] = {name: set() for name in names}
    deferred: list[tuple[str, str, int]] = []
    for path in sorted(core.glob("*.py")):
        module = path.stem
        tree = ast.parse(path.read_text(), str(path))

        def visit(node: ast.AST, in_function: bool, module: str = module) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and _is_type_checking(child.test):
                    for grandchild in child.orelse:
                        visit(grandchild, in_function)
                    continue
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    for target in _module_of(child, names):
                        if target == module:
                            continue
                        if in_function:
                            deferred.append((module, target, child.lineno))
                        elif module != "__init__":
                            edges[module].add(target)
                is_function = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                visit(child, in_function or is_function)

        visit(tree, False)
    return edges, deferred


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``edges`` (as a closed path), or ``None``."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state:
                found = dfs(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            found = dfs(node)
            if found:
                return found
    return None


def problems(core: Path = CORE) -> list[str]:
    edges, deferred = scan(core)
    out = []
    cycle = find_cycle(edges)
    if cycle:
        out.append("module-level import cycle: " + " -> ".join(cycle))
    for module, target, line in deferred:
        if (module, target) not in FORWARDERS:
            out.append(
                f"{module}.py:{line}: imports tensordict.{target} inside a function; use "
                "tensordict._kinds to test or build a kind, import at module level, or "
                "document a forwarder in tools/check_imports.py FORWARDERS"
            )
    used = {(m, t) for m, t, _ in deferred}
    for pair in sorted(set(FORWARDERS) - used):
        out.append(f"FORWARDERS lists {pair[0]} -> {pair[1]}, which no function imports")
    return out


def main() -> int:
    found = problems()
    for line in found:
        print(line)
    if not found:
        print(f"{CORE.relative_to(ROOT)}: no import cycle, only the documented forwarders")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
