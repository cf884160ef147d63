"""The terminal summary of a verdict (rich). The JSON file is the verdict dict itself (docs/verdict.md)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

# Each status's rich style, in a single verdict (here) and in bench's table (kfuse.bench.report).
STYLE = {"correct": "bold green", "correct-parity": "bold yellow", "incorrect": "bold red",
         "compile_error": "bold magenta", "crashed": "bold red", "timeout": "bold yellow", "rejected": "bold red",
         "unsupported": "dim", "missing": "dim"}


def _parity_line(trials: list[dict]) -> str | None:
    worst = None
    for trial in trials:
        for comparison in trial.get("comparisons", []):
            for t in comparison.get("tensors", []):
                if t.get("e_cand") is None:
                    continue
                ratio = t["e_cand"] / t["parity_bound"] if t["parity_bound"] else float("inf")
                if worst is None or ratio > worst[0]:
                    worst = (ratio, t)
    if worst is None:
        return None
    t = worst[1]
    return (f"precision parity: worst error against float64 {t['e_cand']:.3g} (reference's {t['e_ref']:.3g}, "
            f"bound {t['parity_bound']:.3g})")


def print_verdict(verdict: dict, console: Console | None = None) -> None:
    if console is None:
        console = Console(highlight=False)
        if not console.is_terminal:
            console.width = 120  # logs and pipes: long reasons stay on one line
    env = verdict.get("environment") or {}
    where = f"{env.get('name', verdict['options']['device'])}, torch {env.get('torch', '?')}" if env else \
        verdict["options"]["device"]
    if verdict["options"].get("precision", "fp32") != "fp32":
        where += f", {verdict['options']['precision']} precision policy"
    console.print(f"[bold]kfuse check[/] {verdict['problem']} <- {verdict['candidate']}  [dim]({where})[/]")
    if verdict.get("extraction"):
        console.print(f"  [dim]extracted: {verdict['extraction']['why']}[/]")
    status = verdict["status"]
    console.print(f"  verdict: [{STYLE[status]}]{status.upper()}[/]")
    for reason in verdict["reasons"]:
        console.print(f"    - {reason}", markup=False, highlight=False)

    warnings = [f for f in verdict.get("static", []) if f["level"] == "warning"]
    for f in warnings:
        console.print(f"  [yellow]warning[/] line {f['line']}: {f['message']}", highlight=False)

    trials = verdict.get("trials") or []
    if trials:
        kinds = ", ".join(t["kind"] for t in trials)
        passed = sum(t["passed"] for t in trials)
        console.print(f"  trials: {passed}/{len(trials)} passed ({kinds}); seed {verdict['options']['seed']}")
        for trial in trials:
            for note in trial.get("notes", []):
                console.print(f"    [dim]trial {trial['trial']}: {note}[/]", highlight=False)
    if verdict.get("kernelbench_pass") is not None:
        word = "pass" if verdict["kernelbench_pass"] else "fail"
        console.print(f"  KernelBench rule (allclose atol=rtol 1e-4 fp32 / 1e-2 half): {word}")
    if verdict.get("other_batch"):
        console.print(f"  another batch size (told, not judged): {verdict['other_batch']}", highlight=False)
    if verdict.get("other_length"):
        console.print(f"  another length (told, not judged): {verdict['other_length']}", highlight=False)
    parity = _parity_line(trials)
    if parity:
        console.print(f"  {parity}")
    if verdict.get("build_s") is not None:
        console.print(f"  build/import: {verdict['build_s']:.1f} s")

    timing = verdict.get("timing")
    if timing:
        table = Table(box=None, padding=(0, 2), show_edge=False)
        for column in ("", "median ms", "IQR ms", "min ms", "trials", "candidate speedup"):
            table.add_column(column, justify="right" if column else "left")
        for name, s in timing["stats"].items():
            speedup = timing["speedups"].get(f"vs_{name}")
            table.add_row(name, f"{s['median_ms']:.4g}", f"{s['iqr_ms']:.3g}", f"{s['min_ms']:.4g}",
                          str(s["trials"]), f"{speedup:.2f}x" if speedup else "")
        console.print(table)
        r = timing["roofline"]
        console.print(f"  roofline floor {r['floor_ms']:.4g} ms ({r['bound']}-bound: {r['bytes'] / 1e6:.3g} MB, "
                      f"{r['flops'] / 1e9:.3g} GFLOP); candidate at {timing['achieved_fraction_of_floor']:.0%} "
                      f"of the floor's speed")
        for name, err in timing.get("compile_errors", {}).items():
            console.print(f"  [yellow]{name} failed[/]: {err}", highlight=False)
        for name, seen in timing.get("compile_agreement", {}).items():
            if not seen.get("compared"):
                console.print(f"  {name}'s output not compared with eager's: {seen.get('reason')}", highlight=False)
            elif not seen["kernelbench_pass"]:
                console.print(f"  [yellow]{name}'s own output misses KernelBench's 1e-4 against eager's[/] (max abs "
                              f"diff {seen['max_abs_diff']:.3g}): its speed is not eager's precision", highlight=False)
        for flag in timing["flags"]:
            console.print(f"  [bold yellow]flag[/]: {flag}", highlight=False)
    if verdict.get("error_log") and status in ("compile_error", "crashed", "timeout"):
        tail = "\n".join(verdict["error_log"].strip().splitlines()[-12:])
        if tail:
            console.print("  [dim]last lines of the worker's log:[/]")
            console.print(tail, markup=False, highlight=False, style="dim")
