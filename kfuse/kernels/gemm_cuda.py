"""The CUDA GEMM template: fp32-faithful matrix products on tensor cores (3xTF32), with a fused epilogue.

Every fp32 operand x is split into two TF32 numbers, big = tf32(x) and small = tf32(x - big), and each product
a*b is taken as a_small*b_big + a_big*b_small + a_big*b_big (the small terms first, so they are not lost against
the big one) with `mma.sync.aligned.m16n8k8` TF32 MMAs accumulating in fp32. The dropped a_small*b_small term and
the rounding of the small parts are ~2^-22 relative: the result stays near fp32 accuracy (DESIGN.md §5), at three
tensor-core MMAs per product instead of one fp32 FMA on the SIMT units.

Structure (one C++ template, the tile shape as named template parameters):
- a block computes a BM x BN tile of one batch's output; WARPS_M x WARPS_N warps each own a (BM/WARPS_M) x
  (BN/WARPS_N) piece of it, as 16x8 MMA tiles;
- K advances in steps of BK through a STAGES-deep ring of shared-memory tiles filled with `cp.async` (the copy of
  the tile STAGES-1 steps ahead is in flight while the current one is multiplied);
- each operand is seen as rows x K (A: rows = M; B: rows = N, i.e. read transposed) with any batch/row/k strides,
  so transposed operands are read in place. Its shared tile keeps the global layout (K-contiguous: [rows][BK+4],
  or rows-contiguous: [BK][rows+8]); the padding puts the 32 values a warp reads for one fragment in 32 banks;
- VEC = 4: the aligned fast path (16-byte copies; the contiguous extent a multiple of 4, 16-byte aligned);
  VEC = 1: the guarded general path (4-byte copies, any strides and sizes). Both zero-fill outside the matrix;
- the epilogue is a functor `float operator()(float value, int64_t index)` applied in registers to each output
  element (its flat index in the contiguous [batch][M][N] output) before the one write.

On Hopper (compute capability 9.0, files built for sm_90a: KF_SM90A) products of any layout run
`gemm_3xtf32_presplit` instead: warpgroup MMAs (wgmma.mma_async m64n128k8 tf32). One operand
(the one that costs less extra traffic) is split once per call into big and small planes in a workspace
(`split_rows`, or `split_columns` transposing a (K, rows) operand), read by the MMAs from 128-byte-swizzled shared
memory; the other is split in registers. A producer warp fills the stages with TMA copies while two consumer
warpgroups multiply. Same three products, partial sums every two K tiles, same epilogue functor. See WGMMA_TEMPLATE.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

GEMM_DECLS = r"""
namespace kf_gemm {
// One operand of a batched product seen as rows x K: element (l, r, k) is data[l*batch_stride + r*row_stride +
// k*k_stride]. A has rows = M; B has rows = N (B read transposed: (N, K)), so both load the same way.
struct Matrix {
    const float* data;
    int64_t batch_stride, row_stride, k_stride;
};
// out[l][m][n] = epilogue(sum_k A(l, m, k) * B(l, n, k)), out contiguous.
struct Problem {
    int64_t batch, M, N, K;
    Matrix a, b;
    float* out;
};
}  // namespace kf_gemm
"""

# Asynchronous global -> shared copies: the tiled kernels' and the short-K kernel's staging.
# Asynchronous global -> shared copies (cp.async), shared by the GEMM templates and kf::conv_pointwise_tc: guarded, so
# a file holding both families holds them once.
ASYNC_COPY = r"""
#ifndef KF_ASYNC_COPY
#define KF_ASYNC_COPY
namespace kf_gemm {
__device__ __forceinline__ uint32_t shared_address(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Copy of BYTES bytes of which the first `size` are read, the rest zero-filled (size 0: nothing is read).
template <int BYTES>
__device__ __forceinline__ void copy_async_sized(float* dst, const float* src, int size) {
    if constexpr (BYTES == 16) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(shared_address(dst)), "l"(src), "r"(size));
    } else {
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n"
                     :: "r"(shared_address(dst)), "l"(src), "n"(BYTES), "r"(size));
    }
}
// BYTES bytes, or zeros where `inside` is false.
template <int BYTES>
__device__ __forceinline__ void copy_async(float* dst, const float* src, bool inside) {
    copy_async_sized<BYTES>(dst, src, inside ? BYTES : 0);
}
__device__ __forceinline__ void copy_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int PENDING>
__device__ __forceinline__ void copy_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(PENDING)); }
}  // namespace kf_gemm
#endif  // KF_ASYNC_COPY
"""

_MMA_SYNC_TEMPLATE = r"""
namespace kf_gemm {

// x = big + small exactly: big keeps the top 10 significand bits (a TF32 number), small the rest. The MMA reads
// small truncated to TF32 (its low 13 bits ignored, as CUTLASS's fast 3xTF32 does): a relative error under
// 2^-20 of x that scales with the product itself. Two full-rate instructions; cvt.rna costs more issue slots.
__device__ __forceinline__ void split_tf32(float x, uint32_t& big, uint32_t& small) {
    big = __float_as_uint(x) & 0xffffe000u;
    small = __float_as_uint(x - __uint_as_float(big));
}

// c += a * b on one 16x8x8 tile (a: 16x8 row-major fragment, b: 8x8 column fragment), fp32 accumulation.
__device__ __forceinline__ void mma_tf32(float* c, const uint32_t* a, const uint32_t* b) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// d = a * b (no accumulator input): starts a partial sum.
__device__ __forceinline__ void mma_tf32_first(float* d, const uint32_t* a, const uint32_t* b) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(0.0f));
}

// Four 8x4 fp32 matrices (rows of 16 bytes, one address per lane) into the MMA fragment layout: thread T gets
// row T/4, column T%4 of each, which is what the 16x8 A fragment (and two 8x8 B fragments) want.
__device__ __forceinline__ void load_matrix_x4(uint32_t* r, const float* row_address) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(shared_address(row_address)));
}

// A ROWS x BK shared tile laid out as the operand is in global memory.
template <int ROWS, int BK, bool K_CONTIGUOUS>
struct Tile {
    static constexpr int LD = K_CONTIGUOUS ? BK + 4 : ROWS + 8;
    static constexpr int SIZE = K_CONTIGUOUS ? ROWS * LD : BK * LD;
    __device__ __forceinline__ static int at(int row, int k) { return K_CONTIGUOUS ? row * LD + k : k * LD + row; }
};

// Copies rows [row0, row0 + ROWS) x k [k0, k0 + BK) of `m` into a tile, VEC elements per copy along the
// contiguous dimension; elements outside rows x K become zeros (they then add nothing to the products).
template <int ROWS, int BK, bool K_CONTIGUOUS, int VEC, int THREADS>
__device__ __forceinline__ void load_tile(float* tile, const Matrix& m, int64_t batch, int64_t row0, int64_t rows,
                                          int64_t k0, int64_t K, int tid) {
    using T = Tile<ROWS, BK, K_CONTIGUOUS>;
    constexpr int PER_LINE = (K_CONTIGUOUS ? BK : ROWS) / VEC;
    constexpr int COPIES = PER_LINE * (K_CONTIGUOUS ? ROWS : BK);
    static_assert(COPIES % THREADS == 0, "tile copies must divide evenly among the threads");
    const float* base = m.data + batch * m.batch_stride;
#pragma unroll
    for (int i = 0; i < COPIES / THREADS; ++i) {
        const int c = tid + i * THREADS;
        const int line = c / PER_LINE, pos = (c % PER_LINE) * VEC;
        const int row = K_CONTIGUOUS ? line : pos, k = K_CONTIGUOUS ? pos : line;
        const int64_t r = row0 + row, kk = k0 + k;
        const bool inside = r < rows && kk < K;  // VEC > 1: the host checked the contiguous extent % VEC == 0
        const float* src = inside ? base + r * m.row_stride + kk * m.k_stride : m.data;
        copy_async<VEC * 4>(tile + T::at(row, k), src, inside);
    }
}

template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES, bool A_K_CONTIGUOUS, bool B_K_CONTIGUOUS>
struct Config {
    static constexpr int THREADS = WARPS_M * WARPS_N * 32;
    using TileA = Tile<BM, BK, A_K_CONTIGUOUS>;
    using TileB = Tile<BN, BK, B_K_CONTIGUOUS>;
    static constexpr int SMEM_BYTES = STAGES * (TileA::SIZE + TileB::SIZE) * 4;
};

template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES, bool A_K_CONTIGUOUS, bool B_K_CONTIGUOUS,
          int VEC, int MIN_BLOCKS, class Epilogue>
__global__ void __launch_bounds__(WARPS_M * WARPS_N * 32, MIN_BLOCKS)
gemm_3xtf32(const Problem p, const Epilogue epilogue) {
    using C = Config<BM, BN, BK, WARPS_M, WARPS_N, STAGES, A_K_CONTIGUOUS, B_K_CONTIGUOUS>;
    using TA = typename C::TileA;
    using TB = typename C::TileB;
    constexpr int THREADS = C::THREADS;
    constexpr int WTM = BM / WARPS_M, WTN = BN / WARPS_N;  // the warp's piece of the tile
    constexpr int MT = WTM / 16, NT = WTN / 8;              // its 16x8 MMA tiles
    static_assert(WTM % 16 == 0 && WTN % 8 == 0 && BK % 8 == 0, "warp tiles are made of 16x8x8 MMAs");

    extern __shared__ float4 shared_words[];
    float* const tiles_a = reinterpret_cast<float*>(shared_words);
    float* const tiles_b = tiles_a + STAGES * TA::SIZE;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;
    const int group = lane >> 2, quad = lane & 3;  // the MMA fragment coordinates of this lane
    const int64_t k_tiles = (p.K + BK - 1) / BK;
    const int64_t n_tiles = (p.N + BN - 1) / BN;

    // blockIdx.x walks M fastest: the blocks running together share B's columns (read once from DRAM) and
    // A's rows (the smaller operand in the problems this targets); grid-stride loops cover any grid limit.
    for (int64_t batch = blockIdx.z; batch < p.batch; batch += gridDim.z) {
    for (int64_t tile_n = blockIdx.y; tile_n < n_tiles; tile_n += gridDim.y) {
        const int64_t m0 = (int64_t)blockIdx.x * BM, n0 = tile_n * BN;
        float acc[MT][NT][4];
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

        auto load_stage = [&](int stage, int64_t kt) {
            load_tile<BM, BK, A_K_CONTIGUOUS, VEC, THREADS>(tiles_a + stage * TA::SIZE, p.a, batch, m0, p.M, kt * BK, p.K, tid);
            load_tile<BN, BK, B_K_CONTIGUOUS, VEC, THREADS>(tiles_b + stage * TB::SIZE, p.b, batch, n0, p.N, kt * BK, p.K, tid);
        };
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (s < k_tiles) load_stage(s, s);
            copy_commit();
        }
        // The tensor cores round the accumulator toward zero: summed over all of K that bias grows with K (2e-4
        // on the seed, 14x cuBLAS's error). Each K tile is summed in a fresh `part`, added to `acc` in round-to-
        // nearest fp32: the truncation then acts on small partial sums only.
        float part[MT][NT][4];
        for (int64_t kt = 0; kt < k_tiles; ++kt) {
            copy_wait<STAGES - 2>();  // tile kt has landed
            __syncthreads();          // ... for every thread, and everyone is done with the stage refilled next
            const int64_t ahead = kt + STAGES - 1;
            if (ahead < k_tiles) load_stage((int)(ahead % STAGES), ahead);
            copy_commit();
            const float* a = tiles_a + (kt % STAGES) * TA::SIZE;
            const float* b = tiles_b + (kt % STAGES) * TB::SIZE;
            // fragments of the next 8-wide K step load while this step's MMAs run (two register sets)
            auto load_fragments = [&](uint32_t (&a_raw)[MT][4], uint32_t (&b_raw)[NT][2], int kk) {
#pragma unroll
                for (int i = 0; i < MT; ++i) {
                    const int r = warp_m * WTM + i * 16 + group;
                    if constexpr (A_K_CONTIGUOUS) {  // lane l addresses row (l & 15), columns 4 * (l >> 4) ...
                        const int row = warp_m * WTM + i * 16 + (lane & 15);
                        load_matrix_x4(a_raw[i], a + TA::at(row, kk + (lane >> 4) * 4));
                    } else {
                        a_raw[i][0] = __float_as_uint(a[TA::at(r, kk + quad)]);
                        a_raw[i][1] = __float_as_uint(a[TA::at(r + 8, kk + quad)]);
                        a_raw[i][2] = __float_as_uint(a[TA::at(r, kk + quad + 4)]);
                        a_raw[i][3] = __float_as_uint(a[TA::at(r + 8, kk + quad + 4)]);
                    }
                }
#pragma unroll
                for (int j = 0; j < NT; ++j) {
                    const int n = warp_n * WTN + j * 8 + group;
                    if constexpr (B_K_CONTIGUOUS && NT % 2 == 0) {  // two n-tiles per load: (j, k0) (j, k4) (j+1, ...)
                        if (j % 2 == 0) {
                            uint32_t r4[4];
                            const int row = warp_n * WTN + j * 8 + (lane & 7) + (lane >> 4) * 8;
                            load_matrix_x4(r4, b + TB::at(row, kk + ((lane >> 3) & 1) * 4));
                            b_raw[j][0] = r4[0]; b_raw[j][1] = r4[1]; b_raw[j + 1][0] = r4[2]; b_raw[j + 1][1] = r4[3];
                        }
                    } else {
                        b_raw[j][0] = __float_as_uint(b[TB::at(n, kk + quad)]);
                        b_raw[j][1] = __float_as_uint(b[TB::at(n, kk + quad + 4)]);
                    }
                }
            };
            uint32_t a_frag[2][MT][4], b_frag[2][NT][2];
            load_fragments(a_frag[0], b_frag[0], 0);
#pragma unroll
            for (int kk = 0; kk < BK; kk += 8) {
                const int now = (kk / 8) & 1;
                if (kk + 8 < BK) load_fragments(a_frag[now ^ 1], b_frag[now ^ 1], kk + 8);
                uint32_t (&a_raw)[MT][4] = a_frag[now];
                uint32_t (&b_raw)[NT][2] = b_frag[now];
                uint32_t a_big[MT][4], a_small[MT][4], b_big[NT][2], b_small[NT][2];
#pragma unroll
                for (int i = 0; i < MT; ++i)
#pragma unroll
                    for (int e = 0; e < 4; ++e) split_tf32(__uint_as_float(a_raw[i][e]), a_big[i][e], a_small[i][e]);
#pragma unroll
                for (int j = 0; j < NT; ++j)
#pragma unroll
                    for (int e = 0; e < 2; ++e) split_tf32(__uint_as_float(b_raw[j][e]), b_big[j][e], b_small[j][e]);
                // small terms first; each pass over all tiles keeps MT*NT independent MMAs between dependent ones
#pragma unroll
                for (int i = 0; i < MT; ++i)
#pragma unroll
                    for (int j = 0; j < NT; ++j) {
                        if (kk == 0) mma_tf32_first(part[i][j], a_small[i], b_big[j]);
                        else mma_tf32(part[i][j], a_small[i], b_big[j]);
                    }
#pragma unroll
                for (int i = 0; i < MT; ++i)
#pragma unroll
                    for (int j = 0; j < NT; ++j) mma_tf32(part[i][j], a_big[i], b_small[j]);
#pragma unroll
                for (int i = 0; i < MT; ++i)
#pragma unroll
                    for (int j = 0; j < NT; ++j) mma_tf32(part[i][j], a_big[i], b_big[j]);
            }
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int j = 0; j < NT; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc[i][j][e] += part[i][j][e];
        }
        copy_wait<0>();
        __syncthreads();  // the next tile's prologue refills stages other warps may still read

        // epilogue in registers, one write: fragment element e sits at row group (+8 for e >= 2), column 2*quad + e%2
#pragma unroll
        for (int i = 0; i < MT; ++i) {
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int64_t row = m0 + warp_m * WTM + i * 16 + group + half * 8;
                if (row >= p.M) continue;
                const int64_t row_start = (batch * p.M + row) * p.N;
#pragma unroll
                for (int j = 0; j < NT; ++j) {
                    const int64_t col = n0 + warp_n * WTN + j * 8 + 2 * quad;
                    if (col < p.N) p.out[row_start + col] = epilogue(acc[i][j][2 * half], row_start + col);
                    if (col + 1 < p.N) p.out[row_start + col + 1] = epilogue(acc[i][j][2 * half + 1], row_start + col + 1);
                }
            }
        }
    }
    }
}

// Launches the fast path when both operands allow it, else the general one (same tiles, 4-byte copies).
// Returns the error of the shared-memory setup; the caller checks the launch itself.
template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES, bool A_K_CONTIGUOUS, bool B_K_CONTIGUOUS,
          int MIN_BLOCKS, class Epilogue>
static cudaError_t launch_tiles(const Problem& p, const Epilogue& epilogue, cudaStream_t stream) {
    using C = Config<BM, BN, BK, WARPS_M, WARPS_N, STAGES, A_K_CONTIGUOUS, B_K_CONTIGUOUS>;
    if (p.batch == 0 || p.M == 0 || p.N == 0) return cudaSuccess;
    const bool fast = vectorizable(p.a, A_K_CONTIGUOUS, p.M, p.K) && vectorizable(p.b, B_K_CONTIGUOUS, p.N, p.K);
    auto kernel = fast ? gemm_3xtf32<BM, BN, BK, WARPS_M, WARPS_N, STAGES, A_K_CONTIGUOUS, B_K_CONTIGUOUS, 4, MIN_BLOCKS, Epilogue>
                       : gemm_3xtf32<BM, BN, BK, WARPS_M, WARPS_N, STAGES, A_K_CONTIGUOUS, B_K_CONTIGUOUS, 1, MIN_BLOCKS, Epilogue>;
    // Per instantiation and device (the attribute is a device's): allow more than 48 KB of shared memory. This
    // function is static: a local static of a template with external linkage is one object per process (a GNU
    // unique symbol) shared by every kfuse extension loaded, and a second file's kernel would skip its own opt-in.
    static bool configured[2][256] = {};
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err != cudaSuccess) return err;
    if (device >= 256) return cudaErrorInvalidDevice;
    if (!configured[fast][device]) {
        err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM_BYTES);
        if (err != cudaSuccess) return err;
        configured[fast][device] = true;
    }
    const int64_t m_tiles = (p.M + BM - 1) / BM, n_tiles = (p.N + BN - 1) / BN;
    if (m_tiles > INT32_MAX) return cudaErrorInvalidConfiguration;
    const dim3 grid((unsigned)m_tiles, (unsigned)std::min<int64_t>(n_tiles, 65535),
                    (unsigned)std::min<int64_t>(p.batch, 65535));
    kernel<<<grid, C::THREADS, C::SMEM_BYTES, stream>>>(p, epilogue);
    return cudaSuccess;
}

}  // namespace kf_gemm
"""

# What the tiled products share whichever kernel runs them: the 16-byte copy test, the split of K.
_TILED_COMMON = r"""
namespace kf_gemm {
// The operand's layout matches the tile's and allows 16-byte copies.
__host__ inline bool vectorizable(const Matrix& m, bool k_contiguous, int64_t rows, int64_t K) {
    const int64_t contiguous = k_contiguous ? m.k_stride : m.row_stride;
    const int64_t other = k_contiguous ? m.row_stride : m.k_stride;
    const int64_t extent = k_contiguous ? K : rows;
    return contiguous == 1 && other % 4 == 0 && m.batch_stride % 4 == 0 && extent % 4 == 0
           && reinterpret_cast<uintptr_t>(m.data) % 16 == 0;
}

// Split K: when the output has too few tiles to fill the GPU (512x512 with K = 262144: 16 tiles for 132 SMs),
// K is cut into `slices` equal parts run as a batch into a workspace, then summed. 1: no split. Up to 64 slices, so
// that even four tiles fill the GPU (256x256 with K = 524288 ran on 64 of 132 SMs at 16, the tensor pipes 97% busy).
template <int BM, int BN, int BK>
__host__ inline int split_k_slices(const Problem& p, int sms) {
    const int64_t tiles = p.batch * ((p.M + BM - 1) / BM) * ((p.N + BN - 1) / BN);
    int slices = 1;
    while (p.batch == 1 && slices < 64 && tiles * slices * 2 <= sms && p.K % (slices * 2 * 4) == 0
           && p.K / (slices * 2) >= 4 * BK)
        slices *= 2;
    return slices;
}

struct Store {
    __device__ __forceinline__ float operator()(float v, int64_t) const { return v; }
};

// The split's second pass: the slices summed in a fixed order (deterministic), then the epilogue, one write.
template <class Epilogue>
__global__ void sum_slices(const float* __restrict__ partial, int slices, int64_t count, float* __restrict__ out,
                           const Epilogue epilogue) {
    const int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
        float v = 0.0f;
        for (int s = 0; s < slices; ++s) v += partial[s * count + i];
        out[i] = epilogue(v, i);
    }
}

}  // namespace kf_gemm
"""

# In place of the mma.sync kernel in a file planned on Hopper (gemm_template's hopper_only).
_FALLBACK_TEMPLATE = r"""
namespace kf_gemm {
// The tiles on a GPU this file has no tensor-core kernel for (it was planned on a Hopper one, whose wgmma kernel runs
// every product there): plain fp32 FMAs, a 64 x 64 output tile per block of 256 threads, 4 x 4 outputs each, any
// strides, guarded loads through shared memory. fp32-accurate, not tuned: plan the file on that GPU for speed.
template <class Epilogue>
__global__ void __launch_bounds__(256) gemm_fallback(const Problem p, const Epilogue epilogue) {
    __shared__ float As[16][64 + 1], Bs[16][64 + 1];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int64_t m0 = (int64_t)blockIdx.x * 64;
    for (int64_t l = blockIdx.z; l < p.batch; l += gridDim.z)
        for (int64_t n0 = (int64_t)blockIdx.y * 64; n0 < p.N; n0 += (int64_t)gridDim.y * 64) {
            float acc[4][4] = {};
            for (int64_t k0 = 0; k0 < p.K; k0 += 16) {
                for (int i = threadIdx.x; i < 64 * 16; i += 256) {
                    const int r = i / 16, k = i % 16;
                    const bool in_k = k0 + k < p.K;
                    As[k][r] = in_k && m0 + r < p.M ? p.a.data[l * p.a.batch_stride + (m0 + r) * p.a.row_stride
                                                               + (k0 + k) * p.a.k_stride] : 0.0f;
                    Bs[k][r] = in_k && n0 + r < p.N ? p.b.data[l * p.b.batch_stride + (n0 + r) * p.b.row_stride
                                                               + (k0 + k) * p.b.k_stride] : 0.0f;
                }
                __syncthreads();
#pragma unroll
                for (int k = 0; k < 16; ++k)
#pragma unroll
                    for (int i = 0; i < 4; ++i)
#pragma unroll
                        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(As[k][ty + 16 * i], Bs[k][tx + 16 * j], acc[i][j]);
                __syncthreads();
            }
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) {
                    const int64_t m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
                    if (m < p.M && n < p.N) {
                        const int64_t index = (l * p.M + m) * p.N + n;
                        p.out[index] = epilogue(acc[i][j], index);
                    }
                }
        }
}

// launch_tiles' signature (the tile parameters are the mma.sync kernel's, unused here).
template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES, bool A_K_CONTIGUOUS, bool B_K_CONTIGUOUS,
          int MIN_BLOCKS, class Epilogue>
static cudaError_t launch_tiles(const Problem& p, const Epilogue& epilogue, cudaStream_t stream) {
    if (p.batch == 0 || p.M == 0 || p.N == 0) return cudaSuccess;
    const int64_t m_tiles = (p.M + 63) / 64, n_tiles = (p.N + 63) / 64;
    if (m_tiles > INT32_MAX) return cudaErrorInvalidConfiguration;
    const dim3 grid((unsigned)m_tiles, (unsigned)std::min<int64_t>(n_tiles, 65535),
                    (unsigned)std::min<int64_t>(p.batch, 65535));
    gemm_fallback<Epilogue><<<grid, 256, 0, stream>>>(p, epilogue);
    return cudaSuccess;
}
}  // namespace kf_gemm
"""


# Matrix-vector products: only in files whose plan has one (kfuse.kernels.gemm, GemmStep.gemv).
GEMV_TEMPLATE = r"""
namespace kf_gemm {
// Matrix-vector products (N = 1 at capture): memory-bound, so no tensor cores and no split. This thread's share
// of output element w: elements `member`, `member + stride`, ... of its row of A against b (float4 when aligned,
// several loads in flight), fp32 FMAs. Correct for any N (one group of threads per element), efficient for N = 1.
__device__ __forceinline__ float gemv_partial(const Problem& p, int64_t w, int member, int stride) {
    const int64_t n = w % p.N, m = (w / p.N) % p.M, l = w / (p.N * p.M);
    const float* a = p.a.data + l * p.a.batch_stride + m * p.a.row_stride;
    const float* b = p.b.data + l * p.b.batch_stride + n * p.b.row_stride;
    float sum = 0.0f;
    const bool vector = p.a.k_stride == 1 && p.b.k_stride == 1 && p.K % 4 == 0
                        && reinterpret_cast<uintptr_t>(a) % 16 == 0 && reinterpret_cast<uintptr_t>(b) % 16 == 0;
    if (vector) {
        const float4* a4 = reinterpret_cast<const float4*>(a);
        const float4* b4 = reinterpret_cast<const float4*>(b);
#pragma unroll 4
        for (int64_t q = member; q < p.K / 4; q += stride) {
            const float4 x = __ldcs(a4 + q), y = __ldg(b4 + q);  // A streams through once; b stays cached
            sum = fmaf(x.x, y.x, sum);
            sum = fmaf(x.y, y.y, sum);
            sum = fmaf(x.z, y.z, sum);
            sum = fmaf(x.w, y.w, sum);
        }
    } else {
        for (int64_t k = member; k < p.K; k += stride) sum = fmaf(a[k * p.a.k_stride], b[k * p.b.k_stride], sum);
    }
    return sum;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// Short rows: one warp per output element.
template <class Epilogue>
__global__ void gemv_kernel(const Problem p, const Epilogue epilogue) {
    const int lane = threadIdx.x & 31;
    const int64_t total = p.batch * p.M * p.N;
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
    for (int64_t w = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; w < total; w += warps) {
        const float sum = warp_sum(gemv_partial(p, w, lane, 32));
        if (lane == 0) p.out[w] = epilogue(sum, w);
    }
}

// Long rows: one block of 512 per output element, all blocks resident at once. Fewer rows streaming at once keep
// DRAM accesses closer together: H100, 8192 x 98304, 1.240 -> 1.158 ms against a warp per row.
template <class Epilogue>
__global__ void __launch_bounds__(512, 4) gemv_rows_kernel(const Problem p, const Epilogue epilogue) {
    __shared__ float partial[16];
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    const int64_t total = p.batch * p.M * p.N;
    for (int64_t w = blockIdx.x; w < total; w += gridDim.x) {
        const float sum = warp_sum(gemv_partial(p, w, threadIdx.x, blockDim.x));
        if (lane == 0) partial[warp] = sum;
        __syncthreads();
        if (warp == 0) {
            const float row = warp_sum(lane < (int)(blockDim.x / 32) ? partial[lane] : 0.0f);
            if (lane == 0) p.out[w] = epilogue(row, w);
        }
        __syncthreads();
    }
}

template <class Epilogue>
cudaError_t launch_gemv(const Problem& p, const Epilogue& epilogue, int sms, cudaStream_t stream) {
    const int64_t total = p.batch * p.M * p.N;
    if (total == 0) return cudaSuccess;
    if (p.K >= 512 * 32) {  // each of the 512 threads gets at least 8 float4s of the row
        gemv_rows_kernel<<<(unsigned)std::min<int64_t>(total, (int64_t)sms * 4), 512, 0, stream>>>(p, epilogue);
        return cudaSuccess;
    }
    const int warps_per_block = 8;
    const unsigned blocks = (unsigned)std::min<int64_t>((total + warps_per_block - 1) / warps_per_block, (int64_t)sms * 32);
    gemv_kernel<<<blocks, warps_per_block * 32, 0, stream>>>(p, epilogue);
    return cudaSuccess;
}

}  // namespace kf_gemm
"""


# Products with a short K (at most SMALL_K at capture): only in files whose plan has one (GemmStep.small_k).
SMALL_K_TEMPLATE = r"""
namespace kf_gemm {
// A short K makes the product memory-bound on its output: 2K flops per element written, and K <= 32 is below the
// H100's FFMA-to-write balance (67 TFLOP/s against 3 TB/s: 22 flops a byte). So: fp32 FFMA (no tensor cores, no
// operand split), 128 x 128 output tiles, the operands staged in shared memory SK_CHUNK of K at a time by
// asynchronous copies, the next chunk (of this tile or the block's next one) in flight while this one is multiplied
// and the last tile written, and the output written once, in full 16-byte rows per warp, streaming (it is not read
// again here). Blocks stay resident and walk the tiles. Correct for any shape.
constexpr int SK_TILE = 128, SK_CHUNK = 16, SK_THREADS = 256;
constexpr int SK_PITCH = SK_TILE + 4;  // a K-contiguous operand's staging stores 4-way, not 32-way, bank conflicts

// Rows [r0, r0 + SK_TILE) x K [k0, k0 + SK_CHUNK) of an operand into tile[k][row], zeros outside (nothing read
// there). ROWS16 (sk_rows16: contiguous along its rows, as B of a row-major (K, N) or a transposed A, and 16-byte
// aligned): 4 rows per copy, which zero-fills what lies past the last row. Otherwise one float per copy,
// consecutive threads taking consecutive addresses along whichever of the two is contiguous.
template <bool ROWS16>
__device__ __forceinline__ void sk_stage(float (*tile)[SK_PITCH], const float* base, int64_t row_stride,
                                         int64_t k_stride, int64_t r0, int64_t rows, int64_t k0, int64_t K) {
    if constexpr (ROWS16) {
#pragma unroll 1  // (two copies a thread; unrolled, the kernel spilled at 128 registers)
        for (int e = threadIdx.x; e < SK_TILE / 4 * SK_CHUNK; e += SK_THREADS) {
            const int r = e % (SK_TILE / 4) * 4, k = e / (SK_TILE / 4);
            const int64_t row = r0 + r, kk = k0 + k;
            const int64_t left = kk < K ? rows - row : 0;
            const int bytes = left >= 4 ? 16 : left > 0 ? (int)left * 4 : 0;
            copy_async_sized<16>(&tile[k][r], bytes > 0 ? base + row + kk * k_stride : base, bytes);
        }
        return;
    }
    const bool k_fastest = k_stride == 1;
#pragma unroll
    for (int e = threadIdx.x; e < SK_TILE * SK_CHUNK; e += SK_THREADS) {
        const int r = k_fastest ? e / SK_CHUNK : e % SK_TILE;
        const int k = k_fastest ? e % SK_CHUNK : e / SK_TILE;
        const int64_t row = r0 + r, kk = k0 + k;
        const bool inside = row < rows && kk < K;
        copy_async<4>(&tile[k][r], inside ? base + row * row_stride + kk * k_stride : base, inside);
    }
}

// Tile `tile` of the (batch, row, column) order: its batch and first row and column. 32-bit division (a 64-bit one
// is a long subroutine, and this runs once per tile and chunk).
struct SkTile {
    int64_t l, m0, n0;
};
__device__ __forceinline__ SkTile sk_tile(uint32_t tile, uint32_t m_tiles, uint32_t n_tiles) {
    const uint32_t rest = tile / n_tiles;
    return {(int64_t)(rest / m_tiles), (int64_t)(rest % m_tiles) * SK_TILE, (int64_t)(tile % n_tiles) * SK_TILE};
}

// Whether an operand can be staged 16 bytes a copy (sk_stage's ROWS16).
__host__ inline bool sk_rows16(const Matrix& m) {
    return m.row_stride == 1 && m.k_stride % 4 == 0 && m.batch_stride % 4 == 0
           && reinterpret_cast<uintptr_t>(m.data) % 16 == 0;
}

// Thread (ty, tx) of 16 x 16 owns rows 8 ty + i (i < 8) and columns 4 tx + j, 64 + 4 tx + j (j < 4): each store
// of a warp writes two rows, each in two 256-byte runs, and each shared-memory read is a 16-byte broadcast.
template <bool A_ROWS16, bool B_ROWS16, class Epilogue>
__global__ void __launch_bounds__(SK_THREADS, 2) small_k_kernel(const Problem p, const Epilogue epilogue) {
    __shared__ __align__(16) float a_tile[2][SK_CHUNK][SK_PITCH];
    __shared__ __align__(16) float b_tile[2][SK_CHUNK][SK_PITCH];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    // (launch_small_k keeps tiles and steps within 32 bits)
    const uint32_t n_tiles = (uint32_t)((p.N + SK_TILE - 1) / SK_TILE);
    const uint32_t m_tiles = (uint32_t)((p.M + SK_TILE - 1) / SK_TILE);
    const uint32_t tiles = (uint32_t)p.batch * m_tiles * n_tiles;
    const uint32_t chunks = p.K > 0 ? (uint32_t)((p.K + SK_CHUNK - 1) / SK_CHUNK) : 1;  // K = 0: one chunk of zeros
    // step t of this block: chunk t % chunks of its (t / chunks)-th tile
    auto stage = [&](uint32_t t) {
        const SkTile at = sk_tile(blockIdx.x + t / chunks * gridDim.x, m_tiles, n_tiles);
        const int64_t k0 = (int64_t)(t % chunks) * SK_CHUNK;
        const float* a = p.a.data + at.l * p.a.batch_stride;
        const float* b = p.b.data + at.l * p.b.batch_stride;
        sk_stage<A_ROWS16>(a_tile[t & 1], a, p.a.row_stride, p.a.k_stride, at.m0, p.M, k0, p.K);
        sk_stage<B_ROWS16>(b_tile[t & 1], b, p.b.row_stride, p.b.k_stride, at.n0, p.N, k0, p.K);
        copy_commit();
    };
    const uint32_t mine = blockIdx.x < tiles ? (tiles - 1 - blockIdx.x) / gridDim.x + 1 : 0;
    const uint32_t steps = mine * chunks;
    const bool vector = p.N % 4 == 0 && reinterpret_cast<uintptr_t>(p.out) % 16 == 0;
    float acc[8][8] = {};
    if (steps > 0) stage(0);
    for (uint32_t t = 0; t < steps; ++t) {
        if (t + 1 < steps) {
            stage(t + 1);
            copy_wait<1>();
        } else {
            copy_wait<0>();
        }
        __syncthreads();
        const float (*a)[SK_PITCH] = a_tile[t & 1];
        const float (*b)[SK_PITCH] = b_tile[t & 1];
#pragma unroll
        for (int k = 0; k < SK_CHUNK; ++k) {
            float x[8], y[8];
            const float4 x0 = *reinterpret_cast<const float4*>(&a[k][8 * ty]);
            const float4 x1 = *reinterpret_cast<const float4*>(&a[k][8 * ty + 4]);
            const float4 y0 = *reinterpret_cast<const float4*>(&b[k][4 * tx]);
            const float4 y1 = *reinterpret_cast<const float4*>(&b[k][64 + 4 * tx]);
            x[0] = x0.x; x[1] = x0.y; x[2] = x0.z; x[3] = x0.w; x[4] = x1.x; x[5] = x1.y; x[6] = x1.z; x[7] = x1.w;
            y[0] = y0.x; y[1] = y0.y; y[2] = y0.z; y[3] = y0.w; y[4] = y1.x; y[5] = y1.y; y[6] = y1.z; y[7] = y1.w;
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(x[i], y[j], acc[i][j]);
        }
        __syncthreads();  // every read of this buffer is done before step t + 2 stages into it
        if (t % chunks != chunks - 1) continue;
        const SkTile done = sk_tile(blockIdx.x + t / chunks * gridDim.x, m_tiles, n_tiles);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const int64_t m = done.m0 + 8 * ty + i, row = (done.l * p.M + m) * p.N;
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int64_t n = done.n0 + 64 * half + 4 * tx;
                const int64_t at = row + n;
                float* v = acc[i] + 4 * half;
                if (m < p.M) {
                    if (vector && n + 3 < p.N) {
                        __stcs(reinterpret_cast<float4*>(p.out + at),
                               make_float4(epilogue(v[0], at), epilogue(v[1], at + 1), epilogue(v[2], at + 2),
                                           epilogue(v[3], at + 3)));
                    } else {
                        for (int j = 0; j < 4 && n + j < p.N; ++j) p.out[at + j] = epilogue(v[j], at + j);
                    }
                }
#pragma unroll
                for (int j = 0; j < 4; ++j) v[j] = 0.0f;
            }
        }
    }
}

// A_ROWS16, B_ROWS16: the staging the captured layouts take (sk_rows16); any other layout runs the general one
// (a float a copy, correct for any strides). Only these two are compiled: each instantiation of the kernel is large
// (its epilogue inlined at 128 stores), and all four made a third of a vision transformer's device code.
template <bool A_ROWS16, bool B_ROWS16, class Epilogue>
cudaError_t launch_small_k(const Problem& p, const Epilogue& epilogue, int sms, cudaStream_t stream) {
    if (p.batch == 0 || p.M == 0 || p.N == 0) return cudaSuccess;
    const int64_t tiles = p.batch * ((p.M + SK_TILE - 1) / SK_TILE) * ((p.N + SK_TILE - 1) / SK_TILE);
    const int64_t chunks = std::max<int64_t>(1, (p.K + SK_CHUNK - 1) / SK_CHUNK);
    if (tiles * chunks > UINT32_MAX) return cudaErrorInvalidConfiguration;  // (the kernel counts in 32 bits)
    const unsigned blocks = (unsigned)std::min<int64_t>(tiles, (int64_t)sms * 2);
    if (sk_rows16(p.a) == A_ROWS16 && sk_rows16(p.b) == B_ROWS16)
        small_k_kernel<A_ROWS16, B_ROWS16><<<blocks, SK_THREADS, 0, stream>>>(p, epilogue);
    else
        small_k_kernel<false, false><<<blocks, SK_THREADS, 0, stream>>>(p, epilogue);
    return cudaSuccess;
}

}  // namespace kf_gemm
"""


# --------------------------------------------------------------------------------------------------------------
# Hopper (sm_90a): the same product with warpgroup MMAs (wgmma.mma_async), A from registers, B from shared memory.
# Compiled only when the build targets sm_90a (KF_SM90A, set by the emitted file's build flags on an sm_90 device)
# and used at run time on compute capability 9.0, for any operand layout (the split reads it as rows x K); other
# GPUs keep the mma.sync kernel above. The kernel body is guarded by __CUDA_ARCH_FEAT_SM90_ALL, so the
# same source also compiles for other architectures in one build (then the run-time check picks per device).

def _wgmma_wrapper(n: int) -> str:
    """A C++ wrapper of one `wgmma.mma_async ... m64n{n}k8.f32.tf32.tf32`, A from registers."""
    regs = n // 2  # accumulator floats per thread: 64 x n over 128 threads
    d = ", ".join(f"%{i}" for i in range(regs))
    a_operand = "{" + ", ".join(f"%{regs + i}" for i in range(4)) + "}"
    a_inputs = ", ".join(f'"r"(a[{i}])' for i in range(4))
    outputs = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    nxt = regs + 4
    return f"""
// d (+)= A * B on a 64 x {n} x 8 step of the warpgroup, A from registers, B through its shared-memory descriptor;
// accumulate = 0 overwrites d (a fresh partial sum).
__device__ __forceinline__ void wgmma_rs(float (&d)[{regs}], const uint32_t (&a)[4], uint64_t b, int accumulate) {{
    asm volatile("{{\\n.reg .pred keep;\\nsetp.ne.b32 keep, %{nxt + 1}, 0;\\n"
                 "wgmma.mma_async.sync.aligned.m64n{n}k8.f32.tf32.tf32 {{{d}}}, {a_operand}, %{nxt}, keep, 1, 1;\\n}}\\n"
                 : {outputs}
                 : {a_inputs}, "l"(b), "r"(accumulate));
}}
"""


WGMMA_NS = (128,)  # the tile widths (shared-operand rows per block) the wrappers exist for


WGMMA_TEMPLATE = r"""
#if defined(KF_SM90A)
#include <cuda.h>  // CUtensorMap (the tensor-memory-access descriptors; the driver's encoder is found at run time)
namespace kf_gemm {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
""" + "".join(_wgmma_wrapper(n) for n in WGMMA_NS) + r"""
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most PENDING committed groups of this warpgroup's MMAs are still running.
template <int PENDING>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(PENDING) : "memory"); }
// The compiler must not move reads or writes of the accumulators across the asynchronous MMAs.
template <int R>
__device__ __forceinline__ void pin_registers(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}
// ... nor reuse the registers of an A fragment before the MMAs reading it are complete.
template <int S>
__device__ __forceinline__ void pin_registers(uint32_t (&a)[S][4]) {
#pragma unroll
    for (int i = 0; i < S; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(a[i][e]) :: "memory");
}
#endif  // __CUDA_ARCH_FEAT_SM90_ALL

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// ---- Tensor-memory-access (TMA) copies and the shared-memory barriers that count their bytes ------------------
__device__ __forceinline__ void barrier_init(uint64_t* barrier, int arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(shared_address(barrier)), "r"(arrivals));
}
// The barrier's next phase completes once `bytes` have landed (this thread's arrival counts the one expected).
__device__ __forceinline__ void barrier_expect_bytes(uint64_t* barrier, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
                 :: "r"(shared_address(barrier)), "r"(bytes) : "memory");
}
// Waits until the barrier's phase of parity `parity` has completed.
__device__ __forceinline__ void barrier_wait(uint64_t* barrier, uint32_t parity) {
    asm volatile("{\n.reg .pred done;\nwait:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra wait;\n}\n" :: "r"(shared_address(barrier)), "r"(parity) : "memory");
}
// The box of `map` at (k, row, batch) into `tile` (zeros outside the tensor), counted on `barrier`.
__device__ __forceinline__ void tma_load(float* tile, const CUtensorMap& map, int k, int row, int batch,
                                         uint64_t* barrier) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4}], [%5];\n"
                 :: "r"(shared_address(tile)), "l"(reinterpret_cast<uint64_t>(&map)), "r"(k), "r"(row), "r"(batch),
                    "r"(shared_address(barrier)) : "memory");
}
// Orders this thread's ordinary shared-memory accesses before later TMA writes to the same memory.
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// A K-major shared tile in wgmma's 128-byte swizzle: rows of 32 floats (128 bytes, one K step of the pipeline),
// the 16-byte chunk c of row r stored at chunk c ^ (r % 8) (the pattern the hardware undoes from address bits
// 4-6 and 7-9: tiles start 1024-byte aligned). Conflict-free for the row-wise copies and the fragment reads.
__device__ __forceinline__ int swizzled(int row, int k) { return row * 32 + ((((k >> 2) ^ row) & 7) << 2) + (k & 3); }

// The shared-memory matrix descriptor of a swizzled tile from `tile` (+ a multiple of 8 rows, + 32 bytes per
// 8-wide K step): start address, leading offset 16 bytes (unused by this layout), stride 1024 bytes between
// groups of 8 rows, 128-byte swizzle.
__device__ __forceinline__ uint64_t descriptor(const float* tile) {
    const uint64_t address = shared_address(tile);
    return ((address & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}

// The descriptor of the tile `floats` past the one `base` describes: the start address (bits 0-13, in 16-byte
// units) is the only field that changes, and it cannot carry out (shared memory ends below 2^18 bytes).
__device__ __forceinline__ uint64_t descriptor_at(uint64_t base, int floats) { return base + (uint64_t)(floats >> 2); }

// ---- The pre-split kernel: no split pass in shared memory ----------------------------------------------------
// One operand ("shared", see presplit_layout) is split once per call by split_operand into two K-padded planes,
// big = tf32(x) (truncated) and small = x - big, that the wgmma reads through descriptors; the other ("register")
// operand is read from the shared tile into registers and split there. So a K tile costs three TMA copies and the
// MMAs, nothing else: the per-stage split pass (every B element read and written twice in shared memory) is gone.
// Roles: `swapped` (the usual Linear: A has fewer rows) makes A the shared operand and B the register one; the
// accumulator then holds the output transposed, which only changes where the epilogue writes.

// The planes of the shared operand (and, when the register operand's rows are not 16-byte aligned for TMA, its
// packed copy): rows padded to a multiple of 4 floats with zeros.
struct Planes {
    float* big;    // batches x rows x k_padded (big parts; or the packed copy when small is null)
    float* small;  // the same shape, small parts; null: copy only
    int64_t batches, rows, K, k_padded;
};

// Element `at` of the planes: big and small parts of x, or x itself (a packed copy).
__device__ __forceinline__ void store_split(const Planes& out, int64_t at, float x) {
    if (out.small) {
        const float hi = __uint_as_float(__float_as_uint(x) & 0xffffe000u);
        out.big[at] = hi;
        out.small[at] = x - hi;
    } else {
        out.big[at] = x;
    }
}

__global__ void split_rows(const Matrix m, const Planes out) {
    for (int64_t line = blockIdx.x; line < out.batches * out.rows; line += gridDim.x) {
        const int64_t l = line / out.rows, r = line % out.rows;
        const float* src = m.data + l * m.batch_stride + r * m.row_stride;
        for (int64_t k = threadIdx.x; k < out.k_padded; k += blockDim.x)
            store_split(out, line * out.k_padded + k, k < out.K ? src[k * m.k_stride] : 0.0f);
    }
}

// The same for sources whose rows are contiguous (row_stride 1: a (K, N) operand read as N x K): 32 x 32 blocks
// through shared memory, so the reads (along rows) and the writes (along K) are both coalesced.
__global__ void split_columns(const Matrix m, const Planes out) {
    __shared__ float block[32][33];
    const int tx = threadIdx.x, ty = threadIdx.y;  // 32 x 8 threads
    const int64_t row_blocks = (out.rows + 31) / 32, k_blocks = (out.k_padded + 31) / 32;
    for (int64_t b = blockIdx.x; b < out.batches * row_blocks * k_blocks; b += gridDim.x) {
        const int64_t l = b / (row_blocks * k_blocks), rest = b % (row_blocks * k_blocks);
        const int64_t r0 = rest / k_blocks * 32, k0 = rest % k_blocks * 32;
        const float* src = m.data + l * m.batch_stride;
        for (int i = ty; i < 32; i += 8) {
            const int64_t k = k0 + i, r = r0 + tx;
            block[i][tx] = k < out.K && r < out.rows ? src[k * m.k_stride + r * m.row_stride] : 0.0f;
        }
        __syncthreads();
        for (int i = ty; i < 32; i += 8) {
            const int64_t r = r0 + i, k = k0 + tx;
            if (r >= out.rows || k >= out.k_padded) continue;
            store_split(out, (l * out.rows + r) * out.k_padded + k, block[tx][i]);
        }
        __syncthreads();
    }
}

// `m` into `out` with the kernel that reads it coalesced (any other layout: split_rows, correct but slower).
__host__ inline void split_operand(const Matrix& m, const Planes& out, int sms, cudaStream_t stream) {
    const unsigned cap = (unsigned)sms * 16;
    if (m.k_stride != 1 && m.row_stride == 1) {
        const int64_t blocks = out.batches * ((out.rows + 31) / 32) * ((out.k_padded + 31) / 32);
        split_columns<<<(unsigned)std::min<int64_t>(std::max<int64_t>(blocks, 1), cap), dim3(32, 8), 0, stream>>>(m, out);
    } else {
        split_rows<<<(unsigned)std::min<int64_t>(std::max<int64_t>(out.batches * out.rows, 1), cap), 256, 0, stream>>>(m, out);
    }
}

// Which operand is split into planes (A: "swapped"): the one that costs less extra memory traffic, counting its
// split (read once, written twice) and a copy of the other when that cannot be read in place (not K-contiguous).
__host__ inline bool presplit_swapped(const Problem& p) {
    const double a = (double)(p.a.batch_stride == 0 ? 1 : p.batch) * p.M * p.K;
    const double b = (double)(p.b.batch_stride == 0 ? 1 : p.batch) * p.N * p.K;
    const bool a_copied = !vectorizable(p.a, true, p.M, p.K), b_copied = !vectorizable(p.b, true, p.N, p.K);
    const double split_a = 3 * a + (b_copied ? 2 * b : 0), split_b = 3 * b + (a_copied ? 2 * a : 0);
    return split_a < split_b || (split_a == split_b && p.M < p.N);
}

template <int BN, int STAGES>
struct PresplitConfig {
    static constexpr int BM = 128, BK = 32;  // BM register-operand rows: two consumer warpgroups of 64
    static constexpr int CONSUMERS = 256, THREADS = CONSUMERS + 128;  // + the producer warpgroup
    static constexpr int REG = 0, BIG = BM * BK, SMALL = BIG + BN * BK, STAGE_FLOATS = SMALL + BN * BK;
    // the stages, their two barriers each, the output tile's barrier, and the slack to align the stages to 1024 bytes
    static constexpr int SMEM_BYTES = STAGES * STAGE_FLOATS * 4 + (2 * STAGES + 1) * 8 + 1024;
};

// The TMA descriptors of the three tiles of a stage: the register operand, the big and the small planes.
struct TileMaps {
    CUtensorMap reg, big, small;
};

__device__ __forceinline__ void barrier_arrive(uint64_t* barrier) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(shared_address(barrier)) : "memory");
}

// Block: BM register-operand rows x BN shared-operand rows, warp-specialized. K advances BK = 32 at a time through
// a ring of STAGES swizzled stages. The producer warpgroup hands its registers to the others and one of its threads
// issues the TMA copies of each stage's three tiles as soon as the stage is free (`landed` counts the bytes in,
// `freed` the 8 consumer warps done with it). The two consumer warpgroups never wait for each other within an output
// tile. Per 8-wide K step each splits its A fragment into one of SETS register sets (MMAs of the SETS - 1 steps
// before may read the others) and issues r_small*s_big + r_big*s_small + r_big*s_big; the MMAs of consecutive steps
// and tiles overlap. GROUP K tiles form one partial sum (the tensor cores truncate their accumulator), added to the
// running fp32 sum in round-to-nearest.
template <int BN, int STAGES, int GROUP, int SETS, class Epilogue>
__global__ void __launch_bounds__(384, 1) gemm_3xtf32_presplit(const Problem p, const Matrix reg, int64_t reg_rows,
                                                               const Planes shared_planes, bool swapped,
                                                               const __grid_constant__ TileMaps maps,
                                                               const Epilogue epilogue) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using C = PresplitConfig<BN, STAGES>;
    constexpr int BM = C::BM, BK = C::BK, CONSUMERS = C::CONSUMERS, NR = BN / 2;  // NR: accumulator floats per thread
    static_assert(STAGES >= 2, "a stage is refilled while the MMAs read another");
    static_assert(SETS >= 2 && (BK / 8) % SETS == 0, "the sets repeat within a tile, so a tile's MMAs end by the next's");
    static_assert(BN == BM, "a square block tile: the epilogue's shared tile has one shape either way");
    static_assert(BM * (BM + 4) <= STAGES * C::STAGE_FLOATS, "the output tile fits in the stages");
    extern __shared__ float4 shared_words[];
    const uint32_t raw = shared_address(shared_words);
    float* const tiles = reinterpret_cast<float*>(shared_words) + ((1024 - (raw & 1023)) & 1023) / 4;
    uint64_t* const landed = reinterpret_cast<uint64_t*>(tiles + STAGES * C::STAGE_FLOATS);  // per stage: its bytes in
    uint64_t* const freed = landed + STAGES;   // per stage: the consumer warps done with it
    uint64_t* const written = freed + STAGES;  // the output tile has left the stages: they may be refilled

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t K = shared_planes.K, k_tiles = (K + BK - 1) / BK;
    const int64_t n_tiles = (reg_rows + BM - 1) / BM;
    if (tid == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            barrier_init(landed + s, 1);
            barrier_init(freed + s, CONSUMERS / 32);
        }
        barrier_init(written, 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();  // (the last block-wide barrier: the consumers synchronize among themselves below)

    // blockIdx.x walks the shared operand (the smaller one) fastest: the blocks running together read the same
    // register-operand rows, so the larger operand comes from DRAM about once. `position` counts the K tiles the
    // block has gone through (all output tiles): the ring's stage and the barriers' phase follow from it.
    if (warp >= CONSUMERS / 32) {  // the producer warpgroup
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        if (warp != CONSUMERS / 32 || lane != 0) return;
        int64_t position = 0, output_tiles = 0;
        for (int64_t batch = blockIdx.z; batch < p.batch; batch += gridDim.z)
        for (int64_t tile_r = blockIdx.y; tile_r < n_tiles; tile_r += gridDim.y, ++output_tiles) {
            if (output_tiles > 0) barrier_wait(written, (uint32_t)(output_tiles - 1) & 1u);
            const int r0 = (int)(tile_r * BM), s0 = (int)(blockIdx.x * BN);
            const int reg_batch = reg.batch_stride ? (int)batch : 0;
            const int shared_batch = shared_planes.batches > 1 ? (int)batch : 0;
            for (int64_t kt = 0; kt < k_tiles; ++kt, ++position) {
                const int stage = (int)(position % STAGES), k0 = (int)(kt * BK);
                if (position >= STAGES) barrier_wait(freed + stage, (uint32_t)(position / STAGES - 1) & 1u);
                float* s = tiles + stage * C::STAGE_FLOATS;
                barrier_expect_bytes(landed + stage, C::STAGE_FLOATS * 4);
                tma_load(s + C::REG, maps.reg, k0, r0, reg_batch, landed + stage);
                tma_load(s + C::BIG, maps.big, k0, s0, shared_batch, landed + stage);
                tma_load(s + C::SMALL, maps.small, k0, s0, shared_batch, landed + stage);
            }
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    const int group = warp >> 2;                   // the warpgroup: register rows 64 * group ...
    const int warp_row = (warp & 3) * 16;          // ... of which this warp holds 16 in the accumulator
    const int g = lane >> 2, q = lane & 3;         // fragment coordinates (as mma.sync m16n8k8)
    const uint64_t tiles_descriptor = descriptor(tiles);
    auto consumers_sync = [] { asm volatile("bar.sync 1, %0;\n" :: "n"(CONSUMERS) : "memory"); };
    int64_t position = 0;
    for (int64_t batch = blockIdx.z; batch < p.batch; batch += gridDim.z) {
    for (int64_t tile_r = blockIdx.y; tile_r < n_tiles; tile_r += gridDim.y) {
        const int64_t r0 = tile_r * BM, s0 = (int64_t)blockIdx.x * BN;
        float acc[NR], part[NR];
#pragma unroll
        for (int i = 0; i < NR; ++i) acc[i] = part[i] = 0.0f;
        uint32_t r_big[SETS][4], r_small[SETS][4];  // register sets of the split fragment, in turn per K step
#pragma unroll
        for (int set = 0; set < SETS; ++set)
#pragma unroll
            for (int e = 0; e < 4; ++e) r_big[set][e] = r_small[set][e] = 0u;

        for (int64_t kt = 0; kt < k_tiles; ++kt, ++position) {
            const int stage = (int)(position % STAGES), stage_offset = stage * C::STAGE_FLOATS;
            barrier_wait(landed + stage, (uint32_t)(position / STAGES) & 1u);  // tile kt is in
            const float* r_tile = tiles + stage_offset + C::REG;
            const bool fresh = kt % GROUP == 0;  // the first tile of a partial sum overwrites it
#pragma unroll
            for (int step = 0; step < BK / 8; ++step) {
                const int set = step % SETS;  // a compile-time index: the sets stay in registers
                float x[4];  // read before the wait: the shared-memory latency overlaps the MMAs still running
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    x[e] = r_tile[swizzled(group * 64 + warp_row + g + (e & 1) * 8, step * 8 + q + (e >> 1) * 4)];
                wgmma_wait<SETS - 1>();  // the MMAs of SETS steps ago, which read this register set, are done ...
                pin_registers(r_big);
                pin_registers(r_small);
                // ... and at the last set, all of the previous tile's: this warp is done with its stage
                if (step == SETS - 1 && kt > 0 && lane == 0) barrier_arrive(freed + (position - 1) % STAGES);
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    r_big[set][e] = __float_as_uint(x[e]) & 0xffffe000u;
                    r_small[set][e] = __float_as_uint(x[e] - __uint_as_float(r_big[set][e]));
                }
                const uint64_t s_big = descriptor_at(tiles_descriptor, stage_offset + C::BIG + step * 8);
                const uint64_t s_small = descriptor_at(tiles_descriptor, stage_offset + C::SMALL + step * 8);
                wgmma_fence();
                wgmma_rs(part, r_small[set], s_big, fresh && step == 0 ? 0 : 1);
                wgmma_rs(part, r_big[set], s_small, 1);
                wgmma_rs(part, r_big[set], s_big, 1);
                wgmma_commit();
            }
            if (kt % GROUP == GROUP - 1 || kt == k_tiles - 1) {  // the partial sum is complete once its MMAs are
                wgmma_wait<0>();
                pin_registers(part);
#pragma unroll
                for (int i = 0; i < NR; ++i) acc[i] += part[i];
            }
        }
        wgmma_wait<0>();
        pin_registers(r_big);
        pin_registers(r_small);
        if (k_tiles > 0 && lane == 0) barrier_arrive(freed + (position - 1) % STAGES);  // the last tile's stage
        consumers_sync();  // no consumer reads a stage any more: the output tile may use them

        // The tile goes through shared memory as out[row][column] (swapped: register rows are output columns),
        // then each thread takes whole output rows' elements in turn: the epilogue runs on one element at a time,
        // so its operands' index math holds few registers, and the stores are coalesced. Accumulator float
        // 4j + 2h + e sits at register row g + 8h, shared row 8j + 2q + e of this warp's 16 rows.
        float* const out_tile = tiles;
        constexpr int LD = BM + 4;  // rows 4 banks apart: the scattered writes below are (nearly) conflict-free
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int j = 0; j < BN / 8; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int r = group * 64 + warp_row + g + 8 * h, c = j * 8 + 2 * q + e;
                    out_tile[swapped ? c * LD + r : r * LD + c] = acc[4 * j + 2 * h + e];
                }
        consumers_sync();
        const int64_t m0 = swapped ? s0 : r0, n0 = swapped ? r0 : s0;
        if (p.N % 4 == 0 && reinterpret_cast<uintptr_t>(p.out) % 16 == 0) {
            // four neighbouring columns a thread, one 16-byte store (n0 is a multiple of 128, so with N a multiple
            // of 4 every run is aligned and in range together): a quarter of the scalar loop's instructions, on
            // the tile's critical path (H200, results/gemm-epilogue-H200-2026-11-28: a 4D tensor times a matrix
            // 5.35 -> 4.20 ms, a batched product 3.33 -> 3.12, MinGPT's attention 7.72 -> 7.41; streaming stores
            // measured the same)
#pragma unroll 4
            for (int i = tid; i < BM * BM / 4; i += CONSUMERS) {
                const int row = i / (BM / 4), column = i % (BM / 4) * 4;
                const int64_t m = m0 + row, n = n0 + column;
                if (m < p.M && n < p.N) {
                    const int64_t index = (batch * p.M + m) * p.N + n;
                    const float4 v = *reinterpret_cast<const float4*>(out_tile + row * LD + column);
                    *reinterpret_cast<float4*>(p.out + index) =
                        make_float4(epilogue(v.x, index), epilogue(v.y, index + 1), epilogue(v.z, index + 2),
                                    epilogue(v.w, index + 3));
                }
            }
        } else {
#pragma unroll 4
            for (int i = tid; i < BM * BM; i += CONSUMERS) {
                const int row = i / BM, column = i % BM;
                const int64_t m = m0 + row, n = n0 + column;
                if (m < p.M && n < p.N) {
                    const int64_t index = (batch * p.M + m) * p.N + n;
                    p.out[index] = epilogue(out_tile[row * LD + column], index);
                }
            }
        }
        fence_async_shared();  // these reads come before the next output tile's TMA writes ...
        consumers_sync();      // ... in every consumer thread
        if (tid == 0) barrier_arrive(written);
    }
    }
#else
    __trap();  // built for another architecture: launch_presplit is only called on sm_90 with sm_90a code
#endif
}

// Where the pre-split kernel's operands live: the shared operand's planes at the start of the workspace, then,
// when the register operand cannot take 16-byte copies in place, its packed copy.
struct PresplitLayout {
    bool swapped;           // A is the shared operand
    Matrix shared, reg;     // as given
    int64_t shared_rows, reg_rows, k_padded;
    Planes planes, packed;  // packed.big == nullptr: the register operand is read in place
    int64_t floats;         // workspace size
};

__host__ inline PresplitLayout presplit_layout(const Problem& p, float* workspace) {
    PresplitLayout o;
    o.swapped = presplit_swapped(p);
    o.shared = o.swapped ? p.a : p.b;
    o.reg = o.swapped ? p.b : p.a;
    o.shared_rows = o.swapped ? p.M : p.N;
    o.reg_rows = o.swapped ? p.N : p.M;
    o.k_padded = (p.K + 3) / 4 * 4;
    const int64_t shared_batches = o.shared.batch_stride == 0 ? 1 : p.batch;
    const int64_t plane = shared_batches * o.shared_rows * o.k_padded;
    o.planes = Planes{workspace, workspace ? workspace + plane : nullptr, shared_batches, o.shared_rows, p.K, o.k_padded};
    o.floats = 2 * plane;
    o.packed = Planes{nullptr, nullptr, o.reg.batch_stride == 0 ? 1 : p.batch, o.reg_rows, p.K, o.k_padded};
    if (!vectorizable(o.reg, true, o.reg_rows, p.K)) {
        o.packed.big = workspace ? workspace + o.floats : nullptr;
        o.floats += o.packed.batches * o.reg_rows * o.k_padded;
    }
    return o;
}

// Floats of workspace the pre-split kernel needs for `p`.
__host__ inline int64_t presplit_floats(const Problem& p) { return presplit_layout(p, nullptr).floats; }

// cuTensorMapEncodeTiled, asked of the driver at run time (the extension links no libcuda); null if unavailable.
using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
__host__ inline EncodeTiled tensor_map_encoder() {
    static const EncodeTiled encoder = [] {
        void* function = nullptr;
        cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
        const cudaError_t err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function, 12000,
                                                                 cudaEnableDefault, &found);
#else
        const cudaError_t err = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &function, cudaEnableDefault, &found);
#endif
        return err == cudaSuccess && found == cudaDriverEntryPointSuccess ? reinterpret_cast<EncodeTiled>(function)
                                                                          : nullptr;
    }();
    return encoder;
}

// The TMA descriptor of a K-contiguous operand (16-byte aligned rows: `vectorizable`) read as boxes of 32 (K) x ROWS
// rows in the stages' 128-byte swizzle; reads past K or the rows give zeros. Batch coordinate 0 when not batched.
template <int ROWS>
__host__ inline bool encode_tiles(CUtensorMap& map, const Matrix& m, int64_t batches, int64_t rows, int64_t K) {
    const EncodeTiled encode = tensor_map_encoder();
    if (!encode) return false;
    const bool batched = m.batch_stride != 0 && batches > 1;
    const cuuint64_t dims[3] = {(cuuint64_t)K, (cuuint64_t)rows, (cuuint64_t)(batched ? batches : 1)};
    const cuuint64_t strides[2] = {(cuuint64_t)m.row_stride * 4,
                                   (cuuint64_t)(batched ? m.batch_stride : rows * m.row_stride) * 4};
    const cuuint32_t box[3] = {32, ROWS, 1}, element_strides[3] = {1, 1, 1};
    return encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, const_cast<float*>(m.data), dims, strides, box,
                  element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <int BN, int STAGES, int GROUP, int SETS, class Epilogue>
static cudaError_t launch_presplit(const Problem& p, const Epilogue& epilogue, float* workspace, int device,
                                   int sms, cudaStream_t stream) {
    using C = PresplitConfig<BN, STAGES>;
    if (p.batch == 0 || p.M == 0 || p.N == 0) return cudaSuccess;
    const PresplitLayout o = presplit_layout(p, workspace);
    split_operand(o.shared, o.planes, sms, stream);
    Matrix reg = o.reg;
    if (o.packed.big) {  // a packed copy, with the 16-byte aligned rows TMA reads
        split_operand(o.reg, o.packed, sms, stream);
        reg = Matrix{o.packed.big, o.packed.batches > 1 ? o.reg_rows * o.k_padded : 0, o.k_padded, 1};
    }
    TileMaps maps{};
    if (p.K > 0) {  // (K = 0: no tile is loaded)
        if (p.K > INT32_MAX || o.reg_rows > INT32_MAX || o.shared_rows > INT32_MAX || p.batch > INT32_MAX)
            return cudaErrorInvalidValue;  // TMA coordinates are 32-bit
        if (!tensor_map_encoder()) return cudaErrorNotSupported;  // a driver without TMA descriptors
        const int64_t plane_stride = o.planes.batches > 1 ? o.shared_rows * o.k_padded : 0;
        const Matrix big{o.planes.big, plane_stride, o.k_padded, 1}, small{o.planes.small, plane_stride, o.k_padded, 1};
        if (!encode_tiles<C::BM>(maps.reg, reg, p.batch, o.reg_rows, p.K)
            || !encode_tiles<BN>(maps.big, big, o.planes.batches, o.shared_rows, p.K)
            || !encode_tiles<BN>(maps.small, small, o.planes.batches, o.shared_rows, p.K))
            return cudaErrorInvalidValue;
    }
    auto kernel = gemm_3xtf32_presplit<BN, STAGES, GROUP, SETS, Epilogue>;
    static bool configured[256] = {};  // per process only because this function is static: see launch_tiles
    if (!configured[device]) {
        const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM_BYTES);
        if (err != cudaSuccess) return err;
        configured[device] = true;
    }
    const int64_t s_tiles = (o.shared_rows + BN - 1) / BN, r_tiles = (o.reg_rows + C::BM - 1) / C::BM;
    if (s_tiles > INT32_MAX) return cudaErrorInvalidConfiguration;
    const dim3 grid((unsigned)s_tiles, (unsigned)std::min<int64_t>(r_tiles, 65535),
                    (unsigned)std::min<int64_t>(p.batch, 65535));
    kernel<<<grid, C::THREADS, C::SMEM_BYTES, stream>>>(p, reg, o.reg_rows, o.planes, o.swapped, maps, epilogue);
    return cudaSuccess;
}

// Compute capability 9.0 (the sm_90a code runs there only), per device, asked once.
__host__ inline bool hopper_device(int device) {
    static signed char known[256] = {};  // 0 unknown, 1 yes, -1 no
    if (device < 0 || device >= 256) return false;
    if (known[device] == 0) {
        int major = 0, minor = 0;
        const bool ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess
                        && cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess;
        known[device] = ok && major == 9 && minor == 0 ? 1 : -1;
    }
    return known[device] == 1;
}

}  // namespace kf_gemm
#endif  // KF_SM90A
"""


_LAUNCH_TEMPLATE = r"""
namespace kf_gemm {
// The tiles on the best kernel compiled for the device: on sm_90 the pre-split wgmma kernel when this file has
// sm_90a code (KF_SM90A) and the step compiled it (WGMMA_BN > 0), else mma.sync.
// KF_ONLY_SM90A: the build has no other architecture (the emitted files' flags on an sm_90 GPU), so the mma.sync
// fallback of those layouts is left out (it would double the build time for a kernel that cannot run).
template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES, bool A_K_CONTIGUOUS, bool B_K_CONTIGUOUS,
          int MIN_BLOCKS, int WGMMA_BN, int WGMMA_STAGES, class Epilogue>
cudaError_t launch_best(const Problem& p, const Epilogue& epilogue, float* workspace, int sms, cudaStream_t stream) {
#if defined(KF_SM90A)
    if constexpr (WGMMA_BN > 0) {
        int device = 0;
        const cudaError_t err = cudaGetDevice(&device);
        if (err != cudaSuccess) return err;
        // two K tiles per partial sum, four register sets of the split fragment (results/gemm-presplit-*)
        if (hopper_device(device)) return launch_presplit<WGMMA_BN, WGMMA_STAGES, 2, 4>(p, epilogue, workspace, device, sms, stream);
#if defined(KF_ONLY_SM90A)
        return cudaErrorNoKernelImageForDevice;  // no other code in this build: the fallback is not compiled
#else
        return launch_tiles<BM, BN, BK, WARPS_M, WARPS_N, STAGES, A_K_CONTIGUOUS, B_K_CONTIGUOUS, MIN_BLOCKS>(p, epilogue, stream);
#endif
    } else
#endif
    {
        (void)workspace;
        (void)sms;
        return launch_tiles<BM, BN, BK, WARPS_M, WARPS_N, STAGES, A_K_CONTIGUOUS, B_K_CONTIGUOUS, MIN_BLOCKS>(p, epilogue, stream);
    }
}

// The problem the kernels run: `p` itself, or with SPLIT_K (compiled when the captured shape had few tiles) and
// more than one slice, K cut into `slices` parts run as a batch into the workspace.
__host__ inline Problem sliced(const Problem& p, int slices, float* partials) {
    Problem part = p;
    part.batch = slices;
    part.K = p.K / slices;
    part.a.batch_stride = part.K * p.a.k_stride;
    part.b.batch_stride = part.K * p.b.k_stride;
    part.out = partials;
    return part;
}

// Floats of the split's partial products, rounded up to 128 bytes: the pre-split planes after them are read through
// TMA descriptors, whose base address must be 16-byte aligned (an odd M x N, 169 x 3 in a Swin V2 block, left them
// misaligned and the descriptor's encoding failed: "CUDA error: invalid argument").
__host__ inline int64_t partials_floats(int slices, const Problem& p) {
    return slices > 1 && p.M > 0 && p.N > 0 ? (slices * p.M * p.N + 31) / 32 * 32 : 0;
}

// Floats of workspace `launch` needs: the split's partial products, then the pre-split planes (wgmma only).
template <int BM, int BN, int BK, bool A_K_CONTIGUOUS, bool B_K_CONTIGUOUS, bool SPLIT_K, int WGMMA_BN>
int64_t workspace_floats(const Problem& p, int sms) {
    const int slices = SPLIT_K ? split_k_slices<BM, BN, BK>(p, sms) : 1;
    const int64_t partials = partials_floats(slices, p);
    int64_t planes = 0;
#if defined(KF_SM90A)
    if constexpr (WGMMA_BN > 0) {
        int device = 0;
        if (cudaGetDevice(&device) == cudaSuccess && hopper_device(device))  // (else launch reports the error)
            planes = presplit_floats(partials > 0 ? sliced(p, slices, nullptr) : p);
    }
#endif
    return partials + planes;
}

// The product with its epilogue; `workspace` holds workspace_floats(p, sms) floats.
template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES, bool A_K_CONTIGUOUS, bool B_K_CONTIGUOUS,
          int MIN_BLOCKS, bool SPLIT_K, int WGMMA_BN, int WGMMA_STAGES, class Epilogue>
cudaError_t launch(const Problem& p, const Epilogue& epilogue, float* workspace, int sms, cudaStream_t stream) {
    if constexpr (SPLIT_K) {
        const int slices = split_k_slices<BM, BN, BK>(p, sms);
        if (slices > 1 && p.M > 0 && p.N > 0) {
            const Problem part = sliced(p, slices, workspace);
            const int64_t count = p.M * p.N;
            const cudaError_t err = launch_best<BM, BN, BK, WARPS_M, WARPS_N, STAGES, A_K_CONTIGUOUS, B_K_CONTIGUOUS,
                                                MIN_BLOCKS, WGMMA_BN, WGMMA_STAGES>(part, Store{},
                                                                                    workspace + partials_floats(slices, p),
                                                                                    sms, stream);
            if (err != cudaSuccess) return err;
            const unsigned blocks = (unsigned)std::max<int64_t>(1, std::min<int64_t>((count + 255) / 256, (int64_t)sms * 8));
            sum_slices<<<blocks, 256, 0, stream>>>(workspace, slices, count, p.out, epilogue);
            return cudaSuccess;
        }
    }
    return launch_best<BM, BN, BK, WARPS_M, WARPS_N, STAGES, A_K_CONTIGUOUS, B_K_CONTIGUOUS, MIN_BLOCKS, WGMMA_BN,
                       WGMMA_STAGES>(p, epilogue, workspace, sms, stream);
}
}  // namespace kf_gemm
"""


def gemm_template(tiles: bool, wgmma: bool, gemv: bool, small_k: bool = False, hopper_only: bool = False) -> str:
    """The template's parts a file uses: the tiled products (the mma.sync kernel, the general fallback, and the
    launch code) where a step is one, with the Hopper kernel where a step runs it (the file then defines KF_SM90A,
    which every use of it is behind); the matrix-vector and short-K kernels where a step is one. `hopper_only` (the
    plan was made on a Hopper GPU, where the wgmma kernel runs every tiled product and the mma.sync one is never
    built): the plain fp32 fallback stands in for the mma.sync kernel on other GPUs (55 lines instead of 250)."""
    tiles_kernel = _FALLBACK_TEMPLATE if wgmma and hopper_only else _MMA_SYNC_TEMPLATE
    tiled = _TILED_COMMON + tiles_kernel + (WGMMA_TEMPLATE if wgmma else "") + _LAUNCH_TEMPLATE if tiles else ""
    copies = ASYNC_COPY if tiles or small_k else ""
    return copies + tiled + (GEMV_TEMPLATE if gemv else "") + (SMALL_K_TEMPLATE if small_k else "")


# The longest K (at capture) that takes the short-K kernel: below the FFMA-to-write balance on an H100
SMALL_K = 32



@dataclass(frozen=True)
class TileConfig:
    """Named template parameters of one frozen GEMM configuration."""
    bm: int = 128
    bn: int = 128
    bk: int = 64
    warps_m: int = 2
    warps_n: int = 4
    stages: int = 3
    min_blocks: int = 1
    # the Hopper kernel (sm_90a builds on compute capability 9.0, both operands K-contiguous); 0: mma.sync only
    wgmma_bn: int = 128
    wgmma_stages: int = 4

    def arguments(self, a_k_contiguous: bool, b_k_contiguous: bool, split_k: bool | None = None) -> str:
        """The template arguments of `launch` (split_k given) or `launch_tiles` (None)."""
        flag = lambda x: "true" if x else "false"  # noqa: E731
        split = "" if split_k is None else f", {flag(split_k)}, {self.wgmma_bn}, {self.wgmma_stages}"
        return (f"{self.bm}, {self.bn}, {self.bk}, {self.warps_m}, {self.warps_n}, {self.stages}, "
                f"{flag(a_k_contiguous)}, {flag(b_k_contiguous)}, {self.min_blocks}{split}")

    def split_k(self, batch: int, m: int, n: int, k: int, sms: int = 132) -> bool:
        """Whether the captured shape leaves most SMs idle without a split of K (the frozen choice)."""
        tiles = batch * -(-m // self.bm) * -(-n // self.bn)
        return batch == 1 and 4 * tiles <= sms and k >= 8 * self.bk


# The configuration kfuse emits (scripts/bench/gemm_3xtf32.py measured the variants; results/gemm-*.json).
DEFAULT = TileConfig()


def skinny_tiles(config: TileConfig, m: int, n: int) -> TileConfig:
    """The tile for an M x N product where one side is 64 or less (at capture): the 128 x 128 tile, and the wgmma
    kernel's square one, would spend most of their MMAs on zero rows (NetVLAD's per-batch 32 x 512, attention's
    L x 32 head dim, a 20-class head). mma.sync tiles of 32 or 64 rows on that side instead, still 8 warps: with 4
    (128 threads) each thread's share of the tile copies doubled and the copy loop spilled (1.5 KB, sm_90, ptxas)."""
    if min(m, n) > 64:
        return config
    bm = 32 if m <= 32 else 64 if m <= 64 else 128
    bn = 32 if n <= 32 else 64 if n <= 64 else 128
    warps_m = 4 if bm > bn else 2  # warp tiles of 16-32 x 8-32 (whole 16x8 MMAs)
    return replace(config, bm=bm, bn=bn, warps_m=warps_m, warps_n=8 // warps_m, wgmma_bn=0)
