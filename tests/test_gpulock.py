"""The lock that lets several judges share a GPU: timing excludes everything, untimed work overlaps."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kfuse import gpulock
from kfuse.gpulock import GpuLock, NoLock, from_environment

HOLDER = """
import sys, time
from kfuse.gpulock import GpuLock
path, mode, seconds, log = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
lock = GpuLock(path, sole=mode == "sole")
with (lock.shared() if mode == "sole" else getattr(lock, mode)()):
    open(log, "a").write(f"{mode} in {time.monotonic()}\\n")
    time.sleep(seconds)
    open(log, "a").write(f"{mode} out {time.monotonic()}\\n")
"""


def start(path: Path, mode: str, seconds: float, log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", HOLDER, str(path), mode, str(seconds), str(log)],
                            cwd=Path(__file__).parent.parent)


def wait_for_line(log: Path, count: int) -> None:
    deadline = time.monotonic() + 60
    while (not log.exists() or len(log.read_text().splitlines()) < count) and time.monotonic() < deadline:
        time.sleep(0.02)


def order(log: Path) -> list[tuple[str, str]]:
    events = [line.split() for line in log.read_text().splitlines()]
    return [(mode, what) for mode, what, _ in sorted(events, key=lambda e: float(e[2]))]


def test_shared_sections_overlap(tmp_path):
    log, path = tmp_path / "log", tmp_path / "gpu0.lock"
    procs = [start(path, "shared", 1.5, log) for _ in range(2)]
    for p in procs:
        assert p.wait(60) == 0
    assert order(log) == [("shared", "in"), ("shared", "in"), ("shared", "out"), ("shared", "out")]


def test_exclusive_waits_for_shared_and_blocks_new_shared(tmp_path):
    log, path = tmp_path / "log", tmp_path / "gpu0.lock"
    procs = [start(path, "shared", 1.5, log)]
    wait_for_line(log, 1)
    procs.append(start(path, "exclusive", 0.5, log))
    time.sleep(0.8)  # the writer now waits at the data lock, holding the gate
    procs.append(start(path, "shared", 0.1, log))
    for p in procs:
        assert p.wait(60) == 0
    # the writer runs alone, after the first reader left and before the late reader (no starvation)
    assert order(log) == [("shared", "in"), ("shared", "out"), ("exclusive", "in"), ("exclusive", "out"),
                          ("shared", "in"), ("shared", "out")]


def test_big_sections_overlap_small_ones_but_not_each_other(tmp_path):
    """A judge whose problem is too big for two copies shares the GPU with small judges, one big judge at a time."""
    log, path = tmp_path / "log", tmp_path / "gpu0.lock"
    procs = [start(path, "big", 1.5, log)]
    wait_for_line(log, 1)
    procs += [start(path, "shared", 0.3, log), start(path, "big", 0.3, log)]
    for p in procs:
        assert p.wait(60) == 0
    assert order(log) == [("big", "in"), ("shared", "in"), ("shared", "out"), ("big", "out"), ("big", "in"),
                          ("big", "out")]


def test_a_sole_judge_s_untimed_sections_overlap_no_one(tmp_path):
    """A judge run again after it ran out of GPU memory beside the others (KFUSE_GPU_SOLE): its untimed sections
    wait for the others' and keep new ones out, as timing does."""
    log, path = tmp_path / "log", tmp_path / "gpu0.lock"
    procs = [start(path, "shared", 1.5, log)]
    wait_for_line(log, 1)
    procs.append(start(path, "sole", 0.5, log))
    time.sleep(0.8)
    procs.append(start(path, "shared", 0.1, log))
    for p in procs:
        assert p.wait(60) == 0
    assert order(log) == [("shared", "in"), ("shared", "out"), ("sole", "in"), ("sole", "out"),
                          ("shared", "in"), ("shared", "out")]


def test_sections_nest_and_no_lock_without_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("KFUSE_GPU_LOCK", raising=False)
    assert isinstance(from_environment(), NoLock)
    monkeypatch.setenv("KFUSE_GPU_LOCK", str(tmp_path / "locks" / "gpu0.lock"))
    lock = from_environment()
    assert isinstance(lock, GpuLock) and not lock.sole
    with lock.exclusive():
        with lock.exclusive():  # nested sections reuse what the outer one holds
            pass
    with lock.big():
        with lock.big():  # (a big section nested in another: the outer one holds the lock)
            pass
    with lock.shared(), pytest.raises(RuntimeError):
        with lock.exclusive():
            pass
    lock.close()
    monkeypatch.setenv("KFUSE_GPU_SOLE", "1")
    sole = from_environment()
    assert sole.sole
    with sole.big(), sole.shared(), sole.exclusive():  # every section of a sole judge holds the GPU exclusively
        pass
    sole.close()


def test_the_planners_gpu_probes_take_the_judges_lock(monkeypatch):
    """kfuse.kernels.eager_precision's probes run on the GPU at plan time, beside other judges under `kfuse bench
    --per-gpu N`: their work in a shared section (never inside another judge's timed rounds), the layout probe's own
    timing in an exclusive one; the lock's files closed after each."""
    import contextlib

    from kfuse.kernels import eager_precision

    taken = []

    class Recorder:
        def shared(self):
            taken.append("shared")
            return contextlib.nullcontext()

        def exclusive(self):
            taken.append("exclusive")
            return contextlib.nullcontext()

        def close(self):
            taken.append("closed")

    monkeypatch.setattr(eager_precision.gpulock, "from_environment", Recorder)
    assert eager_precision._gpu_section()(lambda x: x + 1)(1) == 2 and taken == ["shared", "closed"]
    taken.clear()
    assert eager_precision._gpu_section(exclusive=True)(lambda: "timed")() == "timed"
    assert taken == ["exclusive", "closed"]
    # every probe that touches the GPU goes through it (under its lru_cache where it has one)
    for probe in (eager_precision._differs, eager_precision._matching_rounding, eager_precision._recurrent_probe):
        assert probe.__wrapped__.gpu_section == "shared", probe
    assert eager_precision._layout_medians.gpu_section == "exclusive"


# ------------------------------------------------------------------------------------------------ quiet timing

TICKER = "import time\nwhile True:\n    time.sleep(0.01)\n"


def state(pid: int) -> str:
    """R, S, T (stopped), Z... from /proc/PID/stat."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def wait_for_state(pid: int, wanted: str, seconds: float = 10) -> str:
    deadline = time.monotonic() + seconds
    while (now := state(pid)) != wanted and time.monotonic() < deadline:
        time.sleep(0.01)
    return now


@pytest.fixture
def other_session():
    """A process in a session of its own, as each judge's worker and each build of `kfuse bench` runs."""
    process = subprocess.Popen([sys.executable, "-c", TICKER], start_new_session=True)
    yield process
    process.kill()
    process.wait()


needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="quiet timing reads /proc")


@needs_proc
def test_quiet_timing_stops_the_other_sessions_while_it_times(monkeypatch, tmp_path, other_session):
    """Under `kfuse bench --per-gpu N` (quiet timing), an exclusive section stops every other registered session
    (SIGSTOP) and resumes it at its end; shared sections stop no one, nor do sessions that were never registered."""
    path = tmp_path / "gpu0.lock"
    monkeypatch.setenv("KFUSE_GPU_QUIET", "1")
    lock = GpuLock(path)
    with lock.exclusive():  # nobody registered yet: nothing to stop
        assert state(other_session.pid) != "T"
    entry = gpulock.register_session(path, other_session.pid)
    assert entry is not None and entry.read_text() == gpulock.started_at(other_session.pid)
    with lock.shared():
        assert state(other_session.pid) != "T"
    with lock.exclusive():
        assert wait_for_state(other_session.pid, "T") == "T"
        with lock.exclusive():  # nested: the outer section resumes, not this one
            pass
        assert state(other_session.pid) == "T"
    assert wait_for_state(other_session.pid, "S") != "T"
    assert not (gpulock.sessions_folder(path) / ".stopped").exists()
    monkeypatch.delenv("KFUSE_GPU_QUIET")
    busy = GpuLock(path)  # --busy-timing: the lock alone
    with busy.exclusive():
        assert state(other_session.pid) != "T"
    busy.close()
    lock.close()


@needs_proc
def test_a_timing_process_killed_mid_section_leaves_sessions_the_bench_resumes(tmp_path, other_session):
    path = tmp_path / "gpu0.lock"
    gpulock.register_session(path, other_session.pid)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), "exclusive", "60", str(tmp_path / "log")],
                              cwd=Path(__file__).parent.parent, start_new_session=True,
                              env={**os.environ, "KFUSE_GPU_QUIET": "1"})
    try:
        wait_for_line(tmp_path / "log", 1)
        assert wait_for_state(other_session.pid, "T") == "T"
        assert not gpulock.resume_orphaned(path)  # the timer is alive: it resumes them itself
        assert state(other_session.pid) == "T"
    finally:
        holder.kill()
        holder.wait()
    assert gpulock.resume_orphaned(path)
    assert wait_for_state(other_session.pid, "S") != "T"
    assert not gpulock.resume_orphaned(path)  # (done once)


@needs_proc
def test_only_session_leaders_register_and_dead_ones_drop_out(tmp_path):
    path = tmp_path / "gpu0.lock"
    follower = subprocess.Popen([sys.executable, "-c", "import os, sys; from kfuse import gpulock; "
                                 "print(gpulock.register_session(sys.argv[1]))", str(path)],
                                cwd=Path(__file__).parent.parent, stdout=subprocess.PIPE, text=True)
    assert follower.communicate(timeout=60)[0].strip() == "None"  # in the test's process group: not its to stop
    gone = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    gone.wait()
    (gpulock.sessions_folder(path)).mkdir(parents=True, exist_ok=True)
    (gpulock.sessions_folder(path) / str(gone.pid)).write_text("12345")  # a session that ended (or a reused pid)
    assert gpulock.stop_others(path) == []
    assert not (gpulock.sessions_folder(path) / str(gone.pid)).exists()


STRESSED = """
import os, sys, time
from pathlib import Path
from kfuse.gpulock import GpuLock
path, me, folder, seconds = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), float(sys.argv[4])
lock, count, end, problems = GpuLock(path), 0, time.monotonic() + seconds, []
def counts():
    return {p.name: p.read_text() for p in folder.glob("count*")}
while time.monotonic() < end:
    with lock.shared():
        count += 1
    (folder / f"count{me}").write_text(str(count))  # CPU work between sections: what quiet timing stops
    if count % 50 == me:
        with lock.exclusive():
            before = counts()
            time.sleep(0.05)
            if counts() != before:
                problems.append((before, counts()))
print(len(problems), count)
"""


@needs_proc
def test_quiet_timing_under_load_stops_every_neighbour_and_never_deadlocks(tmp_path):
    """Three judges in sessions of their own, each looping over shared sections and CPU work with an exclusive
    section now and then: inside every exclusive section no neighbour makes progress, and all finish."""
    path = tmp_path / "gpu0.lock"
    env = {**os.environ, "KFUSE_GPU_QUIET": "1"}
    judges = [subprocess.Popen([sys.executable, "-c", STRESSED, str(path), str(me), str(tmp_path), "3"],
                               cwd=Path(__file__).parent.parent, start_new_session=True, env=env,
                               stdout=subprocess.PIPE, text=True) for me in range(3)]
    results = [judge.communicate(timeout=60)[0].split() for judge in judges]
    assert all(judge.returncode == 0 for judge in judges)
    assert all(problems == "0" and int(count) > 50 for problems, count in results), results
