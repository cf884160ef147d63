"""Run the CUDA adversarial corpus (and the CUDA example) through `kfuse check` on a GPU.

    PYTHONPATH=. python scripts/gpu_corpus.py --out DIR [--big]

Builds every extension first, in parallel (one process per file), then judges each candidate in turn and writes
DIR/corpus-cuda-<gpu>-<date>.json with a row per candidate; prints the table last. `--big` adds the seed
LeakyReLU problem at its full size (6.4 GB input: 64-bit indexing and the judge's memory peak).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kfuse.judge import CheckOptions, check  # noqa: E402
from kfuse.judge.zygote import serving  # noqa: E402
from tests.corpus.expected import CORPUS  # noqa: E402

PROBLEMS = ROOT / "tests" / "corpus" / "problems"
CANDIDATES = ROOT / "tests" / "corpus" / "cuda"


def build(path: Path) -> tuple[str, int, float, str]:
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", "import runpy, sys; runpy.run_path(sys.argv[1])", str(path)],
                          capture_output=True, text=True, env=dict(os.environ, MAX_JOBS="2"), timeout=900)
    return path.name, done.returncode, time.perf_counter() - began, done.stderr[-1500:]


def cases(big: bool) -> list[tuple[str, Path, Path, str, str]]:
    rows = [(name, PROBLEMS / f"{problem}.py", CANDIDATES / f"{name}.py", status, keyword)
            for name, (problem, status, keyword, targets) in CORPUS.items() if "cuda" in targets]
    rows.append(("example_swish", ROOT / "examples" / "swish.py", ROOT / "examples" / "swish_new_cuda.py",
                 "correct", ""))
    if big:
        rows.append(("seed_leaky_relu_full_size", ROOT / "suite" / "seeds" / "leaky_relu_4096x393216.py",
                     CANDIDATES / "leaky_honest.py", "correct", ""))
    return rows


def judge(name: str, problem: Path, candidate: Path, expected: str, keyword: str) -> dict:
    timeout = 30 if expected == "timeout" else 600
    options = CheckOptions(device="cuda", timeout=timeout, time=expected == "correct", min_seconds=0.5,
                           compile_modes=["default"])
    began = time.perf_counter()
    verdict = check(problem, candidate, options)
    reasons = " ".join(verdict["reasons"]).lower()
    ok = verdict["status"] == expected and any(word in reasons for word in keyword.split("|"))
    timing = verdict.get("timing") or {}
    row = {
        "name": name, "problem": problem.name, "candidate": str(candidate.relative_to(ROOT)),
        "expected": expected, "status": verdict["status"], "as_expected": ok, "reasons": verdict["reasons"],
        "kernelbench_pass": verdict["kernelbench_pass"], "seconds": round(time.perf_counter() - began, 1),
        "timing": {k: timing.get(k) for k in ("stats", "speedups", "roofline", "flags", "compile_errors")}
        if timing else None,
        "verdict": verdict,
    }
    print(f"{name}: {verdict['status']} ({'as expected' if ok else 'UNEXPECTED'}) {verdict['reasons'][:1]}",
          flush=True)
    return row


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--big", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    gpu = torch.cuda.get_device_name(0)
    rows = cases(args.big)

    files = sorted({candidate for _, _, candidate, _, _ in rows if "load_inline(" in candidate.read_text()})
    with ThreadPoolExecutor(max_workers=min(8, len(files))) as pool:
        builds = list(pool.map(build, files))
    for name, code, seconds, err in builds:
        print(f"build {name}: {'ok' if code == 0 else 'FAILED'} in {seconds:.0f} s", flush=True)
        if code:
            print(err, flush=True)

    results = []
    with serving():  # the judges' workers forked from one imported torch, as in kfuse bench
        for name, problem, candidate, expected, keyword in rows:
            results.append(judge(name, problem, candidate, expected, keyword))

    stamp = datetime.date.today().isoformat()
    slug = gpu.replace(" ", "-")
    path = args.out / f"corpus-cuda-{slug}-{stamp}.json"
    path.write_text(json.dumps({"gpu": gpu, "torch": torch.__version__, "date": stamp, "builds": [
        {"file": n, "ok": c == 0, "seconds": round(s, 1)} for n, c, s, _ in builds], "results": results},
        indent=2, default=str))

    print(f"\n{'candidate':32} {'expected':14} {'verdict':14} {'ok':4} speedup vs eager / compile")
    for r in results:
        speed = ""
        if r["timing"]:
            sp = r["timing"]["speedups"]
            speed = " / ".join(f"{sp[k]:.2f}x" for k in ("vs_eager", "vs_compile:default") if k in sp)
        print(f"{r['name']:32} {r['expected']:14} {r['status']:14} {'yes' if r['as_expected'] else 'NO':4} {speed}")
    print(f"\n{sum(r['as_expected'] for r in results)}/{len(results)} as expected on {gpu}; wrote {path}")
    return 0 if all(r["as_expected"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
