"""Several judges on one GPU, with timing kept honest: a readers-writer lock between processes.

`kfuse bench --per-gpu N` runs N jobs on each GPU, so that one job's builds and torch.compile (CPU work) overlap
another's GPU work. A timed region must still have the GPU to itself, so the judge's worker holds this lock:
- shared while it runs anything on the GPU that is not timed (references, trials, float64 truths, torch.compile's
  first call), so several such phases overlap;
- exclusive while it times, so nothing else runs on the GPU then.
Builds and captures take no lock: they never touch the GPU.

The lock is three `flock`ed files. A new holder, shared or exclusive, first passes a gate (the `.gate` file, held
exclusively for the moment it takes to enter); a process waiting for the exclusive lock waits holding the gate,
so no new shared holder slips in ahead of it and timing is never starved. One exception: while a shared holder
is inside a *slow* stretch (`slow()`: torch.compile's compile, tens of seconds of CPU work with the GPU all but
idle), a waiting writer lets go of the gate, so the other judges' GPU work goes on meanwhile instead of queueing
behind that compile (the "convoy"). After `PATIENCE_S` (20 s) of waiting the writer keeps the gate regardless, so timing
is still never starved. A process that dies releases its locks with its file descriptors. Without
`KFUSE_GPU_LOCK` in the environment (one job per GPU, or `kfuse check`) every section is a no-op.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

ENV = "KFUSE_GPU_LOCK"
SHARERS_ENV = "KFUSE_GPU_SHARERS"  # how many judges share the GPU (sizes the memory rule)
PATIENCE_S = 20.0  # a writer yields the gate to slow stretches for this long at most
POLL_S = 0.05


class GpuLock:
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._data = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        self._gate = os.open(self.path.with_name(self.path.name + ".gate"), os.O_RDWR | os.O_CREAT, 0o644)
        self._slow = os.open(self.path.with_name(self.path.name + ".slow"), os.O_RDWR | os.O_CREAT, 0o644)
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
        if mode == fcntl.LOCK_EX:
            self._enter_exclusive(began)
        else:
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

    def _enter_exclusive(self, began: float) -> None:
        """Wait for the data lock holding the gate, polling, except while some holder is in a slow stretch (and
        patience lasts): then the gate is let go for a moment, so other shared work can still enter."""
        while True:
            fcntl.flock(self._gate, fcntl.LOCK_EX)
            try:
                while not _try(self._data, fcntl.LOCK_EX):
                    patient = time.perf_counter() - began < PATIENCE_S
                    if patient and not _try(self._slow, fcntl.LOCK_EX, release=True):
                        break  # a slow stretch is on: yield the gate
                    time.sleep(POLL_S)
                else:
                    return
            finally:
                fcntl.flock(self._gate, fcntl.LOCK_UN)
            time.sleep(POLL_S)

    @contextlib.contextmanager
    def slow(self):
        """Inside a shared section: a stretch of mostly CPU work (torch.compile's compile) during which a waiting
        writer lets other shared work in rather than holding everyone at the gate until this stretch ends."""
        if self._held != fcntl.LOCK_SH:
            yield
            return
        fcntl.flock(self._slow, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(self._slow, fcntl.LOCK_UN)

    def shared(self):
        """Untimed GPU work: may overlap other processes' untimed GPU work, never their timing."""
        return self._section(fcntl.LOCK_SH)

    def exclusive(self):
        """Timing: the GPU to this process alone."""
        return self._section(fcntl.LOCK_EX)

    def close(self) -> None:
        for fd in (self._data, self._gate, self._slow):
            os.close(fd)


def _try(fd: int, mode: int, release: bool = False) -> bool:
    """flock without waiting; with `release`, only ask whether it could be taken."""
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    if release:
        fcntl.flock(fd, fcntl.LOCK_UN)
    return True


class NoLock:
    """One job per GPU: nothing to coordinate."""

    waited_s = 0.0

    def shared(self):
        return contextlib.nullcontext()

    def exclusive(self):
        return contextlib.nullcontext()

    def slow(self):
        return contextlib.nullcontext()

    def close(self) -> None:
        return None


def from_environment() -> GpuLock | NoLock:
    path = os.environ.get(ENV)
    return GpuLock(path) if path else NoLock()
