"""How stable is the layout probe (eager_precision.channels_last_slower)? Each problem optimized for CUDA (no check)
REPEATS times in this process, the probe's cache cleared between, every timed layout probe printed: its two medians,
their ratio and the answer under LAYOUT_MARGIN. A ratio near the margin flips from run to run, and with it the file.

    PYTHONPATH=. python3 scripts/gpu_layout_probe.py [--repeats 3] PROBLEM.py ...
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from kfuse.compiler.optimize import optimize
from kfuse.kernels import eager_precision


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("problems", nargs="+", type=Path)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    timed = eager_precision._layout_medians
    current = {}

    def recorded(target, x_shape, w_shape, has_bias, out_shape, rest):
        median = timed(target, x_shape, w_shape, has_bias, out_shape, rest)
        ratio = median["channels_last"] / median["nchw"]
        print(json.dumps({"problem": current["name"], "repeat": current["repeat"], "target": target, "x": x_shape,
                          "w": w_shape, "nchw_ms": round(median["nchw"], 4),
                          "channels_last_ms": round(median["channels_last"], 4), "ratio": round(ratio, 3),
                          "nchw_chosen": ratio > eager_precision.LAYOUT_MARGIN}), flush=True)
        return median

    eager_precision._layout_medians = recorded
    with tempfile.TemporaryDirectory() as scratch:
        for problem in args.problems:
            for repeat in range(args.repeats):
                current.update(name=problem.stem, repeat=repeat)
                eager_precision._layout_slower.cache_clear()
                optimize(problem, Path(scratch) / f"{problem.stem}_{repeat}.py", "cuda")


if __name__ == "__main__":
    main()
