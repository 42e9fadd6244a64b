"""What the monorepo holds: its distributions, read from packages/*/pyproject.toml.

Shared by the noxfile and the tools/check_*.py scripts, so that the list of
distributions, their folders, import names and local dependencies lives in one place
(the pyproject files themselves).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ROOT / "packages"
CORE = "tensordict-core"
NAMESPACE = "tensordict"

# name, [extras], version specifier (up to an environment marker or a direct URL)
_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?([^;@]*)")


def canonical(name: str) -> str:
    """PEP 503 normalised distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_requirement(requirement: str) -> tuple[str, set[str]]:
    """``(normalised name, {specifier clauses})`` of a PEP 508 requirement string.

    >>> parse_requirement("Tensordict_Core >= 0.1, <0.2 ; python_version >= '3.10'")
    ('tensordict-core', {'<0.2', '>=0.1'})
    """
    match = _REQUIREMENT.match(requirement)
    if match is None:
        raise ValueError(f"cannot parse requirement {requirement!r}")
    clauses = {c for c in re.sub(r"\s+", "", match.group(2)).split(",") if c}
    return canonical(match.group(1)), clauses


def requirement_name(requirement: str) -> str:
    """The (normalised) distribution name a PEP 508 requirement string refers to."""
    return parse_requirement(requirement)[0]


@dataclass(frozen=True)
class Distribution:
    """One distribution of the workspace."""

    name: str
    folder: Path
    pyproject: dict

    @property
    def version(self) -> str:
        return self.pyproject["project"]["version"]

    @property
    def dependencies(self) -> list[str]:
        return list(self.pyproject["project"].get("dependencies", []))

    @property
    def extras(self) -> dict[str, list[str]]:
        return dict(self.pyproject["project"].get("optional-dependencies", {}))

    @property
    def is_core(self) -> bool:
        return self.name == CORE

    @property
    def subpackage(self) -> str | None:
        """``memmap`` for tensordict-memmap …; ``None`` for core (it owns the namespace)."""
        if self.is_core:
            return None
        src = self.folder / "src" / NAMESPACE
        found = [p.name for p in src.iterdir() if p.is_dir() and p.name.isidentifier()]
        if len(found) != 1:
            raise RuntimeError(f"{self.folder}/src/{NAMESPACE} must hold exactly one subpackage")
        return found[0]

    @property
    def module(self) -> str:
        """The import name: ``tensordict`` or ``tensordict.<subpackage>``."""
        return NAMESPACE if self.is_core else f"{NAMESPACE}.{self.subpackage}"

    @property
    def short(self) -> str:
        """``core``, ``memmap``, ``nn`` … (used in session names)."""
        return "core" if self.is_core else str(self.subpackage)

    @property
    def init_file(self) -> Path:
        return self.folder / "src" / Path(*self.module.split(".")) / "__init__.py"

    @property
    def tests(self) -> Path:
        return self.folder / "tests"

    def rel(self) -> str:
        """The folder relative to the repository root, as pip and nox want it."""
        return self.folder.relative_to(ROOT).as_posix()


@cache
def distributions() -> tuple[Distribution, ...]:
    """All distributions, core first, then by name."""
    found = []
    for pyproject in sorted(PACKAGES.glob("*/pyproject.toml")):
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        found.append(Distribution(canonical(data["project"]["name"]), pyproject.parent, data))
    found.sort(key=lambda d: (not d.is_core, d.name))
    return tuple(found)


def by_name() -> dict[str, Distribution]:
    return {d.name: d for d in distributions()}


def local_requirements(dist: Distribution) -> list[Distribution]:
    """``dist`` and the workspace distributions it requires (not extras), transitively."""
    index = by_name()
    seen: dict[str, Distribution] = {}
    todo = [dist]
    while todo:
        current = todo.pop()
        if current.name in seen:
            continue
        seen[current.name] = current
        todo += [index[n] for n in map(requirement_name, current.dependencies) if n in index]
    return sorted(seen.values(), key=lambda d: (not d.is_core, d.name))
