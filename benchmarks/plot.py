#!/usr/bin/env python
"""Draw the benchmarks' JSON results as horizontal bar charts (needs matplotlib).

Each benchmark script writes its results with ``--json PATH``; this script reads those
files and draws one chart per benchmark: the ratio of every row against its baseline
(the plain-dict floor, plain torch, torch.save, ...), this library beside the reference
library (tensordict 0.15.3) where the benchmark measures both. A ratio below 1 is faster
than the baseline. Nothing is asserted: the charts show what one run measured.

Regenerating the pictures of the user guide (docs/_static/bench/) from fresh runs, with
this checkout's environment as ``python`` and the reference library's as ``$REF``
(a virtual environment with torch and ``tensordict==0.15.3``)::

    mkdir -p /tmp/bench
    python benchmarks/run.py --quick --json /tmp/bench/run.json
    $REF benchmarks/run.py --quick --json /tmp/bench/run-ref.json
    python benchmarks/nn.py --quick --json /tmp/bench/nn.json
    $REF benchmarks/nn.py --quick --json /tmp/bench/nn-ref.json
    python benchmarks/compile.py --rounds 5 --json /tmp/bench/compile.json
    $REF benchmarks/compile.py --rounds 5 --json /tmp/bench/compile-ref.json
    python benchmarks/tensorclass.py --quick --json /tmp/bench/tensorclass.json
    python benchmarks/memmap_bench.py --total-mb 256 --small-leaves 2000 --repeat 2 \\
        --json /tmp/bench/memmap.json
    python benchmarks/plot.py --dir /tmp/bench --out docs/_static/bench

``--dir`` picks up the files above by name (``run.json``, ``run-ref.json``, ...; a
missing file leaves its chart or its reference bars out); ``--run PATH`` and the other
options name one file each instead. ``benchmarks/distributed.py --json`` results are
drawn too (``distributed.json`` / ``distributed-ref.json``, or ``--distributed``); the
guide does not show that chart, whose rows need a quiet machine. Drop the ``--quick``
options for steadier figures (minutes instead of seconds per script). ``nox -s bench``
installs matplotlib: ``.nox/bench/bin/python benchmarks/plot.py ...``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

OURS_COLOR = "#2f6db5"
REF_COLOR = "#e08a2c"
OTHER_COLOR = "#a8a8a8"

#: chart name -> the script whose --json it draws
CHARTS = {
    "run": "benchmarks/run.py",
    "nn": "benchmarks/nn.py",
    "compile": "benchmarks/compile.py",
    "tensorclass": "benchmarks/tensorclass.py",
    "memmap": "benchmarks/memmap_bench.py",
    "distributed": "benchmarks/distributed.py",
}
#: charts that have a reference run beside ours
WITH_REFERENCE = ("run", "nn", "compile", "distributed")


def _load(path: str | None) -> Any:
    if path is None:
        return None
    with open(path) as f:
        return json.load(f)


def _plt() -> Any:
    try:
        import matplotlib
    except ImportError:
        sys.exit("benchmarks/plot.py needs matplotlib: pip install matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "font.size": 8,
            "axes.titlesize": 9,
            "svg.fonttype": "none",  # text stays text: small files, selectable labels
            "svg.hashsalt": "tensordict-bench",  # stable ids: same input, same file
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    )
    return plt


def _version(meta: dict[str, Any] | None, default: str) -> str:
    if not meta:
        return default
    return f"tensordict {meta.get('tensordict', '?')}"


def _footer(meta: dict[str, Any] | None, extra: str = "") -> str:
    """One line saying where the numbers come from."""
    if not meta:
        return extra
    parts = []
    if "git" in meta:
        parts.append(f"commit {meta['git']}")
    if "torch" in meta:
        parts.append(f"torch {meta['torch']}")
    if "cores" in meta:
        parts.append(f"{meta['cores']} cores ({meta.get('cpu', '?')})")
    if "mode" in meta:
        parts.append(f"{meta['mode']} run, {meta.get('rounds', '?')} rounds")
    if "date" in meta:
        parts.append(str(meta["date"])[:10])
    return ", ".join(parts) + (f". {extra}" if extra else "")


def _bars(
    plt: Any,
    labels: list[str],
    series: list[tuple[str, str, list[float | None]]],
    *,
    title: str,
    xlabel: str,
    footer: str,
    log: bool = True,
    lines: tuple[tuple[float, str, str], ...] = ((1.0, "-", "baseline"),),
) -> Any:
    """A horizontal grouped bar chart: one group per label, one bar per series
    ``(name, color, values)``; each bar is annotated with its value."""
    n, k = len(labels), len(series)
    height = 0.8 / k
    fig_h = 0.8 + 0.16 * n * max(k, 1.5) + 0.2 + 0.17 * (k + len(lines)) + 0.3
    fig, ax = plt.subplots(figsize=(7.0, fig_h))
    finite = [v for _, _, vals in series for v in vals if v is not None and v > 0]
    lo, hi = min(finite + [1.0]), max(finite + [1.0])
    for j, (name, color, values) in enumerate(series):
        ys = [i + (j - (k - 1) / 2) * height for i in range(n)]
        xs = [v if v is not None else float("nan") for v in values]
        ax.barh(ys, xs, height=height * 0.92, color=color, label=name)
        for y, v in zip(ys, values):
            if v is None:
                continue
            ax.text(
                v * (1.04 if log else 1.0) + (0 if log else hi * 0.01),
                y,
                f"{v:.2f}×",
                va="center",
                ha="left",
                fontsize=6.5,
            )
    for x, style, text in lines:
        ax.axvline(
            x,
            color="#444444",
            linestyle=style,
            linewidth=0.8,
            zorder=0,
            label=f"{x:g}×: {text}" if text else None,
        )
        lo, hi = min(lo, x), max(hi, x)
    ax.set_yticks(range(n))
    ax.set_yticklabels(labels)
    ax.invert_yaxis()
    if log:
        ax.set_xscale("log")
        ax.set_xlim(lo / 1.4, hi * 1.8)
        ticks = _log_ticks(lo / 1.4, hi * 1.8)
        ax.set_xticks(ticks)
        ax.set_xticklabels([f"{t:g}×" for t in ticks])
        ax.minorticks_off()
    else:
        ax.set_xlim(0, hi * 1.25)
    ax.set_ylim(n - 0.4, -0.6)
    ax.set_xlabel(xlabel)
    fig.suptitle(title, x=0.01, ha="left", fontsize=9)
    # below the axes: the legend (one line per series), then the footer line
    legend_h = 0.17 * (k + len([line for line in lines if line[2]])) + 0.05
    foot_h = 0.2
    fig.text(0.01, 0.04 / fig_h, footer, fontsize=6, color="#555555", ha="left", va="bottom")
    handles, names = ax.get_legend_handles_labels()
    fig.legend(
        handles,
        names,
        loc="lower left",
        bbox_to_anchor=(0.01, foot_h / fig_h),
        fontsize=7,
        frameon=False,
        ncol=1,
    )
    fig.tight_layout(rect=(0, (foot_h + legend_h) / fig_h, 1, 1))
    return fig


def _log_ticks(lo: float, hi: float) -> list[float]:
    """Tick values between ``lo`` and ``hi``: 1-2-5 steps over a short range, 1-3 steps
    over a few decades, decades beyond."""
    decades = math.log10(hi / lo)
    steps = (1, 2, 5) if decades < 1.6 else (1, 3) if decades < 3.2 else (1,)
    return [
        m * 10.0**e
        for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
        for m in steps
        if lo <= m * 10.0**e <= hi
    ]


def _stat_ratio(entry: dict[str, Any], stat: str) -> float | None:
    if "error" in entry:
        return None
    if stat == "median":
        return float(entry.get("ratio_paired_median", entry["ratio"]))
    return float(entry["ratio"])


def _geomean(values: list[float | None]) -> float:
    vals = [v for v in values if v is not None and v > 0]
    return math.exp(sum(map(math.log, vals)) / len(vals)) if vals else float("nan")


def _floor_chart(plt: Any, ours: Any, ref: Any, stat: str, title: str, baseline: str) -> Any:
    """run.py / nn.py: each op against its floor, ours and (if given) the reference."""
    names = [r["name"] for r in ours["results"]]
    ours_vals = [_stat_ratio(r, stat) for r in ours["results"]]
    series = [
        (
            f"{_version(ours['meta'], 'ours')} (this repository), "
            f"geomean {_geomean(ours_vals):.2f}×",
            OURS_COLOR,
            ours_vals,
        )
    ]
    if ref is not None:
        by_name = {r["name"]: r for r in ref["results"]}
        ref_vals = [_stat_ratio(by_name[n], stat) if n in by_name else None for n in names]
        series.append(
            (
                f"{_version(ref['meta'], 'reference')} (reference), "
                f"geomean {_geomean(ref_vals):.2f}×",
                REF_COLOR,
                ref_vals,
            )
        )
    what = "median of the per-round paired ratios" if stat == "median" else "ratio of the minima"
    return _bars(
        plt,
        names,
        series,
        title=title,
        xlabel=f"time / {baseline}, log scale: lower is better\n({what})",
        footer=_footer(ours["meta"]),
        lines=((1.0, "-", baseline), (3.0, ":", "the tables flag ops above 3×")),
    )


def chart_run(plt: Any, ours: Any, ref: Any, stat: str) -> Any:
    return _floor_chart(
        plt,
        ours,
        ref,
        stat,
        "TensorDict ops against the same torch work on plain nested dicts (run.py)",
        "plain-dict floor",
    )


def chart_nn(plt: Any, ours: Any, ref: Any, stat: str) -> Any:
    return _floor_chart(
        plt,
        ours,
        ref,
        stat,
        "tensordict.nn against hand-written torch / torch.func (nn.py)",
        "plain torch",
    )


def chart_compile(plt: Any, ours: Any, ref: Any, stat: str) -> Any:
    """compile.py: compiled call and first call (the compile), tensordict / dicts."""
    labels, ours_vals, ref_vals = [], [], []
    ref_rows = {r["workload"]: r for r in (ref or {}).get("rows", [])}
    for row in ours["rows"]:
        w = row["workload"]
        breaks = row["td_graph_breaks"]
        for key, what in (
            ("call_ratio", "compiled call"),
            ("first_call_ratio", "first call"),
            ("first_call_warm_ratio", "first call, kernels built"),
        ):
            if key not in row:  # a JSON written before this figure existed
                continue
            labels.append(f"{w}: {what}" + (f" ({breaks} graph breaks)" if breaks else ""))
            ours_vals.append(row[key])
            ref_vals.append(ref_rows[w].get(key) if w in ref_rows else None)
    series = [(f"{_version(ours['meta'], 'ours')} (this repository)", OURS_COLOR, ours_vals)]
    if ref is not None:
        series.append((f"{_version(ref['meta'], 'reference')} (reference)", REF_COLOR, ref_vals))
    backend = ours["meta"].get("backend", "?")
    return _bars(
        plt,
        labels,
        series,
        title=f"torch.compile ({backend}): a tensordict function against\nthe same function on nested dicts (compile.py)",
        xlabel="time / plain-dict version, log scale: lower is better",
        footer=_footer(
            ours["meta"],
            "Call: minimum over interleaved rounds; first call: best of two compiles each, "
            "in a fresh inductor cache (or with the kernels built)",
        ),
        lines=((1.0, "-", "the nested-dict version"),),
    )


def chart_tensorclass(plt: Any, ours: Any, ref: Any, stat: str) -> Any:
    """tensorclass.py: each op on a tensorclass against its TensorDict (or dataclass) twin."""
    labels = [f"{r['name']}  [vs {r.get('against', 'TensorDict')}]" for r in ours["results"]]
    vals = [_stat_ratio(r, stat) for r in ours["results"]]
    what = "median of the per-round paired ratios" if stat == "median" else "ratio of the minima"
    return _bars(
        plt,
        labels,
        [(f"{_version(ours['meta'], 'ours')}", OURS_COLOR, vals)],
        title="@tensorclass against the same op on its TensorDict twin\n(tensorclass.py)",
        xlabel=f"time / twin, log scale: lower is better\n({what})",
        footer=_footer(ours["meta"]),
        lines=((1.0, "-", "the twin"), (1.2, ":", "target of issue 9")),
    )


_SAVE_BASE, _LOAD_BASE = "torch.save", "torch.load"
_LOADS = ("read", "load")


def chart_memmap(plt: Any, ours: Any, ref: Any, stat: str) -> Any:
    """memmap_bench.py: each save against torch.save, each load against torch.load,
    per case (large leaves / many small leaves), best round; the durable-save case
    against its own floor (a raw write + fsync of the same bytes), median of rounds."""
    cases: dict[str, dict[str, float]] = {}
    refs: dict[tuple[str, str], str | None] = {}
    for row in ours:
        cases.setdefault(row["case"], {})[row["what"]] = row["seconds"]
        refs[(row["case"], row["what"])] = row.get("ref")

    def bars(case: str, times: dict[str, float]) -> list[tuple[str, str, float]]:
        """(what, against, seconds) of the rows drawn for ``case``."""
        out = []
        for what, seconds in times.items():
            if _SAVE_BASE in times:  # the save/load cases: against torch.save/torch.load
                if what in (_SAVE_BASE, _LOAD_BASE):
                    continue
                is_load = any(w in what for w in _LOADS)
                out.append((what, _LOAD_BASE if is_load else _SAVE_BASE, seconds))
            elif refs[(case, what)] is not None:  # the durable case: against its row's ref
                out.append((what, str(refs[(case, what)]), seconds))
        return out

    drawn = {case: bars(case, times) for case, times in cases.items()}
    fig, axes = plt.subplots(
        len(cases),
        1,
        figsize=(7.0, 1.6 + 0.2 * sum(len(v) for v in drawn.values())),
        squeeze=False,
        gridspec_kw={"height_ratios": [max(len(v), 1) for v in drawn.values()]},
    )
    for ax, (case, rows) in zip(axes[:, 0], drawn.items()):
        times = cases[case]
        labels, vals, colors = [], [], []
        for what, against, seconds in rows:
            ms = seconds * 1e3
            short = against if len(against) <= 24 else "raw write + fsync"
            labels.append(f"{what}  [{ms:.3g} ms / {short}]")
            vals.append(seconds / times[against])
            ours_row = what.startswith(("td.", "load_memmap"))
            colors.append(OURS_COLOR if ours_row else OTHER_COLOR)
        ys = range(len(labels))
        ax.barh(list(ys), vals, color=colors, height=0.75)
        for y, v in zip(ys, vals):
            ax.text(v * 1.05, y, f"{v:.2f}×", va="center", ha="left", fontsize=6.5)
        ax.axvline(1.0, color="#444444", linewidth=0.8, zorder=0)
        ax.set_xscale("log")
        lo, hi = min(vals + [1.0]), max(vals + [1.0])
        ax.set_xlim(lo / 1.4, hi * 2.0)
        ticks = _log_ticks(lo / 1.4, hi * 2.0)
        ax.set_xticks(ticks)
        ax.set_xticklabels([f"{t:g}×" for t in ticks])
        ax.minorticks_off()
        ax.set_yticks(list(ys))
        ax.set_yticklabels(labels)
        ax.invert_yaxis()
        ax.set_title(case + (" (median of rounds)" if _SAVE_BASE not in times else ""), loc="left")
    fig.suptitle(
        "tensordict-memmap (blue): saves against torch.save, loads against torch.load\n"
        "(memmap_bench.py, best round); durable save against a raw write + fsync",
        x=0.01,
        ha="left",
        fontsize=9,
    )
    axes[-1, 0].set_xlabel("time / the row's reference (log scale): lower is better")
    fig.text(
        0.01,
        0.005,
        "Reads are of files in the page cache. torch.save does not fsync; "
        "td.memmap's default does (atomic, durable).",
        fontsize=6,
        color="#555555",
    )
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    return fig


def chart_distributed(plt: Any, ours: Any, ref: Any, stat: str) -> Any:
    """distributed.py: each row against its plain torch.distributed / redis-py version."""
    rows = [(k, v) for k, v in ours["rows"].items() if "skipped" not in v]
    ref_rows = (ref or {}).get("rows", {})
    labels, ours_vals, ref_vals = [], [], []
    for name, r in rows:
        speedup = "speed-up" in name or name.startswith("map")
        labels.append(
            name.replace(" (speed-up)", ": speed-up, higher is better") if speedup else name
        )
        ours_vals.append(r.get("ratio", r["td"] / r["plain"]))
        other = ref_rows.get(name)
        ref_vals.append(None if not other or "skipped" in other else other.get("ratio"))
    series = [(f"{ours['library'].split(' (')[0]} (this repository)", OURS_COLOR, ours_vals)]
    if ref is not None:
        series.append((f"{ref['library'].split(' (')[0]} (reference)", REF_COLOR, ref_vals))
    mib = ours.get("bytes", 0) / (1 << 20)
    return _bars(
        plt,
        labels,
        series,
        title="tensordict.distributed against plain torch.distributed / redis-py\n(distributed.py)",
        xlabel="time / plain version, log scale: lower is better (map: higher)",
        footer=f"{mib:g} MiB per transfer, 2 gloo processes on 127.0.0.1, "
        f"{ours.get('rounds', '?')} rounds, minimum",
        lines=((1.0, "-", "the plain version"),),
    )


DRAW: dict[str, Callable[..., Any]] = {
    "run": chart_run,
    "nn": chart_nn,
    "compile": chart_compile,
    "tensorclass": chart_tensorclass,
    "memmap": chart_memmap,
    "distributed": chart_distributed,
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--dir", help="folder holding NAME.json / NAME-ref.json (names below)")
    for name, script in CHARTS.items():
        p.add_argument(f"--{name}", metavar="PATH", help=f"JSON of {script} --json")
        if name in WITH_REFERENCE:
            p.add_argument(
                f"--{name}-ref",
                metavar="PATH",
                help=f"JSON of {script} --json run with the reference library",
            )
    p.add_argument("--out", default="docs/_static/bench", help="output folder (%(default)s)")
    p.add_argument("--format", default="svg", choices=["svg", "png"], help="(%(default)s)")
    p.add_argument(
        "--stat",
        default="median",
        choices=["median", "min"],
        help="for run/nn/tensorclass: median of the paired per-round ratios (default) or "
        "the ratio of the minima (what the scripts' tables print)",
    )
    args = p.parse_args(argv)

    def path_of(option: str, filename: str) -> str | None:
        given = getattr(args, option.replace("-", "_"))
        if given:
            return str(given)
        if args.dir and os.path.exists(os.path.join(args.dir, filename)):
            return os.path.join(args.dir, filename)
        return None

    plt = _plt()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    drawn = 0
    for name in CHARTS:
        ours_path = path_of(name, f"{name}.json")
        if ours_path is None:
            continue
        ref_path = path_of(f"{name}-ref", f"{name}-ref.json") if name in WITH_REFERENCE else None
        fig = DRAW[name](plt, _load(ours_path), _load(ref_path), args.stat)
        target = out / f"{name}.{args.format}"
        metadata = {"Date": None} if args.format == "svg" else {"Software": None}
        fig.savefig(target, format=args.format, dpi=110, metadata=metadata)
        plt.close(fig)
        size = target.stat().st_size
        print(
            f"{target}  ({size / 1024:.0f} KB) from {ours_path}"
            + (f" and {ref_path}" if ref_path else "")
        )
        drawn += 1
    if not drawn:
        p.error("no JSON given: pass --dir or one of the --NAME options (see --help)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
