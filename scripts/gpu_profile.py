"""Where the time goes: CUDA kernels of the eager Model, an emitted ModelNew and (--compile) torch.compile's
code, side by side.

    PYTHONPATH=. python scripts/gpu_profile.py PROBLEM.py MODELNEW.py [PROBLEM.py MODELNEW.py ...] \
        [--iters 10] [--compile] [--warm-only]

Prints each kernel's average CUDA time per call under torch.profiler (no L2 flush: compare, don't quote).
--warm-only builds the candidate and compiles the Model, then exits: run it for several problems in parallel
first, so the profiling run (one at a time) finds the extension and inductor's caches warm.
"""

from __future__ import annotations

import argparse
import runpy
import sys

import torch
from torch.profiler import ProfilerActivity, profile


def kernels(fn, iters: int) -> list[tuple[str, float, int]]:
    with torch.no_grad():
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(iters):
                fn()
            torch.cuda.synchronize()
    rows = [(e.key, e.device_time_total / iters / 1e3, e.count // iters) for e in prof.key_averages()
            if e.device_time_total > 0]
    return sorted(rows, key=lambda r: -r[1])


def profile_problem(problem_path: str, candidate_path: str, iters: int, compiled: bool, warm_only: bool) -> None:
    problem, candidate = runpy.run_path(problem_path), runpy.run_path(candidate_path)
    torch.manual_seed(0)
    model = problem["Model"](*problem["get_init_inputs"]()).cuda()
    new = candidate["ModelNew"](*problem["get_init_inputs"]()).cuda()
    new.load_state_dict(model.state_dict())
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem["get_inputs"]()]
    runs = [("eager", lambda: model(*inputs)), ("kfuse", lambda: new(*inputs))]
    if compiled:
        fast = torch.compile(model)
        runs.append(("compile", lambda: fast(*inputs)))
    if warm_only:
        with torch.no_grad():
            for _, fn in runs:
                fn()
        torch.cuda.synchronize()
        return
    print(f"### {problem_path}")
    for name, fn in runs:
        rows = kernels(fn, iters)
        print(f"{name}: {sum(r[1] for r in rows):.4f} ms of kernels per call")
        for key, ms, count in rows:
            print(f"  {ms:9.4f} ms  x{count}  {key[:110]}")
    sys.stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("paths", nargs="+", help="PROBLEM.py MODELNEW.py pairs")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--compile", action="store_true", help="also profile torch.compile (default mode)")
    parser.add_argument("--warm-only", action="store_true", help="build and compile, profile nothing")
    args = parser.parse_args()
    if len(args.paths) % 2:
        parser.error("paths come in PROBLEM.py MODELNEW.py pairs")
    for problem_path, candidate_path in zip(args.paths[::2], args.paths[1::2]):
        try:
            profile_problem(problem_path, candidate_path, args.iters, args.compile, args.warm_only)
        except Exception as error:  # one broken problem must not hide the others' profiles
            print(f"### {problem_path}: failed: {type(error).__name__}: {error}")
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
