"""Transposing copies with 16-byte accesses on both sides, against kfuse's 32x32 scalar tiles. One device call:

    PYTHONPATH=. python scripts/bench/transpose_vec4.py [--json OUT.json]

Why: on an H100 (scripts/gpu_profile.py, 2026-11-23) kfuse's channels-last epilogue of suite/level2/1 (read
[N][S][C], write [N][C][S], relu(x + cb[c]) + b[c]; 1.04 GB) took 0.572 ms where torch.compile's took 0.361, and
kfuse's NCHW -> channels-last input copy 0.250 ms for 0.54 GB where inductor's took 0.176: both at ~2 TB/s, the
32x32 tiles of 4-byte accesses (tile32 below, as emitted). Variants (tile TR rows x TK columns of the source's
[R][K] matrix per image, 256 threads, float4 loads along K and float4 stores along R, a [TK][TR + 1] shared
tile: conflict-free fills for TK = 32) need K % 4 == 0 and R % 4 == 0 (and 16-byte aligned bases).
Each is checked bitwise against torch on the timed size and a small one; times: CUDA events, L2 flushed, median
of 30 (kfuse.problem.time_one_call).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from torch.utils.cpp_extension import load_inline

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from kfuse.problem import L2Flush  # noqa: E402
from transpose_epilogue import timed  # noqa: E402  (the judge's timing of one call, median of 30)

CUDA = r"""
#include <cuda_runtime.h>
#include <cstdint>

struct Plain { __device__ float operator()(float x, int) const { return x; } };
struct BiasRelu {  // suite/level2/1's epilogue: relu(x + conv_bias[c]) + bias[c]
    const float* cb; const float* b;
    __device__ float operator()(float x, int c) const { return fmaxf(x + cb[c], 0.0f) + b[c]; }
};

// kfuse's emitted form (codegen._channels_last_kernel / kf_to_channels_last): 32 x 32 tile, 4-byte accesses
template <typename Epi>
__global__ void tile32(const float* __restrict__ in, float* __restrict__ out, int R, int K, Epi epi, bool k_is_channel) {
    __shared__ float tile[32][33];
    const int r0 = blockIdx.x * 32, k0 = blockIdx.y * 32;
    const int64_t n = blockIdx.z;
    const float* src = in + n * R * K;
    float* dst = out + n * R * K;
    for (int i = threadIdx.y; i < 32; i += blockDim.y) {
        const int r = r0 + i, k = k0 + threadIdx.x;
        if (r < R && k < K) tile[i][threadIdx.x] = src[(int64_t)r * K + k];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < 32; i += blockDim.y) {
        const int k = k0 + i, r = r0 + threadIdx.x;
        if (r < R && k < K) dst[(int64_t)k * R + r] = epi(tile[threadIdx.x][i], k_is_channel ? k : r);
    }
}

// TR rows x TK columns of the source per block: float4 loads along K, float4 stores along R
template <int TR, int TK, typename Epi>
__global__ void __launch_bounds__(256) vec4(const float* __restrict__ in, float* __restrict__ out, int R, int K,
                                             Epi epi, bool k_is_channel) {
    __shared__ float tile[TK][TR + 1];
    const int r0 = blockIdx.x * TR, k0 = blockIdx.y * TK;
    const int64_t n = blockIdx.z;
    const float* src = in + n * R * K;
    float* dst = out + n * R * K;
    constexpr int KQ = TK / 4, RQ = TR / 4;
#pragma unroll
    for (int i = threadIdx.x; i < TR * KQ; i += 256) {
        const int r = i / KQ, kq = i % KQ, gr = r0 + r, gk = k0 + 4 * kq;
        if (gr < R && gk < K) {
            const float4 v = *reinterpret_cast<const float4*>(src + (int64_t)gr * K + gk);
            tile[4 * kq][r] = v.x; tile[4 * kq + 1][r] = v.y; tile[4 * kq + 2][r] = v.z; tile[4 * kq + 3][r] = v.w;
        }
    }
    __syncthreads();
#pragma unroll
    for (int i = threadIdx.x; i < TK * RQ; i += 256) {
        const int k = i / RQ, rq = i % RQ, gk = k0 + k, gr = r0 + 4 * rq;
        if (gk < K && gr < R) {
            const float* t = &tile[k][4 * rq];
            float4 v;
            if (k_is_channel) v = make_float4(epi(t[0], gk), epi(t[1], gk), epi(t[2], gk), epi(t[3], gk));
            else v = make_float4(epi(t[0], gr), epi(t[1], gr + 1), epi(t[2], gr + 2), epi(t[3], gr + 3));
            *reinterpret_cast<float4*>(dst + (int64_t)gk * R + gr) = v;
        }
    }
}

template <typename Epi>
void launch_variant(int v, const float* in, float* out, int64_t N, int R, int K, Epi epi, bool kc) {
    auto grid = [&](int tr, int tk) { return dim3((unsigned)((R + tr - 1) / tr), (unsigned)((K + tk - 1) / tk), (unsigned)N); };
    switch (v) {
        case 0: tile32<<<grid(32, 32), dim3(32, 8)>>>(in, out, R, K, epi, kc); break;
        case 1: vec4<64, 32><<<grid(64, 32), 256>>>(in, out, R, K, epi, kc); break;
        case 2: vec4<128, 32><<<grid(128, 32), 256>>>(in, out, R, K, epi, kc); break;
        case 3: vec4<64, 64><<<grid(64, 64), 256>>>(in, out, R, K, epi, kc); break;
        case 4: vec4<32, 32><<<grid(32, 32), 256>>>(in, out, R, K, epi, kc); break;
        case 5: vec4<32, 64><<<grid(32, 64), 256>>>(in, out, R, K, epi, kc); break;
    }
}

void run(int64_t variant, bool epilogue, const float* in, const float* cb, const float* b, int64_t N, int64_t R,
         int64_t K, bool k_is_channel, float* out) {
    if (epilogue) launch_variant((int)variant, in, out, N, (int)R, (int)K, BiasRelu{cb, b}, k_is_channel);
    else launch_variant((int)variant, in, out, N, (int)R, (int)K, Plain{}, k_is_channel);
}
"""

CPP = r"""
#include <torch/extension.h>
#include <cuda_runtime_api.h>
void run(int64_t variant, bool epilogue, const float* in, const float* cb, const float* b, int64_t N, int64_t R,
         int64_t K, bool k_is_channel, float* out);
void launch(int64_t variant, bool epilogue, torch::Tensor in, torch::Tensor cb, torch::Tensor b, int64_t N, int64_t R,
            int64_t K, bool k_is_channel, torch::Tensor out) {
    run(variant, epilogue, in.data_ptr<float>(), cb.data_ptr<float>(), b.data_ptr<float>(), N, R, K, k_is_channel,
        out.data_ptr<float>());
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "launch failed");
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("launch", &launch); }
"""

VARIANTS = ["tile32 (emitted)", "vec4 64x32", "vec4 128x32", "vec4 64x64", "vec4 32x32", "vec4 32x64"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    args = parser.parse_args()
    ext = load_inline("kfuse_transpose_vec4_bench", cpp_sources=CPP, cuda_sources=CUDA,
                      extra_cuda_cflags=["-O3"], verbose=False)
    flush = L2Flush(torch.device("cuda"))
    rows = []
    # (kind, N, C, H, W): "from" = channels-last conv output -> NCHW through the epilogue (R = S, K = C);
    # "to" = NCHW input -> channels-last (R = C, K = S)
    cases = [("from", 3, 40, 18, 18), ("from", 128, 64, 126, 126), ("from", 32, 128, 254, 254),
             ("to", 3, 12, 18, 18), ("to", 128, 32, 128, 128), ("to", 32, 64, 512, 512)]
    for kind, n, c, h, w in cases:
        big = n * c * h * w > 10**7
        s = h * w
        cb, b = torch.randn(c, device="cuda"), torch.randn(c, device="cuda")
        if kind == "from":
            x = torch.randn(n, c, h, w, device="cuda").contiguous(memory_format=torch.channels_last)
            want = torch.relu(x + cb.view(-1, 1, 1)) + b.view(-1, 1, 1)
            r_, k_, epilogue = s, c, True
        else:
            x = torch.randn(n, c, h, w, device="cuda")
            want = x.contiguous(memory_format=torch.channels_last)
            r_, k_, epilogue = c, s, False
        print(f"# {kind} (N, C, H, W) = {(n, c, h, w)}; {torch.cuda.get_device_name()}, torch {torch.__version__}")
        for v, name in enumerate(VARIANTS):
            out = torch.empty(n * c * s, device="cuda")
            try:
                ext.launch(v, epilogue, x, cb, b, n, r_, k_, True, out)
                torch.cuda.synchronize()
            except Exception as error:  # one broken variant must not stop the others
                print(f"{name:20s} failed: {error}")
                continue
            got = out.view(n, c, h, w) if kind == "from" else out.view(n, h, w, c).permute(0, 3, 1, 2)
            err = (got - want).abs().max().item()
            ms = timed(lambda: ext.launch(v, epilogue, x, cb, b, n, r_, k_, True, out), flush) if big else None
            gbs = 2 * x.numel() * 4 / ms / 1e6 if ms else None
            rows.append({"kind": kind, "shape": [n, c, h, w], "variant": name, "max_abs_diff": err, "ms": ms,
                         "GB_per_s": gbs})
            print(f"{name:20s} diff {err:.1e}" + (f"  {ms:.3f} ms  {gbs:.0f} GB/s" if ms else ""), flush=True)
        if big:
            ref = (lambda: x.contiguous()) if kind == "from" else (lambda: x.contiguous(memory_format=torch.channels_last))
            ms = timed(ref, flush)
            rows.append({"kind": kind, "shape": [n, c, h, w], "variant": "ATen copy", "ms": ms})
            print(f"{'ATen copy':20s}            {ms:.3f} ms")
            plain = torch.randn(n, c, h, w, device="cuda")
            ms = timed(lambda: plain.clone(), flush)
            rows.append({"kind": kind, "shape": [n, c, h, w], "variant": "clone (copy roofline)", "ms": ms})
            print(f"{'clone (roofline)':20s}            {ms:.3f} ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
