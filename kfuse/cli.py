"""The `kfuse` command. Bad input ends in one line on stderr and exit code 2; a verdict other than correct, 1."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import time
from pathlib import Path

import click

from kfuse import PRECISIONS, __version__
from kfuse.errors import UsageError
from kfuse.kernels.choices import PRECISION_FALLBACKS

EXIT_CORRECT, EXIT_VERDICT, EXIT_USAGE = 0, 1, 2


def fail(message: str) -> None:
    click.echo(f"kfuse: error: {message}", err=True)
    sys.exit(EXIT_USAGE)


def parse_compile_modes(text: str) -> list[str]:
    return [] if text.strip().lower() == "none" else [m.strip() for m in text.split(",") if m.strip()]


def judge_with_progress(problem: Path, candidate: Path, options) -> dict:
    """`kfuse check`'s verdict with a spinner naming the current stage; the summary printed after."""
    from rich.console import Console

    from kfuse.judge.verdict import check
    from kfuse.judge.report import print_verdict

    try:
        with Console(stderr=True).status("starting", spinner="dots") as status:
            verdict = check(problem, candidate, options, on_stage=lambda stage: status.update(stage))
    except UsageError as err:
        fail(str(err))
    print_verdict(verdict)
    return verdict


def seconds_text(stages: dict[str, float]) -> str:
    """'capture 1.2 s, plan 0.1 s, ...': where a command's time went."""
    return ", ".join(f"{name.replace('_', ' ')} {seconds:.1f} s" for name, seconds in stages.items()
                     if seconds >= 0.05)


def write_json(path: Path | None, data: dict) -> None:
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2, default=str) + "\n")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(version=__version__, prog_name="kfuse")
def main() -> None:
    """Fused custom-kernel replacements for PyTorch models, and an honest judge for them."""


@main.command("check")
@click.argument("problem", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("candidate", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--device", type=click.Choice(["cuda", "cpu"]), default="cuda", show_default=True)
@click.option("--trials", type=int, default=5, show_default=True, help="Correctness trials (at least 5).")
@click.option("--timeout", type=float, default=300.0, show_default=True,
              help="Wall-clock limit in seconds for the whole run, build included.")
@click.option("--seed", type=int, default=None, help="Base seed (default: a fresh one each run).")
@click.option("--compile-modes", default="default", show_default=True,
              help="torch.compile modes to time against, comma-separated (e.g. default,max-autotune-no-cudagraphs);"
                   " 'none' for none.")
@click.option("--no-timing", is_flag=True, help="Check correctness only.")
@click.option("--min-seconds", type=float, default=1.0, show_default=True,
              help="Least measured time per contender.")
@click.option("--memory-limit", "memory_limit_gb", type=float, default=None,
              help="Host-memory cap for the worker in GiB (CPU target; default 3/4 of RAM).")
@click.option("--all-trials", is_flag=True, help="Run every trial even after one fails.")
@click.option("--precision", type=click.Choice(PRECISIONS), default="fp32", show_default=True,
              help="fp32: PyTorch's default math; tf32: TF32 allowed for reference and candidate (labelled).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the verdict as JSON (schema: docs/verdict.md).")
def check_command(problem, candidate, device, trials, timeout, seed, compile_modes, no_timing, min_seconds,
                  memory_limit_gb, all_trials, precision, json_path):
    """Judge CANDIDATE (a .py with ModelNew, or an answer .txt/.md) against PROBLEM (KernelBench format)."""
    from kfuse.judge.verdict import CheckOptions

    options = CheckOptions(device=device, trials=trials, timeout=timeout, seed=seed, time=not no_timing,
                           compile_modes=parse_compile_modes(compile_modes), min_seconds=min_seconds,
                           memory_limit_gb=memory_limit_gb, all_trials=all_trials, precision=precision)
    verdict = judge_with_progress(problem, candidate, options)
    write_json(json_path, verdict)
    sys.exit(EXIT_CORRECT if verdict["status"] == "correct" else EXIT_VERDICT)


@main.command("optimize")
@click.argument("problem", type=click.Path(dir_okay=False, path_type=Path), required=False)
@click.option("--model", "model_spec", default=None, metavar="MODULE:FACTORY",
              help="Instead of PROBLEM: a function of your own package returning (model, example_inputs); its "
                   "problem file is written beside the output (<output>_problem.py).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write ModelNew (default: <problem>_new.py beside the problem).")
@click.option("--device", type=click.Choice(["cuda", "cpu"]), default="cuda", show_default=True)
@click.option("--precision", type=click.Choice(PRECISIONS), default="fp32", show_default=True,
              help="tf32: convolutions may run channels-last in TF32; judged against a TF32 reference (labelled).")
@click.option("--no-check", is_flag=True, help="Write the file without judging it.")
@click.option("--no-timing", is_flag=True, help="Judge correctness only.")
@click.option("--fallback", type=click.Choice([name for name, _ in PRECISION_FALLBACKS]), default=None,
              help="Plan with one of the fallbacks optimize tries, in this order, for a file incorrect on precision "
                   "alone or correct-parity: the library's GEMMs and convolutions in place of kfuse's 3xTF32 ones, "
                   "or eager's own call for every op a kernel would round otherwise.")
@click.option("--cuda-graph", type=click.Choice(["auto", "on", "off"]), default=None,
              help="Launch the forward as one CUDA graph: auto (the default) where it makes many launches, on "
                   "wherever it can be captured.")
@click.option("--choice", "choice_values", multiple=True, metavar="NAME=VALUE",
              help="One of the planner's choices set (kfuse/kernels/choices.py; what kfuse tune varies), e.g. "
                   "channels_last=false.")
@click.option("--compile-modes", default="default", show_default=True)
@click.option("--timeout", type=float, default=600.0, show_default=True)
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None)
def optimize_command(problem, model_spec, output, device, precision, no_check, no_timing, fallback,
                     cuda_graph, choice_values, compile_modes, timeout, json_path):
    """Compile PROBLEM's Model (or --model's) into fused kernels: write ModelNew, then judge it like `kfuse check`."""
    from kfuse.kernels import choices
    from kfuse.judge.verdict import CheckOptions, needs_precision_fallback, slower_than_eager, vs_eager
    from kfuse.compiler.optimize import optimize

    if (problem is None) == (model_spec is None):
        fail("give a PROBLEM file or --model MODULE:FACTORY (one of them)")
    if model_spec is not None:
        from kfuse.problem import ProblemError, write_factory_problem

        stem = "_".join(part for part in re.split(r"\W+", model_spec) if part)
        output = output or Path(f"{stem}_new.py")
        try:
            problem = write_factory_problem(model_spec, output.with_name(f"{output.stem}_problem.py"))
        except ProblemError as err:
            fail(str(err))
        click.echo(f"kfuse: wrote {problem} (the problem file for {model_spec})", err=True)
    output = output or problem.with_name(f"{problem.stem}_new.py")
    try:
        planned = choices.parse(list(choice_values),
                                dict(choices.PRECISION_FALLBACKS)[fallback] if fallback else choices.Choices())
    except ValueError as err:
        fail(str(err))
    if cuda_graph is not None:
        planned = dataclasses.replace(planned, cuda_graph=cuda_graph)
    try:
        with choices.using(planned):
            result = optimize(problem, output, device, precision)
    except UsageError as err:
        fail(str(err))
    except Exception as err:  # a gap in kfuse itself: still one line, and a non-zero exit
        fail(f"kfuse could not optimize {problem} ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
             f"; please report it")
    click.echo(f"kfuse: wrote {output} ({seconds_text(result.stages_s)})", err=True)
    for kernel in result.kernels:
        into = f" (in place into {kernel['in_place_into']})" if kernel["in_place_into"] else ""
        click.echo(f"  kernel {kernel['name']}: {' -> '.join(kernel['fuses'])}{into}", err=True)
    for call in result.unfused:
        click.echo(f"  library call {call['op']}: {call['reason']}", err=True)
    report = {**result.to_dict(), "precision": precision}
    status = None
    if not no_check:
        options = CheckOptions(device=device, timeout=timeout, time=not no_timing,
                               compile_modes=parse_compile_modes(compile_modes), precision=precision)
        verdict = judge_with_progress(problem, output, options)
        if needs_precision_fallback(verdict["status"], bool(verdict.get("precision_only"))) \
                and not fallback:
            why = ("correct-parity (as accurate as eager, not within 1e-4 of it)"
                   if verdict["status"] == "correct-parity"
                   else "incorrect on precision alone (within 1e-4 of eager, further than its bound from float64)")
            for suffix, rung in choices.PRECISION_FALLBACKS:
                second = dataclasses.replace(planned, **choices.changes(rung))
                if second == planned:
                    continue
                click.echo(f"kfuse: {why}: planning again with {second.label()}", err=True)
                verdict, kept = _plan_again(problem, output, device, precision, options, verdict, report, second,
                                            suffix)
                if kept:
                    planned = second
                    break
        if verdict["status"] not in ("correct", "correct-parity") and report.get("cuda_graph"):
            click.echo(f"kfuse: {verdict['status']} with the forward as one CUDA graph: planning again without it",
                       err=True)
            verdict, _ = _plan_again(problem, output, device, precision, options, verdict, report,
                                     dataclasses.replace(planned, cuda_graph="off"), "ungraphed")
        ratio = vs_eager(verdict)
        if slower_than_eager(verdict["status"], ratio):
            click.echo(f"kfuse: {ratio:.2f}x eager's speed: planning it with kfuse tune's alternatives", err=True)
            verdict = _plan_for_speed(problem, output, device, precision, options, verdict, report, planned)
        report["verdict"] = verdict
        status = verdict["status"]
        if verdict.get("stages_s"):
            click.echo(f"kfuse: judged in {seconds_text(verdict['stages_s'])}", err=True)
    report["status"] = status
    write_json(json_path, report)
    sys.exit(EXIT_CORRECT if status in ("correct", None) else EXIT_VERDICT)


def _plan_again(problem: Path, output: Path, device: str, precision: str, options, verdict: dict, report: dict,
                planned, suffix: str) -> tuple[dict, bool]:
    """optimize's fallbacks: the problem planned again with `planned` into <output>_<suffix>.py and judged; that file
    replaces the first only if the judge finds it correct (the report then says `<suffix>_fallback`). Used for a file
    incorrect on precision alone or correct-parity (choices.PRECISION_FALLBACKS, in turn) and for a graphed file the
    judge failed (a capture the planner's rules did not foresee failing: planned without it). Returns the verdict
    that stands and whether the new file was kept; a plan that writes the same file again is not judged again."""
    from kfuse.compiler.optimize import optimize
    from kfuse.kernels import choices

    second = output.with_name(f"{output.stem}_{suffix}.py")
    try:
        with choices.using(planned):
            result = optimize(problem, second, device, precision)
    except UsageError as err:
        click.echo(f"kfuse: could not plan it again: {err}", err=True)
        return verdict, False
    if second.read_bytes() == output.read_bytes():
        click.echo("kfuse: that plan writes the same file: nothing to judge again", err=True)
        second.unlink(missing_ok=True)
        return verdict, False
    again = judge_with_progress(problem, second, options)
    if again["status"] != "correct":
        click.echo(f"kfuse: that file is {again['status']}: keeping the first", err=True)
        second.unlink(missing_ok=True)
        return verdict, False
    second.replace(output)
    report.update({**result.to_dict(), "output": str(output), f"{suffix}_fallback": True})
    click.echo(f"kfuse: kept the file planned again ({len(result.kernels)} kernel(s))", err=True)
    return again, True


# How long optimize spends judging alternatives to a file slower than eager (each judgement a few seconds to a
# minute; the first file, already written, stays unless one wins).
SPEED_SEARCH_S = 300.0


def _plan_for_speed(problem: Path, output: Path, device: str, precision: str, options, verdict: dict, report: dict,
                    planned) -> dict:
    """optimize's file came out slower than eager: the problem planned again with each of kfuse tune's alternatives
    (choices.ALTERNATIVES, on top of `planned`), each new file judged, and the fastest correct one kept where its
    ratio to eager beats the first's by more than kfuse.tune.MARGIN (the report then says `tuned`). Returns the
    verdict that stands."""
    from kfuse.compiler.optimize import optimize
    from kfuse.judge.verdict import vs_eager as speedup
    from kfuse.kernels import choices
    from kfuse.tune import MARGIN

    def vs_eager(v: dict) -> float:
        return speedup(v) or 0.0

    seen, best, kept = {output.read_bytes()}, verdict, None
    deadline = time.monotonic() + SPEED_SEARCH_S
    for alternative in choices.ALTERNATIVES[1:]:
        if time.monotonic() > deadline:
            click.echo(f"kfuse: {SPEED_SEARCH_S:g} s spent on alternatives: stopping there", err=True)
            break
        second = dataclasses.replace(planned, **choices.changes(alternative))
        path = output.with_name(f"{output.stem}_{re.sub(r'[^0-9A-Za-z_]+', '_', alternative.label())}.py")
        try:
            with choices.using(second):
                result = optimize(problem, path, device, precision)
        except UsageError:
            continue  # (nothing left to fuse under that choice)
        if path.read_bytes() in seen:
            path.unlink(missing_ok=True)
            continue
        seen.add(path.read_bytes())
        again = judge_with_progress(problem, path, options)
        click.echo(f"kfuse: with {alternative.label()}: {again['status']}"
                   + (f", {vs_eager(again):.2f}x eager" if again["status"] == "correct" else ""), err=True)
        if again["status"] == "correct" and vs_eager(again) > vs_eager(best) * (1 + MARGIN):
            if kept is not None:
                kept[0].unlink(missing_ok=True)
            best, kept = again, (path, result, alternative.label())
        else:
            path.unlink(missing_ok=True)
    if kept is None:
        click.echo("kfuse: no alternative was faster: keeping the first file", err=True)
        return verdict
    path, result, label = kept
    path.replace(output)
    report.update({**result.to_dict(), "output": str(output), "tuned": label})
    click.echo(f"kfuse: kept the file planned with {label} ({vs_eager(best):.2f}x eager)", err=True)
    return best


@main.command("tune")
@click.argument("problem", type=click.Path(dir_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the chosen ModelNew (default: <problem>_new.py beside the problem).")
@click.option("--device", type=click.Choice(["cuda", "cpu"]), default="cuda", show_default=True)
@click.option("--precision", type=click.Choice(PRECISIONS), default="fp32", show_default=True)
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Per variant: the judge's limit.")
@click.option("--min-seconds", type=float, default=1.0, show_default=True,
              help="Least measured time per variant.")
@click.option("--keep-variants", is_flag=True, help="Keep every variant's file (<output stem>_variants/).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None)
def tune_command(problem, output, device, precision, timeout, min_seconds, keep_variants, json_path):
    """Judge the plans kfuse's choices give PROBLEM (its GEMM and convolution paths, layouts) and keep the
    fastest correct one, frozen into the output file."""
    from kfuse.judge.verdict import CheckOptions
    from kfuse.tune import remove_variants, tune

    output = output or problem.with_name(f"{problem.stem}_new.py")
    options = CheckOptions(device=device, timeout=timeout, compile_modes=[], min_seconds=min_seconds,
                           precision=precision)

    def report(variant):
        time = f"{variant.ms:.4g} ms" if variant.ms is not None else variant.status
        click.echo(f"  {time:>12}  {variant.label}", err=True)

    try:
        tuned = tune(problem, output, options, precision, on_variant=report)
    except UsageError as err:
        fail(str(err))
    finally:
        if not keep_variants:
            remove_variants(output)
    write_json(json_path, tuned.to_dict())
    if tuned.chosen is None:
        click.echo(f"kfuse: no variant of {problem.name} was judged correct (see --json)", err=True)
        sys.exit(EXIT_VERDICT)
    click.echo(f"kfuse: wrote {output} ({tuned.chosen.label})", err=True)


@main.command("extract")
@click.argument("answer", type=click.Path(dir_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the code here (default: standard output).")
def extract_command(answer, output):
    """Take the final complete code block that defines class ModelNew out of an answer text."""
    from kfuse.extract import ExtractionError, extract_code
    from kfuse.loader import read_text

    try:
        found = extract_code(read_text(answer, "answer"))
    except (UsageError, ExtractionError) as err:
        fail(str(err))
    click.echo(f"kfuse: {found.why}", err=True)
    if output:
        output.write_text(found.code)
        click.echo(f"kfuse: wrote {output}", err=True)
    else:
        click.echo(found.code, nl=False)


@main.command("bench")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--candidates", type=click.Path(path_type=Path), default=None,
              help="Judge the candidates in this folder (<stem>.py, <stem>_new.py, <stem>.txt or .md) instead of "
                   "optimizing each problem.")
@click.option("--device", type=click.Choice(["cuda", "cpu"]), default="cuda", show_default=True)
@click.option("--workers", type=int, default=None,
              help="Parallel workers (default: one per visible GPU; 1 on the CPU target).")
@click.option("--per-gpu", type=int, default=1, show_default=True,
              help="Jobs sharing each GPU: their builds and checks overlap, their timed rounds run one at a time.")
@click.option("--quiet-timing/--busy-timing", default=True, show_default=True,
              help="With --per-gpu N: a judge's timed rounds stop the other jobs' processes, so the host's busy "
                   "cores do not slow eager's launches (busy: faster runs, noisier launch-bound baselines).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("bench-out"),
              show_default=True, help="Report, results.json, candidates, verdicts and the result cache.")
@click.option("--ray", "ray_address", default=None, metavar="ADDRESS",
              help="Run each problem as a Ray task on this cluster ('local' starts one here).")
@click.option("--timeout", type=float, default=300.0, show_default=True,
              help="Per problem: the judge's wall-clock limit, build included (optimize gets as long again).")
@click.option("--no-timing", is_flag=True, help="Check correctness only.")
@click.option("--min-seconds", type=float, default=1.0, show_default=True,
              help="Least measured time per contender.")
@click.option("--compile-modes", default="default", show_default=True,
              help="torch.compile modes to time against, comma-separated; 'none' for none.")
@click.option("--trials", type=int, default=5, show_default=True, help="Correctness trials (at least 5).")
@click.option("--seed", type=int, default=0, show_default=True, help="Base seed of every check.")
def bench_command(paths, candidates, device, workers, per_gpu, quiet_timing, out, ray_address, timeout, no_timing,
                  min_seconds, compile_modes, trials, seed):
    """Optimize and judge every problem in PATHS (files or folders), or judge given candidates; write a report.

    Finished results are cached in --out/cache: a rerun (or a run after Ctrl-C) does only what is left.
    """
    from rich.console import Console

    from kfuse.bench.runner import BenchOptions, bench
    from kfuse.bench.report import print_table, time_text

    options = BenchOptions(device=device, out=out, candidates=candidates, workers=workers, per_gpu=per_gpu,
                           quiet_timing=quiet_timing, ray=ray_address,
                           timeout=timeout, time=not no_timing, min_seconds=min_seconds,
                           compile_modes=parse_compile_modes(compile_modes), trials=trials, seed=seed)
    try:
        run = bench(list(paths), options)
    except UsageError as err:
        fail(str(err))
    except KeyboardInterrupt:  # a second Ctrl-C while stopping: what finished is in the cache already
        click.echo(f"kfuse: stopped; finished results are kept in {out / 'cache'}", err=True)
        sys.exit(130)
    console = Console(highlight=False)
    if not console.is_terminal:
        console.width = 140
    print_table(run.records, run.summary, console)
    if no_timing:
        console.print("  [dim]timing off (--no-timing): no speedups, so no problem counts as fast[/]")
    click.echo(f"kfuse: report in {run.files['html']} ({run.judged} judged now, {run.cached} from the cache)",
               err=True)
    click.echo(f"kfuse: {time_text(run.meta, run.summary)}", err=True)
    sys.exit(130 if run.interrupted else 0)
