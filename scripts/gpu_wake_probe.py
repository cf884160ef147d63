"""Why does a call timed in a second process cost more than the same call timed in one? Ways of waiting, compared.

    PYTHONPATH=. python scripts/gpu_wake_probe.py

The parent times an op itself and asks a child process (over kfuse.judge.wire pipes, like the judge) to time the same
op, in interleaved rounds, with the judge's time_one_call (L2 flush, CUDA events, device sync). Variants: how each
side waits for the other's message (a blocking read, or spinning on select) and whether each process is pinned
to one CPU core. If the child's median matches the parent's, that way of waiting removes the bias.
"""

import os
import select
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kfuse.judge import wire  # noqa: E402
from kfuse.problem import L2Flush, time_one_call  # noqa: E402

OPS = {
    "relu_4096x131072": (lambda x: torch.relu(x), lambda: [torch.randn(4096, 131072, device="cuda")]),
    "add_1x128": (lambda a, b: a + b, lambda: [torch.rand(1, 128, device="cuda"), torch.rand(1, 128, device="cuda")]),
}


def wait(stream, spin: bool) -> None:
    if spin:
        fd = stream.fileno()
        while not select.select([fd], [], [], 0)[0]:
            pass


def child(read_fd: int, write_fd: int) -> None:
    incoming, outgoing = os.fdopen(read_fd, "rb"), os.fdopen(write_fd, "wb")
    flush = L2Flush(torch.device("cuda"))
    spin, op, inputs = False, None, None
    while True:
        wait(incoming, spin)
        try:
            request = wire.receive(incoming)
        except wire.PeerGone:
            return
        if request["command"] == "setup":
            spin = request["spin"]
            if request["pin"]:
                os.sched_setaffinity(0, {request["pin"]})
            else:
                os.sched_setaffinity(0, range(os.cpu_count()))
            fn, make = OPS[request["op"]]
            inputs = make()
            op = fn
            for _ in range(5):
                op(*inputs)
            torch.cuda.synchronize()
            wire.send(outgoing, {})
        else:
            torch.cuda.synchronize()
            ms, _ = time_one_call(lambda: op(*inputs), torch.device("cuda"), flush)
            wire.send(outgoing, {"ms": ms})


def main() -> None:
    if len(sys.argv) == 3:
        child(int(sys.argv[1]), int(sys.argv[2]))
        return
    down_r, down_w = os.pipe()
    up_r, up_w = os.pipe()
    proc = subprocess.Popen([sys.executable, __file__, str(down_r), str(up_w)], pass_fds=(down_r, up_w))
    os.close(down_r)
    os.close(up_w)
    requests, replies = os.fdopen(down_w, "wb"), os.fdopen(up_r, "rb")
    flush = L2Flush(torch.device("cuda"))
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, {os.cpu_count()} CPUs; medians of 80 "
          f"interleaved rounds, ms (min in brackets)")
    for op_name, (fn, make) in OPS.items():
        inputs = make()
        for spin in (False, True):
            for pin in (False, True):
                os.sched_setaffinity(0, {2} if pin else range(os.cpu_count()))
                wire.send(requests, {"command": "setup", "op": op_name, "spin": spin, "pin": 5 if pin else 0})
                wire.receive(replies)
                for _ in range(5):
                    fn(*inputs)
                local, remote = [], []
                for round_ in range(80):
                    for side in ((0, 1) if round_ % 2 else (1, 0)):
                        if side == 0:
                            torch.cuda.synchronize()
                            local.append(time_one_call(lambda: fn(*inputs), torch.device("cuda"), flush)[0])
                        else:
                            wire.send(requests, {"command": "time"})
                            wait(replies, spin)
                            remote.append(wire.receive(replies)["ms"])
                m_l, m_r = statistics.median(local), statistics.median(remote)
                print(f"{op_name:18s} spin={spin!s:5s} pin={pin!s:5s} same process {m_l:.4f} ({min(local):.4f})  "
                      f"other process {m_r:.4f} ({min(remote):.4f})  diff {1e3 * (m_r - m_l):+.1f} us", flush=True)
        # the same op, back to back in this process, nobody waiting: the reference point
        samples = []
        for _ in range(80):
            torch.cuda.synchronize()
            samples.append(time_one_call(lambda: fn(*inputs), torch.device("cuda"), flush)[0])
        print(f"{op_name:18s} alone: {statistics.median(samples):.4f}", flush=True)
    requests.close()
    proc.wait(timeout=30)
    time.sleep(0)


if __name__ == "__main__":
    main()
