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

Quiet timing (`KFUSE_GPU_QUIET`, `kfuse bench`'s default): the GPU to itself is not the host to itself. Eager
launches a network's hundreds of kernels from Python, so its time is CPU time, and seven other judges' builds and
torch.compile on the same cores slowed it 2-3x between runs (development set, H200, runs l-o: EfficientNet-B1's
eager 1.8-5.2 ms, kfuse's CUDA-graphed file 1.1-1.5), flattering every launch-bound speedup. So the sessions
that share a GPU register themselves (`<lock>.sessions/<pgid>`: each judge's worker, with its sandboxes and builds,
and the bench's optimize and build processes), and an exclusive section stops every other registered session
(SIGSTOP) until it ends (SIGCONT). A session is stopped only between its own GPU sections: the exclusive lock waits
for every shared holder first. If the timing process dies in between, the bench resumes the sessions it stopped
(`resume_orphaned`, after each job).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import time
from pathlib import Path

ENV = "KFUSE_GPU_LOCK"
SHARERS_ENV = "KFUSE_GPU_SHARERS"  # how many judges share the GPU (sizes the memory rule)
SOLE_ENV = "KFUSE_GPU_SOLE"        # set: this judge's untimed sections hold the GPU exclusively too (`sole`)
QUIET_ENV = "KFUSE_GPU_QUIET"      # set: timing stops the other registered sessions (quiet timing, above)


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
        self.quiet = bool(os.environ.get(QUIET_ENV))
        self._registered = register_session(self.path) if self.quiet else None

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

    @contextlib.contextmanager
    def exclusive(self):
        """Timing: the GPU to this process alone (and, quiet, the host's cores to its session)."""
        outermost = self._held is None
        with self._section(fcntl.LOCK_EX):
            stopped = stop_others(self.path) if self.quiet and outermost else []
            try:
                yield
            finally:
                resume(self.path, stopped)

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
        if self._registered is not None:
            self._registered.unlink(missing_ok=True)
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


# ------------------------------------------------------------------------------------------------ quiet timing

def sessions_folder(lock_path: str | os.PathLike) -> Path:
    path = Path(lock_path)
    return path.with_name(path.name + ".sessions")


def started_at(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat, field 22), or None if it is gone (or a
    zombie, or there is no /proc: quiet timing is then off): with the pid it names one process for good, where a
    pid alone may be reused."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()  # after the name, which may hold spaces
    except (OSError, IndexError):
        return None
    return None if fields[0] in "ZX" else fields[19]


def register_session(lock_path: str | os.PathLike, pgid: int | None = None) -> Path | None:
    """Mark the session led by `pgid` (default: this process's, if it leads one) as one to stop while a sharer of
    the GPU times. Only a group leader's group: a process in someone else's group (a test, a shell) is left out."""
    pgid = os.getpgrp() if pgid is None else pgid
    if pgid == os.getpgrp() and pgid != os.getpid():
        return None
    began = started_at(pgid)
    if began is None:
        return None
    folder = sessions_folder(lock_path)
    folder.mkdir(parents=True, exist_ok=True)
    entry = folder / str(pgid)
    with contextlib.suppress(OSError):
        if entry.read_text() == began:
            return None  # registered already (the bench registers its optimize processes): not this caller's to remove
    partial = entry.with_name(f".{pgid}.{os.getpid()}")  # whole or not at all for a reader (_live_sessions)
    partial.write_text(began)
    partial.replace(entry)
    return entry


def unregister_session(lock_path: str | os.PathLike, pgid: int) -> None:
    (sessions_folder(lock_path) / str(pgid)).unlink(missing_ok=True)


def _live_sessions(folder: Path) -> list[int]:
    """The registered sessions whose leader is still the process that registered (stale entries removed)."""
    live = []
    for entry in folder.glob("[0-9]*"):
        try:
            pgid, began = int(entry.name), entry.read_text()
        except (OSError, ValueError):
            continue
        if started_at(pgid) == began:
            live.append(pgid)
        elif began:  # (the leader is gone, or the pid is another process's now)
            entry.unlink(missing_ok=True)
    return live


def stop_others(lock_path: str | os.PathLike) -> list[int]:
    """SIGSTOP every registered session but this process's own; returns those signalled. They are written to
    `.stopped` first (with this process's pid and start time), so that `resume_orphaned` finds them whenever this
    process dies."""
    folder = sessions_folder(lock_path)
    if not folder.is_dir():
        return []
    own = os.getpgrp()
    others = [pgid for pgid in _live_sessions(folder) if pgid != own]
    if not others:
        return []
    (folder / ".stopped").write_text(json.dumps({"by": os.getpid(), "began": started_at(os.getpid()),
                                                  "sessions": others}))
    for pgid in others:
        try:
            os.killpg(pgid, signal.SIGSTOP)
        except (ProcessLookupError, PermissionError):
            pass
    return others


def resume(lock_path: str | os.PathLike, stopped: list[int]) -> None:
    for pgid in stopped:
        try:
            os.killpg(pgid, signal.SIGCONT)
        except (ProcessLookupError, PermissionError):
            pass
    if stopped:
        (sessions_folder(lock_path) / ".stopped").unlink(missing_ok=True)


def resume_orphaned(lock_path: str | os.PathLike) -> bool:
    """Resume the sessions a timing process stopped, if it is gone without resuming them (killed at its job's time
    limit). True if it did."""
    marker = sessions_folder(lock_path) / ".stopped"
    try:
        record = json.loads(marker.read_text())
    except (OSError, ValueError):
        return False
    if record.get("began") and started_at(record["by"]) == record["began"]:
        return False  # still timing: it resumes them itself
    resume(lock_path, record.get("sessions", []))
    return True


def from_environment() -> GpuLock | NoLock:
    path = os.environ.get(ENV)
    return GpuLock(path, sole=bool(os.environ.get(SOLE_ENV))) if path else NoLock()
