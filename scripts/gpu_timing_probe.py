"""Where does a candidate's extra time in the judge come from? One process, the judge's own timing call.

    PYTHONPATH=. python scripts/gpu_timing_probe.py PROBLEM.py [...]

For each problem: optimize it, import the emitted ModelNew, then time eager and ModelNew in this process in
interleaved rounds with the judge's `time_one_call` (L2 flush, CUDA events), with and without the flush, and
read the kernels' own durations from the profiler. Prints medians in ms.
"""

import runpy
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kfuse.compiler.optimize import optimize  # noqa: E402
from kfuse.problem import L2Flush, build_reference, load_problem, make_inputs, time_one_call  # noqa: E402


class NoFlush(L2Flush):
    """The judge's timer without the flush."""

    def __call__(self):
        return None


def host_us(fn, n=200):
    import time
    torch.cuda.synchronize()
    began = time.perf_counter()
    for _ in range(n):
        fn()
    per = (time.perf_counter() - began) / n * 1e6
    torch.cuda.synchronize()
    return per


def kernel_ms(fn):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return sum(e.device_time for e in events) / 10 / 1e3, sorted({e.name[:60] for e in events})


def main():
    device = torch.device("cuda")
    for path in map(Path, sys.argv[1:]):
        out = Path(tempfile.mkdtemp()) / f"{path.stem}_new.py"
        optimize(path, out, "cuda")
        module = runpy.run_path(str(out))
        problem, init = load_problem(str(path))
        ref = build_reference(problem, init, 0, device)
        torch.manual_seed(0)
        cand = module["ModelNew"](*init).to(device)
        cand.load_state_dict(ref.state_dict())
        inputs = make_inputs(problem, 1, device)
        flush = L2Flush(device)
        rows = {}
        with torch.no_grad():
            for name, model in (("eager", ref), ("kfuse", cand)):
                for _ in range(5):
                    model(*inputs)
            for label, fl in (("flushed", flush), ("no flush", NoFlush(device))):
                times = {"eager": [], "kfuse": []}
                for _ in range(60):
                    for name, model in (("eager", ref), ("kfuse", cand)):
                        torch.cuda.synchronize()
                        times[name].append(time_one_call(lambda: model(*inputs), device, fl)[0])
                rows[label] = {k: statistics.median(v) for k, v in times.items()}
            for name, model in (("eager", ref), ("kfuse", cand)):
                k, names = kernel_ms(lambda: model(*inputs))
                rows.setdefault("kernels (profiler)", {})[name] = k
                rows.setdefault("host us per call", {})[name] = host_us(lambda: model(*inputs))
                print(f"  {path.stem} {name} kernels: {names}")
        for label, r in rows.items():
            print(f"{path.stem:28s} {label:20s} eager {r['eager']:.4f}  kfuse {r['kfuse']:.4f}  "
                  f"diff {r['kfuse'] - r['eager']:+.4f}")


if __name__ == "__main__":
    main()
