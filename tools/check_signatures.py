"""Compare the installed ``tensordict`` with the reference API's names and signatures.

The reference list is ``tools/reference/api-signatures.md``, a copy of the project's
``reference/api-signatures.md`` (every public name of the reference 0.15, with its
``inspect.signature``). For
every listed name this checks that the installed object exists, is of the same kind
(class, function, property, classmethod ...), and takes the same parameters: names, kinds
(positional or keyword-only), order of the positional ones, and defaults. Annotations are
not compared; parameters whose name starts with ``_`` (private on both sides) are ignored.

Names belong to a distribution (see :data:`SIBLING_TOP_LEVEL`, :data:`SIBLING_METHODS` and
the section owners): core's names are always checked; a sibling's names only when that
sibling is installed, otherwise they are listed as skipped.

A difference fails the check unless it is listed, with its reason, in
``tools/signature_allowlist.txt`` (one ``<difference>  # <reason>`` per line). Allowlist
lines that no longer match anything are reported so that they can be removed.

    python tools/check_signatures.py                    # fail on core's new differences
    python tools/check_signatures.py --all              # list every difference, allowed too
    python tools/check_signatures.py --fail-on tensordict-memmap   # a sibling's, when installed
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ALLOWLIST = ROOT / "tools" / "signature_allowlist.txt"
CORE = "tensordict-core"


def _default_reference() -> Path:
    """``$TENSORDICT_API_SIGNATURES``, or the copy of the reference's list kept in
    ``tools/reference/`` (so that the check runs on a clean clone)."""
    env = os.environ.get("TENSORDICT_API_SIGNATURES")
    return Path(env) if env else ROOT / "tools" / "reference" / "api-signatures.md"


#: Top-level ``tensordict.<name>`` owned by a sibling distribution.
SIBLING_TOP_LEVEL: dict[str, str] = {
    **dict.fromkeys(
        """MemoryMappedTensor PersistentTensorDict append_memmap from_csv from_h5 from_json
        from_parquet from_safetensors from_zarr is_memmap_archive load load_memmap memmap
        pack_memmap refresh_archive_checksums save to_safetensors unpack_memmap""".split(),
        "tensordict-memmap",
    ),
    **dict.fromkeys(
        """TensorClassModuleBase TensorClassModuleWrapper TensorDictParams as_tensordict_module
        from_module from_modules""".split(),
        "tensordict-nn",
    ),
    **dict.fromkeys("LazyStackedTensorDictStore TensorDictStore".split(), "tensordict-distributed"),
    **dict.fromkeys(
        "TensorClass TypedTensorDict from_dataclass tensorclass".split(), "tensorclass"
    ),
}

#: ``TensorDict`` methods owned by a sibling (besides core's forwarders table, read from the
#: installed ``tensordict._plugins.forwarders``): file formats and stores.
SIBLING_METHODS: dict[str, str] = {
    **dict.fromkeys(
        """from_csv from_json from_parquet from_zarr to_csv to_json to_parquet to_zarr
        to_mds""".split(),
        "tensordict-memmap",
    ),
    "to_store": "tensordict-distributed",
}

SUBPACKAGE_DIST = {
    "memmap": "tensordict-memmap",
    "nn": "tensordict-nn",
    "distributed": "tensordict-distributed",
    "tensorclass": "tensorclass",
}


@dataclass
class Param:
    name: str
    kind: str  # "positional" (incl. positional-only), "keyword", "*args", "**kwargs"
    default: str | None  # repr, or None when required

    def describe(self) -> str:
        prefix = {"*args": "*", "**kwargs": "**"}.get(self.kind, "")
        return prefix + self.name + ("" if self.default is None else f"={self.default}")

    @property
    def shown_default(self) -> str:
        return "<required>" if self.default is None else self.default


@dataclass
class Entry:
    section: str  # display prefix: "tensordict", "tensordict.utils", "TensorDict" ...
    name: str
    kind: str  # "function", "class", "method", "classmethod", "staticmethod", "property" ...
    settable: bool
    params: list[Param] | None  # None: not introspectable / not a callable

    @property
    def qualname(self) -> str:
        return f"{self.section}.{self.name}"


# ----------------------------------------------------------------------------- parsing
_NODEFAULT = re.compile(r"<_NoDefault\.\w+: [^>]*>")


def _split_top(text: str, sep: str) -> list[str]:
    """Split ``text`` at ``sep`` characters outside quotes and brackets."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _normalise_default(text: str) -> str:
    text = text.strip()
    if _NODEFAULT.fullmatch(text) or text == "NO_DEFAULT":
        return "NO_DEFAULT"
    return text


def _parse_params(text: str) -> list[Param] | None:
    if text.strip() == "...":
        return None
    params: list[Param] = []
    keyword = False
    for raw in _split_top(text, ","):
        raw = raw.strip()
        if not raw or raw == "/":
            continue
        if raw == "*":
            keyword = True
            continue
        head, *default = _split_top(raw, "=")
        name = _split_top(head, ":")[0].strip()
        if name.startswith("**"):
            params.append(Param(name[2:], "**kwargs", None))
        elif name.startswith("*"):
            params.append(Param(name[1:], "*args", None))
            keyword = True
        else:
            value = _normalise_default("=".join(default)) if default else None
            params.append(Param(name, "keyword" if keyword else "positional", value))
    return params


_ENTRY = re.compile(r"^- `(?P<body>.*)`(?: — (?P<kind>.*))?$")


def _parse_entry(section: str, line: str, default_kind: str) -> Entry | None:
    match = _ENTRY.match(line)
    if not match:
        return None
    body, kind = match["body"], (match["kind"] or default_kind).strip()
    settable = kind == "property (settable)"
    if settable:
        kind = "property"
    paren = body.find("(")
    if paren < 0:
        return Entry(section, body.strip(), kind, settable, None)
    name = body[:paren]
    close = _matching_paren(body, paren)
    return Entry(section, name, kind, settable, _parse_params(body[paren + 1 : close]))


def _matching_paren(text: str, start: int) -> int:
    """Index of the ``)`` that closes the ``(`` at ``start`` (quotes skipped)."""
    depth, quote = 0, ""
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError(f"unbalanced parentheses in {text!r}")


@dataclass
class Section:
    title: str
    target: str  # how to reach the object: module path, or class spec
    owner: str
    inherits: str | None  # another section whose entries this class also has
    entries: list[Entry]


def _section_spec(title: str) -> tuple[str, str, str, str | None] | None:
    """(display name, target, owner, inherits) for a section title of the reference file."""
    name = title.split(" ")[0].strip("`")
    owner_match = re.search(r"\((tensordict-\w+|tensorclass|core)", title)
    if name.startswith("tensordict") and "—" not in title:
        owner = owner_match[1] if owner_match else CORE
        return name, f"module:{name}", CORE if owner == "core" else owner, None
    classes: dict[str, tuple[str, str, str | None]] = {
        "TensorDict": ("tensordict:TensorDict", CORE, None),
        "LazyStackedTensorDict": ("tensordict:LazyStackedTensorDict", CORE, "TensorDict"),
        "NonTensorData": ("tensordict:NonTensorData", CORE, None),
        "NonTensorStack": ("tensordict:NonTensorStack", CORE, None),
        "UnbatchedTensor": ("tensordict:UnbatchedTensor", CORE, None),
        "TypedTensorDict": ("tensordict.tensorclass:TypedTensorDict", "tensorclass", None),
        "MemoryMappedTensor": ("tensordict.memmap:MemoryMappedTensor", "tensordict-memmap", None),
        "PersistentTensorDict": (
            "tensordict.memmap:PersistentTensorDict",
            "tensordict-memmap",
            "TensorDict",
        ),
        "a": ("tensorclass-probe", "tensorclass", None),
        "TensorDictStore": ("tensordict:TensorDictStore", "tensordict-distributed", None),
    }
    if name.startswith("tensordict.nn."):
        return name.split(".")[-1], f"tensordict.nn:{name.split('.')[-1]}", "tensordict-nn", None
    if name in classes:
        target, owner, inherits = classes[name]
        display = "tensorclass" if name == "a" else name
        return display, target, owner, inherits
    return None


def parse_reference(path: Path) -> list[Section]:
    sections: list[Section] = []
    current: Section | None = None
    for line in path.read_text().splitlines():
        if line.startswith("## "):
            spec = _section_spec(line[3:])
            if spec is None:
                raise SystemExit(f"check_signatures: unknown section {line!r} in {path}")
            current = Section(line[3:], spec[1], spec[2], spec[3], [])
            current.title = spec[0]
            sections.append(current)
        elif current is not None and line.startswith("- `"):
            default_kind = "method" if not current.target.startswith("module:") else "function"
            entry = _parse_entry(current.title, line, default_kind)
            if entry is not None:
                current.entries.append(entry)
    return sections


# ----------------------------------------------------------------------------- installed side
def installed(dist: str) -> bool:
    if dist == CORE:
        return importlib.util.find_spec("tensordict") is not None
    sub = {v: k for k, v in SUBPACKAGE_DIST.items()}[dist]
    try:
        return importlib.util.find_spec(f"tensordict.{sub}") is not None
    except ModuleNotFoundError:
        return False


def _resolve(target: str) -> Any:
    if target == "tensorclass-probe":
        from tensordict.tensorclass import tensorclass

        class Probe:
            x: int

        return tensorclass(Probe)
    if target.startswith("module:"):
        return importlib.import_module(target[len("module:") :])
    module, attr = target.split(":")
    return getattr(importlib.import_module(module), attr)


def _installed_params(obj: Any, drop_first: bool = False) -> list[Param] | None:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    out = []
    kinds = {
        inspect.Parameter.POSITIONAL_ONLY: "positional",
        inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional",
        inspect.Parameter.KEYWORD_ONLY: "keyword",
        inspect.Parameter.VAR_POSITIONAL: "*args",
        inspect.Parameter.VAR_KEYWORD: "**kwargs",
    }
    for param in sig.parameters.values():
        if param.default is inspect.Parameter.empty:
            default = None
        else:
            default = _normalise_default(repr(param.default))
        out.append(Param(param.name, kinds[param.kind], default))
    return out[1:] if drop_first else out


def compare_params(qualname: str, ref: list[Param], ours: list[Param]) -> list[str]:
    """One line per difference between the reference's parameters and ours."""
    diffs = []
    ref = [p for p in ref if not p.name.startswith("_")]
    ours = [p for p in ours if not p.name.startswith("_")]
    ours_by_name = {p.name: p for p in ours if p.kind in ("positional", "keyword")}
    ref_by_name = {p.name: p for p in ref if p.kind in ("positional", "keyword")}
    for kind in ("*args", "**kwargs"):
        ref_has = any(p.kind == kind for p in ref)
        ours_has = any(p.kind == kind for p in ours)
        if ref_has != ours_has:
            what = "lacks" if ref_has else "has an extra"
            diffs.append(f"{qualname}: {what} {kind}")
    for name, param in ref_by_name.items():
        mine = ours_by_name.get(name)
        if mine is None:
            diffs.append(f"{qualname}: missing parameter {param.describe()}")
            continue
        if mine.kind != param.kind:
            diffs.append(f"{qualname}: parameter {name!r} is {mine.kind} (reference: {param.kind})")
        if mine.default != param.default:
            diffs.append(
                f"{qualname}: parameter {name!r} default {mine.shown_default} "
                f"(reference: {param.shown_default})"
            )
    for name, mine in ours_by_name.items():
        if name not in ref_by_name:
            diffs.append(f"{qualname}: extra parameter {mine.describe()}")
    ref_pos = [p.name for p in ref if p.kind == "positional" and p.name in ours_by_name]
    ours_pos = [p.name for p in ours if p.kind == "positional" and p.name in ref_by_name]
    if ref_pos != ours_pos and set(ref_pos) == set(ours_pos):
        diffs.append(
            f"{qualname}: positional order ({', '.join(ours_pos)}) (reference: ({', '.join(ref_pos)}))"
        )
    return diffs


def _static_kind(owner: Any, name: str) -> tuple[str, Any]:
    """How ``name`` is defined on class ``owner``: (kind, raw attribute)."""
    for klass in inspect.getmro(owner) if inspect.isclass(owner) else [owner]:
        if name in getattr(klass, "__dict__", {}):
            raw = klass.__dict__[name]
            if isinstance(raw, classmethod):
                return "classmethod", raw
            if isinstance(raw, staticmethod):
                return "staticmethod", raw
            if isinstance(raw, property):
                return "property", raw
            if inspect.isfunction(raw) or inspect.ismethoddescriptor(raw):
                return "method", raw
            if hasattr(raw, "__get__") and not callable(raw):
                return "property", raw
            return "attribute", raw
    return "missing", None


def check_entry(
    entry: Entry, holder: Any, forwarders: dict[str, tuple[str, str, str]]
) -> list[str]:
    q = entry.qualname
    if inspect.ismodule(holder):
        try:
            obj = getattr(holder, entry.name)
        except (AttributeError, NotImplementedError, ModuleNotFoundError):
            return [f"{q}: missing"]
        if entry.kind == "class" and not inspect.isclass(obj):
            return [f"{q}: is a {type(obj).__name__}, reference: class"]
        if entry.kind == "function" and inspect.isclass(obj):
            return [f"{q}: is a class, reference: function"]
        if entry.kind not in ("class", "function"):
            # a value: KEY_SEPARATOR (str), NO_DEFAULT ...
            expected = entry.kind
            if type(obj).__name__ != expected and not expected.startswith("_"):
                return [f"{q}: is a {type(obj).__name__}, reference: {expected}"]
            return []
        if entry.params is None:
            return []
        ours = _installed_params(obj)
        if ours is None:
            return [f"{q}: signature not introspectable"]
        return compare_params(q, entry.params, ours)

    kind, raw = _static_kind(holder, entry.name)
    if kind == "missing":
        return [f"{q}: missing"]
    diffs = []
    if entry.kind == "property":
        if kind not in ("property", "attribute"):
            return [f"{q}: is a {kind}, reference: property"]
        if entry.settable and isinstance(raw, property) and raw.fset is None:
            diffs.append(f"{q}: property is not settable (reference: settable)")
        return diffs
    if entry.kind in ("method", "classmethod", "staticmethod"):
        if entry.name in forwarders:
            sub, hook, fkind = forwarders[entry.name]
            if (
                fkind == "method"
                and entry.kind != "method"
                or (fkind == "classmethod" and entry.kind != "classmethod")
            ):
                diffs.append(f"{q}: is a {fkind} forwarder, reference: {entry.kind}")
            try:
                target = getattr(importlib.import_module(f"tensordict.{sub}"), hook)
            except (ImportError, AttributeError):
                return diffs + [f"{q}: forwards to tensordict.{sub}.{hook}, which is missing"]
            ours = _installed_params(target, drop_first=fkind == "method")
            ref = entry.params[1:] if entry.params and entry.kind == "method" else entry.params
            if ours is None or ref is None:
                return diffs
            return diffs + compare_params(q, ref, ours)
        if kind != entry.kind and not (entry.kind == "method" and kind == "attribute"):
            diffs.append(f"{q}: is a {kind}, reference: {entry.kind}")
        if entry.params is None:
            return diffs
        if entry.name == "__init__":
            obj = holder.__init__
        else:
            obj = getattr(holder, entry.name)
        ours = _installed_params(obj)
        if ours is None:
            return diffs + [f"{q}: signature not introspectable"]
        return diffs + compare_params(q, entry.params, ours)
    if kind == "missing":
        return [f"{q}: missing"]
    return diffs


@dataclass
class Report:
    differences: dict[str, list[str]]  # owner -> lines
    skipped: dict[str, list[str]]  # owner -> qualnames not checked


def run(reference: Path) -> Report:
    sections = parse_reference(reference)
    by_title = {s.title: s for s in sections}
    report = Report({}, {})
    forwarders: dict[str, tuple[str, str, str]] = {}
    if installed(CORE):
        from tensordict._plugins import forwarders as _forwarders

        forwarders = {row[0]: (row[1], row[2], row[3]) for row in _forwarders.FORWARDERS}
    for section in sections:
        entries = list(section.entries)
        holder: Any = None
        if installed(section.owner):
            try:
                holder = _resolve(section.target)
            except (ImportError, AttributeError, NotImplementedError) as err:
                holder = err
        if section.inherits:
            own = {e.name for e in entries}
            base = by_title[section.inherits]
            entries += [
                Entry(section.title, e.name, e.kind, e.settable, e.params)
                for e in base.entries
                if e.name not in own and not _same_as_base(holder, section, base, e.name)
            ]
        for entry in entries:
            owner = section.owner
            if section.target == "module:tensordict":
                owner = SIBLING_TOP_LEVEL.get(entry.name, owner)
            elif section.title in ("TensorDict", "LazyStackedTensorDict"):
                if entry.name in forwarders:
                    owner = SUBPACKAGE_DIST[forwarders[entry.name][0]]
                else:
                    owner = SIBLING_METHODS.get(entry.name, owner)
            if not installed(owner):
                report.skipped.setdefault(owner, []).append(entry.qualname)
                continue
            if isinstance(holder, Exception):
                lines = [f"{section.title}: cannot be reached ({holder})"]
                report.differences.setdefault(section.owner, [])
                if lines[0] not in report.differences[section.owner]:
                    report.differences[section.owner] += lines
                continue
            lines = check_entry(entry, holder, forwarders)
            report.differences.setdefault(owner, []).extend(lines)
    return report


def _same_as_base(holder: Any, section: Section, base: Section, name: str) -> bool:
    """Whether a sibling's class has core's ``name`` unchanged: inherited, or with the very
    same signature. Its difference, if any, is core's and reported in the base section."""
    if section.owner == base.owner or not inspect.isclass(holder) or not installed(base.owner):
        return False
    try:
        base_holder = _resolve(base.target)
    except (ImportError, AttributeError, NotImplementedError):
        return False
    (kind, ours), (base_kind, theirs) = _static_kind(holder, name), _static_kind(base_holder, name)
    if ours is theirs:
        return True
    if kind != base_kind or kind not in ("method", "classmethod", "staticmethod"):
        return False
    mine, core = (
        _installed_params(getattr(holder, name)),
        _installed_params(getattr(base_holder, name)),
    )
    return mine is not None and mine == core


def read_allowlist(path: Path = ALLOWLIST) -> dict[str, str]:
    out: dict[str, str] = {}
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        diff, _, reason = line.partition("  # ")
        out[diff.strip()] = reason.strip()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, default=_default_reference())
    parser.add_argument("--all", action="store_true", help="also list allowlisted differences")
    parser.add_argument(
        "--fail-on",
        nargs="*",
        default=[CORE],
        help="distributions whose new differences fail the check (default: tensordict-core)",
    )
    args = parser.parse_args(argv)
    if not args.reference.exists():
        print(f"check_signatures: reference file {args.reference} not found", file=sys.stderr)
        return 2
    report = run(args.reference)
    allow = read_allowlist()
    matched: set[str] = set()
    failing = 0
    for owner in sorted(report.differences):
        lines = report.differences[owner]
        new = [d for d in lines if d not in allow]
        matched.update(d for d in lines if d in allow)
        shown = lines if args.all else new
        fails = owner in args.fail_on
        if shown:
            print(f"== {owner}: {len(new)} new difference(s), {len(lines) - len(new)} allowlisted")
            for line in shown:
                mark = "  " if line in allow else ("! " if fails else "- ")
                suffix = f"   [allowed: {allow[line]}]" if line in allow else ""
                print(f"{mark}{line}{suffix}")
        if fails:
            failing += len(new)
    for owner, names in sorted(report.skipped.items()):
        print(f"== {owner} not installed: {len(names)} name(s) skipped")
    stale = [d for d in allow if d not in matched and _owner_checked(d, report)]
    if stale:
        print(f"== {len(stale)} allowlist line(s) match nothing any more (remove them):")
        for line in stale:
            print(f"  {line}")
    found = sum(len(v) for v in report.differences.values())
    print(
        f"check_signatures: {failing} new difference(s) in {', '.join(args.fail_on)}"
        f" ({found} in all, {len(matched)} allowlisted)"
    )
    return 1 if failing else 0


def _owner_checked(line: str, report: Report) -> bool:
    """Whether the name an allowlist line is about was checked in this run."""
    qual = line.split(":")[0]
    return not any(qual in names for names in report.skipped.values())


def iter_differences(reference: Path | None = None) -> Iterator[str]:
    """Every difference of the installed packages (for tests and scripts)."""
    report = run(reference or _default_reference())
    for lines in report.differences.values():
        yield from lines


if __name__ == "__main__":
    sys.exit(main())
