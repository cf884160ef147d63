"""Optimize problems for CUDA, build the emitted files cold and warm, and judge them on the GPU.

    PYTHONPATH=. python scripts/gpu_optimize.py --out DIR [--problems suite/seeds] [--no-timing] [--big]

Writes DIR/<folder>-<gpu>-<date>.json and prints a table last: eager, torch.compile and kfuse medians (ms, one
run, interleaved), speedups, the roofline floor, cold build and warm import seconds.
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
from kfuse.compiler.optimize import optimize  # noqa: E402

SEEDS = ROOT / "suite" / "seeds"


def import_seconds(path: Path) -> tuple[float, int, str]:
    """Wall time of importing an emitted file in a fresh process (a cold build the first time)."""
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", "import runpy, sys; runpy.run_path(sys.argv[1])", str(path)],
                          capture_output=True, text=True, timeout=900)
    return time.perf_counter() - began, done.returncode, done.stderr[-1500:]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--big", action="store_true", help="include the 6.4 GB LeakyReLU seed (slow to judge)")
    parser.add_argument("--problems", type=Path, default=SEEDS)
    parser.add_argument("--no-timing", action="store_true")
    parser.add_argument("--serial-builds", action="store_true", help="cold-build one file at a time")
    parser.add_argument("--keep-emitted", action="store_true", help="write the ModelNew files under --out/emitted")
    parser.add_argument("--compile-modes", default="default", help="torch.compile modes to time, or none")
    parser.add_argument("--no-warm", action="store_true", help="skip the warm-import timing (saves device time)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    gpu = torch.cuda.get_device_name(0)
    problems = [p for p in sorted(args.problems.glob("*.py")) if args.big or "4096x393216" not in p.name]
    # Emitted files stay out of --out unless asked for: the device tool returns only a few files.
    where = args.out / "emitted" if args.keep_emitted else Path(tempfile.mkdtemp(prefix="kfuse-emitted-"))
    emitted = {p.stem: optimize(p, where / f"{p.stem}_new.py", "cuda") for p in problems}
    os.environ.setdefault("MAX_JOBS", "4")
    if args.serial_builds:  # each cold build alone on the machine: the number a user sees
        cold = {name: import_seconds(e.path) for name, e in emitted.items()}
    else:
        with ThreadPoolExecutor(max_workers=min(8, len(problems))) as pool:
            cold = dict(zip(emitted, pool.map(import_seconds, [e.path for e in emitted.values()])))
    warm = {name: (0.0, 0, "") if args.no_warm else import_seconds(e.path) for name, e in emitted.items()}
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], check=True)
    import_torch_s = time.perf_counter() - began
    print(f"a fresh process that only imports torch: {import_torch_s:.2f} s", flush=True)
    for name, (seconds, code, err) in cold.items():
        print(f"cold build {name}: {'ok' if code == 0 else 'FAILED'} in {seconds:.1f} s; warm import "
              f"{warm[name][0]:.1f} s", flush=True)
        if code:
            print(err, flush=True)

    rows = []
    for problem in problems:
        name = problem.stem
        modes = [] if args.compile_modes == "none" else args.compile_modes.split(",")
        options = CheckOptions(device="cuda", timeout=600, compile_modes=modes, min_seconds=1.0,
                               time=not args.no_timing)
        verdict = check(problem, emitted[name].path, options)
        timing = verdict.get("timing") or {}
        rows.append({"problem": name, "status": verdict["status"], "reasons": verdict["reasons"],
                     "kernels": emitted[name].kernels, "unfused": emitted[name].unfused,
                     "cold_build_s": round(cold[name][0], 1), "warm_import_s": round(warm[name][0], 2),
                     "timing": timing, "verdict": verdict})
        print(f"{name}: {verdict['status']} {verdict['reasons'][:1]}", flush=True)

    stamp = datetime.date.today().isoformat()
    path = args.out / f"{args.problems.name}-{gpu.replace(' ', '-')}-{stamp}.json"
    path.write_text(json.dumps({"gpu": gpu, "torch": torch.__version__, "date": stamp,
                                "import_torch_s": round(import_torch_s, 2), "rows": rows},
                               indent=2, default=str))
    print(f"\n{'problem':28} {'verdict':9} {'eager':>8} {'compile':>8} {'kfuse':>8} {'floor':>8} "
          f"{'vs eager':>8} {'vs comp':>8} {'cold s':>6} {'warm s':>6}")
    for r in rows:
        t = r["timing"]
        if t:
            s, sp = t["stats"], t["speedups"]
            comp = s.get("compile:default", {}).get("median_ms", float("nan"))
            print(f"{r['problem']:28} {r['status']:9} {s['eager']['median_ms']:8.4f} {comp:8.4f} "
                  f"{s['candidate']['median_ms']:8.4f} {t['roofline']['floor_ms']:8.4f} {sp['vs_eager']:7.2f}x "
                  f"{sp.get('vs_compile:default', float('nan')):7.2f}x {r['cold_build_s']:6.1f} {r['warm_import_s']:6.2f}")
        else:
            print(f"{r['problem']:28} {r['status']:9} {r['reasons'][:1]}")
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
