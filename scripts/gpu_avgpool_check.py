"""The average-pool strip kernel (kfuse/window.py, strip_length) on a GPU: judge it, time it, compare strip lengths.

    cd .wt/avgpool && export PYTHONPATH=$PWD && python3 scripts/gpu_avgpool_check.py --out $OUT

1. Candidates are written on the device by `python3 -m kfuse optimize P --device cuda --no-check` for level1 41
   (AvgPool2d k3 s1 p1, the target), 40 (1D: the general kernel), 42 (3D strips), 38 (MaxPool2d: the general
   kernel, unchanged), level2 9 (a pool after conv - sub - tanh - sub: strips with a prologue) and two irregular
   problems written here (odd sizes, stride 2 / (2, 3), padding 0 and 2, ceil_mode, count_include_pad=False,
   divisor_override, a rectangular window).
2. In parallel: every candidate's extension is built (TORCH_EXTENSIONS_DIR, MAX_JOBS=2 each), torch.compile's
   caches are warmed for each problem, and variants of 41's kernel are built (strip lengths 8 and 4, and the
   general one-output-per-thread kernel, through kfuse.window.STRIP_LENGTHS).
3. 41's variants timed directly on one input (CUDA events, L2 flushed, median of 30) and compared bit for bit
   with F.avg_pool2d (same summation order and division as PyTorch's CUDA kernel), a strided input too.
4. `python3 -m kfuse check P CANDIDATE --device cuda --compile-modes default`, three problems at a time (most
   important first: PRIORITY), sharing the GPU through kfuse.gpulock (each timed region has the GPU to itself;
   problems too big to share run their untimed parts alone too): 5 trials on fresh random inputs incl. strided
   ones, error against float64 within 10x the reference's, then candidate / eager / torch.compile timed (L2
   flushed, medians). One failing problem does not stop the others; none starts without JUDGE_MIN_S left.

Writes under --out (5 files): summary.md (the table), verdicts.json, checks.log, variants.json, warmup.log.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUDGET_S = 225.0  # the whole script; the lead's limit is 4 minutes
JUDGES_AT_ONCE = 3
JUDGE_MIN_S = 35.0  # a judge of a 2 GiB problem with warm caches took ~40 s alone on the H100
PRIORITY = ["41_Average_Pooling_2D", "42_Average_Pooling_3D", "9_Conv2d_Subtract_Tanh_Subtract_AvgPool",
            "avgpool2d_odd_stride2_ceil", "avgpool2d_rect_pad2_exclude", "38_Max_Pooling_2D", "40_Average_Pooling_1D"]

SUITE = [("41_Average_Pooling_2D", "level1"), ("40_Average_Pooling_1D", "level1"),
         ("42_Average_Pooling_3D", "level1"), ("38_Max_Pooling_2D", "level1"),
         ("9_Conv2d_Subtract_Tanh_Subtract_AvgPool", "level2")]

IRREGULAR = {
    "avgpool2d_odd_stride2_ceil": '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """AvgPool2d k3 s2 p0 ceil_mode on odd sizes: partial windows at the bottom and right edges."""

    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool2d(3, stride=2, padding=0, ceil_mode=True)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(16, 48, 333, 517)]


def get_init_inputs():
    return []
''',
    "avgpool2d_rect_pad2_exclude": '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A (5, 4) window, stride (2, 3), padding 2, ceil_mode, count_include_pad=False; and k3 s1 p1 with
    divisor_override=7, on odd sizes."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        a = F.avg_pool2d(x, (5, 4), (2, 3), 2, ceil_mode=True, count_include_pad=False)
        b = F.avg_pool2d(x, 3, 1, 1, divisor_override=7)
        return a, b


def get_inputs():
    return [torch.randn(8, 40, 251, 389)]


def get_init_inputs():
    return []
''',
}

WARM_COMPILE = """
import sys, torch
from kfuse.problem import load_problem, build_reference, make_inputs
problem, init = load_problem(sys.argv[1])
model = build_reference(problem, init, seed=0, device=torch.device("cuda"))
inputs = make_inputs(problem, seed=0, device=torch.device("cuda"))
with torch.no_grad():
    torch.compile(model)(*inputs)
torch.cuda.synchronize()
"""

# 41's kernel at other strip lengths: kfuse.window.STRIP_LENGTHS patched before optimizing; () is the general kernel
VARIANTS = {"strip8 (default)": None, "strip4": (4,), "general (1 output/thread)": ()}

MAKE_VARIANT = """
import sys
from pathlib import Path
import kfuse.window as window
from kfuse.optimize import optimize
lengths = eval(sys.argv[3])
if lengths is not None:
    window.STRIP_LENGTHS = lengths
optimize(Path(sys.argv[1]), Path(sys.argv[2]), "cuda")
"""

TIME_VARIANTS = """
import importlib.util, json, statistics, sys
import torch
import torch.nn.functional as F
files = json.loads(sys.argv[1])
torch.manual_seed(0)
x = torch.randn(32, 64, 512, 512, device="cuda")
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
expected = F.avg_pool2d(x, 3, 1, 1)
def timed(fn, reps=30):
    fn(x); torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(); fn(x); end.record(); torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)
rows = {"eager F.avg_pool2d": {"median_ms": timed(lambda t: F.avg_pool2d(t, 3, 1, 1))}}
for name, path in files.items():
    try:
        spec = importlib.util.spec_from_file_location("variant_" + str(abs(hash(name))), path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        model = module.ModelNew(3, 1, 1).cuda()
        with torch.no_grad():
            got = model(x)
            # a strided view of the same values: the kernel reads strides, not a contiguous copy
            strided = model(x.transpose(2, 3).contiguous().transpose(2, 3))
        torch.cuda.synchronize()
        rows[name] = {"median_ms": timed(lambda t: model(t)), "bitwise_equal_to_torch": bool(torch.equal(got, expected)),
                      "max_abs_diff": float((got - expected).abs().max()),
                      "strided_bitwise_equal": bool(torch.equal(strided, expected))}
    except Exception as err:  # one broken variant must not hide the others' numbers
        rows[name] = {"error": f"{type(err).__name__}: {err}"}
    with open(sys.argv[2], "w") as out:  # rewritten after each variant: a crash keeps the ones before it
        json.dump(rows, out)
"""


def run(args: list[str], env: dict, timeout: float) -> tuple[int, str]:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=max(5.0, timeout), env=env, cwd=ROOT)
        return done.returncode, (done.stdout + done.stderr)[-4000:]
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout:.0f} s"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    parser.add_argument("--budget-s", type=float, default=BUDGET_S)
    args = parser.parse_args()
    began = time.perf_counter()
    left = lambda: args.budget_s - (time.perf_counter() - began)  # noqa: E731
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="kfuse-avgpool-"))
    env = dict(os.environ, PYTHONPATH=str(ROOT), MAX_JOBS="2",
               TORCH_EXTENSIONS_DIR=os.environ.get("TORCH_EXTENSIONS_DIR", "/tmp/kfuse-ext"))
    problems: dict[str, Path] = {name: ROOT / "suite" / level / f"{name}.py" for name, level in SUITE}
    for name, text in IRREGULAR.items():
        problems[name] = work / f"{name}.py"
        problems[name].write_text(text)
    candidates = {name: work / f"{name}_new.py" for name in problems}
    variants = {name: work / f"variant_{i}_41.py" for i, name in enumerate(VARIANTS)}
    warm_log = []

    # 1. candidates, on the device, in parallel (CPU work)
    jobs = [[sys.executable, "-m", "kfuse", "optimize", str(problems[n]), "-o", str(candidates[n]), "--device", "cuda",
             "--no-check"] for n in problems]
    jobs += [[sys.executable, "-c", MAKE_VARIANT, str(problems["41_Average_Pooling_2D"]), str(variants[v]),
              repr(lengths)] for v, lengths in VARIANTS.items()]
    with ThreadPoolExecutor(max_workers=12) as pool:
        done = list(pool.map(lambda a: run(a, env, 120), jobs))
    for job, (code, text) in zip(jobs, done):
        warm_log.append(f"$ {' '.join(job[:6])}\nexit {code}\n{text}\n")
    print(f"optimized in {time.perf_counter() - began:.0f} s", flush=True)

    # 2. builds and torch.compile warm-ups, in parallel
    build = lambda p: [sys.executable, "-c", "import runpy, sys; runpy.run_path(sys.argv[1])", str(p)]  # noqa: E731
    jobs = [build(c) for c in list(candidates.values()) + list(variants.values()) if c.exists()]
    jobs += [[sys.executable, "-c", WARM_COMPILE, str(p)] for p in problems.values()]
    with ThreadPoolExecutor(max_workers=16) as pool:
        done = list(pool.map(lambda a: run(a, env, max(30.0, left() - 120)), jobs))
    for job, (code, text) in zip(jobs, done):
        warm_log.append(f"$ {job[-1] if 'runpy' in job[2] else 'torch.compile warm-up ' + job[-1]}\nexit {code}\n"
                        f"{text if code else ''}\n")
    (args.out / "warmup.log").write_text("\n".join(warm_log))
    print(f"builds and torch.compile warm-ups done at {time.perf_counter() - began:.0f} s", flush=True)

    # 3. 41's variants first, alone on the GPU (quick; the number that matters most, whatever happens below)
    built = {v: str(p) for v, p in variants.items() if p.exists()}
    timings = work / "variants.json"
    code, text = run([sys.executable, "-c", TIME_VARIANTS, json.dumps(built), str(timings)], env,
                     min(90.0, left() - 60))
    variant_rows = json.loads(timings.read_text()) if timings.exists() else {}
    if code:
        variant_rows["error"] = f"exit {code}: {text[-1500:]}"
    (args.out / "variants.json").write_text(json.dumps(variant_rows, indent=1))
    print(f"variants timed at {time.perf_counter() - began:.0f} s", flush=True)

    # 4. the judges, in the order of SUITE and IRREGULAR after 41 (most important first), JUDGES_AT_ONCE at a
    # time; their timed regions are serialized by the GPU lock. None is started without JUDGE_MIN_S left.
    judge_env = dict(env, KFUSE_GPU_LOCK=str(work / "gpu.lock"), KFUSE_GPU_SHARERS=str(JUDGES_AT_ONCE))
    order = [n for n in PRIORITY if n in problems] + [n for n in problems if n not in PRIORITY]
    waiting = [n for n in order if candidates[n].exists()]
    running: dict[str, tuple[subprocess.Popen, object]] = {}
    skipped = []
    while waiting or running:
        while waiting and len(running) < JUDGES_AT_ONCE:
            name = waiting.pop(0)
            if left() < JUDGE_MIN_S:
                skipped.append(name)
                continue
            log = open(work / f"{name}.log", "w")
            proc = subprocess.Popen(
                [sys.executable, "-m", "kfuse", "check", str(problems[name]), str(candidates[name]), "--device",
                 "cuda", "--compile-modes", "default", "--min-seconds", "0.5", "--timeout", f"{left() - 5:.0f}",
                 "--json", str(work / f"{name}.json")],
                stdout=log, stderr=subprocess.STDOUT, env=judge_env, cwd=ROOT, start_new_session=True)
            running[name] = (proc, log)
        for name in [n for n, (proc, _) in running.items() if proc.poll() is not None]:
            running.pop(name)[1].close()
            print(f"  {name} judged at {time.perf_counter() - began:.0f} s", flush=True)
        if left() < 0 and running:
            for name, (proc, log) in running.items():  # the judge and its worker processes (own session)
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                log.close()
                print(f"  {name} stopped: budget spent", flush=True)
            running.clear()
        time.sleep(0.5)
    print(f"judges done at {time.perf_counter() - began:.0f} s", flush=True)

    rows, logs = [], []
    for name in problems:
        verdict = None
        path = work / f"{name}.json"
        if path.exists():
            verdict = json.loads(path.read_text())
        elif name in skipped:
            verdict = {"status": "not run (budget spent)"}
        logs.append(f"===== {name}\n" + ((work / f"{name}.log").read_text() if (work / f"{name}.log").exists()
                                         else "no judge run (see warmup.log)\n"))
        rows.append({"problem": name, "verdict": verdict})
    (args.out / "checks.log").write_text("\n".join(logs))
    (args.out / "verdicts.json").write_text(json.dumps(rows, indent=1, default=str))

    # the table
    import torch
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    lines = [f"# avg-pool strip kernel, {gpu}, torch {torch.__version__}, commit {commit}",
             "", "| problem | status | candidate ms | eager ms | compile ms | vs eager | vs compile | reason |",
             "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        v = row["verdict"] or {}
        stats = (v.get("timing") or {}).get("stats") or {}
        ms = lambda key: f"{stats[key]['median_ms']:.3f}" if key in stats else ""  # noqa: E731
        speed = (v.get("timing") or {}).get("speedups") or {}
        lines.append(f"| {row['problem']} | {v.get('status', 'no verdict')} | {ms('candidate')} | {ms('eager')} | "
                     f"{ms('compile:default')} | {speed.get('vs_eager', float('nan')):.2f}x | "
                     f"{speed.get('vs_compile:default', float('nan')):.2f}x | {str(v.get('reasons', ''))[:90]} |")
    lines += ["", "41 variants (one input, CUDA events, L2 flushed, median of 30):", "",
              "| variant | ms | bitwise = F.avg_pool2d | strided bitwise | max abs diff |", "|---|---|---|---|---|"]
    for name, r in variant_rows.items():
        if isinstance(r, dict) and "median_ms" in r:
            lines.append(f"| {name} | {r['median_ms']:.3f} | {r.get('bitwise_equal_to_torch', '')} | "
                         f"{r.get('strided_bitwise_equal', '')} | {r.get('max_abs_diff', '')} |")
        else:
            lines.append(f"| {name} | {r} | | | |")
    lines.append(f"\ntotal {time.perf_counter() - began:.0f} s")
    (args.out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
