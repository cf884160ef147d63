"""kfuse's convolution kernels (kfuse/kernels/conv.py) on a GPU: correctness on small irregular problems, then time against
cuDNN on the suite's conv problems. One device call:

    PYTHONPATH=. python scripts/bench/conv_kernels.py --out DIR [--variants]

Phase 1: small problems (stride, padding, dilation, groups, depthwise, 1D/3D, epilogue operands of every mode,
non-contiguous inputs) optimized for CUDA, built, and compared with float64 (error vs the fp32 reference's).
Phase 2: full-size problems: eager Model (cuDNN + eager epilogue), cuDNN's convolution alone (with its bias), and
the ModelNew, CUDA events with L2 flushed, median of 20. --variants also times the seed with other build options.
Prints a table last and writes DIR/conv-kernels-<gpu>.json.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import runpy
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from kfuse.errors import UsageError  # noqa: E402
from kfuse.compiler.optimize import optimize  # noqa: E402

SMALL = {  # name: (module constructor, epilogue, input shapes)
    "c2d_div_leaky": ("nn.Conv2d(5, 9, 3)", "torch.nn.functional.leaky_relu(y / 2, 0.01)", [(3, 5, 19, 23)]),
    "c1d_s3_p2_70": ("nn.Conv1d(5, 70, 5, stride=3, padding=2)", "torch.tanh(y)", [(3, 5, 101)]),
    "c3d_bias_param": ("nn.Conv3d(4, 37, 3, padding=(1, 0, 2))", "torch.relu(y + self.extra) * 1.5",
                       [(2, 4, 7, 9, 11)]),
    "grouped_20": ("nn.Conv2d(12, 40, 3, groups=2)", "y", [(2, 12, 11, 13)]),
    "full_operand": ("nn.Conv2d(3, 66, 3, padding=1)", "torch.relu(y) * w", [(2, 3, 9, 10), (2, 66, 9, 10)]),
    "convt2d_groups": ("nn.ConvTranspose2d(6, 40, (3, 2), stride=(2, 3), padding=(1, 0), output_padding=(1, 2), "
                       "groups=2, dilation=(1, 2))", "torch.relu(y)", [(2, 6, 7, 9)]),
    "convt3d": ("nn.ConvTranspose3d(5, 36, 3, stride=2, padding=1, output_padding=1)", "y", [(2, 5, 4, 5, 6)]),
}

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = {ctor}
        self.extra = nn.Parameter(torch.randn(self.conv.out_channels, 1, 1, 1) * 0.1)

    def forward(self, x{more}):
        y = self.conv(x)
        return {epilogue}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
'''

TIMED = ["suite/seeds/conv2d_div_leaky_relu.py"] + [f"suite/level1/{n}" for n in (
    "50_conv_standard_2D.py", "51_conv_standard_1D.py", "52_conv_standard_3D.py", "56_conv_pointwise_2D.py",
    "57_conv_grouped_2D.py", "58_conv_strided_2D.py", "59_conv_dilated_2D.py", "60_conv_asymmetric_kernel_2D.py",
    "53_conv_transposed_2D.py", "54_conv_transposed_3D.py")] + [
    f"suite/level2/{n}" for n in ("1_Conv2d_ReLU_BiasAdd.py", "2_Conv2d_GroupNorm_ReLU.py",
                                  "5_Conv2d_HardSwish_ReLU.py", "10_Conv2d_Multiply_LeakyReLU_GELU.py")]


def build(path: Path) -> tuple[Path, int, str]:
    done = subprocess.run([sys.executable, "-c", "import runpy, sys; runpy.run_path(sys.argv[1])", str(path)],
                          capture_output=True, text=True, env=dict(os.environ, MAX_JOBS="1"), timeout=900)
    return path, done.returncode, done.stderr[-1500:]


def variant(path: Path, old: str, new: str, suffix: str) -> Path:
    """The same emitted file with one text change in its CUDA source (a build option to compare)."""
    text = path.read_text()
    tree = ast.parse(text)
    cuda = next(n.value.value for n in tree.body if isinstance(n, ast.Assign)
                and getattr(n.targets[0], "id", "") == "CUDA_SOURCE")
    assert old in cuda, old
    out = path.with_name(path.stem + suffix + ".py")
    text = text.replace(old, new)
    stem = path.stem.removesuffix("_new")
    text = text.replace(f"kfuse_{stem}_", f"kfuse_{stem}{suffix}_")  # its own extension name
    out.write_text(text)
    return out


def time_ms(fn, reps: int = 20) -> float:
    """Median ms of `reps` calls, each timed as the judge times one (L2 flushed, CUDA events)."""
    from kfuse.problem import L2Flush, time_one_call

    device = torch.device("cuda")
    flush = L2Flush(device)
    fn()
    torch.cuda.synchronize()
    times = sorted(time_one_call(fn, device, flush)[0] for _ in range(reps))
    return times[len(times) // 2]


def models(problem: Path, candidate: Path):
    ns, cand = runpy.run_path(str(problem)), runpy.run_path(str(candidate))
    init = ns["get_init_inputs"]()
    torch.manual_seed(0)
    ref = ns["Model"](*init).cuda().eval()
    new = cand["ModelNew"](*init).cuda().eval()
    new.load_state_dict(ref.state_dict())
    return ns, ref, new


def save(out: Path, rows: list) -> None:
    gpu = torch.cuda.get_device_name(0)
    (out / f"conv-kernels-{gpu.replace(' ', '-')}.json").write_text(
        json.dumps({"gpu": gpu, "torch": torch.__version__, "cudnn_allow_tf32": False, "rows": rows}, indent=2))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--variants", action="store_true")
    parser.add_argument("--skip-small", action="store_true")
    parser.add_argument("--dry-run", action="store_true", help="emit every file, build and run nothing")
    parser.add_argument("--compare-cudnn", action="store_true",
                        help="also time each problem as kfuse planned it before (cuDNN + the epilogue in place)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    work = Path(tempfile.mkdtemp(prefix="kfuse-conv-"))
    problems: dict[str, Path] = {}
    if not args.skip_small:
        for name, (ctor, epilogue, shapes) in SMALL.items():
            path = work / f"{name}.py"
            more = "".join(f", {v}" for v in "wv"[:len(shapes) - 1])
            path.write_text(PROBLEM.format(ctor=ctor, epilogue=epilogue, more=more,
                                           inputs=", ".join(f"torch.rand{s}" for s in shapes)))
            problems[name] = path
    for rel in TIMED:
        problems[Path(rel).stem] = ROOT / rel
    emitted, kernels = {}, {}
    for name, path in problems.items():
        result = optimize(path, work / f"{name}_new.py", "cuda")
        emitted[name] = result.path
        kernels[name] = [k["name"] for k in result.kernels] + [f"lib:{c}" for c in result.library_calls]
    extra, source_of = {}, {}
    if args.variants:  # build options compared on the seed and two problems with a larger K
        ffma = ("constexpr bool CONV_TENSOR_CORES = true;", "constexpr bool CONV_TENSOR_CORES = false;")
        for name in ("conv2d_div_leaky_relu", "50_conv_standard_2D"):
            extra[f"{name}@ffma"] = variant(emitted[name], *ffma, "_ffma")
            source_of[f"{name}@ffma"] = problems[name]
    if args.compare_cudnn:  # the planner without the convolution hook: cuDNN, then the epilogue in place
        import kfuse.kernels.conv
        own = kfuse.kernels.conv.fuse_convolutions
        kfuse.kernels.conv.fuse_convolutions = lambda steps, *rest: steps
        for name in [n for n in problems if n not in SMALL]:
            try:  # a bare convolution has no kfuse kernel left: its cuDNN time is the module's own, timed below
                extra[f"{name}@cudnn"] = optimize(problems[name], work / f"{name}_cudnn_new.py", "cuda").path
            except UsageError:
                continue
            source_of[f"{name}@cudnn"] = problems[name]
        kfuse.kernels.conv.fuse_convolutions = own
    if args.dry_run:
        print({**{n: str(p) for n, p in emitted.items()}, **{n: str(p) for n, p in extra.items()}})
        print({n: str(source_of.get(n) or problems.get(n)) for n in list(problems) + list(extra)})
        return 0
    with ThreadPoolExecutor(max_workers=16) as pool:
        builds = list(pool.map(build, list(emitted.values()) + list(extra.values())))
    for path, code, err in builds:
        if code:
            print(f"BUILD FAILED {path.name}\n{err}", flush=True)

    rows = []
    for name in [n for n in problems if n in SMALL]:
        ns, ref, new = models(problems[name], emitted[name])
        torch.manual_seed(1)
        inputs = [x.cuda() for x in ns["get_inputs"]()]
        strided = [x.transpose(-1, -2).contiguous().transpose(-1, -2) for x in inputs]  # same values, other strides
        with torch.no_grad():
            truth = ref.double()(*[x.double() for x in inputs])
            ref.float()
            want, got, got_strided = ref(*inputs), new(*inputs), new(*strided)
        err_ref = (want.double() - truth).abs().max().item()
        err_new = (got.double() - truth).abs().max().item()
        ok = (err_new <= max(10 * err_ref, 1e-6 * truth.abs().max().item()) and torch.equal(got, got_strided)
              and got.shape == want.shape)
        rows.append({"problem": name, "phase": "small", "ok": ok, "err_new": err_new, "err_ref": err_ref,
                     "kernels": kernels[name]})
        print(f"{name:28} {'ok' if ok else 'WRONG'} err {err_new:.2e} (ref {err_ref:.2e}) {kernels[name]}", flush=True)

    timed = []
    for name in [n for n in problems if n not in SMALL]:  # each problem, then its variants
        timed += [name] + [v for v in extra if v.split("@")[0] == name]
    for name in timed:
        source = problems.get(name) or source_of[name]
        ns, ref, new = models(source, emitted.get(name, extra.get(name)))
        torch.manual_seed(1)
        inputs = [x.cuda() for x in ns["get_inputs"]()]
        conv = next(m for m in ref.modules() if isinstance(m, torch.nn.modules.conv._ConvNd))
        with torch.no_grad():
            want, got = ref(*inputs), new(*inputs)
            rel = ((got - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()
            t_eager = time_ms(lambda: ref(*inputs))
            t_new = time_ms(lambda: new(*inputs))
            t_cudnn = time_ms(lambda: conv(inputs[0])) if conv.in_channels == inputs[0].shape[1] else float("nan")
        row = {"problem": name, "phase": "timed", "rel_diff_vs_eager": rel, "eager_ms": t_eager, "kfuse_ms": t_new,
               "cudnn_conv_ms": t_cudnn, "kernels": kernels.get(name, ["variant"])}
        rows.append(row)
        print(f"{name:40} rel {rel:.1e} eager {t_eager:8.3f} cudnn-conv {t_cudnn:8.3f} kfuse {t_new:8.3f}", flush=True)
        save(args.out, rows)
        del ref, new, inputs, want, got
        torch.cuda.empty_cache()

    save(args.out, rows)
    print(f"\n{'problem':40} {'eager':>8} {'cuDNN conv':>10} {'kfuse':>8} {'vs eager':>8} {'vs cuDNN':>8}  kernels")
    for r in rows:
        if r["phase"] == "timed":
            print(f"{r['problem']:40} {r['eager_ms']:8.3f} {r['cudnn_conv_ms']:10.3f} {r['kfuse_ms']:8.3f} "
                  f"{r['eager_ms'] / r['kfuse_ms']:7.2f}x {r['cudnn_conv_ms'] / r['kfuse_ms']:7.2f}x  {r['kernels']}")
    bad = [r["problem"] for r in rows if r["phase"] == "small" and not r["ok"]]
    print("small problems:", "all correct" if not bad else f"WRONG: {bad}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
