"""Cold build and warm import of emitted ModelNew files, each in a fresh process (issue 3: cold <= 20 s, warm <= 2 s).

    PYTHONPATH=. python scripts/gpu_import_times.py PROBLEM.py [PROBLEM.py ...] [--warm 3]

For each problem: `kfuse optimize --no-check` writes the file; one fresh process imports it into an empty extension
folder (the cold build); then --warm more fresh processes import it again, each timing `import torch` apart from
the file's own import (load_inline finding the built extension, ModelNew's class). Prints one row per problem.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, runpy, sys, time
began = time.perf_counter()
import torch
torch_s = time.perf_counter() - began
began = time.perf_counter()
runpy.run_path(sys.argv[1])
print(json.dumps({"torch_s": torch_s, "file_s": time.perf_counter() - began}))
"""


def import_once(path: Path, env: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, str(path)], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("problems", nargs="+", type=Path)
    parser.add_argument("--warm", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp())
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(work / "extensions"))
    print(f"{'problem':32s} {'cold s':>7s} {'warm file s':>12s} {'import torch s':>15s}")
    for problem in args.problems:
        out = work / f"{problem.stem}_new.py"
        subprocess.run([sys.executable, "-m", "kfuse", "optimize", str(problem), "-o", str(out), "--no-check"],
                       check=True, capture_output=True)
        cold = import_once(out, env)
        warm = [import_once(out, env) for _ in range(args.warm)]
        if "error" in cold or any("error" in w for w in warm):
            print(f"{problem.stem:32s} failed: {cold.get('error') or next(w['error'] for w in warm if 'error' in w)}")
            continue
        files = sorted(w["file_s"] for w in warm)
        torches = sorted(w["torch_s"] for w in warm)
        print(f"{problem.stem:32s} {cold['file_s']:7.1f} {files[len(files) // 2]:12.2f} "
              f"{torches[len(torches) // 2]:15.2f}", flush=True)


if __name__ == "__main__":
    main()
