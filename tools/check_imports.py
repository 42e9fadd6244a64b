"""Check the import structure of the monorepo (run by ``nox -s lint``).

tensordict-core's private modules live in folders by concept, ranked bottom to top
(:data:`LAYERS`). The rules:

1. No import circle between core modules, counting the imports under ``if
   TYPE_CHECKING:`` too (lower layers annotate with the protocols of ``_kinds``, not the
   concrete classes above them).
2. A module imports only from its own folder or from lower ones, but for the few upward
   imports listed in :data:`UPWARD` (the documented forwarders: ``stack``/``cat`` offered
   by ``TensorDictBase`` whose implementation sits above it), each inside a function.
3. Any other import inside a function is listed in :data:`UPWARD` too; telling kinds apart
   or building a ``TensorDict`` never needs one (the classes are bound in ``_kinds.kinds``).
4. At most :data:`MAX_ROOT_MODULES` modules at the root of core's package.
5. The siblings (memmap, nn, distributed, tensorclass) import core only through the
   public modules and :data:`SIBLING_API` (``tensordict._plugins.api``), at module level
   or inside functions; and the module-level imports inside each sibling form no circle.
6. ``ARCHITECTURE.md``'s core map is the one the code gives (folders, their modules, the
   first sentence of each folder's docstring), and every folder of core is a layer.

    python tools/check_imports.py            # exit status 1 and one line per problem
    python tools/check_imports.py --report   # the layers, counts and upward imports
    python tools/check_imports.py --write-map  # redraw ARCHITECTURE.md's core map
"""

from __future__ import annotations

import ast
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "packages/tensordict-core/src/tensordict"
SIBLINGS = {
    "memmap": ROOT / "packages/tensordict-memmap/src/tensordict/memmap",
    "nn": ROOT / "packages/tensordict-nn/src/tensordict/nn",
    "distributed": ROOT / "packages/tensordict-distributed/src/tensordict/distributed",
    "tensorclass": ROOT / "packages/tensorclass/src/tensordict/tensorclass",
}

#: core's folders (and the root module ``base``), bottom first; a module may import its
#: own folder and the ones before it. Root modules other than ``base`` are the top.
LAYERS = (
    "_util",
    "_plugins",
    "_keys",
    "_leaves",
    "_kinds",
    "_torch",
    "_wire",
    "_formats",
    "_base",
    "base",
    "_engine",
    "_combine",
    "_functions",
    "_shared",
    "_dense",
    "_lazy",
    "_backed",
)

#: the one module the siblings import of core's private code: a facade over all of core,
#: never imported by core itself (so it ranks above everything).
SIBLING_API = "_plugins.api"

#: (importing module, imported module) -> why it is an upward (or function-level) import.
UPWARD: dict[tuple[str, str], str] = {
    ("base", "_combine.functional"): "TensorDictBase.stack/cat/lazy_stack/maybe_dense_stack",
    ("_formats.from_python", "_combine.functional"): "TensorDict.from_list stacks its rows",
}
#: at most this many upward imports (counted per statement)
MAX_UPWARD = 5
MAX_ROOT_MODULES = 15

#: core's public modules (any sibling may import them)
PUBLIC = {"", "base", "utils", "tensordict", "functional"}


#: stub-only modules that declare a layer's interface for type checkers -> that layer
STUB_LAYER = {"_table_api": "base"}


def _rank(module: str) -> int:
    if module == SIBLING_API:
        return len(LAYERS) + 1
    head = STUB_LAYER.get(module, module).split(".")[0]
    if head in LAYERS:
        return LAYERS.index(head)
    return len(LAYERS)  # the root modules: the top


def core_modules(core: Path = CORE) -> dict[str, Path]:
    """Dotted names (relative to ``tensordict``) of core's modules, ``__init__`` files as
    their package's name (``""`` for the root). A stub-only module (a ``.pyi`` without its
    ``.py``, such as the generated ``_table_api.pyi``) is a module too: type checkers
    import it, so its imports count as ``TYPE_CHECKING`` ones."""
    out = {}
    for path in sorted([*core.rglob("*.py"), *core.rglob("*.pyi")]):
        if path.suffix == ".pyi" and path.with_suffix(".py").exists():
            continue
        parts = list(path.relative_to(core).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _targets(node: ast.AST, known: set[str], package: str) -> list[str]:
    """The known modules an import statement names (relative to ``package``)."""
    out: list[str] = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name.startswith(f"{package}."):
                name = alias.name[len(package) + 1 :]
                if name in known:
                    out.append(name)
        return out
    assert isinstance(node, ast.ImportFrom)
    if node.level or not node.module:
        return out
    if node.module == package:
        base = ""
    elif node.module.startswith(f"{package}."):
        base = node.module[len(package) + 1 :]
    else:
        return out
    for alias in node.names:
        sub = f"{base}.{alias.name}" if base else alias.name
        if sub in known:
            out.append(sub)  # ``from tensordict._kinds import kinds``
        elif base in known and base:
            out.append(base)
    return sorted(set(out))


def scan(
    modules: dict[str, Path], package: str
) -> tuple[dict[str, set[str]], dict[str, set[str]], list[tuple[str, str, int]]]:
    """Module-level edges, TYPE_CHECKING edges and function-level imports."""
    known = set(modules)
    edges: dict[str, set[str]] = {m: set() for m in modules}
    typing_edges: dict[str, set[str]] = {m: set() for m in modules}
    deferred: list[tuple[str, str, int]] = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))

        def visit(node: ast.AST, in_function: bool, in_typing: bool, module: str = module) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                    for grandchild in child.body:
                        visit_one(grandchild, in_function, True)
                    for grandchild in child.orelse:
                        visit_one(grandchild, in_function, in_typing)
                    continue
                visit_one(child, in_function, in_typing)

        def visit_one(
            child: ast.AST, in_function: bool, in_typing: bool, module: str = module
        ) -> None:
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for target in _targets(child, known, package):
                    if target == module or module.startswith(f"{target}.") and target == "":
                        continue
                    if target == "" and module != "":
                        continue  # ``from tensordict import x`` of a name: the root package
                    if in_function:
                        deferred.append((module, target, child.lineno))
                    elif in_typing:
                        typing_edges[module].add(target)
                    else:
                        edges[module].add(target)
                return
            nested = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            visit(child, in_function or nested, in_typing)

        visit(tree, False, path.suffix == ".pyi")
    return edges, typing_edges, deferred


def find_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One import circle per group of modules that reach each other (each strongly
    connected component of more than one module), so that a second circle is not hidden
    behind the first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    groups: list[set[str]] = []

    def connect(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(edges):
        if node not in index:
            connect(node)
    cycles = []
    for group in groups:
        inside = {m: {t for t in edges.get(m, ()) if t in group} for m in group}
        cycle = find_cycle(inside)
        if cycle:
            cycles.append(cycle)
    return sorted(cycles)


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle, as the list of its modules, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if state.get(nxt) is None:
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


def check_core(problems: list[str], report: bool) -> None:
    modules = core_modules()
    edges, typing_edges, deferred = scan(modules, "tensordict")
    both = {m: edges[m] | typing_edges[m] for m in modules}
    for m in list(both):  # packages import their modules: not a circle through __init__
        both[m] = {t for t in both[m] if not (m and t.startswith(f"{m}."))}
    for cycle in find_cycles({m: {t for t in ts if t != ""} for m, ts in both.items() if m != ""}):
        problems.append(
            "core import circle (TYPE_CHECKING imports included): " + " -> ".join(cycle)
        )
    upward: list[tuple[str, str, int]] = []
    for module in modules:
        if module in ("", SIBLING_API):
            continue
        for target in sorted(both[module]):
            if target in ("", SIBLING_API):
                continue
            if _rank(target) > _rank(module):
                where = "under TYPE_CHECKING" if target not in edges[module] else "at module level"
                problems.append(
                    f"{module} imports {target} {where} (a higher layer); import downward "
                    "only (annotate with the protocols of _kinds), or list a function-level "
                    "forwarder in UPWARD"
                )
    for module, target, line in deferred:
        if (module, target) in UPWARD:
            if _rank(target) > _rank(module):
                upward.append((module, target, line))
            continue
        problems.append(
            f"{module}:{line}: imports {target} inside a function; import at module level, "
            "or document a forwarder in tools/check_imports.py UPWARD"
        )
    if len(upward) > MAX_UPWARD:
        problems.append(f"{len(upward)} upward imports, more than {MAX_UPWARD}: {upward}")
    roots = [m for m in modules if m and "." not in m and not (CORE / m).is_dir()]
    if len(roots) + 1 > MAX_ROOT_MODULES:  # + __init__
        problems.append(f"{len(roots) + 1} modules at core's root, more than {MAX_ROOT_MODULES}")
    if report:
        print(f"core: {len(modules)} modules, {len(roots) + 1} at the root")
        print(f"  upward imports ({len(upward)}): {upward}")
        for layer in LAYERS:
            members = sorted(m for m in modules if m.split(".")[0] == layer and m != layer)
            print(
                f"  {layer}: {', '.join(m.split('.', 1)[1] for m in members) if layer != 'base' else ''}"
            )


def check_siblings(problems: list[str]) -> None:
    core = core_modules()
    for name, folder in SIBLINGS.items():
        if not folder.is_dir():
            continue
        package = f"tensordict.{name}"
        modules = {}
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
        edges, _typing, _deferred = scan(modules, package)
        cycle = find_cycle({m: {t for t in ts if t} for m, ts in edges.items() if m})
        if cycle:
            problems.append(f"{package}: import circle: " + " -> ".join(cycle))
        for module, path in modules.items():
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                for target in (
                    _targets(node, set(core), "tensordict")
                    if isinstance(node, (ast.Import, ast.ImportFrom))
                    else ()
                ):
                    if (
                        target in PUBLIC
                        or target == SIBLING_API
                        or target.split(".")[0] in SIBLINGS
                    ):
                        continue
                    problems.append(
                        f"{package}.{module or '__init__'}:{node.lineno}: imports core's private "
                        f"module tensordict.{target}; use tensordict.{SIBLING_API} or a public module"
                    )


#: Known problems being worked off (the file lists one per line); any other fails.
#: Lines are compared without their line numbers, so editing a module does not make its
#: known problems look new; a module may not gain more of one kind than are listed.
DEBT = ROOT / "tools" / "import_debt.txt"


def _unnumbered(problem: str) -> str:
    """``problem`` without the ``:<line>`` after its module name."""
    head, sep, rest = problem.partition(": ")
    module, colon, line = head.rpartition(":")
    return f"{module}{sep}{rest}" if colon and line.isdigit() else problem


#: the repository's architecture map; the block between these markers is generated
ARCHITECTURE = ROOT / "ARCHITECTURE.md"
MAP_START, MAP_END = "<!-- core map: start -->", "<!-- core map: end -->"


def _first_sentence(doc: str) -> str:
    """The first sentence of a docstring (up to its first period or colon), as Markdown:
    Sphinx roles become plain code."""
    text = " ".join(doc.split()).replace("/ ", "/")
    text = re.sub(r":\w+:`~?([\w.]+)`", lambda m: f"``{m.group(1).rsplit('.', 1)[-1]}``", text)
    for end in (". ", ": "):
        if end in text:
            text = text[: text.index(end)] + "."
            break
    return text.replace("|", "\\|")


def core_map(core: Path = CORE) -> str:
    """Core's layers as a table, top first: each folder's modules (as
    :func:`core_modules` finds them) and the first sentence of its ``__init__.py``
    docstring (``base.py``'s own for the ``base`` layer)."""
    modules = core_modules(core)
    rows = ["| layer | folder | modules | what lives there |", "|---|---|---|---|"]
    for rank, layer in reversed(list(enumerate(LAYERS))):
        doc = ast.get_docstring(ast.parse(modules[layer].read_text())) or ""
        what = _first_sentence(doc).replace("``", "`")
        if layer == "base":
            where, members = "`base.py`", ["base"]
        else:
            where = f"`{layer}/`"
            members = sorted(m.split(".", 1)[1] for m in modules if m.startswith(f"{layer}."))
        rows.append(f"| {rank} | {where} | {', '.join(f'`{m}`' for m in members)} | {what} |")
    return "\n".join(rows) + "\n"


def check_map(problems: list[str], write: bool) -> None:
    """ARCHITECTURE.md's core map is the one the code gives (``--write-map`` rewrites it);
    every folder of core is a layer."""
    folders = {p.parent.name for p in CORE.glob("*/__init__.py")}
    for folder in sorted(folders - set(LAYERS) - {"prototype"}):
        problems.append(f"core folder {folder}/ is not in LAYERS (tools/check_imports.py)")
    text = ARCHITECTURE.read_text() if ARCHITECTURE.exists() else ""
    if MAP_START not in text or MAP_END not in text:
        problems.append(f"{ARCHITECTURE.name}: no core map between {MAP_START} and {MAP_END}")
        return
    head, rest = text.split(MAP_START, 1)
    _old, tail = rest.split(MAP_END, 1)
    new = f"{head}{MAP_START}\n{core_map()}{MAP_END}{tail}"
    if write:
        ARCHITECTURE.write_text(new)
    elif new != text:
        problems.append(
            f"{ARCHITECTURE.name}'s core map differs from the code: "
            "python tools/check_imports.py --write-map"
        )


def main(argv: list[str]) -> int:
    problems: list[str] = []
    check_map(problems, "--write-map" in argv)
    check_core(problems, "--report" in argv)
    check_siblings(problems)
    known = DEBT.read_text().splitlines() if DEBT.exists() else []
    if "--write-debt" in argv:
        DEBT.write_text("".join(f"{p}\n" for p in sorted(problems)))
        return 0
    budget = Counter(_unnumbered(k) for k in known)
    new = []
    for problem in problems:
        key = _unnumbered(problem)
        if budget[key] > 0:
            budget[key] -= 1
        else:
            new.append(problem)
    for problem in new:
        print(problem)
    paid = [k for k, n in budget.items() for _ in range(n)]
    if paid:
        print(f"{len(paid)} line(s) of {DEBT.name} no longer apply: remove them")
    if not new and not paid:
        print(
            "import structure: no new circle, layer break or private sibling import "
            f"({len(known)} known in {DEBT.name})"
        )
    return 1 if new or paid else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
