"""A process that imports torch and the judge once, then forks each judgement's worker from itself.

A judgement's worker is started as `python -m kfuse.judge.launch` (kfuse.judge.verdict.run_worker), and `import
torch` costs it 2-5 s of CPU before any judging. A run of many judgements on a small machine pays that each time:
the test suite judges about a hundred candidates on two cores. With KFUSE_JUDGE_ZYGOTE naming the socket a zygote
serves (`serving`, around a bench or a tune; the zygote's loop is kfuse.judge.launch.serve), run_worker asks it
instead (`start_worker`), and it forks a child that becomes the worker as launch's process would: a session of its
own, the caller's environment and working directory, its log file as stdout and stderr, the token pipe as stdin,
the CPU judge's memory cap and heap settings. The child then runs kfuse.judge.launch.main, which forks the helpers
and runs the worker, as before.

The zygote runs no torch op and starts no thread, so every fork comes from a process as clean as launch's own
before its forks. It never sees a token: that goes down the pipe the caller writes after the fork. A zygote
stops when the process that started it goes away.

Protocol, one connection per worker: the caller sends one JSON line (argv, environment, working directory, memory
cap) with two descriptors attached (the token pipe's read end, the log); the zygote answers the child's pid on one
line and, once the child has exited, its exit code (negative: killed by that signal) on another.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ZYGOTE_ENV = "KFUSE_JUDGE_ZYGOTE"  # the socket of the zygote serving this process's judgements, if one does
# glibc reads these once, at a process's start: a forked worker applies them itself (mallopt's numbers for them)
MALLOPT = {"MALLOC_MMAP_THRESHOLD_": -3, "MALLOC_TRIM_THRESHOLD_": -1}


class ZygoteChild:
    """The parts of subprocess.Popen run_worker uses, for a worker the zygote forked (not this process's child:
    its exit code comes over the connection)."""

    def __init__(self, connection: socket.socket, pid: int, stdin):
        self.connection, self.pid, self.stdin = connection, pid, stdin
        self.returncode: int | None = None
        self._pending = b""

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self.connection], [], [], 0)[0]:
            self._read()
        return self.returncode

    def _read(self) -> None:
        chunk = self.connection.recv(64)
        if not chunk:  # the zygote went away: the worker cannot be waited for any more
            self.returncode = -9
        self._pending += chunk
        if b"\n" in self._pending:
            self.returncode = int(self._pending.split(b"\n")[0])
        if self.returncode is not None:
            self.connection.close()

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout)
            if select.select([self.connection], [], [], left)[0]:
                self._read()
        return self.returncode


def start_worker(path: str, argv: list[str], env: dict, log_fd: int, memory_cap: int | None) -> ZygoteChild | None:
    """The worker forked by the zygote at `path`, or None where none answers there (the caller starts one itself)."""
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    token_read, token_write = os.pipe()
    try:
        connection.connect(path)
        request = {"argv": argv, "env": env, "cwd": os.getcwd(), "memory_cap": memory_cap}
        socket.send_fds(connection, [json.dumps(request).encode() + b"\n"], [token_read, log_fd])
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = connection.recv(1)
            if not chunk:
                raise OSError("the zygote closed the connection")
            answer += chunk
        pid = int(answer)
    except (OSError, ValueError):
        connection.close()
        os.close(token_write)
        return None
    finally:
        os.close(token_read)
    return ZygoteChild(connection, pid, os.fdopen(token_write, "wb"))


@contextlib.contextmanager
def serving():
    """A zygote for the judgements of this process and its children while the block runs (ZYGOTE_ENV names its
    socket); none where one serves already. It takes a few seconds to import torch: a judgement meanwhile finds no
    socket, and starts its worker itself."""
    if os.environ.get(ZYGOTE_ENV):
        yield
        return
    folder = Path(tempfile.mkdtemp(prefix="kfuse-zygote-"))
    serve_at = "import sys; from kfuse.judge.launch import serve; serve(sys.argv[1])"
    process = subprocess.Popen([sys.executable, "-c", serve_at, str(folder / "socket")], stdin=subprocess.DEVNULL)
    os.environ[ZYGOTE_ENV] = str(folder / "socket")
    try:
        yield
    finally:
        os.environ.pop(ZYGOTE_ENV, None)
        process.kill()
        process.wait()
        shutil.rmtree(folder, ignore_errors=True)
