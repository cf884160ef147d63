"""Run emitted ModelNew files directly, one process each, to see why a candidate crashed or differs.

    PYTHONPATH=. CUDA_LAUNCH_BLOCKING=1 python scripts/gpu_triage.py [--sanitize] PROBLEM CANDIDATE [...]

For each pair: build the reference and the candidate with the same weights (seed 0), run both on seeded random
inputs, and print the full traceback of a failure (with CUDA_LAUNCH_BLOCKING=1 it names the failing launch) or the
largest difference from eager and whether KernelBench's allclose (atol = rtol = 1e-4) holds. --sanitize runs each
pair under compute-sanitizer, whose report of a failed CUDA call carries the host backtrace (the emitted function).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CHILD = r"""
import importlib.util, sys, traceback, torch
sys.path.insert(0, sys.argv[3])
from kfuse.problem import load_problem, build_reference, make_inputs
problem_path, candidate_path = sys.argv[1:3]
problem, init = load_problem(problem_path)
ref = build_reference(problem, init, seed=0, device=torch.device("cuda"))
spec = importlib.util.spec_from_file_location("candidate", candidate_path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
torch.manual_seed(0)
cand = module.ModelNew(*init).cuda()
cand.load_state_dict(ref.state_dict())
inputs = make_inputs(problem, seed=1, device=torch.device("cuda"))
with torch.no_grad():
    want = ref(*inputs)
    got = cand(*inputs)
torch.cuda.synchronize()
want = want if isinstance(want, (tuple, list)) else [want]
got = got if isinstance(got, (tuple, list)) else [got]
for w, g in zip(want, got):
    diff = (w.double() - g.double()).abs().max().item()
    print(f"  output {tuple(w.shape)}: max |diff| {diff:.3g}, allclose(1e-4) {torch.allclose(w, g, 1e-4, 1e-4)}")
"""


def main(argv: list[str]) -> int:
    sanitize = argv[:1] == ["--sanitize"]
    argv = argv[sanitize:]
    if len(argv) % 2:
        print("usage: gpu_triage.py PROBLEM CANDIDATE [PROBLEM CANDIDATE ...]", file=sys.stderr)
        return 2
    root = str(Path(__file__).resolve().parent.parent)
    for problem, candidate in zip(argv[::2], argv[1::2]):
        print(f"== {problem}", flush=True)
        prefix = ["compute-sanitizer", "--print-limit", "3", "--show-backtrace", "host"] if sanitize else []
        run = subprocess.run(prefix + [sys.executable, "-c", CHILD, problem, candidate, root],
                             capture_output=True, text=True)
        # Python's traceback underlines each expression with a line of carets, and quotes the emitted forward's
        # call line, which names every parameter: noise here.
        lines = [line[:300] for line in (run.stdout + run.stderr).splitlines() if line.strip(" ^~")]
        print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
