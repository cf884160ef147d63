"""What a BatchNorm's statistics pass needs to stream at DRAM speed. One device call:

    PYTHONPATH=. python scripts/bench/norm_statistics.py [--json OUT.json]

Per-channel mean and M2 of an NCHW tensor, (N, C, H, W) = (64, 64, 512, 512) as in level1/33_BatchNorm (4.3 GB):
kfuse's split row kernel spent 2.0 ms on it (stage 1, 528 blocks of 512 threads; ncu under its clocks: 1.62 ms,
DRAM 55%, issue slots 55% busy, 50% occupancy limited by registers, about 84 instructions a float4), torch.compile's
Triton reduction 0.95 ms (results/devset-H200-2026-11-28-r/). Each variant is the same two launches: every block
folds a contiguous chunk of one channel's N x H x W values into (mean, M2, count), then one thread a channel merges
the chunks (Chan's formula). Variants differ in one thing each against `kfuse`:

- kfuse: kfuse's float4 step (four values' own mean and M2 merged with an IEEE division), the chunk's address of
  each float4 found by a division of the reduced index (as kf::reduced_offsets), two float4 loads in flight a thread;
- rcp: the merge's 4 / total by a reciprocal instruction (MUFU.RCP, no slow-path check);
- walk: addresses by stepping through the planes (no division per float4);
- walk_rcp: both;
- shifted: sums of (x - K) and (x - K)^2 over the chunk (K: the chunk's first value), four independent chains, turned
  into (mean, M2) once at the end; walk addressing;
- shifted_4: the same with four float4 loads in flight a thread;
- kfuse_occ3: kfuse's, under __launch_bounds__(512, 3) (three blocks an SM where it has the registers);
- kfuse_occ2: kfuse's at two blocks an SM (unused shared memory holds it there), the occupancy kfuse's kernel has:
  this stand-alone one needs 38 registers, kfuse's, which also holds the merge and the full phase, 64.

Reported: each variant's largest relative error of the mean and variance against float64, and time (CUDA events, L2
flushed, median of 20) with GB/s; beside them ATen's torch.var_mean and torch.compile's (Triton) over the same dims.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from torch.utils.cpp_extension import load_inline

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from kfuse.problem import L2Flush  # noqa: E402
from transpose_epilogue import timed  # noqa: E402  (the judge's timing of one call, a median)

CUDA = r"""
#include <cuda_runtime.h>
#include <cstdint>

struct Stat { float mean, m2, n; };

__device__ __forceinline__ void merge(Stat& a, const Stat& b) {  // Chan's formula (kfr_welford_merge)
    if (b.n == 0.0f) return;
    if (a.n == 0.0f) { a = b; return; }
    const float total = a.n + b.n, d = b.mean - a.mean, f = b.n / total;
    a.mean += d * f;
    a.m2 += b.m2 + d * d * a.n * f;
    a.n = total;
}

template <bool RCP>
__device__ __forceinline__ void step4(Stat& s, float4 v) {  // kfr_welford_step4
    const float q = 0.25f;
    const float mean_b = (v.x * q + v.y * q) + (v.z * q + v.w * q);
    const float d0 = v.x - mean_b, d1 = v.y - mean_b, d2 = v.z - mean_b, d3 = v.w - mean_b;
    const float m2_b = (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3);
    const float total = s.n + 4.0f, d = mean_b - s.mean;
    const float f = RCP ? 4.0f * __frcp_rn(total) : 4.0f / total;
    s.mean += d * f;
    s.m2 += m2_b + d * d * s.n * f;
    s.n = total;
}

__device__ __forceinline__ Stat shfl_down(const Stat& s, int off) {
    return Stat{__shfl_down_sync(0xffffffffu, s.mean, off), __shfl_down_sync(0xffffffffu, s.m2, off),
                __shfl_down_sync(0xffffffffu, s.n, off)};
}

__device__ Stat block_merge(Stat s) {
    __shared__ Stat red[32];
    for (int off = 16; off > 0; off >>= 1) merge(s, shfl_down(s, off));
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) red[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = lane < (int)blockDim.x / 32 ? red[lane] : Stat{0.0f, 0.0f, 0.0f};
        for (int off = 16; off > 0; off >>= 1) merge(s, shfl_down(s, off));
    }
    return s;
}

// n / d for 0 <= n < 2^31 by multiply-high and shift (kf::div32)
__device__ __forceinline__ uint32_t div32(uint32_t n, uint32_t magic, uint32_t shift) {
    return (__umulhi(n, magic) + n) >> shift;
}

struct Geometry {
    const float* x;
    int C, HW;
    int64_t R;         // N * HW: a channel's values
    int splits;
    uint32_t magic, shift;  // HW as a div32 divisor
};

// The float4 at reduced index r (a multiple of 4, HW % 4 == 0) of channel c.
__device__ __forceinline__ const float4* by_division(const Geometry& g, int c, uint32_t r) {
    const uint32_t n = div32(r, g.magic, g.shift), s = r - n * (uint32_t)g.HW;
    return reinterpret_cast<const float4*>(g.x + ((int64_t)n * g.C + c) * g.HW + s);
}

// Stepping through channel c's planes: the position (n, s) of reduced index r, advanced `step` at a time.
struct Walker {
    int64_t n; int s;
    __device__ __forceinline__ Walker(const Geometry& g, int64_t r) : n(r / g.HW), s((int)(r % g.HW)) {}
    __device__ __forceinline__ const float4* at(const Geometry& g, int c) const {
        return reinterpret_cast<const float4*>(g.x + (n * g.C + c) * g.HW + s);
    }
    __device__ __forceinline__ void advance(const Geometry& g, int step) {
        s += step;
        while (s >= g.HW) { s -= g.HW; ++n; }
    }
};

template <bool RCP, bool WALK, bool SHIFTED, int INFLIGHT>
__device__ __forceinline__ Stat chunk_stats(const Geometry& g, int c, int64_t r0, int64_t r1) {
    const int step = 4 * (int)blockDim.x;
    int64_t r = r0 + 4 * threadIdx.x;
    Walker w(g, r);
    Stat s{0.0f, 0.0f, 0.0f};
    const float K = g.x[((r0 / g.HW) * g.C + c) * g.HW + r0 % g.HW];  // the chunk's first value (SHIFTED)
    float s1[4] = {0, 0, 0, 0}, s2[4] = {0, 0, 0, 0};
    int64_t count = 0;
    while (r < r1) {
        float4 v[INFLIGHT];
        int got = 0;
#pragma unroll
        for (int k = 0; k < INFLIGHT; ++k) {
            const int64_t rk = r + (int64_t)k * step;
            if (rk < r1) {
                v[k] = WALK ? *w.at(g, c) : *by_division(g, c, (uint32_t)rk);
                if (WALK) w.advance(g, step);
                ++got;
            }
        }
#pragma unroll
        for (int k = 0; k < INFLIGHT; ++k) {
            if (k < got) {
                if (SHIFTED) {
                    const float a = v[k].x - K, b = v[k].y - K, cc = v[k].z - K, d = v[k].w - K;
                    s1[0] += a; s1[1] += b; s1[2] += cc; s1[3] += d;
                    s2[0] += a * a; s2[1] += b * b; s2[2] += cc * cc; s2[3] += d * d;
                } else {
                    step4<RCP>(s, v[k]);
                }
            }
        }
        count += 4 * got;
        r += (int64_t)INFLIGHT * step;
    }
    if (SHIFTED && count > 0) {
        const float n = (float)count, t1 = (s1[0] + s1[1]) + (s1[2] + s1[3]), t2 = (s2[0] + s2[1]) + (s2[2] + s2[3]);
        s = Stat{K + t1 / n, fmaxf(t2 - t1 * t1 / n, 0.0f), n};
    }
    return s;
}

template <bool RCP, bool WALK, bool SHIFTED, int INFLIGHT, int MIN_BLOCKS>
__global__ void __launch_bounds__(512, MIN_BLOCKS) partial_stats(Geometry g, Stat* partial) {
    for (int unit = blockIdx.x; unit < g.C * g.splits; unit += gridDim.x) {
        const int c = unit / g.splits, split = unit % g.splits;
        const int64_t chunk = ((g.R + g.splits - 1) / g.splits + 3) / 4 * 4;
        const int64_t r0 = (int64_t)split * chunk, r1 = r0 + chunk < g.R ? r0 + chunk : g.R;
        Stat s = r0 < r1 ? chunk_stats<RCP, WALK, SHIFTED, INFLIGHT>(g, c, r0, r1) : Stat{0.0f, 0.0f, 0.0f};
        s = block_merge(s);
        if (threadIdx.x == 0) partial[unit] = s;
        __syncthreads();
    }
}

__global__ void channel_stats(const Stat* partial, int C, int splits, float* mean, float* var) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    Stat s{0.0f, 0.0f, 0.0f};
    for (int j = 0; j < splits; ++j) merge(s, partial[c * splits + j]);
    mean[c] = s.mean;
    var[c] = s.m2 / s.n;
}

void run(int64_t variant, const float* x, int64_t N, int64_t C, int64_t HW, int64_t splits, int64_t blocks,
         float* partial, float* mean, float* var) {
    Geometry g{x, (int)C, (int)HW, N * HW, (int)splits, 0, 0};
    const uint64_t d = (uint64_t)HW;  // div32's magic number and shift (kf::set_divisor)
    g.shift = d > 1 ? 64 - __builtin_clzll(d - 1) : 0;
    g.magic = (uint32_t)((uint64_t(1) << 32) * ((uint64_t(1) << g.shift) - d) / d + 1);
    Stat* p = reinterpret_cast<Stat*>(partial);
    const unsigned grid = (unsigned)blocks;
    switch (variant) {
        case 0: partial_stats<false, false, false, 2, 1><<<grid, 512>>>(g, p); break;  // kfuse
        case 1: partial_stats<true, false, false, 2, 1><<<grid, 512>>>(g, p); break;   // rcp
        case 2: partial_stats<false, true, false, 2, 1><<<grid, 512>>>(g, p); break;   // walk
        case 3: partial_stats<true, true, false, 2, 1><<<grid, 512>>>(g, p); break;    // walk_rcp
        case 4: partial_stats<false, true, true, 2, 1><<<grid, 512>>>(g, p); break;    // shifted
        case 5: partial_stats<false, true, true, 4, 1><<<grid, 512>>>(g, p); break;    // shifted_4
        case 6: partial_stats<false, false, false, 2, 3><<<grid, 512>>>(g, p); break;  // kfuse_occ3
        case 7: {  // kfuse_occ2: shared memory it does not use holds it to two blocks an SM, as kfuse's registers do
            auto kernel = partial_stats<false, false, false, 2, 1>;
            const int bytes = 80 * 1024;
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
            kernel<<<grid, 512, bytes>>>(g, p);
            break;
        }
    }
    channel_stats<<<(unsigned)((C + 127) / 128), 128>>>(p, (int)C, (int)splits, mean, var);
}
"""

CPP = r"""
#include <torch/extension.h>
#include <cuda_runtime_api.h>
void run(int64_t variant, const float* x, int64_t N, int64_t C, int64_t HW, int64_t splits, int64_t blocks,
         float* partial, float* mean, float* var);
void launch(int64_t variant, torch::Tensor x, int64_t splits, int64_t blocks, torch::Tensor partial,
            torch::Tensor mean, torch::Tensor var) {
    TORCH_CHECK(x.is_contiguous() && x.dim() == 4 && (x.size(2) * x.size(3)) % 4 == 0, "NCHW, H * W in fours");
    run(variant, x.data_ptr<float>(), x.size(0), x.size(1), x.size(2) * x.size(3), splits, blocks,
        partial.data_ptr<float>(), mean.data_ptr<float>(), var.data_ptr<float>());
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "launch failed");
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("launch", &launch); }
"""

VARIANTS = ["kfuse", "rcp", "walk", "walk_rcp", "shifted", "shifted_4", "kfuse_occ3", "kfuse_occ2"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    args = parser.parse_args()
    ext = load_inline("kfuse_norm_statistics_bench", cpp_sources=CPP, cuda_sources=CUDA,
                      extra_cuda_cflags=["-O3"], verbose=False)
    flush = L2Flush(torch.device("cuda"))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for shape in [(3, 40, 17, 20), (64, 64, 512, 512)]:
        n, c, h, w = shape
        big = n == 64
        x = torch.rand(shape, device="cuda") * 3 + 1  # an offset mean, as a norm's input often has
        want_var, want_mean = torch.var_mean(x.double(), dim=(0, 2, 3), unbiased=False)
        splits = max(1, (4 * sms) // c)  # about kfuse's split (528 blocks for C = 64 on 132 SMs)
        blocks = c * splits
        partial = torch.empty(blocks * 3, device="cuda")
        mean, var = torch.empty(c, device="cuda"), torch.empty(c, device="cuda")
        gb = x.numel() * 4 / 1e9
        print(f"# (N, C, H, W) = {shape}, {splits} splits a channel; {torch.cuda.get_device_name()}, torch "
              f"{torch.__version__}")
        for v, name in enumerate(VARIANTS):
            ext.launch(v, x, splits, blocks, partial, mean, var)
            torch.cuda.synchronize()
            err_mean = ((mean.double() - want_mean).abs() / want_mean.abs()).max().item()
            err_var = ((var.double() - want_var).abs() / want_var.abs()).max().item()
            ms = timed(lambda: ext.launch(v, x, splits, blocks, partial, mean, var), flush, trials=20) if big else None
            rows.append({"shape": list(shape), "variant": name, "mean_rel_err": err_mean, "var_rel_err": err_var,
                         "ms": ms, "GB/s": gb / ms * 1e3 if ms else None})
            print(f"{name:12s} mean err {err_mean:.1e} var err {err_var:.1e}"
                  + (f"  {ms:.3f} ms  {gb / ms * 1e3:.0f} GB/s" if ms else ""), flush=True)
        if big:
            compiled = torch.compile(lambda t: torch.var_mean(t, dim=(0, 2, 3), unbiased=False))
            for name, fn in [("ATen var_mean", lambda: torch.var_mean(x, dim=(0, 2, 3), unbiased=False)),
                             ("torch.compile var_mean", lambda: compiled(x))]:
                ms = timed(fn, flush, trials=20)
                rows.append({"shape": list(shape), "variant": name, "ms": ms, "GB/s": gb / ms * 1e3})
                print(f"{name:24s} {ms:.3f} ms  {gb / ms * 1e3:.0f} GB/s", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
