"""Timing several implementations of one function fairly (DESIGN.md §4, Timing).

All contenders run in the same process in interleaved rounds, the order rotating each round, so drift in clocks
or temperature hits them alike and a speedup is a ratio from one run. On CUDA: the L2 is flushed before every
timed call, CUDA events on the current stream bracket the call, then the whole device is synchronised. On the
CPU: time.perf_counter, no flush.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch


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


class _CudaClock:
    def __init__(self, device: torch.device):
        props = torch.cuda.get_device_properties(device)
        l2 = getattr(props, "L2_cache_size", 0) or 64 << 20
        # Twice the L2, so nothing the previous call left there survives the flush.
        self.flush_buffer = torch.empty(2 * l2 // 4, dtype=torch.float32, device=device)

    def time_call(self, fn: Callable[[], object]) -> float:
        self.flush_buffer.fill_(1.0)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end)


class _CpuClock:
    def time_call(self, fn: Callable[[], object]) -> float:
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e3


def time_interleaved(contenders: dict[str, Callable[[], object]], device: torch.device,
                     plan: TimingPlan = TimingPlan()) -> dict[str, dict]:
    """Median, IQR, min and mean (ms) of each contender, timed in interleaved rounds."""
    clock = _CudaClock(device) if device.type == "cuda" else _CpuClock()
    names = list(contenders)
    for name in names:
        for _ in range(plan.warmup):
            contenders[name]()
    if device.type == "cuda":
        torch.cuda.synchronize()
    samples: dict[str, list[float]] = {name: [] for name in names}
    began = time.perf_counter()
    rounds = 0
    while True:
        order = names[rounds % len(names):] + names[:rounds % len(names)]
        for name in order:
            samples[name].append(clock.time_call(contenders[name]))
        rounds += 1
        enough = rounds >= plan.min_trials and all(sum(s) >= plan.min_seconds * 1e3 for s in samples.values())
        if enough or rounds >= plan.max_trials or time.perf_counter() - began > plan.max_wall_seconds:
            break
    return {name: summarize(s) for name, s in samples.items()}
