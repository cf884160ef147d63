"""Replay a finished `kfuse bench` run's judgements through LocalRunner's GPU memory ledger, on the CPU, in seconds.

Each problem becomes a job of its recorded data bytes that sleeps for its recorded judgement (the `judged A-B s` of
the run's log; 35 s for one judged again alone), scaled down SCALE times; jobs arrive one every ARRIVAL seconds after
the first 50 s (the pipeline's pace on 16 cores): those of big data first, largest first (`start_order`), then the
rest, shortest first; or, with --interleave, the big ones taking turns with the rest (start_order before 2026-11-26). What it prints is what the ledger alone
makes of those jobs: the run's length, and two floors (the judges' slots; the GPU memory the ledger hands out, over
time). It does not model out-of-memory retries or CPU contention.

    python3 scripts/replay_ledger.py RESULTS_JSON BENCH_LOG [--copies 6] [--gpu-gib 79.2] [--workers 8] [--interleave]
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
from concurrent.futures import Future
from pathlib import Path

from kfuse.bench import runner

SCALE, ARRIVAL, FIRST_S = 200.0, 5.0, 50.0


def judgements(results: Path, log: Path) -> list[runner.Problem]:
    seconds = {}
    for line in log.read_text().splitlines():
        m = re.search(r"\] +\d+/\d+ (\S+): \S+ \(judged (\d+)-(\d+) s(, GPU to itself)?", line)
        if m:
            seconds[m.group(1)] = 35.0 if m.group(4) else float(int(m.group(3)) - int(m.group(2)))
    jobs = []
    for row in json.loads(results.read_text())["problems"]:
        stem = Path(row["problem"]).stem
        if stem in seconds:
            jobs.append({"id": stem, "data_bytes": row.get("data_bytes"), "seconds": seconds[stem]})
    return jobs


def replay(jobs: list[dict], gpu_bytes: int, workers: int, interleave: bool = False) -> float:
    ends, began = [], time.perf_counter()

    def judge(job, env=None):
        time.sleep(job["seconds"] / SCALE)
        ends.append(time.perf_counter() - began)
        return {"status": "correct", "reasons": []}

    def arrive(future: Future, job: dict, at: float) -> None:
        time.sleep(at / SCALE)
        future.set_result(job)

    runner.run_job_isolated = judge
    big = sorted((j for j in jobs if (j["data_bytes"] or 0) >= runner.BIG_DATA_BYTES), key=lambda j: -j["data_bytes"])
    rest = sorted((j for j in jobs if j not in big), key=lambda j: j["seconds"])
    order = big + rest
    if interleave:
        order = [job for pair in zip(big + [None] * len(rest), rest + [None] * len(big)) for job in pair if job]
    lined = []
    for i, job in enumerate(order):
        future = Future()
        threading.Thread(target=arrive, args=(future, job, FIRST_S + i * ARRIVAL), daemon=True).start()
        lined.append((job["id"], future))
    slots = [{"CUDA_VISIBLE_DEVICES": "0", "KFUSE_GPU_LOCK": "replay"}] * workers
    runner.LocalRunner(slots, gpu_bytes).run(lined, lambda tag: None, lambda tag, result: None)
    return max(ends) * SCALE


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("log", type=Path)
    parser.add_argument("--copies", type=float, default=runner.JUDGE_COPIES)
    parser.add_argument("--gpu-gib", type=float, default=79.2)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--interleave", action="store_true")
    args = parser.parse_args()
    runner.JUDGE_COPIES = args.copies
    jobs = judgements(args.results, args.log)
    gpu_bytes = int(args.gpu_gib * (1 << 30))
    budget = runner.MEMORY_BUDGET * gpu_bytes
    memory_floor = sum(min(1.0, runner.gpu_need(j) / budget) * j["seconds"] for j in jobs)
    slot_floor = sum(j["seconds"] for j in jobs) / args.workers
    print(f"{len(jobs)} judgements, {args.copies:g} copies: the ledger's run {replay(jobs, gpu_bytes, args.workers, args.interleave):.0f} s;"
          f" floors: memory {memory_floor:.0f} s, judges {slot_floor:.0f} s")


if __name__ == "__main__":
    main()
