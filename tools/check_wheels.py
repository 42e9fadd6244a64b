"""Build the five wheels and check that they share the ``tensordict`` namespace cleanly.

1. Builds every distribution's wheel with ``python -m build --wheel``.
2. Fails if two wheels ship the same file, if a sibling wheel ships anything outside
   ``tensordict/<its subpackage>/`` (``tensordict/__init__.py`` above all), if core ships
   files inside a sibling's subpackage, or if a wheel's version is not the workspace's.
3. Installs the wheels into two fresh virtual environments (torch pinned first), core
   first in one and last in the other, runs ``pip check`` and imports everything from
   outside the source tree.
4. Uninstalls one sibling in each environment and checks that core and the remaining
   siblings still import, and that the removed sibling's names fail with
   ``ModuleNotFoundError`` naming the ``pip install`` that fixes it.

Usage: python tools/check_wheels.py --torch 2.13.0 [--outdir DIR]
(the running Python needs the ``build`` package).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from workspace import NAMESPACE, Distribution, distributions, requirement_name

# Run by each environment's Python.
# argv: expected version, {subpackage: distribution} as JSON, removed subpackage or "".
_IMPORT_CHECK = r"""
import importlib, json, sys, sysconfig
from pathlib import Path

import tensordict
from tensordict._plugins.siblings import DISTRIBUTIONS, LAZY_TOP_LEVEL

version, expected, removed = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
assert DISTRIBUTIONS == expected, ("core's sibling table disagrees with the workspace", DISTRIBUTIONS)
site = Path(sysconfig.get_path("purelib")).resolve()
assert Path(tensordict.__file__).resolve().is_relative_to(site), tensordict.__file__
assert tensordict.__version__ == version, tensordict.__version__
for sub, dist in DISTRIBUTIONS.items():
    name = "tensordict." + sub
    if sub == removed:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError:
            pass
        else:
            raise AssertionError(name + " still imports after uninstalling " + dist)
        top = next(t for t, (s, _) in LAZY_TOP_LEVEL.items() if s == sub)
        try:
            getattr(tensordict, top)
        except ModuleNotFoundError as err:
            assert "pip install " + dist in str(err), err
        else:
            raise AssertionError("tensordict." + top + " resolved without " + dist)
        continue
    module = importlib.import_module(name)
    assert Path(module.__file__).resolve().is_relative_to(site), module.__file__
    assert module.__version__ == version, (name, module.__version__)
print("imports ok:", "core and", ", ".join(s for s in DISTRIBUTIONS if s != removed))
"""


def run(*cmd: str | Path, cwd: Path | None = None) -> None:
    shown = ("<script>" if "\n" in str(c) else str(c) for c in cmd)
    print("+", " ".join(shown), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, cwd=cwd)


def build(dists: tuple[Distribution, ...], outdir: Path) -> dict[str, Path]:
    wheels = {}
    for dist in dists:
        before = set(outdir.glob("*.whl"))
        run(sys.executable, "-m", "build", "--wheel", "--outdir", outdir, dist.folder)
        (wheel,) = set(outdir.glob("*.whl")) - before
        wheels[dist.name] = wheel
    return wheels


def layout_problems(dists: tuple[Distribution, ...], wheels: dict[str, Path]) -> list[str]:
    problems = []
    owner: dict[str, str] = {}
    siblings = {f"{NAMESPACE}/{d.subpackage}/" for d in dists if not d.is_core}
    for dist in dists:
        wheel = wheels[dist.name]
        if f"-{dist.version}-" not in wheel.name:
            problems.append(f"{wheel.name}: expected version {dist.version}")
        with zipfile.ZipFile(wheel) as archive:
            files = [n for n in archive.namelist() if not n.split("/")[0].endswith(".dist-info")]
        if not files:
            problems.append(f"{wheel.name} ships no files")
        if dist.is_core and f"{NAMESPACE}/__init__.py" not in files:
            problems.append(f"{wheel.name} does not ship {NAMESPACE}/__init__.py")
        for path in files:
            if path in owner:
                problems.append(f"{path} is shipped by both {owner[path]} and {dist.name}")
            owner[path] = dist.name
            if dist.is_core:
                if not path.startswith(f"{NAMESPACE}/"):
                    problems.append(f"{dist.name} ships {path} outside {NAMESPACE}/")
                elif any(path.startswith(s) for s in siblings):
                    problems.append(f"{dist.name} ships {path}, inside a sibling's subpackage")
            elif not path.startswith(f"{NAMESPACE}/{dist.subpackage}/"):
                problems.append(f"{dist.name} ships {path} outside {NAMESPACE}/{dist.subpackage}/")
    return problems


def environment(root: Path, torch: str) -> Path:
    """A fresh virtual environment with torch==<torch> installed first; returns its python."""
    run(sys.executable, "-m", "venv", root)
    python = root / "bin" / "python"
    run(python, "-m", "pip", "install", "--quiet", f"torch=={torch}")
    return python


def check_environment(
    python: Path,
    order: list[Distribution],
    wheels: dict[str, Path],
    version: str,
    remove: Distribution,
    cwd: Path,
) -> None:
    """Install wheels in ``order``, import everything, then uninstall ``remove`` and recheck."""
    pip = (python, "-m", "pip")
    workspace = {d.name for d in order}
    for dist in order:
        # core brings its own requirements (numpy). A sibling requires core, which may not
        # be installed yet in this order: its wheel goes in with --no-deps, after its
        # third-party requirements (tqdm, ...) are installed by name.
        if dist.is_core:
            run(*pip, "install", "--quiet", wheels[dist.name])
            continue
        third_party = [r for r in dist.dependencies if requirement_name(r) not in workspace]
        if third_party:
            run(*pip, "install", "--quiet", *third_party)
        run(*pip, "install", "--quiet", "--no-deps", wheels[dist.name])
    run(*pip, "check")
    siblings = json.dumps({d.subpackage: d.name for d in order if not d.is_core})
    run(python, "-I", "-c", _IMPORT_CHECK, version, siblings, "", cwd=cwd)
    run(*pip, "uninstall", "--yes", "--quiet", remove.name)
    run(python, "-I", "-c", _IMPORT_CHECK, version, siblings, str(remove.subpackage), cwd=cwd)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--torch", required=True, help="torch version installed first")
    parser.add_argument("--outdir", type=Path, help="keep the wheels here (default: temp)")
    args = parser.parse_args()
    dists = distributions()
    version = dists[0].version
    with tempfile.TemporaryDirectory(prefix="check-wheels-") as tmp:
        scratch = Path(tmp)
        outdir = (args.outdir or scratch / "wheels").resolve()
        outdir.mkdir(parents=True, exist_ok=True)
        for stale in outdir.glob("*.whl"):
            stale.unlink()
        wheels = build(dists, outdir)
        problems = layout_problems(dists, wheels)
        for problem in problems:
            print(f"check_wheels: {problem}", file=sys.stderr)
        if problems:
            return 1
        print(f"check_wheels: {len(wheels)} wheels, no file shipped twice")
        siblings = [d for d in dists if not d.is_core]
        orders = {
            "core-first": (list(dists), siblings[-1]),
            "core-last": (list(reversed(dists)), siblings[0]),
        }
        for label, (order, remove) in orders.items():
            print(
                f"check_wheels: {label}: {' '.join(d.name for d in order)}; then "
                f"uninstall {remove.name}",
                flush=True,
            )
            python = environment(scratch / label, args.torch)
            check_environment(python, order, wheels, version, remove, cwd=scratch)
        print(f"check_wheels: OK ({', '.join(w.name for w in wheels.values())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
