"""A/B of candidate variants on the GPU: the same problems, ModelNew files from several kfuse versions, one process.

    PYTHONPATH=. python3 scripts/gpu_ab.py --out $OUT --variant main=DIR_A --variant new=DIR_B PROBLEM.py ...

A variant's candidate for problem X is DIR/X_new.py (the bench's naming). Every candidate is imported once in a
subprocess first, several at a time, so their extensions build in parallel. Then per problem: each candidate's
output on fresh random inputs is compared with the reference's (kfuse.judge.compare: KernelBench's allclose and the
float64 precision-parity rule, the truth from a float64 copy of the reference), and eager and every candidate are
timed in interleaved rounds (kfuse.judge.timing, L2 flushed, CUDA events): the ratios come from one run, so two
variants can be told apart by a few percent, which separate judge runs cannot.

`--emit LABEL=DIR` first writes this checkout's files for the problems into DIR (`kfuse optimize --no-check`, on
this GPU, with `--emit-flags LABEL=FLAGS` added) and adds them as variant LABEL. Each candidate is called twice on
other inputs before the compared call (a file that captures a CUDA graph replays it from its second call). Emit both sides of an A/B on the GPU: the plan asks the GPU (eager's
precision, channels-last), so a file emitted on a machine without one can be another plan (2026-11-26: a
ConvTranspose3d problem NCHW there, channels-last here, 8.0 against 14.5 ms).

Writes ab.json and ab.md under --out. Not the judge: `kfuse check` stays the verdict that counts.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kfuse.judge.compare import compare_outputs  # noqa: E402
from kfuse.loader import import_from_source  # noqa: E402
from kfuse.problem import L2Flush, build_reference, load_problem, make_inputs, time_one_call  # noqa: E402
from kfuse.judge.timing import TimingPlan, time_interleaved  # noqa: E402


def prebuild(paths: list[Path], workers: int) -> dict[str, str]:
    """Imports each candidate in its own process (building its extension); returns the errors by path."""
    def one(path: Path) -> tuple[str, str]:
        code = f"import runpy; runpy.run_path({str(path)!r})"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
        last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return str(path), "" if done.returncode == 0 else last
    with ThreadPoolExecutor(workers) as pool:
        return {p: err for p, err in pool.map(one, paths) if err}


def emit(problems: list[Path], folder: Path, workers: int, flags: list[str] = ()) -> dict[str, str]:
    """This checkout's ModelNew for each problem into folder/X_new.py, emitted here; returns the errors by problem."""
    folder.mkdir(parents=True, exist_ok=True)

    def one(problem: Path) -> tuple[str, str]:
        output = folder / f"{problem.stem}_new.py"
        command = [sys.executable, "-m", "kfuse", "optimize", str(problem), "-o", str(output), "--device", "cuda",
                   "--no-check", *flags]
        done = subprocess.run(command, capture_output=True, text=True, timeout=900,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return str(problem), "" if done.returncode == 0 else last
    with ThreadPoolExecutor(workers) as pool:
        return {p: err for p, err in pool.map(one, problems) if err}


def to_double(model: torch.nn.Module) -> torch.nn.Module:
    return copy.deepcopy(model).double()


def run_problem(problem_path: Path, variants: dict[str, Path], device: torch.device, plan: TimingPlan) -> dict:
    name = problem_path.stem
    problem, init = load_problem(str(problem_path))
    ref = build_reference(problem, init, seed=0, device=device)
    inputs = make_inputs(problem, 1, device)
    row: dict = {"problem": name, "variants": {}}
    with torch.no_grad():
        want = ref(*inputs)
        truth = to_double(ref)(*[x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                                 for x in inputs])
    models = {"eager": ref}
    for label, folder in variants.items():
        path = folder / f"{name}_new.py"
        if not path.exists():
            row["variants"][label] = {"error": "no candidate"}
            continue
        try:
            module = import_from_source(path.read_text(), str(path), f"ab_{label}_{name}")
            new = module.ModelNew(*init).to(device)
            new.load_state_dict(ref.state_dict())
            with torch.no_grad():
                for seed in (2, 3):  # (a file that captures a CUDA graph does so by its second call)
                    new(*make_inputs(problem, seed, device))
                got = new(*inputs)
            torch.cuda.synchronize()
        except Exception as err:  # this variant only; a sticky CUDA error fails the rest of the problem too
            row["variants"][label] = {"error": f"{type(err).__name__}: {err}"[:200]}
            traceback.print_exc()
            continue
        verdict = compare_outputs(got, want, truth)
        row["variants"][label] = {"passed": verdict.passed, "problems": verdict.problems()[:3]}
        models[label] = new
    del truth
    flush = L2Flush(device)
    with torch.no_grad():
        for m in models.values():
            for _ in range(3):
                m(*inputs)
        calls = {label: (lambda r, m=m: time_one_call(lambda: m(*inputs), device, flush)[0])
                 for label, m in models.items()}
        times = time_interleaved(calls, plan)
    row["eager_ms"] = times["eager"]["median_ms"]
    for label in models:
        if label != "eager":
            t = times[label]["median_ms"]
            row["variants"][label].update(ms=t, vs_eager=row["eager_ms"] / t)
    return row


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("problems", nargs="+", type=Path)
    parser.add_argument("--variant", action="append", default=[], help="LABEL=DIR of *_new.py candidates")
    parser.add_argument("--emit", action="append", default=[], help="LABEL=DIR: emit this checkout's files there first")
    parser.add_argument("--emit-flags", action="append", default=[],
                        help="LABEL=FLAGS: kfuse optimize's extra flags for --emit LABEL (e.g. 'off=--cuda-graph off')")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget-s", type=float, default=400.0, help="no new problem starts after this")
    args = parser.parse_args()
    variants = {label: Path(folder) for label, folder in (v.split("=", 1) for v in args.variant + args.emit)}
    if not variants:
        parser.error("give at least one --variant or --emit")
    args.out.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    flags = {label: text.split() for label, text in (f.split("=", 1) for f in args.emit_flags)}
    for label, folder in (v.split("=", 1) for v in args.emit):
        failed = emit(args.problems, Path(folder), workers=min(8, os.cpu_count() or 4), flags=flags.get(label, []))
        print(f"emitted {label} into {folder} in {time.perf_counter() - began:.0f} s; errors: {failed}", flush=True)
    paths = [folder / f"{p.stem}_new.py" for p in args.problems for folder in variants.values()]
    errors = prebuild([p for p in paths if p.exists()], workers=min(16, os.cpu_count() or 4))
    print(f"built {len(paths)} candidates in {time.perf_counter() - began:.0f} s; errors: {errors}", flush=True)
    device = torch.device("cuda")
    plan = TimingPlan(min_trials=30, min_seconds=0.5, max_wall_seconds=20.0)
    rows = []
    for problem in args.problems:
        if time.perf_counter() - began > args.budget_s:
            rows.append({"problem": problem.stem, "skipped": "budget"})
            continue
        try:
            rows.append(run_problem(problem, variants, device, plan))
        except Exception as err:  # one failing problem must not stop the others
            rows.append({"problem": problem.stem, "error": f"{type(err).__name__}: {err}"[:300]})
            traceback.print_exc()
        torch.cuda.empty_cache()
        print(json.dumps(rows[-1]), flush=True)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "date": time.strftime("%Y-%m-%d"), "variants": {k: str(v) for k, v in variants.items()},
              "build_errors": errors, "rows": rows}
    (args.out / "ab.json").write_text(json.dumps(result, indent=1))
    labels = list(variants)
    lines = [f"# A/B on {result['device']}, torch {result['torch']}, {result['date']}", "",
             "| problem | eager ms | " + " | ".join(f"{v} ms (× eager)" for v in labels) + " |",
             "|---|---|" + "---|" * len(labels)]
    for row in rows:
        if "variants" not in row:
            lines.append(f"| {row['problem']} | {row.get('error') or row.get('skipped')} |")
            continue
        cells = []
        for v in labels:
            c = row["variants"].get(v, {})
            if "ms" in c:
                cells.append(f"{c['ms']:.3f} ({c['vs_eager']:.3f}×){'' if c['passed'] else ' WRONG'}")
            else:
                cells.append(c.get("error", "-"))
        lines.append(f"| {row['problem']} | {row['eager_ms']:.3f} | " + " | ".join(cells) + " |")
    (args.out / "ab.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
