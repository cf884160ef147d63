"""A process that imports torch once, then forks the run's Python processes from itself.

A judgement's worker (`python -m kfuse.judge.launch`), an optimize (`python -m kfuse optimize`) and a build (a
fresh process importing the emitted file) each spend 2-5 s of CPU in `import torch` before doing anything. A run of
many on a small machine pays that each time: the test suite starts about a hundred such processes on two cores,
a bench three per problem. With ZYGOTE_ENV naming the socket of a zygote (`serving`, around a bench, a tune or the
tests), `popen` asks it instead, and it forks a child that becomes the process asked for, set up as
`subprocess.Popen([python, *args], start_new_session=True)` would have started it: a session of its own, the
caller's environment, working directory and standard streams, the CPU judge's memory cap and heap settings, the
niceness asked for. The child then runs `python ARGS` (`-m MODULE ...` or `-c CODE ...`) as the interpreter would.
Where no zygote serves, `popen` starts the process itself.

The zygote (kfuse.judge.launch.serve) runs no torch op and starts no thread, so every fork comes from a process
as clean as a fresh interpreter after its imports. It never sees what flows through the streams it hands on (a
judge's token goes down a pipe after the fork), and stops when the process that started it goes away.

Protocol, one connection per process: the caller sends one JSON line (args, environment, working directory,
memory cap, niceness) with three descriptors attached (the child's stdin, stdout and stderr); the zygote answers
the child's pid on one line and, once the child has exited, its exit code (negative: killed by that signal) on
another.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ZYGOTE_ENV = "KFUSE_JUDGE_ZYGOTE"  # the socket of the zygote serving this process and its children, if one does
# glibc reads these once, at a process's start: a forked child applies them itself (mallopt's numbers for them)
MALLOPT = {"MALLOC_MMAP_THRESHOLD_": -3, "MALLOC_TRIM_THRESHOLD_": -1}
STARTING_S = 180.0  # how long a caller waits for a zygote still importing torch (its pid alive, no socket yet)


class ZygoteChild:
    """The parts of subprocess.Popen the callers use, for a process the zygote forked (not this process's child:
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
        if not chunk:  # the zygote went away: the child cannot be waited for any more
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

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


def popen(args: list[str], *, env: dict, stdin=None, stdout=None, stderr=None, memory_cap: int | None = None,
          nice: int = 0):
    """`python ARGS` (args: `-m MODULE ...` or `-c CODE ...`) in a session of its own: forked by the zygote serving
    this process, else a subprocess.Popen. stdin: None (this process's), subprocess.DEVNULL or PIPE (the child's
    .stdin is then the writing end), or a file; stdout and stderr: None, DEVNULL or a file, stderr also STDOUT.
    memory_cap: the child's RLIMIT_AS in bytes; nice: added to its niceness."""
    path = os.environ.get(ZYGOTE_ENV)
    child = _forked(path, args, env, (stdin, stdout, stderr), memory_cap, nice) if path else None
    if child is not None:
        return child
    limit = (lambda: resource.setrlimit(resource.RLIMIT_AS, (memory_cap, memory_cap))) if memory_cap else None
    prefix = ["nice", "-n", str(nice)] if nice and shutil.which("nice") else []
    return subprocess.Popen([*prefix, sys.executable, *args], stdin=stdin, stdout=stdout, stderr=stderr, env=env,
                            start_new_session=True, preexec_fn=limit)


def _forked(path: str, args: list[str], env: dict, streams: tuple, memory_cap: int | None,
            nice: int) -> ZygoteChild | None:
    """The child forked by the zygote at `path`, or None where none answers there."""
    if not _wait_for_socket(path):
        return None
    opened: list[int] = []  # descriptors made here for the request, closed once sent

    def descriptor(stream, own: int) -> int:
        if stream is None:
            return own
        if stream == subprocess.DEVNULL:
            opened.append(os.open(os.devnull, os.O_RDWR))
            return opened[-1]
        return stream if isinstance(stream, int) else stream.fileno()

    stdin, stdout, stderr = streams
    writer = None
    if stdin == subprocess.PIPE:
        read_end, write_end = os.pipe()
        opened.append(read_end)
        writer = os.fdopen(write_end, "wb")
        fds = [read_end]
    else:
        fds = [descriptor(stdin, 0)]
    fds.append(descriptor(stdout, 1))
    fds.append(fds[1] if stderr == subprocess.STDOUT else descriptor(stderr, 2))
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(path)
        request = {"args": args, "env": env, "cwd": os.getcwd(), "memory_cap": memory_cap, "nice": nice}
        socket.send_fds(connection, [json.dumps(request).encode() + b"\n"], fds)
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = connection.recv(1)
            if not chunk:
                raise OSError("the zygote closed the connection")
            answer += chunk
        pid = int(answer)
    except (OSError, ValueError):
        connection.close()
        if writer is not None:
            writer.close()
        return None
    finally:
        for fd in opened:
            os.close(fd)
    return ZygoteChild(connection, pid, writer)


def _wait_for_socket(path: str) -> bool:
    """The zygote's socket is there, or appears while the zygote that will bind it is alive (importing torch)."""
    deadline = time.monotonic() + STARTING_S
    while not os.path.exists(path):
        try:
            os.kill(int((Path(path).parent / "pid").read_text()), 0)
        except (OSError, ValueError):
            return False  # no zygote there, or it has gone (it could not bind: callers start their own processes)
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@contextlib.contextmanager
def serving():
    """A zygote for the processes of this process and its children while the block runs (ZYGOTE_ENV names its
    socket); none where one serves already. It takes a few seconds to import torch: callers meanwhile wait for it."""
    if os.environ.get(ZYGOTE_ENV):
        yield
        return
    folder = Path(tempfile.mkdtemp(prefix="kfuse-zygote-"))
    serve_at = "import sys; from kfuse.judge.launch import serve; serve(sys.argv[1])"
    process = subprocess.Popen([sys.executable, "-c", serve_at, str(folder / "socket")], stdin=subprocess.DEVNULL)
    (folder / "pid").write_text(str(process.pid))
    os.environ[ZYGOTE_ENV] = str(folder / "socket")
    try:
        yield
    finally:
        os.environ.pop(ZYGOTE_ENV, None)
        process.kill()
        process.wait()
        shutil.rmtree(folder, ignore_errors=True)
