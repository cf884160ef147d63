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


def test_a_worker_forked_by_the_zygote_runs_in_the_caller_s_folder_and_reports_its_exit(tmp_path, monkeypatch):
    """The session's zygote (tests/conftest.py) forks launch's main with the caller's working directory and log;
    its exit code comes back over the connection. A spec without a device makes the worker fail at once."""
    from kfuse.judge.zygote import ZYGOTE_ENV, start_worker

    (tmp_path / "spec.json").write_text(json.dumps({"time": False}))
    monkeypatch.chdir(tmp_path)
    deadline = time.monotonic() + 60
    with open(tmp_path / "log", "w") as log:
        while (child := start_worker(os.environ[ZYGOTE_ENV], ["spec.json", "events"], dict(os.environ),
                                     log.fileno(), None)) is None:
            assert time.monotonic() < deadline, "the zygote never answered"
            time.sleep(0.5)  # still importing torch
        child.stdin.write(b"token\n")
        child.stdin.close()
        assert child.wait(timeout=60) == 1
    assert "KeyError: 'device'" in (tmp_path / "log").read_text()


def test_no_zygote_at_the_path_means_the_caller_starts_the_worker(tmp_path):
    from kfuse.judge.zygote import start_worker

    assert start_worker(str(tmp_path / "nothing"), ["a", "b"], {}, 2, None) is None
