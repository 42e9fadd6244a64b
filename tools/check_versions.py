"""Fail when the five distributions' versions drift apart.

Checks that
* every packages/*/pyproject.toml has the same ``project.version`` (say X.Y.Z);
* every requirement on a workspace distribution, in ``dependencies`` and in every extra,
  is exactly the compatible range ``>=X.Y,<X.(Y+1)``;
* every distribution's ``__version__`` (core's ``tensordict/__init__.py`` and each
  sibling's ``tensordict/<sub>/__init__.py``) equals X.Y.Z, read without importing;
* with ``--tag vX.Y.Z`` (a release tag), the tag names that version.

Usage: python tools/check_versions.py [--tag TAG]
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

from workspace import ROOT, by_name, distributions, parse_requirement


def module_version(init_file: Path) -> str | None:
    """The literal ``__version__ = "..."`` assigned in ``init_file``, if any."""
    tree = ast.parse(init_file.read_text(encoding="utf-8"), str(init_file))
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value
    return None


def compatible_range(version: str) -> set[str]:
    """``{">=X.Y", "<X.(Y+1)"}`` for version X.Y.Z (pre/post/dev suffixes allowed)."""
    match = re.match(r"(\d+)\.(\d+)", version)
    if match is None:
        raise ValueError(f"version {version!r} is not X.Y[.Z...]")
    major, minor = int(match.group(1)), int(match.group(2))
    return {f">={major}.{minor}", f"<{major}.{minor + 1}"}


def problems(tag: str | None = None) -> list[str]:
    dists = distributions()
    found: list[str] = []
    versions = {d.name: d.version for d in dists}
    version = versions[dists[0].name]
    if len(set(versions.values())) != 1:
        found.append(f"pyproject versions differ: {versions}")
    expected = compatible_range(version)
    workspace = by_name()
    for dist in dists:
        pyproject = dist.folder.relative_to(ROOT) / "pyproject.toml"
        groups = {"dependencies": dist.dependencies}
        groups |= {f"optional-dependencies.{k}": v for k, v in dist.extras.items()}
        for group, requirements in groups.items():
            for requirement in requirements:
                name, clauses = parse_requirement(requirement)
                if name in workspace and clauses != expected:
                    found.append(
                        f"{pyproject} [{group}] pins {requirement!r}; "
                        f"lockstep wants {name}{','.join(sorted(expected, reverse=True))}"
                    )
        init = dist.init_file
        declared = module_version(init) if init.exists() else None
        if declared != dist.version:
            found.append(
                f"{init.relative_to(ROOT)}: __version__ is {declared!r}, "
                f"pyproject says {dist.version!r}"
            )
    if tag is not None and tag.removeprefix("v") != version:
        found.append(f"tag {tag!r} does not name version {version!r}")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tag", help="release tag to check against the version, e.g. v0.1.0")
    args = parser.parse_args()
    found = problems(args.tag)
    for problem in found:
        print(f"check_versions: {problem}", file=sys.stderr)
    if found:
        return 1
    dists = distributions()
    print(f"check_versions: {len(dists)} distributions in lockstep at {dists[0].version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
