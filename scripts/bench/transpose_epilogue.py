"""Why kfuse's channels-last epilogue (read [N][S][C], write [N][C][S], pointwise ops on the way) is slow, and
what a fast one looks like. One device call:

    PYTHONPATH=. python scripts/bench/transpose_epilogue.py [--json OUT.json]

The epilogue of suite/level2/1_Conv2d_ReLU_BiasAdd: out = relu(conv + conv_bias[c]) + bias[c], the convolution's
output channels-last, (N, C, H, W) = (128, 64, 126, 126). kfuse's kernel (codegen._channels_last_kernel) took
4.19 ms there (ncu: DRAM throughput 76%, occupancy 99%); the same ops on an NCHW input stream in 0.65 ms.
Variants, each checked bitwise against torch on this size and on an irregular one (C = 40, H x W = 17 x 19):
- tile32_div: kfuse's kernel as emitted (32 x 32 tile through shared memory, grid (S/32, C/32, N), the per-channel
  operands' offsets found by dividing the spatial index);
- tile32: the same without the divisions (per-channel operands read at c);
- tile32_c_fastest: the same, grid ordered channel tiles fastest (blocks in flight share spatial rows);
- strip4: one block per 32 channels x 128 positions (four tiles in turn: 512-byte runs per output plane);
- allc: one block per 32 positions x all channels (each input row read whole, 256 bytes at C = 64);
- tile32_images: tile32 with each block walking several images (about 16K blocks in all);
and, for scale, ATen's channels-last -> contiguous copy and the NCHW epilogue (contiguous in, contiguous out).
Also timed at (32, 64, 513, 513): an odd number of positions, where kfuse takes the 32 x 32 scalar tile
(level2/5_ConvTranspose2d_Subtract_Tanh's epilogue: 2.37 ms against torch.compile's 1.10 for the same bytes, run r).
Times: CUDA events, L2 flushed, median of 30.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
from torch.utils.cpp_extension import load_inline

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from kfuse.problem import L2Flush, time_one_call  # noqa: E402

CUDA = r"""
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>

__device__ __forceinline__ float epi(float x, float cb, float b) { return fmaxf(x + cb, 0.0f) + b; }

// positions [s0, s0 + 32) x channels [c0, c0 + 32) of one channels-last image into a shared tile (coalesced on c)
__device__ __forceinline__ void load_tile(float (*tile)[33], const float* in, int s0, int c0, int C, int S) {
    for (int i = threadIdx.y; i < 32; i += blockDim.y) {
        const int s = s0 + i, c = c0 + threadIdx.x;
        if (s < S && c < C) tile[i][threadIdx.x] = in[(int64_t)s * C + c];
    }
}

// the tile written transposed into image n of the NCHW output (coalesced on s), through the epilogue
__device__ __forceinline__ void store_tile(const float (*tile)[33], const float* cb, const float* b, int s0, int c0,
                                           int C, int S, int64_t n, float* out) {
    for (int i = threadIdx.y; i < 32; i += blockDim.y) {
        const int c = c0 + i, s = s0 + threadIdx.x;
        if (s < S && c < C) out[((int64_t)n * C + c) * S + s] = epi(tile[threadIdx.x][i], cb[c], b[c]);
    }
}

// kfuse's emitted form: per-channel operands addressed through a division of the spatial index
__global__ void tile32_div(const float* src, const float* cb, const float* b, int C, int S, int H, int W,
                           int spatial_stride, float* out) {
    __shared__ float tile[32][33];
    const int s0 = blockIdx.x * 32, c0 = blockIdx.y * 32;
    const int n = blockIdx.z;
    load_tile(tile, src + (int64_t)n * S * C, s0, c0, C, S);
    __syncthreads();
    for (int i = threadIdx.y; i < 32; i += blockDim.y) {
        const int c = c0 + i, s = s0 + threadIdx.x;
        if (s < S && c < C) {
            int off1 = c, off2 = c, rest = s;
            const int sizes[2] = {H, W};
            for (int d = 1; d >= 0; --d) {  // strides 0 along the spatial dims, as for a (C, 1, 1) operand
                const int x = rest % sizes[d];
                rest /= sizes[d];
                off1 += x * spatial_stride; off2 += x * spatial_stride;
            }
            out[((int64_t)n * C + c) * S + s] = epi(tile[threadIdx.x][i], cb[off1], b[off2]);
        }
    }
}

template <bool C_FASTEST>
__global__ void tile32(const float* src, const float* cb, const float* b, int C, int S, int stiles, int ctiles,
                       float* out) {
    __shared__ float tile[32][33];
    int st, ct, n;
    if (C_FASTEST) {
        const int64_t id = blockIdx.x;
        ct = (int)(id % ctiles);
        st = (int)(id / ctiles % stiles);
        n = (int)(id / ctiles / stiles);
    } else {
        st = blockIdx.x; ct = blockIdx.y; n = blockIdx.z;
    }
    const int s0 = st * 32, c0 = ct * 32;
    load_tile(tile, src + (int64_t)n * S * C, s0, c0, C, S);
    __syncthreads();
    store_tile(tile, cb, b, s0, c0, C, S, n, out);
}

// 32 channels x 128 positions per block, one 32 x 32 tile at a time
__global__ void strip4(const float* src, const float* cb, const float* b, int C, int S, float* out) {
    __shared__ float tile[32][33];
    const int c0 = blockIdx.y * 32, n = blockIdx.z;
    const float* in = src + (int64_t)n * S * C;
    for (int part = 0; part < 4; ++part) {
        const int s0 = (blockIdx.x * 4 + part) * 32;
        if (s0 >= S) break;
        load_tile(tile, in, s0, c0, C, S);
        __syncthreads();
        store_tile(tile, cb, b, s0, c0, C, S, n, out);
        __syncthreads();
    }
}

// 32 positions x all channels per block (channel tiles in turn): each input row read whole
__global__ void allc(const float* src, const float* cb, const float* b, int C, int S, float* out) {
    __shared__ float tile[32][33];
    const int s0 = blockIdx.x * 32, n = blockIdx.y;
    const float* in = src + (int64_t)n * S * C;
    for (int c0 = 0; c0 < C; c0 += 32) {
        load_tile(tile, in, s0, c0, C, S);
        __syncthreads();
        store_tile(tile, cb, b, s0, c0, C, S, n, out);
        __syncthreads();
    }
}

// tile32 walking images: gridDim.z images a block in turn (kfuse's emitted launch on branch
// channels-last-epilogue-grid: about 16K blocks in all, not one tile a block)
__global__ void tile32_images(const float* src, const float* cb, const float* b, int N, int C, int S, float* out) {
    __shared__ float tile[32][33];
    const int s0 = blockIdx.x * 32, c0 = blockIdx.y * 32;
    for (int n = blockIdx.z; n < N; n += gridDim.z) {
        load_tile(tile, src + (int64_t)n * S * C, s0, c0, C, S);
        __syncthreads();
        store_tile(tile, cb, b, s0, c0, C, S, n, out);
        __syncthreads();
    }
}

// the NCHW epilogue for scale: contiguous in, contiguous out, 4 at a time
__global__ void nchw_vec4(const float* x, const float* cb, const float* b, int C, int S, int64_t groups,
                          float* out) {
    const int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= groups) return;
    const float4 v = reinterpret_cast<const float4*>(x)[q];
    float r[4] = {v.x, v.y, v.z, v.w};
    for (int j = 0; j < 4; ++j) {
        const int c = (int)((4 * q + j) / S % C);
        r[j] = epi(r[j], cb[c], b[c]);
    }
    reinterpret_cast<float4*>(out)[q] = make_float4(r[0], r[1], r[2], r[3]);
}

void run(int64_t variant, const float* src, const float* cb, const float* b, int64_t N, int64_t C, int64_t H,
         int64_t W, float* out) {
    const int S = (int)(H * W);
    const int stiles = (S + 31) / 32, ctiles = (int)((C + 31) / 32);
    const dim3 threads(32, 8);
    cudaStream_t stream = 0;
    switch (variant) {
        case 0: tile32_div<<<dim3(stiles, ctiles, (unsigned)N), threads, 0, stream>>>(src, cb, b, (int)C, S, (int)H, (int)W, 0, out); break;
        case 1: tile32<false><<<dim3(stiles, ctiles, (unsigned)N), threads, 0, stream>>>(src, cb, b, (int)C, S, stiles, ctiles, out); break;
        case 2: tile32<true><<<(unsigned)(N * stiles * ctiles), threads, 0, stream>>>(src, cb, b, (int)C, S, stiles, ctiles, out); break;
        case 3: strip4<<<dim3((stiles + 3) / 4, ctiles, (unsigned)N), threads, 0, stream>>>(src, cb, b, (int)C, S, out); break;
        case 4: allc<<<dim3(stiles, (unsigned)N), threads, 0, stream>>>(src, cb, b, (int)C, S, out); break;
        case 5: {
            const int64_t groups = N * C * S / 4;  // (the sizes used here are multiples of 4)
            nchw_vec4<<<(unsigned)((groups + 255) / 256), 256, 0, stream>>>(src, cb, b, (int)C, S, groups, out);
            break;
        }
        case 6: {
            const int64_t tiles = (int64_t)stiles * ctiles;
            const unsigned images = (unsigned)std::max<int64_t>(1, std::min<int64_t>(N, (16384 + tiles - 1) / tiles));
            tile32_images<<<dim3(stiles, ctiles, images), threads, 0, stream>>>(src, cb, b, (int)N, (int)C, S, out);
            break;
        }
    }
}
"""

CPP = r"""
#include <torch/extension.h>
#include <cuda_runtime_api.h>
void run(int64_t variant, const float* src, const float* cb, const float* b, int64_t N, int64_t C, int64_t H,
         int64_t W, float* out);
void launch(int64_t variant, torch::Tensor src, torch::Tensor cb, torch::Tensor b, int64_t N, int64_t C, int64_t H,
            int64_t W, torch::Tensor out) {
    run(variant, src.data_ptr<float>(), cb.data_ptr<float>(), b.data_ptr<float>(), N, C, H, W, out.data_ptr<float>());
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "launch failed");
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("launch", &launch); }
"""

VARIANTS = ["tile32_div", "tile32", "tile32_c_fastest", "strip4", "allc", "nchw_vec4 (for scale)", "tile32_images"]


def timed(fn, flush: L2Flush, trials: int = 30) -> float:
    """Median ms of `trials` calls, each timed as the judge times one (kfuse.problem.time_one_call)."""
    for _ in range(3):
        fn()
    return statistics.median(time_one_call(fn, torch.device("cuda"), flush)[0] for _ in range(trials))


def add_row(rows: list, variant: str, err: float | None, ms: float | None, moved_bytes: int, **keys) -> None:
    """One variant's result: a row of the JSON (`keys` first: the case and shape) and a printed line, with the
    bandwidth its `moved_bytes` make (the transposes' benches: 2 x 4 bytes an element)."""
    gbs = moved_bytes / ms / 1e6 if ms else None
    rows.append({**keys, "variant": variant, "max_abs_diff": err, "ms": ms, "GB_per_s": gbs})
    print(f"{variant:20s} " + (f"diff {err:.1e}" if err is not None else " " * 12)
          + (f"  {ms:.3f} ms  {gbs:.0f} GB/s" if ms else ""), flush=True)


def write_rows(path: str | None, rows: list) -> None:
    if path:
        with open(path, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    args = parser.parse_args()
    ext = load_inline("kfuse_transpose_epilogue_bench", cpp_sources=CPP, cuda_sources=CUDA,
                      extra_cuda_cflags=["-O3"], verbose=False)
    flush = L2Flush(torch.device("cuda"))
    rows = []
    for (n, c, h, w) in [(3, 40, 17, 19), (128, 64, 126, 126), (32, 64, 513, 513)]:
        x = torch.randn(n, c, h, w, device="cuda").contiguous(memory_format=torch.channels_last)
        cb, b = torch.randn(c, device="cuda"), torch.randn(c, device="cuda")
        want = torch.relu(x + cb.view(-1, 1, 1)) + b.view(-1, 1, 1)
        x_nchw = x.contiguous()
        big = n * c * h * w > 1 << 24
        print(f"# (N, C, H, W) = {(n, c, h, w)}; {torch.cuda.get_device_name()}, torch {torch.__version__}")
        for v, name in enumerate(VARIANTS):
            if v == 5 and (n * c * h * w) % 4:
                continue
            out = torch.empty(n, c, h, w, device="cuda")
            source = x_nchw if v == 5 else x
            ext.launch(v, source, cb, b, n, c, h, w, out)
            torch.cuda.synchronize()
            err = (out - want).abs().max().item()
            ms = timed(lambda: ext.launch(v, source, cb, b, n, c, h, w, out), flush) if big else None
            rows.append({"shape": [n, c, h, w], "variant": name, "max_abs_diff": err, "ms": ms})
            print(f"{name:24s} diff {err:.1e}" + (f"  {ms:.3f} ms" if ms is not None else ""), flush=True)
        if big:
            ms = timed(lambda: x.contiguous(), flush)
            rows.append({"shape": [n, c, h, w], "variant": "ATen channels-last -> contiguous copy", "ms": ms})
            print(f"{'ATen copy (cl -> nchw)':24s}             {ms:.3f} ms")
    write_rows(args.json, rows)


if __name__ == "__main__":
    main()
