"""The channels-last copies with 16-byte accesses (kfuse/compiler/codegen.py: kf_to_channels_last4 and each epilogue's
_from_channels_last4) on a GPU: which launch each size takes, and the judge's verdict on it.

    PYTHONPATH=. python3 scripts/gpu_transpose_check.py [--out DIR]

Small convolution -> bias/relu problems, emitted with the tf32 policy (their convolutions then run channels-last):
channels and positions multiples of 4 (both 16-byte kernels), odd positions (the copy's 32x32 scalar tiles, the
epilogue's 32 x 128 tile of 16-byte reads where the channels come in fours), channel counts that fill part of a
tile, a 3D convolution. For each: `kfuse check` (5 trials on fresh random inputs, float64 parity; no timing: on the
smallest sizes the reference's NCHW cuDNN kernel may be an fp32 one, and then the TF32 channels-last result misses
1e-4 whatever the transposes do), so also: the difference from torch running the same convolution channels-last,
and the CUDA kernels one forward launches (torch.profiler).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kfuse.judge import CheckOptions, check  # noqa: E402
from kfuse.loader import import_from_source  # noqa: E402

TEMPLATE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv{d}d({cin}, {cout}, 3)
        self.bias = nn.Parameter(torch.randn({cout}, {ones}))

    def forward(self, x):
        return torch.relu(self.conv(x)) + self.bias


def get_inputs():
    return [torch.randn({shape})]


def get_init_inputs():
    return []
'''

# name: (dims, in channels, out channels, input shape); expected launches in the comment
CASES = {
    "both_vec4": (2, 16, 32, (3, 16, 22, 22)),       # S_in 484, S_out 400, C 16/32: both 16-byte kernels
    "both_scalar": (2, 16, 32, (3, 16, 21, 21)),     # S_in 441: the scalar copy; S_out 361, C 32: the 32 x 128 tile
    "odd_partial": (2, 12, 36, (2, 12, 23, 23)),     # S_out 441, C 36: the 32 x 128 tile, its second one 4 channels
    "partial_tiles": (2, 12, 20, (2, 12, 26, 26)),   # C 12/20 < the tile's 64/32 channels; S 676/576
    "odd_channels": (2, 6, 18, (2, 6, 20, 20)),      # copy: C_in 6 -> scalar; epilogue: C 18 % 4 -> scalar
    "conv3d": (3, 8, 36, (2, 8, 6, 10, 10)),         # S_in 600, S_out 256, C 8/36
}


def write_problem(folder: Path, name: str, case) -> Path:
    d, cin, cout, shape = case
    path = folder / f"{name}.py"
    path.write_text(TEMPLATE.format(d=d, cin=cin, cout=cout, ones=", ".join(["1"] * d), shape=", ".join(map(str, shape))))
    return path


def emit_channels_last(problem: Path, out: Path) -> Path:
    """The file `kfuse optimize` emits with the tf32 policy where no GPU is asked: every convolution channels-last.
    (On the GPU the plan times both layouts and took NCHW for these small 2D convolutions, so the transposes went
    untested: H200, 2026-11-28.)"""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    subprocess.run([sys.executable, "-m", "kfuse", "optimize", str(problem), "--device", "cuda", "--no-check",
                    "--precision", "tf32", "-o", str(out)], check=True, env=env, cwd=ROOT, capture_output=True)
    return out


def run_direct(candidate: Path, problem: Path) -> tuple[list[str], float]:
    """The channels-last kernels one forward launches, and its largest difference from torch running the same
    convolution channels-last (the same cuDNN kernel, so TF32 rounding cancels out and a misplaced element shows)."""
    module = import_from_source(problem.read_text(), str(problem), f"problem_{problem.stem}")
    new = import_from_source(candidate.read_text(), str(candidate), f"candidate_{problem.stem}")
    reference = module.Model(*module.get_init_inputs()).cuda()
    model = new.ModelNew(*module.get_init_inputs()).cuda()
    model.load_state_dict(reference.state_dict())
    x = module.get_inputs()[0].cuda()
    layout = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
    with torch.no_grad():
        got = model(x)
        want = torch.relu(reference.conv(x.contiguous(memory_format=layout))) + reference.bias
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            model(x)
            torch.cuda.synchronize()
    kernels = sorted({e.name.split("(")[0].replace("void ", "") for e in prof.events() if "channels_last" in e.name})
    return kernels, (got - want).abs().max().item()


def judge_all(emitted: dict[str, tuple[Path, Path]], options: CheckOptions, jobs: int) -> dict[str, dict]:
    """`kfuse check` of each (problem, candidate), `jobs` at a time: builds overlap, each check's trials are short."""
    with ThreadPoolExecutor(jobs) as pool:
        return dict(zip(emitted, pool.map(lambda pc: check(pc[0], pc[1], options), emitted.values())))


def write_rows(out: Path | None, name: str, rows: list[dict]) -> None:
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(json.dumps(
            {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="kfuse-transpose-"))
    emitted = {}
    for name, case in CASES.items():
        problem = write_problem(folder, name, case)
        emitted[name] = (problem, emit_channels_last(problem, folder / f"{name}_new.py"))

    options = CheckOptions(device="cuda", time=False, compile_modes=[], precision="tf32", timeout=400)
    verdicts = judge_all(emitted, options, jobs=3)
    rows = []
    for name, (problem, candidate) in emitted.items():
        verdict = verdicts[name]
        kernels, diff = run_direct(candidate, problem)
        rows.append({"case": name, "shape": CASES[name], "status": verdict["status"],
                     "reasons": verdict["reasons"], "channels_last_kernels": kernels, "max_abs_diff_same_conv": diff})
        print(f"{name:15s} {verdict['status']:10s} diff {diff:.1e} {kernels} {verdict['reasons'][:1]}", flush=True)
    write_rows(args.out, "transpose-check.json", rows)


if __name__ == "__main__":
    main()
