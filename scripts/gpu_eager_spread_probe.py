"""Eager's time under the judge's own timing (kfuse.problem.time_one_call: L2 flush, head start, CUDA events), 60
calls after 3 warm-ups, in one process: run it several times, with and without busy cores beside it, to see how far
a problem's eager median moves between processes and under CPU load.

    PYTHONPATH=. python3 scripts/gpu_eager_spread_probe.py PROBLEM.py LABEL

Results: results/probes-H100-2026-11-26-conv-address.md (its last section)."""
import runpy
import statistics
import sys

import torch

from kfuse.problem import L2Flush, time_one_call
prob = runpy.run_path(sys.argv[1])
torch.manual_seed(0)
dev = torch.device("cuda")
model = prob["Model"](*prob["get_init_inputs"]()).to(dev)
inputs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in prob["get_inputs"]()]
flush = L2Flush(dev)
with torch.no_grad():
    for _ in range(3):
        time_one_call(lambda: model(*inputs), dev, flush)
    ms = sorted(time_one_call(lambda: model(*inputs), dev, flush)[0] for _ in range(60))
print(sys.argv[1].split("/")[-1][:20], sys.argv[2], "median %.2f min %.2f p90 %.2f" % (statistics.median(ms), ms[0], ms[54]), flush=True)
