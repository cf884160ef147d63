"""The judge's trusted worker, started so that its helper processes import torch while it does.

Run as `python -m kfuse.judge.launch SPEC.json EVENTS.jsonl` with a one-line token on stdin. A process spends
seconds in `import torch` (2-5 s, more on a busy host); the worker needs the candidate's process (and, when it
times, the reference's timing process) only after its own import, the problem and the reference are loaded. So
this module, which imports nothing heavy, reads the token, starts those processes first, then imports the worker
(kfuse.judge.worker) and hands them over: the three imports overlap instead of following one another.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Spawned:
    """A kfuse.judge.sandbox process and the two pipes to it: requests go down, replies come up."""
    process: subprocess.Popen
    requests: object
    replies: object

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()


def spawn_sandbox() -> Spawned:
    down_read, down_write = os.pipe()
    up_read, up_write = os.pipe()
    process = subprocess.Popen(
        [sys.executable, "-m", "kfuse.judge.sandbox", str(down_read), str(up_write)],
        pass_fds=(down_read, up_write), stdin=subprocess.DEVNULL, close_fds=True)
    os.close(down_read)
    os.close(up_write)
    return Spawned(process, os.fdopen(down_write, "wb"), os.fdopen(up_read, "rb"))


def main(spec_path: str, events_path: str) -> int:
    token = sys.stdin.readline().strip()  # read before any other process starts: none of them can see it
    timing = bool(json.loads(Path(spec_path).read_text()).get("time"))
    early = [spawn_sandbox() for _ in range(2 if timing else 1)]
    try:
        from kfuse.judge import worker

        return worker.main(spec_path, events_path, token, early)
    finally:
        for spawned in early:  # those the worker did not take (it stopped before needing them)
            spawned.kill()


if __name__ == "__main__":
    code = main(sys.argv[1], sys.argv[2])
    # The outcome is written: exit without torch's teardown (about a second, more with a CUDA context), which a
    # bench would count against the judgement and the GPU memory it holds. The driver frees the memory either way.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
