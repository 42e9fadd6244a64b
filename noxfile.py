"""Every check of the monorepo is a nox session. `nox -l` lists them.

    nox -s tests              all five distributions, editable, torch 2.13.0
    nox -s isolated-memmap    one distribution alone (core, memmap, nn, distributed, tensorclass)
    nox -s tests_torch        the test suite against every supported torch
    nox -s cuda               tests marked `cuda` (skips cleanly without a GPU)
    nox -s lint               version lockstep, import structure, ruff, mypy
    nox -s docs               sphinx html + doctest, warnings are errors
    nox -s build              build the five wheels and check how they share the namespace
    nox -s bench              python benchmarks/run.py
    nox -s bench-smoke        benchmarks/run.py and benchmarks/compile.py, --quick
    nox -s tour               python examples/tour.py
    nox -s compat             saved folders/archives load in both this project and the
                              reference tensordict==0.15.3 (installed in its own env)

Every environment installs torch==<version> FIRST and only then the packages, so pip
never picks a torch by itself (which would download several GB of CUDA wheels). The
torch version is $TORCH_VERSION, 2.13.0 by default. Virtual environments are reused, and
an environment whose requested packages have not changed since its last install is not
reinstalled (the stamp in `install`); `nox -r --no-install` skips installs outright.
Arguments after `--` go to pytest (tests sessions), the benchmark or the tour script.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "tools"))
from workspace import Distribution, distributions, local_requirements  # noqa: E402

nox.options.reuse_venv = "yes"
nox.options.sessions = ["lint", "tests"]
nox.options.error_on_external_run = True

TORCH_VERSIONS = ("2.13.0", "2.14.1")
TORCH = os.environ.get("TORCH_VERSION", TORCH_VERSIONS[0])
TEST_DEPS = ("pytest>=8", "hypothesis")
LINT_DEPS = ("ruff==0.17.6", "mypy==2.4.1")
TYPING_DEPS = ("pyright==1.1.414",)
TOOL_DEPS = ("tomli>=1; python_version < '3.11'",)  # tools/*.py read pyproject.toml
DISTS = distributions()


# --------------------------------------------------------------------------- helpers


def install(session: nox.Session, *requirements: str, torch: str | None = TORCH) -> None:
    """Install torch==``torch`` first, then ``requirements`` (pip arguments).

    Skipped when this environment already got exactly this install and none of the local
    distributions it names changed since (for ``-e`` installs only their pyproject.toml
    matters; otherwise their whole folder). Torch alone is skipped when the environment
    already has that version. ``torch=None`` installs no torch.
    """
    stamp = Path(session.virtualenv.location) / ".install-stamp"
    key = _install_key(torch, requirements)
    if stamp.exists() and stamp.read_text() == key:
        session.log("environment up to date (install stamp matches); not reinstalling")
        return
    if torch is not None:
        have = session.run(
            "python",
            "-c",
            "import importlib.metadata as m; print(m.version('torch'))",
            silent=True,
            success_codes=[0, 1],
            log=False,
        )
        if isinstance(have, str) and have.strip().splitlines()[-1].split("+")[0] == torch:
            session.log(f"torch {have.strip().splitlines()[-1]} already installed")
        else:
            session.install(f"torch=={torch}")
    if requirements:
        session.install(*requirements)
    stamp.write_text(key)


def _install_key(torch: str | None, requirements: tuple[str, ...]) -> str:
    digest = hashlib.sha256(json.dumps([torch, requirements]).encode())
    for i, requirement in enumerate(requirements):
        folder = ROOT / requirement.split("[")[0]
        if not requirement.startswith("packages/") or not folder.is_dir():
            continue
        editable = i > 0 and requirements[i - 1] == "-e"
        files = (
            [folder / "pyproject.toml"]
            if editable
            else sorted(
                p
                for p in folder.rglob("*")
                if p.is_file() and not {"__pycache__", "tests"} & set(p.relative_to(folder).parts)
            )
        )
        for path in files:
            digest.update(path.relative_to(ROOT).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()


#: Extras left out of the shared environments: tensordict-memmap[mds] brings
#: mosaicml-streaming, which pins torchvision/transformers and numpy<2.2 (torchvision from
#: PyPI does not import beside the pinned torch CPU wheel, and letting pip choose a torch
#: downloads CUDA). `to_mds` is tested with a writer of our own instead.
NOT_IN_WORKSPACE = {("tensordict-memmap", "mds")}


def workspace() -> list[str]:
    """pip arguments installing all five distributions, editable, with their extras (but
    those of NOT_IN_WORKSPACE)."""
    args: list[str] = []
    for dist in DISTS:
        extras = [e for e in dist.extras if (dist.name, e) not in NOT_IN_WORKSPACE]
        args += ["-e", dist.rel() + (f"[{','.join(extras)}]" if extras else "")]
    return args


def pytest(session: nox.Session, *args: str) -> None:
    """Run pytest (config: root pyproject.toml). Exit code 5, "no tests collected", is
    accepted: pytest then prints "no tests ran" itself, and CI reports it as such."""
    session.run("python", "-m", "pytest", *args, *session.posargs, success_codes=[0, 5])


# --------------------------------------------------------------------------- tests


@nox.session
def tests(session: nox.Session) -> None:
    """All five distributions installed together (editable, with extras); every test.

    The extras include tensordict-distributed[redis]: its store tests start a real
    ``redis-server`` (Debian package; .ci/run installs it) and skip without one.
    """
    install(session, *workspace(), *TEST_DEPS)
    pytest(session)  # testpaths: packages/*/tests


@nox.session
@nox.parametrize("torch", TORCH_VERSIONS)
def tests_torch(session: nox.Session, torch: str) -> None:
    """The `tests` session against each supported torch version."""
    install(session, *workspace(), *TEST_DEPS, torch=torch)
    session.run("python", "-c", "import torch; print('torch', torch.__version__)")
    pytest(session)


def _isolated(dist: Distribution):
    def session_func(session: nox.Session) -> None:
        # Non-editable, from the folders: the distribution and the workspace distributions
        # it requires (core), so pip never looks for them on an index. No extras.
        local = [d.rel() for d in local_requirements(dist)]
        install(session, *local, *TEST_DEPS, *TOOL_DEPS)
        session.run("python", "tools/check_isolation.py", dist.name, "--installed")
        if dist.tests.is_dir():
            pytest(session, dist.tests.relative_to(ROOT).as_posix())
        else:
            session.warn(f"{dist.name} has no tests folder ({dist.tests.relative_to(ROOT)})")

    session_func.__doc__ = f"{dist.name} alone (non-editable, no extras): its tests, its imports."
    return session_func


for _dist in DISTS:
    nox.session(name=f"isolated-{_dist.short}")(_isolated(_dist))


@nox.session
def cuda(session: nox.Session) -> None:
    """Tests marked `cuda` on a GPU; without one, says so and succeeds."""
    gpus = _nvidia_gpus()
    if not gpus:
        session.skip(
            "no NVIDIA GPU on this machine (nvidia-smi missing or lists no GPU): "
            "the CUDA tests were not run"
        )
    session.log(f"GPUs: {'; '.join(gpus)}")
    install(session, *workspace(), *TEST_DEPS)
    session.run(
        "python",
        "-c",
        "import torch; assert torch.cuda.is_available(), "
        "f'torch {torch.__version__} cannot use the GPU (a CPU-only build?)'; "
        "print('torch', torch.__version__, 'on', torch.cuda.get_device_name(0))",
    )
    pytest(session, "-m", "cuda")


def _nvidia_gpus() -> list[str]:
    if shutil.which("nvidia-smi") is None:
        return []
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if line.startswith("GPU")]


# --------------------------------------------------------------------------- quality


@nox.session
def lint(session: nox.Session) -> None:
    """Version lockstep, core's import structure, every distribution's signatures against the
    reference's, ruff check + format check, mypy; the tensorclass typing check (mypy and
    pyright)."""
    # mypy resolves torch/numpy from this environment: core brings them. The five
    # distributions are installed as wheels, not editable (no extras): the `tensordict`
    # namespace is then one folder in site-packages, as users have it, and the type checkers
    # see `tensordict.tensorclass` (neither merges a namespace split across source folders).
    install(session, *(d.rel() for d in DISTS), *LINT_DEPS, *TYPING_DEPS, *TOOL_DEPS)
    session.run("python", "tools/check_versions.py")
    session.run("python", "tools/gen_table_stubs.py", "--check")
    session.run("python", "tools/check_imports.py")
    # public names and signatures against the reference's, for every distribution
    session.run("python", "tools/check_signatures.py", "--fail-on", *(d.name for d in DISTS))
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")  # files: [tool.mypy] in pyproject.toml
    typing = "packages/tensorclass/tests/typing"
    session.run("mypy", "--config-file", f"{typing}/mypy.ini")
    session.run("mypy", "--config-file", f"{typing}/mypy.ini", "-p", "tensordict.tensorclass")
    python = str(Path(session.virtualenv.location) / "bin" / "python")
    session.run("pyright", "--pythonpath", python, "--project", f"{typing}/pyrightconfig.json")


@nox.session
def docs(session: nox.Session) -> None:
    """Sphinx: html and doctest builders, warnings are errors."""
    install(session, *workspace(), "sphinx")
    build = ROOT / "docs" / "_build"
    for builder in ("html", "doctest"):
        session.run(
            "sphinx-build",
            "-W",
            "--keep-going",
            "-b",
            builder,
            "-d",
            str(build / "doctrees"),
            "docs",
            str(build / builder),
        )


@nox.session
def build(session: nox.Session) -> None:
    """Build the five wheels; check files, install orders and uninstalling a sibling.

    `nox -s build -- --outdir dist` keeps the wheels.
    """
    install(session, "build", *TOOL_DEPS, torch=None)
    session.run("python", "tools/check_versions.py")
    # (tools/gen_table_stubs.py --check imports tensordict, so it runs in `lint`, which has
    # torch and core; this environment has neither.)
    session.run("python", "tools/check_wheels.py", "--torch", TORCH, *session.posargs)


# --------------------------------------------------------------------------- programs


@nox.session
def bench(session: nox.Session) -> None:
    """python benchmarks/run.py (arguments after -- go to it). matplotlib is installed for
    benchmarks/plot.py, which draws the benchmarks' --json results."""
    install(session, *workspace(), "pytest-benchmark", "matplotlib")
    session.run("python", "benchmarks/run.py", *session.posargs)


@nox.session(name="bench-smoke")
def bench_smoke(session: nox.Session) -> None:
    """Smoke runs of the benchmarks CI can afford: the op table (--quick) and torch.compile
    (benchmarks/compile.py --quick, aot_eager). They fail only when a workload raises or a
    result differs; timings are printed, never asserted."""
    install(session, *workspace())
    session.run("python", "benchmarks/run.py", "--quick")
    session.run("python", "benchmarks/compile.py", "--quick")


@nox.session
def tour(session: nox.Session) -> None:
    """python examples/tour.py: the guided tour of the API."""
    install(session, *workspace())
    session.run("python", "examples/tour.py", *session.posargs)


# --------------------------------------------------------------------------- compatibility

REFERENCE = "tensordict==0.15.3"


@nox.session
def compat(session: nox.Session) -> None:
    """On-disk format against the reference library, both directions.

    This session's environment gets torch==2.13.0 then the reference (``tensordict==0.15.3``
    from the registry); a second environment inside it (``ours/``) gets torch, then
    tensordict-core and tensordict-memmap from this checkout. ``tools/compat_memmap.py``
    writes with each and reads with each, in subprocesses.
    """
    install(session, REFERENCE, *TOOL_DEPS)
    ours = Path(session.virtualenv.location) / "ours"
    python = ours / "bin" / "python"
    local = [d.rel() for d in DISTS if d.name in ("tensordict-core", "tensordict-memmap")]
    key = _install_key(TORCH, tuple(local))
    stamp = ours / ".install-stamp"
    if not (stamp.exists() and stamp.read_text() == key):
        session.run("python", "-m", "venv", "--clear", str(ours))
        session.run(str(python), "-m", "pip", "install", "-q", f"torch=={TORCH}", external=True)
        session.run(str(python), "-m", "pip", "install", "-q", *local, external=True)
        stamp.write_text(key)
    # a folder the reference wrote long ago (in the shared conformance checkout, if present)
    found = [
        base / "shared" / "conformance" / "upstream" / "artifacts" / "mmap_example"
        for base in (ROOT.parent, ROOT.parent.parent)
    ]
    args = [arg for path in found if path.is_dir() for arg in ("--fixture", str(path))][:2]
    session.run(
        "python", "tools/compat_memmap.py", "--ours", str(python), "--reference", "python", *args
    )
