"""Which layout and precision cuDNN is fastest at for a convolution, and what the layout changes cost.

    PYTHONPATH=. python scripts/gpu_conv_layouts.py [--batch 128 --cin 8 --cout 64 --size 128 --kernel 3]

Medians of CUDA-event timings with an L2 flush before each call (ms); max abs error against float64.
"""

from __future__ import annotations

import argparse
import statistics

import torch
import torch.nn.functional as F


def timed(fn, trials: int = 30) -> float:
    flush = torch.empty(64 << 20, device="cuda")
    for _ in range(3):
        fn()
    times = []
    for _ in range(trials):
        flush.fill_(1.0)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--cin", type=int, default=8)
    parser.add_argument("--cout", type=int, default=64)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--kernel", type=int, default=3)
    a = parser.parse_args()
    x = torch.rand(a.batch, a.cin, a.size, a.size, device="cuda")
    w = torch.randn(a.cout, a.cin, a.kernel, a.kernel, device="cuda") * 0.1
    b = torch.randn(a.cout, device="cuda")
    truth = F.conv2d(x.double(), w.double(), b.double())
    x_cl, w_cl = x.contiguous(memory_format=torch.channels_last), w.contiguous(memory_format=torch.channels_last)
    print(f"conv2d {tuple(x.shape)} -> {a.cout} channels, k{a.kernel}; cudnn.allow_tf32 default "
          f"{torch.backends.cudnn.allow_tf32}")
    for tf32 in (False, True):
        torch.backends.cudnn.allow_tf32 = tf32
        for name, fn in [("NCHW, bias", lambda: F.conv2d(x, w, b)),
                         ("NCHW, no bias", lambda: F.conv2d(x, w)),
                         ("NHWC, bias", lambda: F.conv2d(x_cl, w_cl, b)),
                         ("NHWC, no bias", lambda: F.conv2d(x_cl, w_cl)),
                         ("NHWC incl. converting x", lambda: F.conv2d(x.contiguous(memory_format=torch.channels_last), w_cl))]:
            out = fn()
            error = (out.double() - truth).abs().max().item() if "no bias" not in name and "x" not in name else float("nan")
            print(f"  tf32={tf32!s:5} {name:24} {timed(fn):7.4f} ms  max err {error:.2e}")
    torch.backends.cudnn.allow_tf32 = True
    y = F.conv2d(x_cl, w_cl)
    print(f"  NHWC -> NCHW copy of the output {timed(lambda: y.contiguous()):7.4f} ms; "
          f"plain copy {timed(lambda: y.clone()):7.4f} ms")


if __name__ == "__main__":
    main()
