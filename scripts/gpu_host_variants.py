"""Which host path makes a launch-bound ModelNew as fast as eager? a + b (1x128), five ways of calling one kernel.

    PYTHONPATH=. python scripts/gpu_host_variants.py --out DIR [--rounds 400] [--check]

The judge timed a + b at ~0.10-0.12 ms for kfuse's file when it registered `forward` as a torch op, and ~0.05 ms for
eager (`results/max-autotune-*/README.md`); on the CPU target binding `forward` with pybind11 instead took kfuse's
judged time from 0.57-0.59x eager to 1.04-1.07x. This writes five ModelNew files for the same kernel and times
each the judge's way (kfuse.problem.time_one_call after a refill and a sync, interleaved rounds, one process), plus
the host microseconds of the call alone:
- emitted:   the file as kfuse writes it (a pybind11 module: `kernels.forward(...)` returns the tensor; its host
             code built at -O1);
- host_O0, host_O2: the same with the host code built at torch's default (no -O) or -O2;
- torch_ops: the same C++ registered with TORCH_LIBRARY and called through torch.ops (kfuse's binding until
             2026-11-23: the dispatcher boxes the arguments);
- eager:     ModelNew whose forward is `a + b` (torch's own kernel; the control).
With --check, `kfuse check` judges each file (seed 0, no torch.compile) so the verdicts can be set beside the loop's.
Writes DIR/host-variants.json and DIR/host-variants.txt. Honours KFUSE_GPU_LOCK (kfuse.gpulock) like the judge.
"""

import argparse
import json
import re
import runpy
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kfuse.compiler.optimize import optimize  # noqa: E402
from kfuse import gpulock  # noqa: E402
from kfuse.problem import L2Flush, load_problem, make_inputs, time_one_call  # noqa: E402

PROBLEM = "suite/level1/74_add_1x128.py"


def variants(emitted: str) -> dict[str, str]:
    name = re.search(r'name="(\w+)"', emitted).group(1)
    ops = emitted.replace('name="' + name + '"', 'name="' + name + '_ops"')
    ops = ops.replace("#include <torch/csrc/utils/pybind.h>\n", "#include <torch/library.h>\n")
    ops = re.sub(r"PYBIND11_MODULE\(TORCH_EXTENSION_NAME, m\)", f"TORCH_LIBRARY({name}_ops, m)", ops)
    ops = ops.replace("kernels = load_inline(\n", "load_inline(\n").replace("is_python_module=True", "is_python_module=False")
    ops = re.sub(r"(load_inline\(\n(?:    .*\n)+\)\n)", rf"\1kernels = torch.ops.{name}_ops\n", ops)
    eager = emitted.replace("return kernels.forward(a, b)", "return a + b")

    def host_flags(suffix: str, flags: str) -> str:
        return emitted.replace('name="' + name + '"', 'name="' + name + suffix + '"').replace(
            'extra_cflags=["-O1"],\n', flags)

    host_o0 = host_flags("_o0", "")  # torch's default for the host file: no -O
    host_o2 = host_flags("_o2", 'extra_cflags=["-O2"],\n')
    files = {"emitted": emitted, "host_O0": host_o0, "host_O2": host_o2, "torch_ops": ops, "eager": eager}
    assert len(set(files.values())) == len(files) and "TORCH_LIBRARY" in ops, "the emitted file changed shape"
    return files


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--check", action="store_true", help="also judge each file with kfuse check (slow)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    device = torch.device("cuda")
    emitted_path = args.out / "emitted.py"
    optimize(Path(PROBLEM), emitted_path, "cuda", "fp32")
    files = {}
    for label, text in variants(emitted_path.read_text()).items():
        files[label] = args.out / f"add_{label}.py"
        files[label].write_text(text)

    problem, init_inputs = load_problem(PROBLEM)
    models, built = {}, {}
    for label, path in files.items():
        began = time.perf_counter()
        models[label] = runpy.run_path(str(path))["ModelNew"](*init_inputs).to(device)
        built[label] = round(time.perf_counter() - began, 1)
    inputs = make_inputs(problem, 1, device)
    flush = L2Flush(device)
    timed = {label: [] for label in models}
    host = {label: [] for label in models}
    labels = list(models)
    # Beside a `kfuse bench --per-gpu N` (its lock file in KFUSE_GPU_LOCK), the loop takes the GPU as its timing does.
    with torch.no_grad(), gpulock.from_environment().exclusive():
        for model in models.values():
            for _ in range(20):
                model(*inputs)
        for r in range(args.rounds):
            for label in labels[r % len(labels):] + labels[:r % len(labels)]:
                for t in inputs:  # the judge's refill, then its synchronize
                    t.uniform_()
                torch.cuda.synchronize()
                model = models[label]

                def call():
                    began = time.perf_counter()
                    out = model(*inputs)
                    host[label].append((time.perf_counter() - began) * 1e6)
                    return out

                ms, out = time_one_call(call, device, flush)
                timed[label].append(ms * 1e3)
    rows = {label: {"timed_median_us": statistics.median(timed[label]), "timed_min_us": min(timed[label]),
                    "host_median_us": statistics.median(host[label]), "import_s": built[label]} for label in labels}
    for label in labels:  # written as soon as known: the checks below may outlast the caller's patience
        print(f"{label:10s} timed median {rows[label]['timed_median_us']:.1f} us, min {rows[label]['timed_min_us']:.1f}, "
              f"host median {rows[label]['host_median_us']:.1f}", flush=True)
    # Where the host time of one judged call goes: the profiler over a few rounds done the judge's way.
    with torch.no_grad(), gpulock.from_environment().exclusive():
        for label in ("emitted", "host_O0", "eager"):
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                    torch.profiler.ProfilerActivity.CUDA]) as prof:
                for _ in range(50):
                    for t in inputs:
                        t.uniform_()
                    torch.cuda.synchronize()
                    time_one_call(lambda: models[label](*inputs), device, flush)
            table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14)
            print(f"## {label}: 50 judged calls, profiler\n{table}", flush=True)

    checks = {}
    if args.check:
        for label, path in files.items():
            verdict = args.out / f"check-{label}.json"
            subprocess.run([sys.executable, "-m", "kfuse", "check", PROBLEM, str(path), "--seed", "0",
                            "--compile-modes", "none", "--json", str(verdict)], check=False,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                v = json.loads(verdict.read_text())
                stats = v["timing"]["stats"]
                checks[label] = {"status": v["status"], "candidate_ms": stats["candidate"]["median_ms"],
                                 "eager_ms": stats["eager"]["median_ms"]}
            except (OSError, KeyError, TypeError, json.JSONDecodeError) as err:
                checks[label] = {"error": repr(err)}

    lines = [f"# {torch.cuda.get_device_name()}, torch {torch.__version__}; a + b (1x128), {args.rounds} "
             f"interleaved rounds the judge's way (refill, sync, L2 flush, events), us",
             f"{'variant':10s} {'timed med':>10s} {'timed min':>10s} {'host med':>9s} {'import s':>9s}   kfuse check"]
    for label in labels:
        row, c = rows[label], checks.get(label, {})
        judged = (f"{c['status']}: candidate {c['candidate_ms'] * 1e3:.1f} us, eager {c['eager_ms'] * 1e3:.1f} us"
                  if "candidate_ms" in c else c.get("error", "-"))
        lines.append(f"{label:10s} {row['timed_median_us']:10.1f} {row['timed_min_us']:10.1f} "
                     f"{row['host_median_us']:9.1f} {row['import_s']:9.1f}   {judged}")
    text = "\n".join(lines)
    print(text)
    (args.out / "host-variants.txt").write_text(text + "\n")
    (args.out / "host-variants.json").write_text(json.dumps({"rows": rows, "checks": checks}, indent=1))


if __name__ == "__main__":
    main()
