"""Can a one-pass pointwise kernel beat eager's by more than noise? ReLU over (4096, 131072) fp32 (2 GiB in,
2 GiB out: suite/level1/14_ReLU), where kfuse's float4 kernel and eager's sit within 1% of each other.
One device call:

    PYTHONPATH=. python scripts/bench/stream_variants.py [--json OUT.json]

Variants, each checked bitwise against torch.relu on this size and on an odd one:
- vec4: kfuse's kernel as emitted (one float4 per thread, 256 threads, plain loads and stores);
- vec4_t128 / vec4_t512 / vec4_t1024: the same with other block sizes;
- vec4_cs: streaming hints (__ldcs / __stcs: evict-first in L1 and L2);
- vec4_nc256: loads through the non-coherent path with no L1 allocation and a 256-byte L2 prefetch hint;
- vec8: two neighbouring float4 per thread (32 contiguous bytes), both loads before the stores;
- vec8_nc256: vec8 with the 256-byte prefetch hint and streaming stores;
- vec4_x2: two float4 a block apart per thread (coalesced), loads first.
Times: CUDA events, L2 flushed (kfuse.problem.time_one_call), interleaved rounds (kfuse.timing), median
and min of 60.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from torch.utils.cpp_extension import load_inline

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from kfuse.problem import L2Flush, time_one_call  # noqa: E402
from kfuse.timing import TimingPlan, time_interleaved  # noqa: E402

CUDA = r"""
#include <cuda_runtime.h>
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <cstdint>

__device__ __forceinline__ float op(float x) { return (x < 0.0f) ? 0.0f : x; }
__device__ __forceinline__ float4 op4(float4 v) { return make_float4(op(v.x), op(v.y), op(v.z), op(v.w)); }

__device__ __forceinline__ float4 load_nc256(const float4* p) {
    float4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
}

template <int MODE>  // 0 plain, 1 __ldcs/__stcs, 2 nc256 loads + plain stores
__global__ void vec4(const float4* __restrict__ in, float4* __restrict__ out, int64_t groups) {
    const int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= groups) return;
    if (MODE == 0) out[q] = op4(in[q]);
    if (MODE == 1) __stcs(out + q, op4(__ldcs(in + q)));
    if (MODE == 2) out[q] = op4(load_nc256(in + q));
}

template <int MODE>  // 0 plain, 1 nc256 loads + streaming stores
__global__ void vec8(const float4* __restrict__ in, float4* __restrict__ out, int64_t groups) {
    const int64_t q = 2 * ((int64_t)blockIdx.x * blockDim.x + threadIdx.x);
    if (q + 1 < groups) {
        const float4 a = MODE ? load_nc256(in + q) : in[q];
        const float4 b = MODE ? load_nc256(in + q + 1) : in[q + 1];
        if (MODE) { __stcs(out + q, op4(a)); __stcs(out + q + 1, op4(b)); }
        else { out[q] = op4(a); out[q + 1] = op4(b); }
    } else if (q < groups) {
        out[q] = op4(in[q]);
    }
}

__global__ void vec4_x2(const float4* __restrict__ in, float4* __restrict__ out, int64_t groups) {
    const int64_t q = 2 * (int64_t)blockIdx.x * blockDim.x + threadIdx.x, r = q + blockDim.x;
    float4 a, b;
    if (q < groups) a = in[q];
    if (r < groups) b = in[r];
    if (q < groups) out[q] = op4(a);
    if (r < groups) out[r] = op4(b);
}

__global__ void tail(const float* __restrict__ in, float* __restrict__ out, int64_t begin, int64_t n) {
    const int64_t i = begin + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = op(in[i]);
}

torch::Tensor run(torch::Tensor x, int64_t variant, int64_t threads) {
    auto out = torch::empty_like(x);
    const int64_t n = x.numel(), groups = n / 4;
    auto in4 = reinterpret_cast<const float4*>(x.data_ptr<float>());
    auto out4 = reinterpret_cast<float4*>(out.data_ptr<float>());
    const int64_t per_thread = (variant == 4 || variant == 5 || variant == 6) ? 2 : 1;
    const unsigned blocks = (unsigned)((groups + per_thread * threads - 1) / (per_thread * threads));
    auto stream = c10::cuda::getCurrentCUDAStream();
    if (groups > 0) {
        switch (variant) {
            case 0: vec4<0><<<blocks, threads, 0, stream>>>(in4, out4, groups); break;
            case 1: vec4<1><<<blocks, threads, 0, stream>>>(in4, out4, groups); break;
            case 2: vec4<2><<<blocks, threads, 0, stream>>>(in4, out4, groups); break;
            case 4: vec8<0><<<blocks, threads, 0, stream>>>(in4, out4, groups); break;
            case 5: vec8<1><<<blocks, threads, 0, stream>>>(in4, out4, groups); break;
            case 6: vec4_x2<<<blocks, threads, 0, stream>>>(in4, out4, groups); break;
        }
    }
    if (groups * 4 < n) tail<<<1, 256, 0, stream>>>(x.data_ptr<float>(), out.data_ptr<float>(), groups * 4, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""
CPP = "torch::Tensor run(torch::Tensor x, int64_t variant, int64_t threads);"

VARIANTS = {  # name: (variant, threads)
    "vec4": (0, 256), "vec4_t128": (0, 128), "vec4_t512": (0, 512), "vec4_t1024": (0, 1024),
    "vec4_cs": (1, 256), "vec4_nc256": (2, 256), "vec8": (4, 256), "vec8_nc256": (5, 256), "vec4_x2": (6, 256),
}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()
    ext = load_inline("kf_stream_variants", cpp_sources=CPP, cuda_sources=CUDA, functions=["run"],
                      extra_cuda_cflags=["-O3", "-arch=sm_90"])
    device = torch.device("cuda")
    for shape in [(37, 1001), (4096, 131072)]:  # odd size first: tails and partial blocks
        x = torch.randn(shape, device=device)
        x.view(-1)[::7] = -0.0
        want = torch.relu(x)
        for name, (variant, threads) in VARIANTS.items():
            got = ext.run(x, variant, threads)
            assert torch.equal(got, want), f"{name} differs from torch.relu at {shape}"
    print("all variants bitwise equal to torch.relu")
    flush = L2Flush(device)
    contenders = {"eager": lambda: torch.relu(x)}
    for name, (variant, threads) in VARIANTS.items():
        contenders[name] = (lambda v=variant, t=threads: ext.run(x, v, t))
    for fn in contenders.values():
        for _ in range(3):
            fn()
    plan = TimingPlan(warmup=0, min_trials=args.rounds, min_seconds=0.0, max_trials=args.rounds)
    stats = time_interleaved({name: (lambda _round, fn=fn: time_one_call(fn, device, flush)[0])
                              for name, fn in contenders.items()}, plan)
    gbytes = 2 * x.numel() * 4 / 1e9
    rows = []
    base = stats["eager"]["median_ms"]
    for name, st in stats.items():
        med = st["median_ms"]
        rows.append({"variant": name, "median_ms": med, "min_ms": st["min_ms"], "gb_per_s": gbytes / med * 1e3,
                     "vs_eager": base / med})
        print(f"{name:12s} median {med:.4f} ms  min {st['min_ms']:.4f}  {gbytes / med * 1e3:7.0f} GB/s  "
              f"{base / med:.3f}x eager")
    if args.json:
        Path(args.json).write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                                               "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
