"""The judge's helpers are forked from the worker's process (kfuse.judge.launch): what a forked helper holds."""

import json
import os
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
