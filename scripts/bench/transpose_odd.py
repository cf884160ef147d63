"""The channels-last epilogue where positions are not in fours (a 513 x 513 transposed convolution's result).

    PYTHONPATH=. python scripts/bench/transpose_odd.py [--json OUT.json]

level2/5_ConvTranspose2d_Subtract_Tanh's epilogue reads cuDNN's channels-last result (32 x 513 x 513 positions of
64 channels, 2.16 GB) and writes tanh(x - b[c]) NCHW: 2.4-2.5 ms in kfuse's kernels, 1.10 in torch.compile's Triton
kernel (H200). NCHW rows of 263169 floats start anywhere in a 32-byte sector, so no 16-byte stores; the question is
what else makes kfuse's kernels slow. Variants, each checked against torch on the timed size and an irregular one:
- cur4r / cur4r plain: kfuse's emitted kernel (64 channels x 64 positions a block, 16-byte reads into the tile,
  4-byte streaming stores) and the same with plain stores;
- wTCxTS (s: streaming stores): TC channels x TS positions a block, 16-byte reads, the tile padded so that both
  shared-memory passes are conflict-free, a warp's stores 32 neighbouring positions of one channel and a block's
  whole TS positions of a channel row back to back (fewer tile edges inside a row: the sectors two blocks share);
- scalar32: the 32 x 32 tile of 4-byte accesses (the kernel before the 16-byte reads);
- copy4 for scale, and torch.compile's kernel for the same epilogue.
Times: CUDA events, L2 flushed, median of 30 (scripts/bench/transpose_epilogue.timed).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch.utils.cpp_extension import load_inline

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from kfuse.compiler.codegen import TILE_FILL  # noqa: E402  (kf::fill_tile4, as the emitted kernels use it)
from kfuse.problem import L2Flush  # noqa: E402
from transpose_epilogue import add_row, timed, write_rows  # noqa: E402

CUDA = r"""
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>
""" + TILE_FILL + r"""

// in: [N][S][C] (channels-last), out: [N][C][S]; out = tanh(in - b[c]). C a multiple of 4, S anything.

template <bool STREAM>
__global__ void cur4r(const float* __restrict__ in, const float* __restrict__ b, float* __restrict__ out, int64_t N,
                      int64_t C, int64_t S) {
    __shared__ float tile[64][64 + 1];  // [channel][position]
    const int64_t stiles = (S + 63) / 64, per_image = stiles * ((C + 63) / 64);
    for (int64_t u = blockIdx.x; u < N * per_image; u += gridDim.x) {
        const int64_t n = u / per_image, s0 = u % per_image % stiles * 64, c0 = u % per_image / stiles * 64;
        kf::fill_tile4(tile, in + n * S * C, S, C, s0, c0);
        __syncthreads();
        const int64_t s = s0 + threadIdx.x % 64;
        #pragma unroll 4
        for (int i = threadIdx.x / 64; i < 64; i += 4) {
            const int64_t c = c0 + i;
            if (c < C && s < S) {
                const int at = (int)((n * C + c) * S + s);
                const float y = tanhf(tile[i][threadIdx.x % 64] - b[c]);
                if (STREAM) __stcs(out + at, y); else out[at] = y;
            }
        }
        __syncthreads();
    }
}

// TC channels x TS positions a block of 256 threads. Loads: quad q (4 channels) of position p, a thread's float4s
// all issued before any is stored to the tile; tile pitch TS + PAD so that a warp's 8 / 4 / 2 positions x 4 / 8 /
// 16 quads hit 32 banks. Stores: 256 positions (or TS) of one channel per pass, 32 a warp.
template <int TC, int TS, bool STREAM>
__global__ void __launch_bounds__(256) wide(const float* __restrict__ in, const float* __restrict__ b,
                                            float* __restrict__ out, int64_t N, int64_t C, int64_t S) {
    constexpr int QP = TC / 4, PAD = QP == 8 ? 1 : QP == 4 ? 2 : 4, P = TS + PAD;
    constexpr int STEPS = TC * TS / 1024, RUN = TS < 256 ? TS : 256, CH = 256 / RUN;
    static_assert(TC * TS % 1024 == 0 && (QP == 2 || QP == 4 || QP == 8), "tile");
    __shared__ float tile[TC * P];
    const int64_t stiles = (S + TS - 1) / TS, per_image = stiles * ((C + TC - 1) / TC);
    const int64_t u = blockIdx.x;
    const int64_t n = u / per_image, s0 = u % per_image % stiles * TS, c0 = u % per_image / stiles * TC;
    const float* src = in + n * S * C;
    float4 v[STEPS];
    #pragma unroll
    for (int j = 0; j < STEPS; ++j) {
        const int idx = threadIdx.x + 256 * j, p = idx / QP, q = idx % QP;
        const int64_t s = s0 + p, c = c0 + 4 * q;
        v[j] = s < S && c < C ? *reinterpret_cast<const float4*>(src + s * C + c) : make_float4(0, 0, 0, 0);
    }
    #pragma unroll
    for (int j = 0; j < STEPS; ++j) {
        const int idx = threadIdx.x + 256 * j, p = idx / QP, q = idx % QP;
        float* t = tile + 4 * q * P + p;
        t[0] = v[j].x; t[P] = v[j].y; t[2 * P] = v[j].z; t[3 * P] = v[j].w;
    }
    __syncthreads();
    #pragma unroll 4
    for (int i = threadIdx.x / RUN; i < TC; i += CH) {
        const int64_t c = c0 + i;
        for (int p = threadIdx.x % RUN; p < TS; p += RUN) {  // (TS over 256: a thread takes TS / 256 positions)
            const int64_t s = s0 + p;
            if (c < C && s < S) {
                const int at = (int)((n * C + c) * S + s);
                const float y = tanhf(tile[i * P + p] - b[c]);
                if (STREAM) __stcs(out + at, y); else out[at] = y;
            }
        }
    }
}

__global__ void scalar32(const float* __restrict__ in, const float* __restrict__ b, float* __restrict__ out,
                         int64_t N, int64_t C, int64_t S) {
    __shared__ float tile[32][33];
    const int64_t s0 = (int64_t)blockIdx.x * 32, c0 = (int64_t)blockIdx.y * 32;
    for (int64_t n = blockIdx.z; n < N; n += gridDim.z) {
        const float* src = in + n * S * C;
        float v[4];
        #pragma unroll
        for (int k = 0; k < 4; ++k) {
            const int64_t s = s0 + threadIdx.y + 8 * k, c = c0 + threadIdx.x;
            v[k] = s < S && c < C ? src[s * C + c] : 0.0f;
        }
        #pragma unroll
        for (int k = 0; k < 4; ++k) tile[threadIdx.y + 8 * k][threadIdx.x] = v[k];
        __syncthreads();
        #pragma unroll
        for (int i = threadIdx.y; i < 32; i += 8) {
            const int64_t c = c0 + i, s = s0 + threadIdx.x;
            if (s < S && c < C) out[(int)((n * C + c) * S + s)] = tanhf(tile[threadIdx.x][i] - b[c]);
        }
        __syncthreads();
    }
}

__global__ void copy4(const float4* __restrict__ in, float4* __restrict__ out, int64_t n4) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = in[i];
}

template <int TC, int TS, bool STREAM>
void launch_wide(const float* in, const float* b, float* out, int64_t N, int64_t C, int64_t S) {
    const int64_t tiles = N * ((S + TS - 1) / TS) * ((C + TC - 1) / TC);
    wide<TC, TS, STREAM><<<(unsigned)tiles, 256>>>(in, b, out, N, C, S);
}

void run(int64_t variant, const float* in, const float* b, float* out, int64_t N, int64_t C, int64_t S) {
    switch (variant) {
        case 0: case 1: {
            const int64_t tiles = N * ((S + 63) / 64) * ((C + 63) / 64);
            if (variant == 0) cur4r<true><<<(unsigned)tiles, 256>>>(in, b, out, N, C, S);
            else cur4r<false><<<(unsigned)tiles, 256>>>(in, b, out, N, C, S);
            break;
        }
        case 2: launch_wide<16, 256, false>(in, b, out, N, C, S); break;
        case 3: launch_wide<16, 256, true>(in, b, out, N, C, S); break;
        case 4: launch_wide<32, 128, false>(in, b, out, N, C, S); break;
        case 5: launch_wide<8, 512, false>(in, b, out, N, C, S); break;
        case 6: launch_wide<32, 256, false>(in, b, out, N, C, S); break;
        case 7: launch_wide<16, 512, false>(in, b, out, N, C, S); break;
        case 8: {
            const int64_t tiles = ((S + 31) / 32) * ((C + 31) / 32);
            const dim3 blocks((unsigned)((S + 31) / 32), (unsigned)((C + 31) / 32),
                              (unsigned)std::min<int64_t>(std::min<int64_t>(N, 65535), (16384 + tiles - 1) / tiles));
            scalar32<<<blocks, dim3(32, 8)>>>(in, b, out, N, C, S);
            break;
        }
        case 9: copy4<<<1056, 512>>>(reinterpret_cast<const float4*>(in), reinterpret_cast<float4*>(out), N * C * S / 4); break;
    }
}
"""

CPP = r"""
#include <torch/extension.h>
#include <cuda_runtime_api.h>
void run(int64_t variant, const float* in, const float* b, float* out, int64_t N, int64_t C, int64_t S);
void launch(int64_t variant, torch::Tensor in, torch::Tensor b, torch::Tensor out, int64_t N, int64_t C, int64_t S) {
    run(variant, in.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), N, C, S);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "launch failed");
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("launch", &launch); }
"""

VARIANTS = ["cur4r", "cur4r plain", "w16x256", "w16x256s", "w32x128", "w8x512", "w32x256", "w16x512", "scalar32",
            "copy4 (for scale)"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    args = parser.parse_args()
    ext = load_inline("kfuse_transpose_odd_bench", cpp_sources=CPP, cuda_sources=CUDA,
                      extra_cuda_cflags=["-O3"], verbose=False)
    flush = L2Flush(torch.device("cuda"))
    rows = []
    for n, c, h, w in [(3, 20, 37, 37), (2, 68, 9, 61), (32, 64, 513, 513)]:
        x = torch.randn(n, h, w, c, device="cuda").permute(0, 3, 1, 2)  # channels-last NCHW view
        b = torch.randn(c, device="cuda")
        want = torch.tanh(x - b.view(1, -1, 1, 1)).contiguous()
        big = x.numel() > 1 << 24
        print(f"# (N, C, H, W) = {(n, c, h, w)}; {torch.cuda.get_device_name()}, torch {torch.__version__}")
        for v, name in enumerate(VARIANTS):
            if name.startswith("copy4") and not big:
                continue
            out = torch.full((n, c, h, w), float("nan"), device="cuda")
            ext.launch(v, x, b, out, n, c, h * w)
            torch.cuda.synchronize()
            err = None if name.startswith("copy4") else (out - want).abs().max().item()
            ms = timed(lambda: ext.launch(v, x, b, out, n, c, h * w), flush) if big else None
            add_row(rows, name, err, ms, 2 * x.numel() * 4, shape=[n, c, h, w])
        if big:  # torch.compile's Triton kernel for the same epilogue
            compiled = torch.compile(lambda t: torch.tanh(t - b.view(1, -1, 1, 1)).contiguous())
            err = (compiled(x) - want).abs().max().item()
            add_row(rows, "torch.compile", err, timed(lambda: compiled(x), flush), 2 * x.numel() * 4,
                    shape=[n, c, h, w])
    write_rows(args.json, rows)


if __name__ == "__main__":
    main()
