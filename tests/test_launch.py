"""The judge's helpers are forked from the worker's process (kfuse.judge.launch): what a forked helper holds."""

import json
import os
import subprocess
import time

from kfuse.judge import launch


def _open_now() -> list[int]:
    listed = [int(fd) for fd in os.listdir("/proc/self/fd")]  # (the listing's own descriptor is closed after it)
    return sorted(fd for fd in listed if os.path.exists(f"/proc/self/fd/{fd}"))


def test_a_forked_helper_holds_only_its_pipes_and_not_the_parent_s_stdin(monkeypatch, tmp_path):
    def report(read_fd: int, write_fd: int) -> int:  # runs in the child in place of the sandbox's loop
        with os.fdopen(write_fd, "w") as out:
            json.dump({"open": _open_now(), "stdin": os.readlink("/proc/self/fd/0"), "own": [read_fd, write_fd]}, out)
        return 7

    monkeypatch.setattr(launch.sandbox, "main", report)
    with open(tmp_path / "secret", "w"):  # a descriptor the parent holds while it forks: the child must not
        spawned = launch.fork_sandbox()
        seen = json.loads(spawned.replies.read())
    assert spawned.process.wait(timeout=30) == 7
    assert seen["open"] == sorted({0, 1, 2, *seen["own"]}), seen
    assert seen["stdin"] == os.devnull


def test_a_killed_helper_reports_its_signal_as_popen_does(monkeypatch):
    monkeypatch.setattr(launch.sandbox, "main", lambda read_fd, write_fd: time.sleep(60) or 0)
    spawned = launch.fork_sandbox()
    spawned.process.kill()
    assert spawned.process.wait(timeout=30) == -9


def test_a_process_forked_by_the_zygote_runs_where_and_as_the_caller_says(tmp_path, monkeypatch):
    """The session's zygote (tests/conftest.py) forks `python -m`/`-c` children with the caller's working directory,
    environment, streams and niceness, in sessions of their own; their exit codes come back over the connection."""
    from kfuse.judge import zygote

    monkeypatch.chdir(tmp_path)
    code = ("import os, sys; print(os.getcwd(), os.environ['PROBE'], os.getsid(0) == os.getpid(), os.nice(0), "
            "sys.argv[1:], sys.stdin.readline().strip()); sys.exit(3)")
    with open(tmp_path / "out", "w") as out:
        child = zygote.popen(["-c", code, "a", "b"], env={**os.environ, "PROBE": "yes"}, stdin=subprocess.PIPE,
                             stdout=out, stderr=subprocess.STDOUT, nice=5)
        assert isinstance(child, zygote.ZygoteChild)  # not a process of its own
        child.stdin.write(b"token\n")
        child.stdin.close()
        assert child.wait(timeout=120) == 3
    assert (tmp_path / "out").read_text().split() == [str(tmp_path), "yes", "True", str(os.nice(0) + 5), "['a',",
                                                        "'b']", "token"]
    # the judge's worker as a module: a spec without a device makes it fail at once, its traceback in the log
    (tmp_path / "spec.json").write_text(json.dumps({"time": False}))
    with open(tmp_path / "log", "w") as log:
        child = zygote.popen(["-m", "kfuse.judge.launch", "spec.json", "events"], env=dict(os.environ),
                             stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT)
        child.stdin.write(b"token\n")
        child.stdin.close()
        assert child.wait(timeout=120) == 1
    assert "KeyError: 'device'" in (tmp_path / "log").read_text()
    killed = zygote.popen(["-c", "import time; time.sleep(60)"], env=dict(os.environ), stdout=subprocess.DEVNULL)
    killed.kill()
    assert killed.wait(timeout=60) == -9


def test_without_a_zygote_the_caller_starts_the_process(tmp_path, monkeypatch):
    from kfuse.judge import zygote

    monkeypatch.setenv(zygote.ZYGOTE_ENV, str(tmp_path / "nothing" / "socket"))  # no socket, no zygote's pid
    child = zygote.popen(["-c", "import sys; sys.exit(4)"], env=dict(os.environ), stdout=subprocess.DEVNULL)
    assert isinstance(child, subprocess.Popen) and child.wait(timeout=120) == 4
