"""kfuse's direct small-filter convolution kernels (kf::conv2d_small_filter_tc on 3xTF32 tensor cores, and the FFMA
kf::conv2d_small_filter; kfuse/kernels/conv.py) on a GPU. One call:

    cd .wt/conv2 && export PYTHONPATH=$PWD && python scripts/bench/conv_direct.py --out $OUT [--ncu]

1. Optimizes for CUDA the seed (suite/level2/30_conv2d_div_leaky_relu.py) and small irregular variants (odd sizes,
   padding, stride 2, dilation, one input channel, two column tiles, two channel chunks, per-channel and full-size
   epilogue operands, and a filter too large for the kernel: cuDNN kept), builds them in parallel, and checks each
   against float64: error <= 10x the fp32 reference's (cuDNN with TF32 off), and the same output for an input with
   other strides. The seed is checked at full size too.
   The seed and level-1 61 are also emitted with the FFMA kernel (kfuse.kernels.choices.Choices.small_filter_tensor_cores off): "_ffma".
2. Times the seed with CUDA events, L2 flushed (the judge's time_one_call), median of 30: kfuse's ModelNew, eager,
   torch.compile default (PyTorch's default math, as the judge runs them: cuDNN may use TF32), and cuDNN's
   convolution alone (module with bias) with TF32 off and on.
   Both kernels of the seed and of level-1 61 are timed (the FFMA one as kfuse_ffma_ms).
3. Writes OUT/conv-direct.json and prints a table. --ncu: ncu on the seed's tensor-core kernel: time, tensor-pipe
   utilisation, achieved FLOP/s (2 * 8 * 126 * 126 * 128 * 64 * 72 useful FLOPs over the kernel's time).
One failing variant prints its error and the rest go on.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from kfuse.kernels import choices  # noqa: E402
from kfuse.compiler.optimize import optimize  # noqa: E402

SEED = ROOT / "suite/level2/30_conv2d_div_leaky_relu.py"

# Variants of the seed's emitted file (text replacements in its CUDA source), checked and timed beside it: the
# tensor-core kernel without the double-buffered patch, and without the conflict-free patch pitches.
SEED_VARIANTS = {
    "seed_1buffer": [("BYTES(2, IN_ROWS * IN_COLS) <= SMALL_FILTER_TC_MAX_SMEM ? 2 : 1;",
                      "BYTES(2, IN_ROWS * IN_COLS) <= SMALL_FILTER_TC_MAX_SMEM ? 1 : 1;")],
    "seed_unpadded": [("&& K::template conflict_free<SW>(row, plane))", "&& row == IN_COLS && plane == IN_ROWS * IN_COLS)")],
    "seed_cvtsplit": [("split_tf32_fast(xw[o0", "split_tf32(xw[o0"), ("split_tf32_fast(xw[o1", "split_tf32(xw[o1")],
}


def variant_file(emitted: Path, name: str, replacements: list[tuple[str, str]]) -> Path:
    """A copy of an emitted file with its CUDA source edited and its extension renamed (its own build)."""
    text = emitted.read_text()
    extension = text.split('load_inline(\n    name="', 1)[1].split('"', 1)[0]
    for old, new in replacements:
        assert old in text, f"{name}: {old!r} not in the emitted file"
        text = text.replace(old, new)
    path = emitted.with_name(f"{name}_new.py")
    path.write_text(text.replace(extension, f"{extension}_{name.split('_', 1)[1]}"))
    return path


# suite files whose other convolutions the rule also gives the direct kernel: checked at full size, timed vs eager
ALSO = {"l1_61_depthwise_separable": ROOT / "suite/level1/61_conv_depthwise_separable_2D.py"}  # 1x1, 64 -> 128

SMALL = {  # name: (module constructor, epilogue, input shapes, the direct kernel expected)
    "c5_37_odd": ("nn.Conv2d(5, 37, 3)", "torch.nn.functional.leaky_relu(y / 2, 0.01)", [(3, 5, 19, 23)], True),
    "c8_64_pad1": ("nn.Conv2d(8, 64, 3, padding=1)", "torch.nn.functional.leaky_relu(y / 2, 0.01)",
                   [(2, 8, 33, 45)], True),
    "c8_64_stride2": ("nn.Conv2d(8, 64, 3, stride=2)", "torch.relu(y)", [(2, 8, 37, 41)], True),
    "c1_16_k5_wide": ("nn.Conv2d(1, 16, 5, padding=2)", "torch.tanh(y)", [(2, 1, 30, 131)], True),  # 2 col tiles
    "c3_33_dil_asym": ("nn.Conv2d(3, 33, (3, 5), dilation=(2, 1), padding=(1, 2), stride=(1, 2))", "y",
                       [(2, 3, 17, 29)], True),
    "c4_70_per_channel": ("nn.Conv2d(4, 70, 3)", "torch.relu(y + self.extra) * 1.5", [(2, 4, 13, 11)], True),
    "c3_20_full_operand": ("nn.Conv2d(3, 20, 3, padding=1)", "torch.relu(y) * w", [(2, 3, 9, 10), (2, 20, 9, 10)],
                           True),
    "c8_64_width_1": ("nn.Conv2d(8, 64, (3, 1))", "torch.sigmoid(y)", [(3, 8, 9, 1)], True),
    "c32_64_cudnn": ("nn.Conv2d(32, 64, 3)", "torch.relu(y)", [(2, 32, 12, 14)], False),  # K = 288: cuDNN kept
}

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = {ctor}
        self.extra = nn.Parameter(torch.randn(self.conv.out_channels, 1, 1) * 0.1)

    def forward(self, x{more}):
        y = self.conv(x)
        return {epilogue}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
'''


def build(path: Path) -> tuple[Path, int, str]:
    """Imports the emitted file in its own process: load_inline compiles it into the extensions cache."""
    done = subprocess.run([sys.executable, "-c", "import runpy, sys; runpy.run_path(sys.argv[1])", str(path)],
                          capture_output=True, text=True, env=dict(os.environ, MAX_JOBS="2"), timeout=600)
    return path, done.returncode, done.stderr[-2000:]


def models(problem: Path, candidate: Path):
    ns, cand = runpy.run_path(str(problem)), runpy.run_path(str(candidate))
    init = ns["get_init_inputs"]()
    torch.manual_seed(0)
    ref = ns["Model"](*init).cuda().eval()
    new = cand["ModelNew"](*init).cuda().eval()
    new.load_state_dict(ref.state_dict())
    return ns, ref, new


def check(problem: Path, candidate: Path, seed: int = 1) -> dict:
    """Errors vs float64 of the candidate and of the fp32 reference (cuDNN, TF32 off), and the strided input's."""
    ns, ref, new = models(problem, candidate)
    torch.manual_seed(seed)
    inputs = [x.cuda() for x in ns["get_inputs"]()]
    strided = [x.transpose(-1, -2).contiguous().transpose(-1, -2) for x in inputs]  # same values, other strides
    tf32 = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        with torch.no_grad():
            want, got, got_strided = ref(*inputs), new(*inputs), new(*strided)
            truth = ref.double()(*[x.double() for x in inputs])
    finally:
        torch.backends.cudnn.allow_tf32 = tf32
    err_ref = (want.double() - truth).abs().max().item()
    err_new = (got.double() - truth).abs().max().item()
    same = torch.equal(got, got_strided)
    ok = got.shape == want.shape and err_new <= max(10 * err_ref, 1e-7 * truth.abs().max().item()) and same
    return {"ok": bool(ok), "err_new": err_new, "err_ref": err_ref, "strided_equal": same,
            "shape": list(got.shape)}


def time_ms(fn, reps: int = 30) -> float:
    from kfuse.problem import L2Flush, time_one_call

    device = torch.device("cuda")
    flush = L2Flush(device)
    fn()
    torch.cuda.synchronize()
    times = sorted(time_one_call(fn, device, flush)[0] for _ in range(reps))
    return times[len(times) // 2]


SEED_FLOPS = 2 * 8 * 126 * 126 * 128 * 64 * 72  # the seed convolution's multiply-adds x 2


def ncu_child(candidate: Path) -> None:
    """Runs the seed's ModelNew twice (what ncu profiles)."""
    ns, ref, new = models(SEED, candidate)
    inputs = [x.cuda() for x in ns["get_inputs"]()]
    with torch.no_grad():
        for _ in range(2):
            new(*inputs)
    torch.cuda.synchronize()


def run_ncu(candidate: Path) -> dict:
    metrics = ["gpu__time_duration.sum", "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
               "sm__throughput.avg.pct_of_peak_sustained_elapsed", "dram__bytes.sum",
               "sm__warps_active.avg.pct_of_peak_sustained_active", "launch__registers_per_thread",
               "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", "smsp__inst_executed.sum",
               "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
               "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio",
               "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio",
               "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "lts__t_sectors_op_write.sum"]
    cmd = ["ncu", "--kernel-name", "regex:conv2d_small_filter_tc", "--launch-count", "1", "--launch-skip", "1",
           "--metrics", ",".join(metrics), "--csv", sys.executable, __file__, "--ncu-child", str(candidate)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=150)
    values = {}
    for line in done.stdout.splitlines():
        cells = [c.strip('"') for c in line.split('","')]
        if len(cells) > 3 and cells[-3] in metrics:
            values[cells[-3]] = (cells[-1], cells[-2])
    result = {"raw": values, "rc": done.returncode}
    if done.returncode or "gpu__time_duration.sum" not in values:
        result["error"] = (done.stdout + done.stderr)[-1500:]
        return result
    seconds = float(values["gpu__time_duration.sum"][0].replace(",", "")) * {"ns": 1e-9, "us": 1e-6, "usecond": 1e-6,
                                                                            "nsecond": 1e-9, "msecond": 1e-3,
                                                                            "ms": 1e-3}.get(values["gpu__time_duration.sum"][1], 1e-9)
    result.update(kernel_ms=seconds * 1e3, tflops=SEED_FLOPS / seconds / 1e12)
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    parser.add_argument("--ncu", action="store_true", help="also profile the seed's kernel with ncu")
    parser.add_argument("--ncu-child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--dry-run", action="store_true", help="optimize every problem, build and run nothing")
    args = parser.parse_args()
    if args.ncu_child:
        ncu_child(args.ncu_child)
        return 0
    began = time.time()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="kfuse-conv-direct-"))
    problems: dict[str, Path] = {"seed": SEED, **ALSO}
    for name, (ctor, epilogue, shapes, _) in SMALL.items():
        path = work / f"{name}.py"
        more = "".join(f", {v}" for v in "wv"[:len(shapes) - 1])
        path.write_text(PROBLEM.format(ctor=ctor, epilogue=epilogue, more=more,
                                       inputs=", ".join(f"torch.rand{s}" for s in shapes)))
        problems[name] = path
    problems.update({f"{name}_ffma": problems[name] for name in ("seed", *ALSO)})
    rows, emitted = [], {}
    for name, path in problems.items():
        try:
            with choices.using(choices.Choices(small_filter_tensor_cores=not name.endswith("_ffma"))):
                result = optimize(path, work / f"{name}_new.py", "cuda")
            emitted[name] = result.path
            text = result.path.read_text()
            direct = "conv2d_small_filter_forward<" in text
            expected = SMALL[name][3] if name in SMALL else True
            rows.append({"problem": name, "kernels": [k["name"] for k in result.kernels],
                         "library_calls": result.library_calls, "direct": direct, "direct_expected": expected,
                         "tensor_cores": direct and ", true>(x, w, g, epi, out" in text})
        except Exception:  # noqa: BLE001  (a bench script: report, go on)
            print(f"OPTIMIZE FAILED {name}\n{traceback.format_exc()[-1500:]}", flush=True)
            rows.append({"problem": name, "ok": False, "error": "optimize failed"})
    for name, replacements in SEED_VARIANTS.items():
        try:
            emitted[name] = variant_file(emitted["seed"], name, replacements)
            problems[name] = SEED
            rows.append({"problem": name, "kernels": rows[0]["kernels"], "library_calls": rows[0]["library_calls"],
                         "direct": True, "direct_expected": True, "tensor_cores": True})
        except Exception:  # noqa: BLE001
            print(f"VARIANT FAILED {name}\n{traceback.format_exc()[-1500:]}", flush=True)
    if args.dry_run:
        print(json.dumps(rows, indent=1))
        return 0
    with ThreadPoolExecutor(max_workers=len(emitted)) as pool:
        for path, code, err in pool.map(build, emitted.values()):
            if code:
                print(f"BUILD FAILED {path.name}\n{err}", flush=True)
    print(f"built in {time.time() - began:.0f} s", flush=True)
    by_name = {r["problem"]: r for r in rows}
    for name in [n for n in problems if n in emitted]:
        try:
            by_name[name].update(check(problems[name], emitted[name]))
            by_name[name]["ok"] = by_name[name]["ok"] and by_name[name]["direct"] == by_name[name]["direct_expected"]
        except Exception:  # noqa: BLE001
            print(f"CHECK FAILED {name}\n{traceback.format_exc()[-1500:]}", flush=True)
            by_name[name].update(ok=False, error="check failed")
        r = by_name[name]
        print(f"{name:22} {'ok' if r.get('ok') else 'WRONG'} err {r.get('err_new', float('nan')):.2e} "
              f"(fp32 ref {r.get('err_ref', float('nan')):.2e}) direct={r['direct']} tc={r['tensor_cores']} {r['kernels']} "
              f"lib={r['library_calls']}", flush=True)
        torch.cuda.empty_cache()
    (args.out / "conv-direct.json").write_text(json.dumps({"rows": rows}, indent=1))

    timing = {}
    if "seed" in emitted:
        try:
            ns, ref, new = models(SEED, emitted["seed"])
            torch.manual_seed(2)
            inputs = [x.cuda() for x in ns["get_inputs"]()]
            conv = ref.conv
            with torch.no_grad():
                timing["kfuse_ms"] = time_ms(lambda: new(*inputs))
                timing["eager_ms"] = time_ms(lambda: ref(*inputs))  # PyTorch's default math, as the judge's
                torch.backends.cudnn.allow_tf32 = False
                timing["cudnn_conv_fp32_ms"] = time_ms(lambda: conv(inputs[0]))
                torch.backends.cudnn.allow_tf32 = True
                timing["cudnn_conv_tf32_allowed_ms"] = time_ms(lambda: conv(inputs[0]))
                timing["kfuse_again_ms"] = time_ms(lambda: new(*inputs))
                for name in ("seed_ffma", *SEED_VARIANTS):
                    if name in emitted:
                        other = models(SEED, emitted[name])[2]
                        timing[f"kfuse_{name.split('_', 1)[1]}_ms"] = time_ms(lambda: other(*inputs))
            print(f"timed kfuse/eager/cuDNN at {time.time() - began:.0f} s", flush=True)
            (args.out / "conv-direct.json").write_text(json.dumps({"rows": rows, "seed_timing": timing}, indent=1))
            compiled = torch.compile(ref)
            with torch.no_grad():
                timing["compile_default_ms"] = time_ms(lambda: compiled(*inputs))
        except Exception:  # noqa: BLE001
            print(f"TIMING FAILED\n{traceback.format_exc()[-2000:]}", flush=True)
            timing["error"] = "timing failed"
    for name in [n for n in ALSO if n in emitted]:
        try:
            ns, ref, new = models(ALSO[name], emitted[name])
            torch.manual_seed(2)
            inputs = [x.cuda() for x in ns["get_inputs"]()]
            with torch.no_grad():
                timing[f"{name}:kfuse_ms"] = time_ms(lambda: new(*inputs))
                timing[f"{name}:eager_ms"] = time_ms(lambda: ref(*inputs))
                if f"{name}_ffma" in emitted:
                    ffma = models(ALSO[name], emitted[f"{name}_ffma"])[2]
                    timing[f"{name}:kfuse_ffma_ms"] = time_ms(lambda: ffma(*inputs))
            torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001
            print(f"TIMING FAILED {name}\n{traceback.format_exc()[-1500:]}", flush=True)
    if args.ncu and "seed" in emitted and time.time() - began > 420:
        print(f"ncu skipped: {time.time() - began:.0f} s gone: ncu would pass the call's 10 minutes", flush=True)
    elif args.ncu and "seed" in emitted:
        try:
            timing["ncu"] = run_ncu(emitted["seed"])
        except Exception:  # noqa: BLE001
            print(f"NCU FAILED\n{traceback.format_exc()[-1500:]}", flush=True)
    gpu = torch.cuda.get_device_name(0)
    (args.out / "conv-direct.json").write_text(json.dumps(
        {"gpu": gpu, "torch": torch.__version__, "rows": rows, "seed_timing": timing}, indent=1))

    print(f"\n{gpu}, torch {torch.__version__}, seed Conv2d(8->64, k3) /2 LeakyReLU, x (128, 8, 128, 128); "
          f"median ms of 30, L2 flushed")
    for key in ("kfuse_ms", "kfuse_again_ms", "kfuse_ffma_ms", *(f"kfuse_{n.split('_', 1)[1]}_ms" for n in SEED_VARIANTS), "eager_ms", "compile_default_ms", "cudnn_conv_fp32_ms",
                "cudnn_conv_tf32_allowed_ms"):
        if key in timing:
            extra = f"  ({timing[key] / timing['compile_default_ms']:.2f}x compile)" \
                if "compile_default_ms" in timing and key.startswith("kfuse") else ""
            print(f"  {key:28} {timing[key]:8.3f}{extra}")
    for name in ALSO:
        if f"{name}:kfuse_ms" in timing:
            print(f"  {name}: kfuse {timing[f'{name}:kfuse_ms']:.3f} ffma {timing.get(f'{name}:kfuse_ffma_ms', 0):.3f} "
                  f"eager {timing[f'{name}:eager_ms']:.3f}")
    if "ncu" in timing:
        print(f"  ncu: {json.dumps({k: v for k, v in timing['ncu'].items() if k != 'raw'})}")
        print(f"  ncu raw: {timing['ncu'].get('raw')}")
    bad = [r["problem"] for r in rows if not r.get("ok")]
    print("correctness:", "all correct" if not bad else f"WRONG: {bad}", f"({time.time() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
