"""For every convolution problem of the suite: what cuDNN does with it in each layout, and whether the faster layout
would pass the judge's precision-parity rule.

    PYTHONPATH=. python scripts/gpu_conv_layout_survey.py [PATHS...] [--json OUT.json]

For the first convolution module of each problem's Model (its own weights, its get_inputs() input), with PyTorch's
default flags (cuDNN may use TF32): the median time (CUDA events, L2 flushed) of the convolution in NCHW as eager
runs it, in channels-last (input and weight converted beforehand), and of the input's conversion to channels-last;
the max abs error of each against a float64 run (the judge's rule 5 bound is 10x the NCHW error); and the NCHW time
with TF32 off. Why: torch.compile runs these convolutions channels-last and beats eager (and kfuse, which keeps
eager's NCHW cuDNN call) by up to 2x on the level-2 convolution problems (suite, H100, 2026-11-22).
"""

from __future__ import annotations

import argparse
import json
import runpy
import statistics
import sys
from pathlib import Path

import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kfuse.problem import L2Flush, time_one_call  # noqa: E402

CONVS = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)


def timed(fn, flush: L2Flush, trials: int = 20) -> float:
    """Median ms of `trials` calls, each timed as the judge times one (kfuse.problem.time_one_call)."""
    for _ in range(3):
        fn()
    return statistics.median(time_one_call(fn, torch.device("cuda"), flush)[0] for _ in range(trials))


def survey(path: Path, flush: L2Flush) -> dict | None:
    ns = runpy.run_path(str(path))
    torch.manual_seed(0)
    model = ns["Model"](*ns["get_init_inputs"]())
    conv = next((m for m in model.modules() if isinstance(m, CONVS)), None)
    if conv is None:
        return None
    x = ns["get_inputs"]()[0].cuda()
    conv = conv.cuda()
    spatial = x.dim() - 2
    last = {2: torch.channels_last, 3: torch.channels_last_3d}.get(spatial)
    row = {"problem": path.stem, "conv": repr(conv), "input": list(x.shape)}
    with torch.no_grad():
        truth = conv.double()(x.double())
        conv.float()
        nchw = conv(x)
        row["nchw_ms"] = timed(lambda: conv(x), flush)
        row["nchw_err"] = (nchw.double() - truth).abs().max().item()
        torch.backends.cudnn.allow_tf32 = False
        row["nchw_fp32_ms"] = timed(lambda: conv(x), flush)
        row["nchw_fp32_err"] = (conv(x).double() - truth).abs().max().item()
        torch.backends.cudnn.allow_tf32 = True
        if last is not None:
            xl = x.contiguous(memory_format=last)
            convl = conv.to(memory_format=last)
            out = convl(xl)
            row["channels_last_ms"] = timed(lambda: convl(xl), flush)
            row["channels_last_err"] = (out.double() - truth).abs().max().item()
            row["to_channels_last_ms"] = timed(lambda: x.contiguous(memory_format=last), flush)
            row["channels_last_passes_parity"] = row["channels_last_err"] <= max(10 * row["nchw_err"],
                                                                                 1e-6 * truth.abs().max().item())
    del truth
    torch.cuda.empty_cache()
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("paths", nargs="*", type=Path, default=[Path("suite/level1"), Path("suite/level2")])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    files = sorted(f for p in args.paths for f in ([p] if p.is_file() else p.glob("*.py")))
    flush = L2Flush(torch.device("cuda"))
    rows = []
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}; ms medians, errors max abs vs float64")
    print(f"{'problem':48s} {'nchw':>7s} {'fp32':>7s} {'cl':>7s} {'to_cl':>6s} {'err nchw':>9s} {'err cl':>9s} parity")
    for f in files:
        row = survey(f, flush)
        if row is None:
            continue
        rows.append(row)
        print(f"{row['problem'][:48]:48s} {row['nchw_ms']:7.3f} {row['nchw_fp32_ms']:7.3f} "
              f"{row.get('channels_last_ms', float('nan')):7.3f} {row.get('to_channels_last_ms', float('nan')):6.3f} "
              f"{row['nchw_err']:9.2e} {row.get('channels_last_err', float('nan')):9.2e} "
              f"{row.get('channels_last_passes_parity', '-')}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                         "rows": rows}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
