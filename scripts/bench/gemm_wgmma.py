"""The Hopper (wgmma) 3xTF32 GEMM against the mma.sync one and cuBLAS fp32: build, validate, time (one GPU run).

The first wgmma kernel (split pass in shared memory per stage; results/gemm-wgmma-*-2026-11-22.*) was replaced by the
pre-split one (results/gemm-presplit-*), whose cp.async stages gave way to TMA copies from a producer warpgroup
(results/gemm-tma-*); the variants of the replaced kernels are gone from this list with them.

    cd .wt/wgmma && export PYTHONPATH=$PWD && MAX_JOBS=2 python3 scripts/bench/gemm_wgmma.py --out $OUT

1. Builds every variant (kfuse/kernels/gemm_cuda.py's templates; the wgmma ones for sm_90a with KF_SM90A) and the seed's
   `kfuse optimize --device cuda` file in parallel; a failing build prints its compiler output and is skipped.
2. Validates each kernel against a float64 truth on irregular sizes (tails in M, N and K, tiny, K = 4096, batched,
   a strided operand for the 4-byte-copy path, the seed's epilogue, the seed itself): error vs cuBLAS fp32's own
   error, parity bound 10x; the first mismatching indices are printed.
3. Times the seed Linear(8192 -> 8192) -> x2 -> LeakyReLU(0.1) (x 1024x8192) and a square 4096 product: CUDA
   events, L2 flushed before each call, median of 20, against cuBLAS fp32 (eager).
4. Times kfuse's ModelNew for suite/level2/31_linear_scale_leaky_relu.py against the eager Model.
Writes $OUT/gemm-wgmma.json and prints a table. Operands here are K-contiguous (A (L, M, K), B (L, N, K)).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from kfuse.kernels.gemm_cuda import DEFAULT, GEMM_DECLS, gemm_template  # noqa: E402

HOPPER_FLAGS = ["-O3", "-gencode=arch=compute_90a,code=sm_90a", "-DKF_SM90A", "-DKF_ONLY_SM90A"]
# name: (C++ call of the tiles for a K-contiguous A and B, nvcc flags)
VARIANTS = {
    "mma_sync_default": (f"kf_gemm::launch_tiles<{DEFAULT.arguments(True, True)}>", ["-O3", "-arch=sm_90"]),
    # the smaller operand split once per call into big/small planes (no split pass per stage), stages filled with
    # TMA by a producer warp, MMAs pipelined across K steps: launch_presplit<shared rows per block, stages, K tiles
    # (of 32) per partial sum, register sets of the split fragment in turn (MMA groups in flight while the next set
    # is filled)>
    "presplit_s4_g2_sets4": ("kf_gemm::launch_presplit<128, 4, 2, 4>", HOPPER_FLAGS),  # emitted
    "presplit_s4_g1_sets4": ("kf_gemm::launch_presplit<128, 4, 1, 4>", HOPPER_FLAGS),
}
SEED_PROBLEM = ROOT / "suite" / "level2" / "31_linear_scale_leaky_relu.py"

EPILOGUES = r"""
struct Identity {
    __device__ __forceinline__ float operator()(float v, int64_t) const { return v; }
};
// the seed's epilogue: + bias (per column), * scale, LeakyReLU
struct BiasScaleLeaky {
    const float* bias;
    int64_t n;
    float scale, slope;
    __device__ __forceinline__ float operator()(float v, int64_t i) const {
        const float x = (v + bias[i % n]) * scale;
        return x > 0.0f ? x : x * slope;
    }
};
"""

HOST = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
""" + GEMM_DECLS + r"""
cudaError_t run_gemm(const kf_gemm::Problem& p, int epilogue, const float* bias, float scale, float slope,
                     float* workspace, cudaStream_t stream);
// a: (L, M, K), b: (L, N, K), any strides; returns (L, M, N)
torch::Tensor gemm(torch::Tensor a, torch::Tensor b, torch::Tensor bias, int64_t epilogue, double scale, double slope) {
    auto out = torch::empty({a.size(0), a.size(1), b.size(1)}, a.options());
    kf_gemm::Problem p{a.size(0), a.size(1), b.size(1), a.size(2),
                       {a.data_ptr<float>(), a.stride(0), a.stride(1), a.stride(2)},
                       {b.data_ptr<float>(), b.stride(0), b.stride(1), b.stride(2)}, out.data_ptr<float>()};
    // the pre-split kernels' planes: at most the smaller operand twice and the larger once, K padded to 4
    const int64_t k4 = (p.K + 3) / 4 * 4;
    auto workspace = torch::empty({p.batch * (2 * std::min(p.M, p.N) + std::max(p.M, p.N)) * k4}, a.options());
    C10_CUDA_CHECK(run_gemm(p, (int)epilogue, bias.data_ptr<float>(), (float)scale, (float)slope,
                            workspace.data_ptr<float>(), c10::cuda::getCurrentCUDAStream()));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""


def cuda_source(name: str) -> str:
    call = VARIANTS[name][0]
    extra = ", workspace, dev, 132" if "presplit" in call else ", dev" if "wgmma" in call else ""
    template = gemm_template(tiles=True, wgmma=True, gemv=False)
    return ("#include <cuda_runtime.h>\n#include <algorithm>\n#include <cstdint>\n" + GEMM_DECLS + template
            + EPILOGUES
            + "cudaError_t run_gemm(const kf_gemm::Problem& p, int epilogue, const float* bias, float scale,"
              " float slope, float* workspace, cudaStream_t stream) {\n"
              "    int dev = 0;\n    cudaGetDevice(&dev);\n    (void)dev;\n    (void)workspace;\n"
              f"    return epilogue == 0 ? {call}(p, Identity{{}}{extra}, stream)\n"
              f"        : {call}(p, BiasScaleLeaky{{bias, p.N, scale, slope}}{extra}, stream);\n}}\n")


def load_variant(name: str):
    from torch.utils.cpp_extension import load_inline
    return load_inline(name=f"gemm_wgmma_bench_{name}", cpp_sources=HOST, cuda_sources=cuda_source(name),
                       functions=["gemm"], extra_cuda_cflags=VARIANTS[name][1], verbose=False)


def build(name: str):
    """(name, seconds, error text or None), in a worker process."""
    start = time.time()
    try:
        if name == "kfuse_optimize":
            out = Path(os.environ["GEMM_WGMMA_OUT"]) / "seed_optimized.py"
            done = subprocess.run([sys.executable, "-m", "kfuse", "optimize", str(SEED_PROBLEM), "-o", str(out),
                                   "--device", "cuda", "--no-check"], capture_output=True, text=True, cwd=ROOT,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)})
            if done.returncode != 0:
                return name, time.time() - start, done.stdout[-3000:] + done.stderr[-5000:]
            import_file(out)  # builds its extension (cached for the main process)
        else:
            load_variant(name)
        return name, time.time() - start, None
    except Exception:
        return name, time.time() - start, traceback.format_exc()[-8000:]


def import_file(path: Path):
    import importlib.util
    spec = importlib.util.spec_from_file_location(f"kfuse_generated_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def time_ms(fn, flush, trials=50):
    """Median ms of `trials` calls, each timed as the judge times one (kfuse.problem.time_one_call)."""
    import torch

    from kfuse.problem import time_one_call
    for _ in range(3):
        fn()
    return statistics.median(time_one_call(fn, torch.device("cuda"), flush)[0] for _ in range(trials))


def compare(got, truth, ref):
    """Errors vs float64 and where the first elements past the parity bound are."""
    e_got = (got.double() - truth).abs()
    e_ref = (ref.double() - truth).abs().max().item()
    bound = max(10 * e_ref, 1e-6)
    bad = (e_got > bound) | ~torch_isfinite(got)
    first = []
    if bad.any():
        idx = bad.nonzero()[:5]
        for i in idx:
            t = tuple(i.tolist())
            first.append({"index": t, "got": got[t].item(), "truth": truth[t].item()})
    return {"err": e_got.max().item(), "ref_err": e_ref, "ok": not first, "bad_count": int(bad.sum().item()),
            "first_bad": first}


def torch_isfinite(x):
    import torch
    return torch.isfinite(x)


def validate(mod, dev):
    import torch
    gen = torch.Generator(device=dev).manual_seed(1)
    dummy = torch.zeros(1, device=dev)
    checks = []

    def run(label, a, b, bias=None):
        truth = torch.matmul(a.double(), b.double().transpose(1, 2))
        ref = torch.matmul(a, b.transpose(1, 2))
        if bias is not None:
            truth = torch.nn.functional.leaky_relu((truth + bias.double()) * 2.0, 0.1)
            ref = torch.nn.functional.leaky_relu((ref + bias) * 2.0, 0.1)
            got = mod.gemm(a, b, bias, 1, 2.0, 0.1)
        else:
            got = mod.gemm(a, b, dummy, 0, 1.0, 0.0)
        torch.cuda.synchronize()
        c = {"case": label, **compare(got, truth, ref)}
        checks.append(c)
        if not c["ok"]:
            print(f"    MISMATCH {label}: err {c['err']:.3e} vs bound 10x{c['ref_err']:.3e}, {c['bad_count']} bad,"
                  f" first {c['first_bad']}", flush=True)

    for (L, M, N, K) in [(1, 1823, 781, 333), (1, 1000, 520, 264), (1, 2, 17, 5), (1, 64, 64, 4096),
                         (1, 256, 256, 64), (3, 130, 257, 96), (1, 129, 130, 31)]:
        a = torch.randn(L, M, K, device=dev, generator=gen)
        b = torch.randn(L, N, K, device=dev, generator=gen)
        run(f"{L}x{M}x{N}x{K}", a, b)
    # strided A (the 4-byte-copy path) and a broadcast batch of B (stride 0)
    a = torch.randn(2, 300, 2 * 130, device=dev, generator=gen)[:, :, ::2]
    b = torch.randn(1, 200, 130, device=dev, generator=gen).expand(2, 200, 130)
    run("strided A, broadcast B 2x300x200x130", a, b)
    # operands stored with their rows contiguous ((K, M) / (K, N) read transposed): the split transposes them
    a_t = torch.randn(2, 333, 190, device=dev, generator=gen).transpose(1, 2)
    b_t = torch.randn(2, 333, 170, device=dev, generator=gen).transpose(1, 2)
    run("A rows-contiguous 2x190x170x333", a_t, torch.randn(2, 170, 333, device=dev, generator=gen))
    run("B rows-contiguous 2x190x170x333", torch.randn(2, 190, 333, device=dev, generator=gen), b_t)
    run("both rows-contiguous 2x190x170x333", a_t, b_t)
    # the seed's epilogue on an irregular shape, and the seed itself
    a = torch.rand(1, 77, 300, device=dev, generator=gen)
    w = torch.randn(1, 203, 300, device=dev, generator=gen) * 0.05
    run("epilogue 77x203x300", a, w, torch.randn(203, device=dev, generator=gen))
    x = torch.rand(1, 1024, 8192, device=dev, generator=gen)
    w = (torch.rand(1, 8192, 8192, device=dev, generator=gen) * 2 - 1) / 8192 ** 0.5
    run("seed 1024x8192x8192 + epilogue", x, w, (torch.rand(8192, device=dev, generator=gen) * 2 - 1) / 8192 ** 0.5)
    return checks


class Seed:
    """The seed's operands (same in every process: seeded), its float64 truth and cuBLAS's error."""

    def __init__(self, dev):
        import torch
        torch.manual_seed(0)
        lin = torch.nn.Linear(8192, 8192).to(dev)
        self.x = torch.rand(1024, 8192, device=dev)
        self.w, self.bias = lin.weight.detach(), lin.bias.detach()
        self.truth = torch.nn.functional.leaky_relu((self.x.double() @ self.w.double().t() + self.bias.double()) * 2.0, 0.1)
        self.sq_a, self.sq_b = torch.rand(4096, 4096, device=dev), torch.rand(4096, 4096, device=dev)
        self.sq_b_nk = self.sq_b.t().contiguous()  # the same product with B stored (N, K)

    def eager(self):
        import torch
        return torch.nn.functional.leaky_relu(torch.nn.functional.linear(self.x, self.w, self.bias) * 2.0, 0.1)


FLOPS = 2 * 1024 * 8192 * 8192


def measure_variant(name: str) -> dict:
    """Validation, then timings, of one built variant (run in its own process: a sticky CUDA error stays there)."""
    import torch

    from kfuse.problem import L2Flush
    dev = torch.device("cuda")
    mod = load_variant(name)
    checks = validate(mod, dev)
    entry = {"checks": checks, "correct": all(c["ok"] for c in checks)}
    print(f"{name}: {'correct' if entry['correct'] else 'WRONG'} (worst err/ref_err "
          f"{max(c['err'] / max(c['ref_err'], 1e-30) for c in checks):.3f})", flush=True)
    flush, seed, dummy = L2Flush(dev), Seed(dev), torch.zeros(1, device=dev)
    fn = lambda: mod.gemm(seed.x.unsqueeze(0), seed.w.unsqueeze(0), seed.bias, 1, 2.0, 0.1)  # noqa: E731
    t = time_ms(fn, flush)
    err = (fn()[0].double() - seed.truth).abs().max().item()
    t_sq = time_ms(lambda: mod.gemm(seed.sq_a.unsqueeze(0), seed.sq_b_nk.unsqueeze(0), dummy, 0, 1.0, 0.0), flush)
    # the same product with B as stored (K, N), read transposed (torch.matmul's layout)
    t_kn = time_ms(lambda: mod.gemm(seed.sq_a.unsqueeze(0), seed.sq_b.t().unsqueeze(0), dummy, 0, 1.0, 0.0), flush)
    entry.update(seed_ms=t, seed_err=err, seed_tflops=FLOPS / t / 1e9, square_ms=t_sq, square_kn_ms=t_kn)
    return entry


def measure_kfuse_optimize(out_dir: Path) -> dict:
    """kfuse optimize's file for the seed problem, as the judge runs it: ModelNew vs Model, same weights."""
    import torch

    from kfuse.problem import L2Flush, build_reference, load_problem, make_inputs
    dev = torch.device("cuda")
    problem, init_inputs = load_problem(str(SEED_PROBLEM))
    reference = build_reference(problem, init_inputs, seed=0, device=dev)
    generated = import_file(out_dir / "seed_optimized.py")
    candidate = generated.ModelNew(*init_inputs).to(dev)
    candidate.load_state_dict(reference.state_dict())
    inputs = make_inputs(problem, seed=1, device=dev)
    flush = L2Flush(dev)
    with torch.no_grad():
        got, ref = candidate(*inputs), reference(*inputs)
        truth = torch.nn.functional.leaky_relu(
            (inputs[0].double() @ reference.gemm.weight.double().t() + reference.gemm.bias.double()) * 2.0, 0.1)
        check = compare(got, truth, ref)
        t_model = time_ms(lambda: candidate(*inputs), flush)
        t_ref = time_ms(lambda: reference(*inputs), flush)
    return {"eager_ms": t_ref, "kfuse_ms": t_model, "speedup": t_ref / t_model, **check}


def child(args) -> None:
    """--one NAME: measure one thing, write its JSON to --result."""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        entry = (measure_kfuse_optimize(Path(args.out)) if args.one == "kfuse_optimize"
                 else measure_variant(args.one))
    except Exception:
        entry = {"error": traceback.format_exc()[-6000:], "correct": False}
        print(f"{args.one}: FAILED\n{entry['error']}", flush=True)
    Path(args.result).write_text(json.dumps(entry))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        return child(args)
    import tempfile

    import torch
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    os.environ["GEMM_WGMMA_OUT"] = str(out_dir)
    os.environ.setdefault("MAX_JOBS", "2")  # per extension (2 sources); the builds run side by side
    names = args.variants.split(",")
    began = time.time()
    results = {"variants": {}, "builds": {}}

    # spawned workers (CUDA is not initialized in this process before they start: forked children could not use it)
    with ProcessPoolExecutor(max_workers=len(names) + 1, mp_context=multiprocessing.get_context("spawn")) as pool:
        builds = list(pool.map(build, names + ["kfuse_optimize"]))
    for name, seconds, error in builds:
        results["builds"][name] = {"seconds": round(seconds, 1), "error": error}
        print(f"build {name}: {seconds:.1f} s" + ("" if error is None else f" FAILED\n{error}"), flush=True)
    ok_builds = [n for n, _, e in builds if e is None]

    # one process per variant, one at a time (timings must not overlap)
    scratch = Path(tempfile.mkdtemp(prefix="gemm_wgmma_"))
    for name in ok_builds:
        result = scratch / f"{name}.json"
        try:
            subprocess.run([sys.executable, __file__, "--one", name, "--result", str(result), "--out", str(out_dir)],
                           timeout=150, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
            entry = json.loads(result.read_text()) if result.exists() else {"error": "no result (crashed?)"}
        except subprocess.TimeoutExpired:
            entry = {"error": "timed out after 150 s (a hang?)", "correct": False}
        if "error" in entry and "checks" not in entry:
            print(f"{name}: FAILED: {entry['error'][-3000:]}", flush=True)
        results["variants"][name] = entry
    optimized = results["variants"].pop("kfuse_optimize", None)
    if optimized is not None:
        results["kfuse_optimize"] = optimized

    torch.backends.cuda.matmul.allow_tf32 = False
    from kfuse.problem import L2Flush
    dev = torch.device("cuda")
    results["device"] = torch.cuda.get_device_name()
    flush, seed = L2Flush(dev), Seed(dev)
    e_ref = (seed.eager().double() - seed.truth).abs().max().item()
    t_eager = time_ms(seed.eager, flush)
    t_sq_eager = time_ms(lambda: torch.matmul(seed.sq_a, seed.sq_b), flush)
    results["seed"] = {"eager_ms": t_eager, "eager_err": e_ref}
    results["square4096"] = {"eager_ms": t_sq_eager}
    rows = [f"{'variant':30s} {'correct':>7s} {'seed ms':>8s} {'TFLOP/s':>8s} {'vs eager':>8s} {'seed err':>9s} "
            f"{'sq4096 ms':>9s} {'sq speedup':>10s}",
            f"{'cuBLAS fp32 (eager)':30s} {'':>7s} {t_eager:8.3f} {FLOPS / t_eager / 1e9:8.1f} {1.0:8.2f} "
            f"{e_ref:9.2e} {t_sq_eager:9.3f} {1.0:10.2f}"]
    for name, entry in results["variants"].items():
        if "seed_ms" not in entry:
            rows.append(f"{name:30s} {'FAILED':>7s}")
            continue
        t, t_sq = entry["seed_ms"], entry["square_ms"]
        entry["parity"] = entry["seed_err"] <= 10 * e_ref
        rows.append(f"{name:30s} {str(entry['correct']):>7s} {t:8.3f} {FLOPS / t / 1e9:8.1f} {t_eager / t:8.2f} "
                    f"{entry['seed_err']:9.2e} {t_sq:9.3f} {t_sq_eager / t_sq:10.2f}   (B (K, N): "
                    f"{entry['square_kn_ms']:.3f} ms)")
    opt = results.get("kfuse_optimize")
    if opt and "kfuse_ms" in opt:
        rows.append(f"{'kfuse optimize ModelNew':30s} {str(opt['ok']):>7s} {opt['kfuse_ms']:8.3f} "
                    f"{FLOPS / opt['kfuse_ms'] / 1e9:8.1f} {opt['speedup']:8.2f} {opt['err']:9.2e}   "
                    f"(vs its own eager Model {opt['eager_ms']:.3f} ms)")
    elif "kfuse_optimize" in results["builds"]:
        rows.append(f"{'kfuse optimize ModelNew':30s} {'FAILED':>7s}")
    results["total_s"] = time.time() - began
    (out_dir / "gemm-wgmma.json").write_text(json.dumps(results, indent=1))
    (out_dir / "gemm-wgmma.txt").write_text("\n".join(rows) + "\n")
    print("\n".join(rows))
    print(f"total {results['total_s']:.0f} s; {out_dir / 'gemm-wgmma.json'}")


if __name__ == "__main__":
    main()
