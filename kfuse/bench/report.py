"""The report of `kfuse bench`: the numbers (fast_p, geomeans, roofline), a terminal table, results.json, PNG
plots and one self-contained report.html (the plots inlined as base64 data URIs).

fast_p is KernelBench's: the fraction of ALL problems that are correct AND have a speedup > p over the baseline.
fast_0 is the fraction correct. A correct problem without a speedup (timing off, or torch.compile unavailable)
counts as not fast for p > 0. Geomeans are over the correct problems that have that speedup, and say how many.
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kfuse.judge.report import STYLE

FAILURES = ("compile_error", "crashed", "timeout", "incorrect", "rejected", "unsupported", "missing")
STATUSES = ("correct", "correct-parity") + FAILURES
COLORS = {"correct": "#2e9d5b", "correct-parity": "#8cc63f", "incorrect": "#d64545", "compile_error": "#a155b9",
          "crashed": "#b8322a", "timeout": "#e0a020", "rejected": "#e06c2c", "unsupported": "#7b8794",
          "missing": "#b7bfc8"}
P_MAX, P_STEPS = 3.0, 61


# --------------------------------------------------------------------------------------------------- the numbers

def fast_p(records: list[dict], p: float, baseline: str, total: int | None = None) -> float:
    """KernelBench's fast_p: fraction of all problems (`total`, default len(records)) correct with speedup > p."""
    total = len(records) if total is None else total
    if total == 0:
        return 0.0
    fast = 0
    for r in records:
        if r["status"] != "correct":
            continue
        speedup = (r.get("speedups") or {}).get(baseline)
        if p <= 0 or (speedup is not None and speedup > p):
            fast += 1
    return fast / total


def geomean(records: list[dict], baseline: str) -> tuple[float | None, int]:
    """Geometric mean speedup over the correct problems that have one, and how many that is."""
    values = [r["speedups"][baseline] for r in records
              if r["status"] == "correct" and (r.get("speedups") or {}).get(baseline)]
    if not values:
        return None, 0
    return math.exp(sum(math.log(v) for v in values) / len(values)), len(values)


def median(values: list[float]) -> float | None:
    values = sorted(values)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def short_op(op: str) -> str:
    """aten.linear.default -> linear."""
    parts = op.split(".")
    return parts[1] if len(parts) >= 3 and parts[0] == "aten" else op


def summarize(records: list[dict], baselines: list[str], total: int | None = None) -> dict:
    total = len(records) if total is None else total
    statuses = Counter(r["status"] for r in records)
    ps = [round(P_MAX * i / (P_STEPS - 1), 4) for i in range(P_STEPS)]
    fractions = [r["roofline_fraction"] for r in records
                 if r["status"] == "correct" and r.get("roofline_fraction") is not None]
    unfused = Counter(short_op(u["op"]) for r in records for u in r.get("unfused", []) if u.get("op"))
    summary = {
        "problems": total,
        "statuses": {s: statuses.get(s, 0) for s in STATUSES if statuses.get(s, 0)},
        "correct": statuses.get("correct", 0),
        "correct_fraction": statuses.get("correct", 0) / total if total else 0.0,
        "baselines": baselines,
        "fast_1": {b: fast_p(records, 1.0, b, total) for b in baselines},
        "fast_p": {"p": ps, **{b: [fast_p(records, p, b, total) for p in ps] for b in baselines}},
        "geomean": {},
        "roofline_fraction": {"median": median(fractions), "count": len(fractions)},
        "kernels_fused": sum(len(r.get("kernels", [])) for r in records),
        "unfused_ops": dict(unfused.most_common()),
        "failures": {s: [{"id": r["id"], "reason": (r["reasons"] or [""])[0]} for r in records if r["status"] == s]
                     for s in STATUSES[1:] if statuses.get(s, 0)},  # correct-parity listed apart too
        "stages_s": stage_totals(records),
        # the judge's other sizes, told not judged: the first word ("passed", "failed", "skipped") per problem
        "other_batch": dict(Counter((r.get("other_batch") or "").split(":")[0] for r in records
                                    if r.get("other_batch"))),
        "other_length": dict(Counter((r.get("other_length") or "").split(":")[0].split(" ")[0] for r in records
                                     if r.get("other_length"))),
        # problems whose file is a precision fallback's (the first was incorrect on precision alone), per fallback
        "precision_fallbacks": dict(Counter(r["precision_fallback"] for r in records if r.get("precision_fallback"))),
        # problems whose file is an alternative's that beat a first file slower than eager (speed_pass), per choice
        "tuned": dict(Counter(r["tuned"] for r in records if r.get("tuned"))),
        "compile_agreement": compile_agreement(records),
    }
    for b in baselines:
        value, count = geomean(records, b)
        summary["geomean"][b] = {"value": value, "over_correct": count}
    return summary


def compile_agreement(records: list[dict]) -> dict[str, dict]:
    """Per torch.compile mode: the problems whose compiled output met KernelBench's 1e-4 against eager's own, those
    whose output missed it, and, of those, the ones where torch.compile timed faster than a correct kfuse file (a
    speed kfuse, held to eager's output, does not try to reach there)."""
    modes: dict[str, dict] = {}
    for r in records:
        for mode, seen in (r.get("compile_agreement") or {}).items():
            m = modes.setdefault(mode, {"within": 0, "outside": [], "not_compared": 0, "outside_and_faster": []})
            if not seen.get("compared"):
                m["not_compared"] += 1
            elif seen.get("kernelbench_pass"):
                m["within"] += 1
            else:
                m["outside"].append(r["id"])
                speedup = (r.get("speedups") or {}).get(f"vs_{mode}")
                if r.get("status") == "correct" and speedup is not None and speedup < 1.0:
                    m["outside_and_faster"].append(r["id"])
    return modes


STAGE_LABELS = {"capture_plan": "capture and plan", "build": "build", "trials": "judge trials",
                "compile": "torch.compile", "gpu_wait": "waiting for the GPU", "timing": "timing"}


def stage_totals(records: list[dict]) -> dict[str, float]:
    """Seconds per stage summed over the problems run now (cached results cost nothing this time). Problems run
    side by side, so the sum exceeds the wall-clock time."""
    totals: dict[str, float] = {}
    for r in records:
        if r.get("cached"):
            continue
        for stage, seconds in (r.get("stages_s") or {}).items():
            totals[stage] = totals.get(stage, 0.0) + seconds
    return {stage: round(totals[stage], 1) for stage in sorted(totals, key=lambda s: list(STAGE_LABELS).index(s)
                                                               if s in STAGE_LABELS else len(STAGE_LABELS))}


def time_text(meta: dict, summary: dict) -> str:
    """'wall 612 s; summed over problems: capture and plan 80 s, build 900 s, ...; builds: 3 cached, 40 built'."""
    parts = []
    if meta.get("wall_s") is not None:
        segments = len(meta.get("segments") or [])
        parts.append(f"wall {meta['wall_s']:.0f} s" + (f" over {segments} commands" if segments > 1 else ""))
    stages = summary.get("stages_s") or {}
    if stages:
        parts.append("summed over problems: " + ", ".join(f"{STAGE_LABELS.get(k, k)} {v:.0f} s"
                                                           for k, v in stages.items()))
    cache = meta.get("build_cache") or {}
    if cache.get("hits") or cache.get("built"):
        parts.append(f"builds: {cache['hits']} from the cache, {cache['built']} built"
                     + (f", {cache['failed']} failed before the judge" if cache.get("failed") else ""))
    return "; ".join(parts)


def label(baseline: str) -> str:
    if baseline == "vs_eager":
        return "eager"
    mode = baseline.split(":", 1)[1] if ":" in baseline else "default"
    return "torch.compile" if mode == "default" else f"torch.compile ({mode})"


def pct(x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"{100 * x:.2g}%" if 0 < 100 * x < 1 else f"{100 * x:.1f}%"


def times(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}×"


def headlines(summary: dict) -> list[tuple[str, str, str]]:
    """(title, value, note) for the headline numbers, in order."""
    n = summary["problems"]
    rows = [("correct", pct(summary["correct_fraction"]), f"{summary['correct']} of {n} problems")]
    for b in summary["baselines"]:
        rows.append((f"fast_1 vs {label(b)}", pct(summary["fast_1"][b]), "correct and faster, of all problems"))
    for b in summary["baselines"]:
        g = summary["geomean"][b]
        note = f"over {g['over_correct']} correct problem{'s' if g['over_correct'] != 1 else ''} timed"
        rows.append((f"geomean vs {label(b)}", times(g["value"]), note))
    roof = summary["roofline_fraction"]
    if roof["count"]:
        rows.append(("roofline (median)", pct(roof["median"]), f"of the floor's speed, {roof['count']} timed"))
    for key, what in (("other_batch", "another batch size"), ("other_length", "another length")):
        other = summary.get(key) or {}
        if other:
            told = ", ".join(f"{other[k]} {k}" for k in ("passed", "failed", "skipped") if other.get(k))
            rows.append((what, told, "told, not judged"))
    fallbacks = summary.get("precision_fallbacks") or {}
    if fallbacks:
        rows.append(("precision fallbacks", ", ".join(f"{n} {name}" for name, n in fallbacks.items()),
                     "planned again after the judge found the first file incorrect on precision alone"))
    for mode, m in (summary.get("compile_agreement") or {}).items():
        compared = m["within"] + len(m["outside"])
        if compared:
            rows.append((f"{label('vs_' + mode)}'s own output", f"{m['within']} of {compared} within 1e-4",
                         f"of eager's (KernelBench's check); outside and faster than kfuse: "
                         f"{len(m['outside_and_faster'])}"))
    tuned = summary.get("tuned") or {}
    if tuned:
        rows.append(("tuned for speed", ", ".join(f"{n} {name}" for name, n in tuned.items()),
                     "the first file slower than eager: planned with kfuse tune's alternatives, the fastest kept"))
    return rows


# ------------------------------------------------------------------------------------------------------ terminal

def print_table(records: list[dict], summary: dict, console: Console | None = None) -> None:
    console = console or Console(highlight=False)
    baselines = summary["baselines"]
    table = Table(title="kfuse bench", title_justify="left", show_lines=False, header_style="bold")
    table.add_column("problem", overflow="fold")
    table.add_column("status")
    table.add_column("ms", justify="right")
    for b in baselines:
        table.add_column(f"vs {label(b)}", justify="right")
    table.add_column("roofline", justify="right")
    table.add_column("note", overflow="fold", ratio=1)
    for r in records:
        status = r["status"]
        row = [r["id"], f"[{STYLE.get(status, '')}]{status}[/]",
               f"{r['times_ms']['candidate']:.4g}" if r.get("times_ms", {}).get("candidate") else ""]
        for b in baselines:
            s = (r.get("speedups") or {}).get(b)
            row.append("" if s is None else f"[{'green' if s > 1 else 'red'}]{s:.2f}×[/]")
        row.append(pct(r["roofline_fraction"]) if r.get("roofline_fraction") is not None else "")
        note = (r["reasons"] or [""])[0] if status != "correct" else launch_note(r)
        row.append(note[:160])
        table.add_row(*row)
    console.print(table)
    parts = [f"{title} [bold]{value}[/] [dim]({note})[/]" for title, value, note in headlines(summary)]
    console.print("  " + "\n  ".join(parts), highlight=False)


def launch_note(record: dict) -> str:
    """"N kernel(s)", with the launches per forward where they are more, and "one CUDA graph" where it has one."""
    if not record.get("kernels"):
        return ""
    kernels, launches = len(record["kernels"]), record.get("launches")
    note = f"{kernels} kernel(s)" + (f", {launches} launches" if launches and launches > kernels else "")
    return note + (", one CUDA graph" if record.get("cuda_graph") else "")


# ------------------------------------------------------------------------------------------------------- plots

def tick(name: str, limit: int = 36) -> str:
    return name if len(name) <= limit else name[:limit - 1] + "…"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 9, "axes.spines.top": False, "axes.spines.right": False,
                         "axes.titleweight": "bold", "axes.titlesize": 10, "figure.dpi": 110})
    return plt


BASELINE_COLORS = ["#3b6fb6", "#e07b39", "#6a9f3a", "#8c62b0"]


def _bars_figure(plt, rows: int, per_row: float, title: str):
    """A full-width horizontal-bar figure whose title and legend sit in a fixed band above the axes."""
    height = max(2.4, per_row * rows + 1.3)
    fig, ax = plt.subplots(figsize=(10.5, height))
    fig.suptitle(title, x=0.01, y=1 - 0.08 / height, ha="left", va="top", fontweight="bold", fontsize=10)
    return fig, ax, height


def _finish_bars(fig, ax, rows: int, height: float, path: Path, legend: bool) -> None:
    ax.set_ylim(rows - 0.5, -0.5)  # first problem on top, no blank margin
    if legend:
        fig.legend(*ax.get_legend_handles_labels(), loc="upper right", ncol=4, frameon=False,
                   bbox_to_anchor=(0.99, 1 - 0.02 / height))
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.2 / height))
    fig.savefig(path)


def plot_speedups(records: list[dict], baselines: list[str], path: Path) -> bool:
    timed = [r for r in records if r["status"] == "correct" and any((r.get("speedups") or {}).get(b)
                                                                    for b in baselines)]
    if not timed:
        return False
    plt = _pyplot()
    fig, ax, height = _bars_figure(plt, len(timed), 0.16 + 0.1 * len(baselines), "Speedup per correct problem")
    bar = 0.8 / len(baselines)
    values = [v for r in timed for v in (r["speedups"].get(b) for b in baselines) if v]
    for i, b in enumerate(baselines):
        ys = [k + (i - (len(baselines) - 1) / 2) * bar for k in range(len(timed))]
        xs = [r["speedups"].get(b) or 0 for r in timed]
        ax.barh(ys, xs, height=bar * 0.92, color=BASELINE_COLORS[i % 4], label=f"vs {label(b)}")
    ax.set_xscale("log")
    low, high = min(values + [1.0]), max(values + [1.0])
    ax.set_xlim(low / 1.6, high * 1.6)
    ax.axvline(1.0, color="#222", linewidth=1, linestyle="--")
    ax.set_yticks(range(len(timed)), [tick(r["id"]) for r in timed])
    ax.set_xlabel("speedup (baseline time / candidate time, log scale; > 1 is faster)")
    ax.grid(axis="x", which="both", alpha=0.25)
    _finish_bars(fig, ax, len(timed), height, path, legend=True)
    plt.close(fig)
    return True


def matplotlib_percent():
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda v, _: f"{v:g}%")


def plot_fast_p(summary: dict, path: Path) -> bool:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.2, 3.3))
    ps = summary["fast_p"]["p"]
    for i, b in enumerate(summary["baselines"]):
        ax.plot(ps, [100 * v for v in summary["fast_p"][b]], color=BASELINE_COLORS[i % 4], linewidth=2,
                label=f"vs {label(b)}", drawstyle="steps-post", linestyle=("-", "--", ":", "-.")[i % 4])
    ax.axvline(1.0, color="#222", linewidth=1, linestyle="--")
    ax.set_xlim(0, P_MAX)
    ax.set_ylim(0, 105)
    ax.set_xlabel("p (speedup threshold)")
    ax.set_ylabel("fast_p (% of all problems)")
    ax.set_title("fast_p: correct and speedup > p")
    ax.legend(frameon=False)
    ax.grid(alpha=0.25)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def plot_roofline(records: list[dict], path: Path) -> bool:
    timed = [r for r in records if r["status"] == "correct" and r.get("roofline_fraction") is not None]
    if not timed:
        return False
    plt = _pyplot()
    fig, ax, height = _bars_figure(plt, len(timed), 0.22, "Roofline: how close to the floor")
    xs = [r["roofline_fraction"] * 100 for r in timed]
    ax.barh(range(len(timed)), xs, color="#3b6fb6", height=0.7)
    ax.axvline(100, color="#222", linewidth=1, linestyle="--")
    ax.set_yticks(range(len(timed)), [tick(r["id"]) for r in timed])
    # log scale: small problems on the CPU sit far below a DRAM floor, GPU kernels near it
    ax.set_xscale("log")
    ax.set_xlim(max(min(xs) / 2, 1e-3), max(150, max(xs) * 1.5))
    ax.xaxis.set_major_formatter(matplotlib_percent())
    ax.set_xlabel("achieved % of the roofline floor's speed (floor time / candidate time, log scale)")
    ax.grid(axis="x", which="both", alpha=0.25)
    _finish_bars(fig, ax, len(timed), height, path, legend=False)
    plt.close(fig)
    return True


def plot_statuses(summary: dict, path: Path) -> bool:
    counts = summary["statuses"]
    if not counts:
        return False
    plt = _pyplot()
    names = [s for s in STATUSES if counts.get(s)]
    fig, ax = plt.subplots(figsize=(6.2, 3.3))  # beside the fast_p plot, as tall
    ax.barh(range(len(names)), [counts[s] for s in names], color=[COLORS[s] for s in names], height=0.7)
    for k, s in enumerate(names):
        ax.text(counts[s], k, f" {counts[s]}", va="center")
    ax.set_yticks(range(len(names)), names)
    ax.set_ylim(max(len(names), 6) - 0.5, -0.5)  # bars of one thickness however few, from the top
    ax.set_xlim(0, max(counts.values()) * 1.15 + 0.5)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("problems")
    ax.set_title("Outcomes")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


# -------------------------------------------------------------------------------------------------------- html

CSS = """
body { font: 14px/1.45 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; color: #1f2933;
       background: #f5f7fa; margin: 0; }
main { max-width: 1240px; margin: 0 auto; padding: 24px 28px 48px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 32px 0 10px; padding-bottom: 4px; border-bottom: 1px solid #d9dee5; }
.meta { color: #52606d; font-size: 13px; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(165px, 1fr)); gap: 12px;
         margin-top: 18px; }
.card { background: #fff; border: 1px solid #e1e5eb; border-radius: 8px; padding: 12px 16px;
        box-shadow: 0 1px 2px rgba(0,0,0,.04); }
.card .t { color: #52606d; font-size: 12px; text-transform: uppercase; letter-spacing: .03em; }
.card .v { font-size: 26px; font-weight: 650; margin: 2px 0; }
.card .n { color: #7b8794; font-size: 12px; }
.plots { display: grid; align-items: start; grid-template-columns: repeat(auto-fit, minmax(480px, 1fr)); gap: 14px; }
.plot { background: #fff; border: 1px solid #e1e5eb; border-radius: 8px; padding: 8px; text-align: center; }
.plot img { max-width: 100%; height: auto; }
.plot.wide { grid-column: 1 / -1; }
table { border-collapse: collapse; width: 100%; background: #fff; border: 1px solid #e1e5eb; font-size: 13px; }
th, td { padding: 6px 8px; border-bottom: 1px solid #edf0f3; text-align: left; vertical-align: top; }
th { background: #eef1f5; font-weight: 600; white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr:hover td { background: #fafbfc; }
.pill { display: inline-block; padding: 1px 8px; border-radius: 10px; color: #fff; font-size: 12px;
        font-weight: 600; white-space: nowrap; }
.good { color: #1f7a45; font-weight: 600; } .bad { color: #b8322a; }
.reason { color: #52606d; font-size: 12px; min-width: 200px; overflow-wrap: anywhere; }
td.reason { width: 34%; }
.ops { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; }
td.ops { min-width: 110px; max-width: 220px; overflow-wrap: anywhere; }
.scroll { overflow-x: auto; }
.note { color: #52606d; font-size: 12px; margin-top: 6px; }
ul.fail { margin: 4px 0 12px; padding-left: 20px; } ul.fail li { margin: 2px 0; }
code { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; background: #eef1f5;
       padding: 0 3px; border-radius: 3px; }
"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _img(path: Path, alt: str, wide: bool = False) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<div class="plot{" wide" if wide else ""}"><img alt="{_e(alt)}" src="data:image/png;base64,{data}"></div>'


def _pill(status: str) -> str:
    return f'<span class="pill" style="background:{COLORS.get(status, "#7b8794")}">{_e(status)}</span>'


def _kernel_text(kernel: dict) -> str:
    """One fused kernel as its op chain; a long chain shortened (the whole of it in the tooltip)."""
    ops = [short_op(op) for op in kernel.get("fuses", [])]
    whole = " → ".join(ops)
    if len(ops) <= 6:
        return _e(whole)
    shown = " → ".join(ops[:3]) + " → … → " + ops[-1]
    return f"<span title='{_e(whole)}'>{_e(shown)} ({len(ops)} ops)</span>"


def _speedup_cell(value: float | None) -> str:
    if value is None:
        return '<td class="num">—</td>'
    return f'<td class="num {"good" if value > 1 else "bad"}">{value:.2f}×</td>'


def render_html(records: list[dict], summary: dict, meta: dict, plots: dict[str, Path]) -> str:
    baselines = summary["baselines"]
    env = meta.get("environment") or {}
    where = env.get("name") or meta["device"]
    when = meta.get("written", "")
    source = ("kfuse optimize, then kfuse check" if meta["mode"] == "optimize"
              else f"candidates from {meta['candidates']}, judged by kfuse check")
    timing = meta["options"].get("time", True)
    out = ["<!doctype html><html lang='en'><head><meta charset='utf-8'>",
           "<meta name='viewport' content='width=device-width, initial-scale=1'>",
           f"<title>kfuse bench — {summary['problems']} problems</title><style>{CSS}</style></head><body><main>",
           "<h1>kfuse bench</h1>",
           f"<div class='meta'>{summary['problems']} problems · {_e(meta['device'])} target ({_e(where)}) · "
           f"torch {_e(env.get('torch') or meta.get('torch'))} · kfuse {_e(meta['kfuse_version'])} · {_e(source)}"
           f" · {_e(when)}</div>"]
    if meta.get("interrupted"):
        out.append(f"<div class='note'><b>Interrupted:</b> {len(records)} of {summary['problems']} problems finished; "
                   f"the others count as not correct here. Run the same command again to go on.</div>")
    if not timing:
        out.append("<div class='note'>Timing was off (<code>--no-timing</code>): no speedups, so fast_p for "
                   "p &gt; 0 is 0.</div>")
    out.append("<div class='cards'>")
    for title, value, note in headlines(summary):
        out.append(f"<div class='card'><div class='t'>{_e(title)}</div><div class='v'>{_e(value)}</div>"
                   f"<div class='n'>{_e(note)}</div></div>")
    out.append("</div>")
    if time_text(meta, summary):
        out.append(f"<div class='note'><b>Time:</b> {_e(time_text(meta, summary))}.</div>")
    out.append("<div class='note'>fast_p (KernelBench's definition): the fraction of <i>all</i> problems that are "
               "correct and run more than p× faster than the baseline; fast_0 is the fraction correct. A correct "
               "problem without a measured speedup counts as not fast. Geomeans are over the correct problems "
               "that were timed against that baseline.</div>")

    out.append("<h2>Plots</h2><div class='plots'>")
    for name, alt in (("fast_p", "fast_p curve"), ("statuses", "outcomes"), ("speedups", "speedup per problem"),
                      ("roofline", "achieved fraction of the roofline")):
        if name in plots:
            out.append(_img(plots[name], alt, wide=name in ("speedups", "roofline")))
    out.append("</div>")
    if "speedups" not in plots:
        out.append("<div class='note'>No correct problem was timed, so there is no speedup plot.</div>")

    out.append("<h2>Problems</h2><div class='scroll'><table><thead><tr><th>problem</th><th>status</th><th>candidate ms</th>"
               + "".join(f"<th>vs {_e(label(b))}</th>" for b in baselines)
               + "<th>roofline</th><th>build s</th><th>kernels fused</th><th>left unfused</th><th>reasons</th>"
               "</tr></thead><tbody>")
    for r in records:
        ms = (r.get("times_ms") or {}).get("candidate")
        kernels = "<br>".join(_kernel_text(k) for k in r.get("kernels", []))
        unfused = ", ".join(_e(short_op(u["op"])) for u in r.get("unfused", []))
        notes = [_e(x) for x in r.get("reasons", [])[:3]] + [f"<b>flag:</b> {_e(f)}" for f in r.get("flags", [])]
        cells = [f"<td>{_e(r['id'])}</td>", f"<td>{_pill(r['status'])}</td>",
                 f"<td class='num'>{'' if ms is None else f'{ms:.4g}'}</td>"]
        cells += [_speedup_cell((r.get("speedups") or {}).get(b)) for b in baselines]
        roof = r.get("roofline_fraction")
        cells.append(f"<td class='num'>{'' if roof is None else pct(roof)}</td>")
        build = r.get("build_s")
        cells.append(f"<td class='num'>{'' if build is None else f'{build:.1f}'}</td>")
        cells.append(f"<td class='ops'>{kernels}</td><td class='ops'>{unfused}</td>")
        cells.append(f"<td class='reason'>{'<br>'.join(notes)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")

    out.append("<h2>Failures</h2>")
    if not summary["failures"]:
        out.append("<p>None: every problem is correct.</p>")
    for status, items in summary["failures"].items():
        out.append(f"<div>{_pill(status)} <b>{len(items)}</b></div><ul class='fail'>")
        for item in items:
            out.append(f"<li><b>{_e(item['id'])}</b>: <span class='reason'>{_e(item['reason'])}</span></li>")
        out.append("</ul>")

    out.append("<h2>Left unfused</h2>")
    if summary["unfused_ops"]:
        out.append("<table style='width:auto'><thead><tr><th>op</th><th>count</th></tr></thead><tbody>")
        for op, count in summary["unfused_ops"].items():
            out.append(f"<tr><td class='ops'>{_e(op)}</td><td class='num'>{count}</td></tr>")
        out.append("</tbody></table>")
        out.append(f"<div class='note'>Ops that kfuse optimize kept as library or ATen calls, counted over all "
                   f"problems; {summary['kernels_fused']} fused kernels in all.</div>")
    elif meta["mode"] == "optimize":
        out.append("<p>Nothing: in the problems kfuse optimized, every op went into a fused kernel.</p>")
    else:
        out.append("<p>Not applicable: the candidates were given, not optimized by kfuse.</p>")
    out.append("<div class='note'>Files: <code>results.json</code> (every number here), <code>verdicts/</code> "
               "(each problem's full verdict), PNG plots beside this file.</div></main></body></html>")
    return "\n".join(out)


def write_report(out: Path, records: list[dict], summary: dict, meta: dict) -> dict[str, Path]:
    """results.json, the PNG plots and report.html in `out`; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    data = {**meta, "summary": summary, "problems": records}
    files["results"] = out / "results.json"
    files["results"].write_text(json.dumps(data, indent=2, default=str) + "\n")
    plots = {}
    for name, draw in (("speedups", lambda p: plot_speedups(records, summary["baselines"], p)),
                       ("fast_p", lambda p: plot_fast_p(summary, p)),
                       ("roofline", lambda p: plot_roofline(records, p)),
                       ("statuses", lambda p: plot_statuses(summary, p))):
        path = out / f"{name}.png"
        if draw(path):
            plots[name] = path
        elif path.exists():
            path.unlink()  # a stale plot from an earlier run
    files.update(plots)
    files["html"] = out / "report.html"
    files["html"].write_text(render_html(records, summary, meta, plots))
    return files
