"""Timing several implementations of one function fairly (DESIGN.md §4, Timing).

Contenders run in interleaved rounds, the order rotating each round, so drift in clocks or temperature hits them
alike and a speedup is a ratio from one run. Each contender is a function that takes the round number and returns
the milliseconds of one timed call (see kfuse.problem.time_one_call: L2 flush, CUDA events, device sync).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class TimingPlan:
    warmup: int = 3
    min_trials: int = 30
    min_seconds: float = 1.0    # per contender, of measured time
    max_trials: int = 1000
    max_wall_seconds: float = 60.0


def summarize(samples_ms: list[float]) -> dict:
    ordered = sorted(samples_ms)
    q = statistics.quantiles(ordered, n=4, method="inclusive") if len(ordered) > 1 else [ordered[0]] * 3
    return {"median_ms": statistics.median(ordered), "iqr_ms": q[2] - q[0], "min_ms": ordered[0],
            "mean_ms": statistics.fmean(ordered), "trials": len(ordered)}


def time_interleaved(contenders: dict[str, Callable[[int], float]], plan: TimingPlan = TimingPlan()) -> dict:
    """Median, IQR, min and mean (ms) of each contender, timed in interleaved rounds (warm-ups done by the caller)."""
    names = list(contenders)
    samples: dict[str, list[float]] = {name: [] for name in names}
    began = time.perf_counter()
    rounds = 0
    while True:
        shift = rounds % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(contenders[name](rounds))
        rounds += 1
        enough = rounds >= plan.min_trials and all(sum(s) >= plan.min_seconds * 1e3 for s in samples.values())
        if enough or rounds >= plan.max_trials or time.perf_counter() - began > plan.max_wall_seconds:
            return {name: summarize(s) for name, s in samples.items()}
