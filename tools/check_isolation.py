"""Check that importing a distribution loads nothing it did not declare.

Run it with the Python of an environment where the distribution is installed:

    python tools/check_isolation.py tensordict-memmap [--installed]

In a fresh interpreter (``python -I``, so neither the working directory nor PYTHONPATH
is on sys.path) it first imports the third-party packages the workspace distributions in
the closure require directly (torch, numpy: what *they* load is their business), then the
distribution's module. Every module that second import added must be from the standard
library, from the distribution itself, or from a distribution in its declared requirement
closure (``Requires-Dist`` of the installed metadata, followed transitively; extras are
*not* followed). Sibling subpackages ``tensordict.<sub>`` that the distribution does not
require, and the packages of its extras (h5py for tensordict-memmap …), are undeclared.

``--installed`` also checks that the module was imported from site-packages, not from a
source tree (i.e. a non-editable install).
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import json
import subprocess
import sys
import sysconfig
from collections.abc import Mapping
from pathlib import Path

from workspace import NAMESPACE, by_name, canonical, requirement_name

_PROBE = """
import json, sys
{baseline}
before = set(sys.modules)
import {module}
print(json.dumps({{"before": sorted(before), "after": sorted(sys.modules), "file": {file}}}))
"""


def declared_closure(dist: str) -> set[str]:
    """``dist`` and every installed distribution it requires, transitively, without extras."""
    closure: set[str] = set()
    todo = [canonical(dist)]
    while todo:
        name = todo.pop()
        if name in closure:
            continue
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue  # a requirement for another platform/Python, never installed here
        closure.add(name)
        todo += [requirement_name(r) for r in requires if "extra" not in r.partition(";")[2]]
    return closure


def third_party_modules(closure: set[str], owners: Mapping[str, list[str]]) -> list[str]:
    """Top-level modules of what the workspace distributions in ``closure`` require.

    ``owners`` is :func:`importlib.metadata.packages_distributions`.
    """
    workspace = by_name()
    direct = {
        requirement_name(r)
        for name in closure & set(workspace)
        for r in workspace[name].dependencies
    } - set(workspace)
    tops: dict[str, list[str]] = {name: [] for name in direct}
    for top, dists in owners.items():
        for name in direct & {canonical(d) for d in dists}:
            if top.isidentifier() and not top.startswith("_"):
                tops[name].append(top)
    modules: list[str] = []
    for name, found in tops.items():
        main = name.replace("-", "_")
        modules += [main] if main in found else found  # torch: not functorch; PyYAML: yaml
    return sorted(modules)


def probe(module: str, baseline: list[str]) -> dict:
    """sys.modules of a fresh interpreter that imported ``baseline``, before/after ``module``."""
    code = _PROBE.format(
        baseline="".join(f"import {m}\n" for m in baseline),
        module=module,
        file=f"sys.modules[{module!r}].__file__",
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, cwd="/"
    )
    if out.returncode != 0:
        raise SystemExit(f"check_isolation: `import {module}` failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def undeclared(dist_name: str) -> tuple[list[str], dict]:
    workspace = by_name()
    dist = workspace[canonical(dist_name)]
    allowed = declared_closure(dist.name)
    if dist.name not in allowed:
        raise SystemExit(f"check_isolation: {dist.name} is not installed in {sys.prefix}")
    owners = metadata.packages_distributions()
    sibling_owner = {d.module: d.name for d in workspace.values() if not d.is_core}
    result = probe(dist.module, third_party_modules(allowed, owners))
    found: dict[str, tuple[str, int]] = {}  # package -> (where from, modules loaded)
    for name in sorted(set(result["after"]) - set(result["before"])):
        top = name.partition(".")[0]
        if top in sys.stdlib_module_names:
            continue
        if top == NAMESPACE:
            top = ".".join(name.split(".")[:2])
            owner = sibling_owner.get(top)
            if owner is None or owner in allowed:
                continue
            origin = f"owned by {owner}"
        else:
            dists = {canonical(d) for d in owners.get(top, [])}
            if dists & allowed:
                continue
            origin = f"from {', '.join(sorted(dists)) or 'no known distribution'}"
        found[top] = (origin, found.get(top, (origin, 0))[1] + 1)
    lines = [f"{top} ({origin}; {count} module(s))" for top, (origin, count) in found.items()]
    return lines, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("distribution", nargs="+", help="e.g. tensordict-core tensordict-nn")
    parser.add_argument(
        "--installed", action="store_true", help="require an import from site-packages"
    )
    args = parser.parse_args()
    site = {Path(sysconfig.get_path(k)).resolve() for k in ("purelib", "platlib")}
    failed = False
    for name in args.distribution:
        found, result = undeclared(name)
        module = by_name()[canonical(name)].module
        where = Path(result["file"]).resolve()
        if args.installed and not any(where.is_relative_to(s) for s in site):
            print(f"check_isolation: {module} was imported from {where}, not site-packages")
            failed = True
        if found:
            print(f"check_isolation: `import {module}` loaded undeclared modules:")
            print("".join(f"  {line}\n" for line in found), end="")
            failed = True
        else:
            added = len(set(result["after"]) - set(result["before"]))
            print(
                f"check_isolation: `import {module}` ({where}) added {added} modules, "
                f"all declared by {canonical(name)}"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
