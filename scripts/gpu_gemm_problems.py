"""GEMM problems on the GPU in one bounded device call: optimize, build in parallel, judge one by one.

    PYTHONPATH=. python3 scripts/gpu_gemm_problems.py OUT PROBLEM.py...

Every verdict is added to OUT/verdicts.json as soon as it exists and a line is printed (flushed), so a run cut
off by the device's time limit still returns what it finished; OUT/table.txt holds the table. The emitted files
go to a temporary folder (the device tool returns only a few files). Timing: `kfuse check`
(eager = cuBLAS fp32, L2 flushed, interleaved rounds), without torch.compile to save device time.
"""

from __future__ import annotations

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

from kfuse.optimize import optimize  # noqa: E402


def build(path: Path) -> tuple[float, int, str]:
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", "import runpy, sys; runpy.run_path(sys.argv[1])", str(path)],
                          capture_output=True, text=True, timeout=600)
    return time.perf_counter() - began, done.returncode, done.stderr[-1500:]


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    problems = [Path(p) for p in sys.argv[2:]]
    emitted = {}
    emitted_dir = Path(tempfile.mkdtemp(prefix="kfuse-gemm-"))
    verdicts = {}
    for p in problems:
        result = optimize(p, emitted_dir / f"{p.stem}_new.py", "cuda")
        emitted[p] = result
        print(f"optimized {p.stem}: {[k['name'] for k in result.kernels]}", flush=True)
    with ThreadPoolExecutor(max_workers=len(problems)) as pool:
        builds = dict(zip(problems, pool.map(build, [e.path for e in emitted.values()])))
    for p, (seconds, code, err) in builds.items():
        print(f"build {p.stem}: {'ok' if code == 0 else 'FAILED ' + err} in {seconds:.0f} s", flush=True)
    rows = []
    for p in problems:
        verdict_path = emitted_dir / f"{p.stem}.json"
        subprocess.run([sys.executable, "-m", "kfuse", "check", str(p), str(emitted[p].path), "--compile-modes", "none",
                        "--min-seconds", "0.5", "--timeout", "120", "--json", str(verdict_path)],
                       capture_output=True, text=True, timeout=150)
        v = json.loads(verdict_path.read_text()) if verdict_path.exists() else {"status": "no verdict", "reasons": []}
        verdicts[p.stem] = {"verdict": v, "kernels": emitted[p].kernels, "unfused": emitted[p].unfused,
                            "build_s": round(builds[p][0], 1)}
        (out / "verdicts.json").write_text(json.dumps(verdicts, indent=1, default=str))
        t = v.get("timing") or {}
        stats = t.get("stats", {})
        eager = stats.get("eager", {}).get("median_ms", float("nan"))
        mine = stats.get("candidate", {}).get("median_ms", float("nan"))
        row = (f"{p.stem:40s} {v['status']:10s} eager {eager:8.3f} ms  kfuse {mine:8.3f} ms  "
               f"x{eager / mine if mine == mine and mine else float('nan'):5.2f}  {str(v.get('reasons', [])[:1])[:160]}")
        rows.append(row)
        print(row, flush=True)
        (out / "table.txt").write_text("\n".join(rows) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MAX_JOBS", "2")
    sys.exit(main())
