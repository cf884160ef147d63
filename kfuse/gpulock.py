"""Several judges on one GPU, with timing kept honest: a readers-writer lock between processes.

`kfuse bench --per-gpu N` runs N jobs on each GPU, so that one job's builds and torch.compile (CPU work) overlap
another's GPU work. A timed region must still have the GPU to itself, so the judge's worker holds this lock:
- shared while it runs anything on the GPU that is not timed (references, trials, float64 truths), a trial at a
  time, so several such phases overlap and a waiting writer waits for one trial of each;
- exclusive while it times, so nothing else runs on the GPU then.
Builds and captures take no lock: they never touch the GPU. Nor does torch.compile's compile (kfuse.judge.worker,
reference_timing_prepared says why). The planner's probes of eager's precision and layout do
(kfuse.kernels.eager_precision): shared sections, and an exclusive one where the layout probe times the two layouts.

A judge whose problem is too big for two judges' copies in GPU memory (kfuse.judge.worker's too_big_to_share) takes
`big` sections for its untimed work instead: shared with the small judges' untimed work, but one big judge at a
time (a third file, `.big`, held exclusively around the shared section). It used to take the GPU exclusively: on
the development set 20 such problems then stopped the seven other judges for 35-100 s each.

The lock is two `flock`ed files (three with `.big`). A new holder, shared or exclusive, first passes a gate (the `.gate` file, held
exclusively for the moment it takes to enter); a process waiting for the exclusive lock waits holding the gate,
so no new shared holder slips in ahead of it and timing is never starved. A process that dies releases its locks
with its file descriptors. Without `KFUSE_GPU_LOCK` in the environment (one job per GPU, or `kfuse check`) every
section is a no-op. With `KFUSE_GPU_SOLE` too, every section of the judge is exclusive (`sole`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

ENV = "KFUSE_GPU_LOCK"
SHARERS_ENV = "KFUSE_GPU_SHARERS"  # how many judges share the GPU (sizes the memory rule)
SOLE_ENV = "KFUSE_GPU_SOLE"        # set: this judge's untimed sections hold the GPU exclusively too (`sole`)


class GpuLock:
    def __init__(self, path: str | os.PathLike, sole: bool = False):
        self.path = Path(path)
        # Sole: every section exclusive, as timing is. For a judge run again after it ran out of GPU memory beside
        # the others (kfuse.bench.runner.LocalRunner): its GPU work then overlaps nobody's, while the other judges go on
        # with their CPU work (builds, torch.compile) instead of all waiting for the end of the run.
        self.sole = sole
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._data = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        self._gate = os.open(self.path.with_name(self.path.name + ".gate"), os.O_RDWR | os.O_CREAT, 0o644)
        self._big = os.open(self.path.with_name(self.path.name + ".big"), os.O_RDWR | os.O_CREAT, 0o644)
        self._held: int | None = None   # fcntl.LOCK_SH or LOCK_EX while inside a section
        self.waited_s = 0.0             # seconds spent waiting for other judges (reported per stage by the judge)

    @contextlib.contextmanager
    def _section(self, mode: int):
        if self._held is not None:  # nested: the outer section already holds at least what is needed
            if mode == fcntl.LOCK_EX and self._held != fcntl.LOCK_EX:
                raise RuntimeError("cannot take the GPU exclusively inside a shared section")
            yield
            return
        began = time.perf_counter()
        fcntl.flock(self._gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._data, mode)
        finally:
            fcntl.flock(self._gate, fcntl.LOCK_UN)
        self.waited_s += time.perf_counter() - began
        self._held = mode
        try:
            yield
        finally:
            self._held = None
            fcntl.flock(self._data, fcntl.LOCK_UN)

    def shared(self):
        """Untimed GPU work: may overlap other processes' untimed GPU work, never their timing (a sole judge's:
        nothing)."""
        return self._section(fcntl.LOCK_EX if self.sole else fcntl.LOCK_SH)

    def exclusive(self):
        """Timing: the GPU to this process alone."""
        return self._section(fcntl.LOCK_EX)

    @contextlib.contextmanager
    def big(self):
        """Untimed GPU work of a problem too big for two judges' copies: a shared section, one big judge at a time.
        (The `.big` file is taken before the gate and released after the data lock: a big judge waiting for
        another holds nothing the small judges or a waiting writer need.)"""
        if self._held is not None:
            with self.shared():  # nested: the outer section decides
                yield
            return
        began = time.perf_counter()
        fcntl.flock(self._big, fcntl.LOCK_EX)
        self.waited_s += time.perf_counter() - began
        try:
            with self.shared():
                yield
        finally:
            fcntl.flock(self._big, fcntl.LOCK_UN)

    def close(self) -> None:
        os.close(self._data)
        os.close(self._gate)
        os.close(self._big)


class NoLock:
    """One job per GPU: nothing to coordinate."""

    waited_s = 0.0

    def shared(self):
        return contextlib.nullcontext()

    def exclusive(self):
        return contextlib.nullcontext()

    def big(self):
        return contextlib.nullcontext()

    def close(self) -> None:
        return None


def from_environment() -> GpuLock | NoLock:
    path = os.environ.get(ENV)
    return GpuLock(path, sole=bool(os.environ.get(SOLE_ENV))) if path else NoLock()
