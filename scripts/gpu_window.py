"""Pooling and scan kernels on a GPU: optimize, build, judge (and time the suite's pooling/cumsum problems).

    PYTHONPATH=. python scripts/gpu_window.py --out DIR [--budget-s 280] [--only 41,42,62,63,64,65]

Order: the CPU-tested mixes (tests/optimize/pooling_mix.py, scans_mix.py: irregular sizes, every path), the
timed suite problems (level1 37-42, 62-65: eager and torch.compile, interleaved, L2 flushed, through `kfuse
check`), then level2 problems with a pool after a convolution (correctness only). Builds and torch.compile's
caches are warmed in parallel first, so the serial judging spends its time on trials and timing. Checks stop
being started when the budget is spent; the JSON is rewritten after every problem. The floor column is
(bytes read + written once) / 3.0 TB/s.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kfuse.judge import CheckOptions, check  # noqa: E402
from kfuse.optimize import optimize  # noqa: E402

MIXES = ["tests/optimize/pooling_mix.py", "tests/optimize/scans_mix.py"]
TIMED = ["37_Max_Pooling_1D", "38_Max_Pooling_2D", "39_Max_Pooling_3D", "40_Average_Pooling_1D",
         "41_Average_Pooling_2D", "42_Average_Pooling_3D", "62_cumsum", "63_cumsum_reverse", "64_cumsum_exclusive",
         "65_cumsum_masked"]
LEVEL2 = ["9_Conv2d_Subtract_Tanh_Subtract_AvgPool", "6_Conv2d_AvgPool_Sigmoid_Sum",
          "16_ConvTranspose2d_MaxPool_Hardtanh_Mean_Tanh", "11_Conv3d_Softmax_MaxPool_MaxPool",
          "19_ConvTranspose3d_Sum_LayerNorm_AvgPool_GELU", "17_ConvTranspose3d_Scaling_BatchNorm_GlobalAvgPool"]

WARM_COMPILE = """
import sys, torch
sys.path.insert(0, {root!r})
from kfuse.problem import load_problem, build_reference, make_inputs
problem, init = load_problem({path!r})
model = build_reference(problem, init, seed=0, device=torch.device("cuda"))
inputs = make_inputs(problem, seed=0, device=torch.device("cuda"))
with torch.no_grad():
    torch.compile(model)(*inputs)
torch.cuda.synchronize()
"""


def moved_bytes(path: Path) -> int:
    """Bytes of the inputs and outputs, each counted once (the memory-bound floor's numerator)."""
    import torch
    from kfuse.problem import build_reference, load_problem, make_inputs
    problem, init = load_problem(str(path))
    meta = torch.device("meta")
    model = build_reference(problem, init, seed=0, device=meta)
    inputs = make_inputs(problem, seed=0, device=meta)
    with torch.no_grad():
        out = model(*inputs)
    outs = out if isinstance(out, (tuple, list)) else [out]
    tensors = [t for t in list(inputs) + list(outs) if isinstance(t, torch.Tensor)]
    return sum(t.numel() * t.element_size() for t in tensors)


def run_quiet(args: list[str], env=None) -> tuple[int, str]:
    done = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
    return done.returncode, done.stderr[-1500:]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget-s", type=float, default=280.0)
    parser.add_argument("--only", default="", help="comma-separated name prefixes (e.g. 62,63,41,scans_mix)")
    args = parser.parse_args()
    began = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    gpu = torch.cuda.get_device_name(0)
    problems = ([(ROOT / p, "mix") for p in MIXES] + [(ROOT / "suite/level1" / f"{p}.py", "timed") for p in TIMED]
                + [(ROOT / "suite/level2" / f"{p}.py", "level2") for p in LEVEL2])
    if args.only:
        wanted = [w.strip() for w in args.only.split(",") if w.strip()]
        problems = [(p, kind) for p, kind in problems if any(p.stem.startswith(w) for w in wanted)]
    where = Path(tempfile.mkdtemp(prefix="kfuse-window-"))
    emitted = {p.stem: optimize(p, where / f"{p.stem}_new.py", "cuda") for p, _ in problems}
    print(f"optimized {len(emitted)} problems in {time.perf_counter() - began:.1f} s", flush=True)

    env = dict(os.environ, MAX_JOBS="2")
    builds = [[sys.executable, "-c", "import runpy, sys; runpy.run_path(sys.argv[1])", str(e.path)]
              for e in emitted.values()]
    warms = [[sys.executable, "-c", WARM_COMPILE.format(root=str(ROOT), path=str(p))]
             for p, kind in problems if kind == "timed"]
    with ThreadPoolExecutor(max_workers=12) as pool:
        built = list(pool.map(lambda a: run_quiet(a, env), builds + warms))
    for name, (code, err) in zip(list(emitted) + [f"compile {p.stem}" for p, k in problems if k == "timed"], built):
        if code:
            print(f"warm-up {name} FAILED: {err}", flush=True)
    print(f"builds and torch.compile warm-ups done at {time.perf_counter() - began:.1f} s", flush=True)

    rows = []
    stamp = datetime.date.today().isoformat()
    path = args.out / f"window-{gpu.replace(' ', '-')}-{stamp}.json"
    for problem, kind in problems:
        if time.perf_counter() - began > args.budget_s:
            rows.append({"problem": problem.stem, "status": "not run (budget spent)"})
            continue
        timed = kind == "timed"
        options = CheckOptions(device="cuda", timeout=240, compile_modes=["default"] if timed else [],
                               min_seconds=0.25, timing_trials=20, time=timed)
        verdict = check(problem, emitted[problem.stem].path, options)
        row = {"problem": problem.stem, "kind": kind, "status": verdict["status"], "reasons": verdict["reasons"],
               "kernels": emitted[problem.stem].kernels, "unfused": emitted[problem.stem].unfused,
               "verdict": verdict}
        if timed:
            row["bytes"] = moved_bytes(problem)
            row["floor_3TBps_ms"] = row["bytes"] / 3.0e12 * 1e3
        rows.append(row)
        print(f"{problem.stem}: {verdict['status']} {verdict['reasons'][:1]} "
              f"({time.perf_counter() - began:.0f} s)", flush=True)
        path.write_text(json.dumps({"gpu": gpu, "torch": torch.__version__, "date": stamp, "rows": rows},
                                   indent=2, default=str))

    print(f"\n{'problem':32} {'verdict':9} {'eager':>8} {'compile':>8} {'kfuse':>8} {'floor':>8} {'vs eager':>8} "
          f"{'vs comp':>8} {'of floor':>8}")
    for r in rows:
        t = (r.get("verdict") or {}).get("timing") or {}
        if t:
            s, sp = t["stats"], t["speedups"]
            comp = s.get("compile:default", {}).get("median_ms", float("nan"))
            ours = s["candidate"]["median_ms"]
            print(f"{r['problem']:32} {r['status']:9} {s['eager']['median_ms']:8.3f} {comp:8.3f} {ours:8.3f} "
                  f"{r['floor_3TBps_ms']:8.3f} {sp['vs_eager']:7.2f}x {sp.get('vs_compile:default', float('nan')):7.2f}x "
                  f"{r['floor_3TBps_ms'] / ours:7.0%}")
        else:
            print(f"{r['problem']:32} {r['status']:9} {str(r.get('reasons', ''))[:80]}")
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
