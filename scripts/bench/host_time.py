"""Host time of one forward call: a candidate's ModelNew against the reference Model, at the problem's own sizes
but batch 1 (GPU work too short to fill the launch queue, so the loop runs at the host's pace).

    python scripts/bench/host_time.py PROBLEM.py CANDIDATE.py       (on the device)

Prints microseconds per call (median of 5 loops of 200 calls, no synchronisation inside a loop) for ModelNew and
Model, and for ModelNew's extension op called directly (no nn.Module / Python forward around it).
"""

from __future__ import annotations

import json
import runpy
import statistics
import sys
import time
from pathlib import Path

import torch


def per_call_us(fn, calls: int = 200) -> float:
    loops = []
    for _ in range(5):
        torch.cuda.synchronize()
        began = time.perf_counter()
        for _ in range(calls):
            fn()
        loops.append((time.perf_counter() - began) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(loops)


def main() -> int:
    problem, candidate = Path(sys.argv[1]), Path(sys.argv[2])
    ns, cand = runpy.run_path(str(problem)), runpy.run_path(str(candidate))
    init = ns["get_init_inputs"]()
    ref = ns["Model"](*init).cuda().eval()
    new = cand["ModelNew"](*init).cuda().eval()
    new.load_state_dict(ref.state_dict())
    inputs = [x[:1].cuda() if x.dim() > 1 else x.cuda() for x in ns["get_inputs"]()]
    with torch.no_grad():
        for _ in range(10):
            new(*inputs), ref(*inputs)
        result = {"problem": problem.stem, "model_new_us": per_call_us(lambda: new(*inputs)),
                  "model_us": per_call_us(lambda: ref(*inputs)),
                  "empty_op_us": per_call_us(lambda: torch.empty(0, device="cuda"))}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
