"""The judge's trusted worker, with its helper processes forked from it after one `import torch`.

Run as `python -m kfuse.judge.launch SPEC.json EVENTS.jsonl` with a one-line token on stdin. A process spends
seconds in `import torch` (2-5 s of CPU, more on a busy host), and a judgement needs three processes: the trusted
worker, the candidate's process and, when it times, the reference's timing process (kfuse.judge.sandbox). Started
apart, each imported torch on its own; here torch and the judge's modules are imported once, then the two helpers
are forked (before this process runs any torch op or starts a thread, and before CUDA is touched: each child
initialises its own), then the worker runs here (kfuse.judge.worker).

What a forked helper gets of this process: its code and imported modules, nothing else. It is forked before the
token is read (the token never exists in its memory), its stdin is /dev/null, and every file descriptor but its own
two pipe ends, stdout and stderr is closed before it runs anything.

`serve` is the zygote of a run (kfuse.judge.zygote, its client): this module, torch's exporter and compiler front
end imported once, then each process the run asks for forked from it and set up as a process started for it would
be: a judgement's worker (`main` above, run as this module), an optimize, a build.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch  # noqa: F401 - imported once here, before the forks: the point of this module

from kfuse.judge import sandbox, worker, zygote


class ForkedProcess:
    """The parts of subprocess.Popen the worker uses, for a child made with os.fork."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)  # -N for a signal, as Popen's
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout)
            time.sleep(0.005)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@dataclass
class Spawned:
    """A helper process (kfuse.judge.sandbox's loop) and the two pipes to it: requests go down, replies come up."""
    process: ForkedProcess
    requests: object
    replies: object

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()


def fork_sandbox() -> Spawned:
    down_read, down_write = os.pipe()
    up_read, up_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            keep = {0, 1, 2, down_read, up_write}
            for fd in _open_fds():
                if fd not in keep:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            code = sandbox.main(down_read, up_write)
        except BaseException:  # noqa: BLE001 - the child never returns into the parent's code
            import traceback

            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(down_read)
    os.close(up_write)
    return Spawned(ForkedProcess(pid), os.fdopen(down_write, "wb"), os.fdopen(up_read, "rb"))


def _open_fds() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:  # no /proc: every descriptor up to the limit
        return list(range(3, os.sysconf("SC_OPEN_MAX")))


def main(spec_path: str, events_path: str) -> int:
    timing = bool(json.loads(Path(spec_path).read_text()).get("time"))
    early = [fork_sandbox() for _ in range(2 if timing else 1)]
    token = sys.stdin.readline().strip()  # read after the forks: no helper ever holds it
    try:
        return worker.main(spec_path, events_path, token, early)
    finally:
        for spawned in early:  # those the worker did not take (it stopped before needing them)
            spawned.kill()


def serve(path: str) -> None:
    """The zygote: fork a child for each request at `path`, until the process that started this one is gone.
    torch, its exporter and compiler front end and the judge's worker are imported before any fork (the processes
    asked for spend most of their start there), CUDA left untouched (each child initialises its own, with its own
    CUDA_VISIBLE_DEVICES); the socket is bound after them, so that callers wait rather than start their own."""
    import torch._dynamo  # noqa: F401 - 2-3 s more: optimize's capture (torch.export) and torch.compile's timing
    import torch.export  # noqa: F401

    if torch.cuda.is_initialized():  # a forked child could not use CUDA: callers start their own processes
        return
    parent = os.getppid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(path)
    except OSError:  # (a socket path over 107 bytes, under a long TMPDIR): no zygote, callers start their own
        return
    listener.listen(64)
    waiting: dict[int, socket.socket] = {}  # child pid -> the connection its exit code goes to
    while os.getppid() == parent:
        if select.select([listener], [], [], 0.05)[0]:
            connection = listener.accept()[0]
            try:
                request, fds = _receive(connection)
            except (OSError, ValueError):
                connection.close()
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                listener.close()
                for other in [connection, *waiting.values()]:
                    other.close()
                _become(request, fds)
            for fd in fds:
                os.close(fd)
            try:
                connection.sendall(f"{pid}\n".encode())
            except OSError:
                pass
            waiting[pid] = connection
        _reap(waiting)


def _receive(connection: socket.socket) -> tuple[dict, list[int]]:
    data, fds, _, _ = socket.recv_fds(connection, 1 << 16, 3)
    while not data.endswith(b"\n"):
        more = connection.recv(1 << 16)
        if not more:
            raise ValueError("request cut short")
        data += more
    if len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise ValueError("a request carries three descriptors")
    return json.loads(data), fds


def _reap(waiting: dict[int, socket.socket]) -> None:
    while waiting:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        connection = waiting.pop(pid, None)
        if connection is not None:
            try:
                connection.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
            except OSError:
                pass
            connection.close()


def _become(request: dict, fds: list[int]) -> None:
    """In the forked child: set up as `python ARGS` started by `popen` would be, run it, never return."""
    code = 1
    try:
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in set(fds) - {0, 1, 2}:
            os.close(fd)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        import ctypes

        libc = ctypes.CDLL(None)
        for name, option in zygote.MALLOPT.items():
            if name in os.environ:
                libc.mallopt(option, int(os.environ[name]))
        if request["nice"]:
            os.nice(request["nice"])
        if request["memory_cap"]:
            resource.setrlimit(resource.RLIMIT_AS, (request["memory_cap"], request["memory_cap"]))
        code = _run_python(request["args"])
    except BaseException:  # noqa: BLE001 - the child never returns into the zygote's loop
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _run_python(args: list[str]) -> int:
    """What the interpreter does with `-m MODULE ARGS...` or `-c CODE ARGS...`; the exit code."""
    import atexit
    import runpy
    import types

    kind, target, rest = args[0], args[1], args[2:]
    try:
        if kind == "-m":
            sys.argv = [target, *rest]  # (run_module puts the module's file first, as `python -m` does)
            sys.modules.pop(target, None)  # imported here already (the judge's launch): run afresh, as __main__
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        elif kind == "-c":
            sys.argv = ["-c", *rest]
            main = types.ModuleType("__main__")
            sys.modules["__main__"] = main
            exec(compile(target, "<string>", "exec"), main.__dict__)
        else:
            raise ValueError(f"the zygote runs `-m MODULE` or `-c CODE`, not {kind!r}")
        code = 0
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            code = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - as the interpreter: the traceback, exit code 1
        import traceback

        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()  # as the interpreter's exit would (temporary folders, flushed logs)
    return code


if __name__ == "__main__":
    code = main(sys.argv[1], sys.argv[2])
    # The outcome is written: exit without torch's teardown (about a second, more with a CUDA context), which a
    # bench would count against the judgement and the GPU memory it holds. The driver frees the memory either way.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
