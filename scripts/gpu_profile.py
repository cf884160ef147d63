"""Where the time goes: CUDA kernels of the eager Model and of an emitted ModelNew, side by side.

    PYTHONPATH=. python scripts/gpu_profile.py PROBLEM.py MODELNEW.py [--iters 10]

Prints each kernel's average CUDA time per call under torch.profiler (no L2 flush: compare, don't quote).
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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("problem")
    parser.add_argument("candidate")
    parser.add_argument("--iters", type=int, default=10)
    args = parser.parse_args()
    problem, candidate = runpy.run_path(args.problem), runpy.run_path(args.candidate)
    torch.manual_seed(0)
    model = problem["Model"](*problem["get_init_inputs"]()).cuda()
    new = candidate["ModelNew"](*problem["get_init_inputs"]()).cuda()
    new.load_state_dict(model.state_dict())
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem["get_inputs"]()]
    for name, fn in [("eager", lambda: model(*inputs)), ("kfuse", lambda: new(*inputs))]:
        rows = kernels(fn, args.iters)
        print(f"{name}: {sum(r[1] for r in rows):.4f} ms of kernels per call")
        for key, ms, count in rows:
            print(f"  {ms:9.4f} ms  x{count}  {key[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
