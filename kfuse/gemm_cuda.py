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

On Hopper (compute capability 9.0, files built for sm_90a: KF_SM90A) products whose operands are both
K-contiguous run `gemm_3xtf32_wgmma` instead: warpgroup MMAs (wgmma.mma_async m64nNk8 tf32) with B split once per
stage into big/small tiles in 128-byte-swizzled shared memory (A split in registers, or also in shared memory),
same three products, same per-K-tile partial sums, same epilogue functor. See WGMMA_TEMPLATE.
"""

from __future__ import annotations

from dataclasses import dataclass

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

_MMA_SYNC_TEMPLATE = r"""
namespace kf_gemm {

__device__ __forceinline__ uint32_t shared_address(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Asynchronous global -> shared copy of BYTES bytes; zero-filled when `inside` is false (nothing is read then).
template <int BYTES>
__device__ __forceinline__ void copy_async(float* dst, const float* src, bool inside) {
    const int size = inside ? BYTES : 0;
    if constexpr (BYTES == 16) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(shared_address(dst)), "l"(src), "r"(size));
    } else {
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n"
                     :: "r"(shared_address(dst)), "l"(src), "n"(BYTES), "r"(size));
    }
}
__device__ __forceinline__ void copy_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int PENDING>
__device__ __forceinline__ void copy_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(PENDING)); }

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

// The operand's layout matches the tile's and allows 16-byte copies.
__host__ inline bool vectorizable(const Matrix& m, bool k_contiguous, int64_t rows, int64_t K) {
    const int64_t contiguous = k_contiguous ? m.k_stride : m.row_stride;
    const int64_t other = k_contiguous ? m.row_stride : m.k_stride;
    const int64_t extent = k_contiguous ? K : rows;
    return contiguous == 1 && other % 4 == 0 && m.batch_stride % 4 == 0 && extent % 4 == 0
           && reinterpret_cast<uintptr_t>(m.data) % 16 == 0;
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

// Split K: when the output has too few tiles to fill the GPU (512x512 with K = 262144: 16 tiles for 132 SMs),
// K is cut into `slices` equal parts run as a batch into a workspace, then summed. 1: no split.
template <int BM, int BN, int BK>
__host__ inline int split_k_slices(const Problem& p, int sms) {
    const int64_t tiles = p.batch * ((p.M + BM - 1) / BM) * ((p.N + BN - 1) / BN);
    int slices = 1;
    while (p.batch == 1 && slices < 16 && tiles * slices * 2 <= sms && p.K % (slices * 2 * 4) == 0
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


# --------------------------------------------------------------------------------------------------------------
# Hopper (sm_90a): the same product with warpgroup MMAs (wgmma.mma_async) reading B, and optionally A, from shared
# memory. Compiled only when the build targets sm_90a (KF_SM90A, set by the emitted file's build flags on an sm_90
# device) and used at run time on compute capability 9.0, for operands with K contiguous (both read as rows x K);
# everything else keeps the mma.sync kernel above. The kernel body is guarded by __CUDA_ARCH_FEAT_SM90_ALL, so the
# same source also compiles for other architectures in one build (then the run-time check picks per device).

def _wgmma_wrapper(n: int, a_shared: bool) -> str:
    """A C++ wrapper of one `wgmma.mma_async ... m64n{n}k8.f32.tf32.tf32` (A from registers or shared memory)."""
    regs = n // 2  # accumulator floats per thread: 64 x n over 128 threads
    d = ", ".join(f"%{i}" for i in range(regs))
    if a_shared:
        a_operand, a_inputs, nxt = f"%{regs}", '"l"(a)', regs + 1
        a_param = "uint64_t a"
    else:
        a_operand = "{" + ", ".join(f"%{regs + i}" for i in range(4)) + "}"
        a_inputs = ", ".join(f'"r"(a[{i}])' for i in range(4))
        a_param, nxt = "const uint32_t (&a)[4]", regs + 4
    outputs = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    source = "shared" if a_shared else "registers"
    return f"""
// d (+)= A * B on a 64 x {n} x 8 step of the warpgroup, A from {source}, B through its shared-memory descriptor;
// accumulate = 0 overwrites d (a fresh partial sum).
__device__ __forceinline__ void wgmma_{'ss' if a_shared else 'rs'}(float (&d)[{regs}], {a_param}, uint64_t b, int accumulate) {{
    asm volatile("{{\\n.reg .pred keep;\\nsetp.ne.b32 keep, %{nxt + 1}, 0;\\n"
                 "wgmma.mma_async.sync.aligned.m64n{n}k8.f32.tf32.tf32 {{{d}}}, {a_operand}, %{nxt}, keep, 1, 1;\\n}}\\n"
                 : {outputs}
                 : {a_inputs}, "l"(b), "r"(accumulate));
}}
"""


WGMMA_NS = (128, 64)  # the tile widths (BN) the wrappers exist for


WGMMA_TEMPLATE = r"""
#if defined(KF_SM90A)
namespace kf_gemm {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
""" + "".join(_wgmma_wrapper(n, shared) for n in WGMMA_NS for shared in (False, True)) + r"""
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
// Generic-proxy shared-memory writes (the split) made visible to the async proxy wgmma reads through.
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
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

// Copies rows [row0, row0 + ROWS) x k [k0, k0 + 32) of `m` (read along K) into a swizzled tile, VEC floats per
// copy; zeros outside rows x K.
template <int ROWS, int VEC, int THREADS>
__device__ __forceinline__ void load_swizzled(float* tile, const Matrix& m, int64_t batch, int64_t row0, int64_t rows,
                                              int64_t k0, int64_t K, int tid) {
    constexpr int PER_ROW = 32 / VEC, COPIES = PER_ROW * ROWS;
    static_assert(COPIES % THREADS == 0, "tile copies must divide evenly among the threads");
    const float* base = m.data + batch * m.batch_stride;
#pragma unroll
    for (int i = 0; i < COPIES / THREADS; ++i) {
        const int c = tid + i * THREADS;
        const int row = c / PER_ROW, k = (c % PER_ROW) * VEC;
        const int64_t r = row0 + row, kk = k0 + k;
        const bool inside = r < rows && kk < K;  // VEC = 4: the host checked K % 4 == 0 and alignment
        const float* src = inside ? base + r * m.row_stride + kk * m.k_stride : m.data;
        copy_async<VEC * 4>(tile + swizzled(row, k), src, inside);
    }
}

// x = big + small, elementwise over a tile (any layout: both tiles share it): big = tf32(x) by truncation
// written back in place (STORE_BIG), small = x - big (exact) into `small`. With STORE_BIG the MMA sees TF32
// values whatever it does with the low 13 bits of its inputs; without, it must ignore them (truncate) itself.
template <int FLOATS, int THREADS, bool STORE_BIG>
__device__ __forceinline__ void split_tile(float* big, float* small, int tid) {
    static_assert(FLOATS % (4 * THREADS) == 0, "the split covers the tile in float4s");
#pragma unroll
    for (int i = tid * 4; i < FLOATS; i += THREADS * 4) {
        float4 x = *reinterpret_cast<const float4*>(big + i);
        float4 hi;
        hi.x = __uint_as_float(__float_as_uint(x.x) & 0xffffe000u);
        hi.y = __uint_as_float(__float_as_uint(x.y) & 0xffffe000u);
        hi.z = __uint_as_float(__float_as_uint(x.z) & 0xffffe000u);
        hi.w = __uint_as_float(__float_as_uint(x.w) & 0xffffe000u);
        if constexpr (STORE_BIG) *reinterpret_cast<float4*>(big + i) = hi;
        *reinterpret_cast<float4*>(small + i) = make_float4(x.x - hi.x, x.y - hi.y, x.z - hi.z, x.w - hi.w);
    }
}

template <int BN, int STAGES, bool A_SHARED>
struct WgmmaConfig {
    static constexpr int BM = 128, BK = 32, THREADS = 256;  // two warpgroups, each 64 rows x BN
    static constexpr int A_FLOATS = BM * BK, B_FLOATS = BN * BK;
    // one stage: A (split in place when A_SHARED), A's small parts (A_SHARED), B split in place, B's small parts
    static constexpr int A_SMALL = A_FLOATS, B_BIG = A_FLOATS + (A_SHARED ? A_FLOATS : 0), B_SMALL = B_BIG + B_FLOATS;
    static constexpr int STAGE_FLOATS = B_SMALL + B_FLOATS;
    static constexpr int SMEM_BYTES = STAGES * STAGE_FLOATS * 4 + 1024;  // + the alignment slack
};

// The 3xTF32 product on Hopper. Block: 128 x BN outputs, two warpgroups of 64 rows. K advances 32 at a time
// through a ring of STAGES swizzled tiles filled with cp.async. Per K tile: (1) B (and with A_SHARED, A) is split
// once into big and small tiles in shared memory, for the whole block; (2) each warpgroup issues 3 wgmmas per
// 8-wide K step, A_small*B_big + A_big*B_small + A_big*B_big (small terms first), into a fresh partial sum;
// without A_SHARED each thread reads and splits its A fragment in registers (A small parts never stored);
// (3) while they run, the next tile is split and the tile STAGES-1 ahead is requested; (4) the partial sum is
// added to the running fp32 sum in round-to-nearest (the tensor cores truncate their accumulator: summed over all
// of K that bias is 14x cuBLAS's error, see the mma.sync kernel).
template <int BN, int STAGES, bool A_SHARED, bool STORE_BIG, bool PARTIAL_SUMS, bool PREFETCH_A, int VEC, class Epilogue>
__global__ void __launch_bounds__(256, 1) gemm_3xtf32_wgmma(const Problem p, const Epilogue epilogue) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using C = WgmmaConfig<BN, STAGES, A_SHARED>;
    constexpr int BM = C::BM, BK = C::BK, THREADS = C::THREADS, NR = BN / 2;  // NR: accumulator floats per thread
    static_assert(STAGES >= 3, "the stage being split, the one multiplied and the one refilled are distinct");
    extern __shared__ float4 shared_words[];
    const uint32_t raw = shared_address(shared_words);
    float* const tiles = reinterpret_cast<float*>(shared_words) + ((1024 - (raw & 1023)) & 1023) / 4;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int group = warp >> 2;                   // the warpgroup: rows 64 * group ...
    const int warp_row = (warp & 3) * 16;          // ... of which this warp holds 16 in the accumulator
    const int g = lane >> 2, q = lane & 3;         // fragment coordinates (as mma.sync m16n8k8)
    const int64_t k_tiles = (p.K + BK - 1) / BK;
    const int64_t n_tiles = (p.N + BN - 1) / BN;

    for (int64_t batch = blockIdx.z; batch < p.batch; batch += gridDim.z) {
    for (int64_t tile_n = blockIdx.y; tile_n < n_tiles; tile_n += gridDim.y) {
        const int64_t m0 = (int64_t)blockIdx.x * BM, n0 = tile_n * BN;
        float acc[NR], part_sum[NR];
#pragma unroll
        for (int i = 0; i < NR; ++i) acc[i] = part_sum[i] = 0.0f;
        // the MMAs' target: a fresh partial sum per K tile, or (PARTIAL_SUMS = false, a bench experiment: is the
        // truncation bias of the wgmma accumulator small enough?) the running sum itself
        float (&part)[NR] = PARTIAL_SUMS ? part_sum : acc;
        constexpr int FIRST = PARTIAL_SUMS ? 0 : 1;  // the accumulate flag of a K tile's first MMA

        auto stage_of = [&](int64_t kt) { return tiles + (int)(kt % STAGES) * C::STAGE_FLOATS; };
        auto load_stage = [&](int64_t kt) {
            float* s = stage_of(kt);
            load_swizzled<BM, VEC, THREADS>(s, p.a, batch, m0, p.M, kt * BK, p.K, tid);
            load_swizzled<BN, VEC, THREADS>(s + C::B_BIG, p.b, batch, n0, p.N, kt * BK, p.K, tid);
        };
        auto split_stage = [&](int64_t kt) {
            float* s = stage_of(kt);
            if constexpr (A_SHARED) split_tile<C::A_FLOATS, THREADS, STORE_BIG>(s, s + C::A_SMALL, tid);
            split_tile<C::B_FLOATS, THREADS, STORE_BIG>(s + C::B_BIG, s + C::B_SMALL, tid);
            fence_async_shared();
        };
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (s < k_tiles) load_stage(s);
            copy_commit();
        }
        copy_wait<STAGES - 2>();  // tile 0
        __syncthreads();
        if (k_tiles > 0) split_stage(0);
        __syncthreads();
        // A_SHARED = false: this thread's A fragment (m16n8k8 TF32 layout, this warp's 16 rows): (g, k) (g+8, k)
        // (g, k+4) (g+8, k+4), k = q, per 8-wide step, as loaded (PREFETCH_A: the next tile's, during the MMAs)
        uint32_t a_raw[BK / 8][4];
        auto load_a = [&](int64_t kt) {
            const float* s = stage_of(kt);
#pragma unroll
            for (int step = 0; step < BK / 8; ++step)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    a_raw[step][e] = __float_as_uint(s[swizzled(group * 64 + warp_row + g + (e & 1) * 8, step * 8 + q + (e >> 1) * 4)]);
        };
        if constexpr (!A_SHARED && PREFETCH_A) {
            if (k_tiles > 0) load_a(0);
        }

        for (int64_t kt = 0; kt < k_tiles; ++kt) {
            const float* s = stage_of(kt);
            const float* a_tile = s + group * 64 * BK;  // this warpgroup's 64 rows (a multiple of 8: aligned)
            uint32_t a_big[BK / 8][4], a_small[BK / 8][4];  // A_SHARED = false: the split fragment
            pin_registers(part);
            if constexpr (A_SHARED) {
                wgmma_fence();
#pragma unroll
                for (int step = 0; step < BK / 8; ++step) {
                    const uint64_t a_big = descriptor(a_tile + step * 8), a_small = descriptor(s + C::A_SMALL + group * 64 * BK + step * 8);
                    const uint64_t b_big = descriptor(s + C::B_BIG + step * 8), b_small = descriptor(s + C::B_SMALL + step * 8);
                    wgmma_ss(part, a_small, b_big, step > 0 ? 1 : FIRST);
                    wgmma_ss(part, a_big, b_small, 1);
                    wgmma_ss(part, a_big, b_big, 1);
                }
            } else {
                if constexpr (!PREFETCH_A) load_a(kt);
#pragma unroll
                for (int step = 0; step < BK / 8; ++step)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const float x = __uint_as_float(a_raw[step][e]);
                        a_big[step][e] = __float_as_uint(x) & 0xffffe000u;
                        a_small[step][e] = __float_as_uint(x - __uint_as_float(a_big[step][e]));
                    }
                wgmma_fence();
#pragma unroll
                for (int step = 0; step < BK / 8; ++step) {
                    const uint64_t b_big = descriptor(s + C::B_BIG + step * 8), b_small = descriptor(s + C::B_SMALL + step * 8);
                    wgmma_rs(part, a_small[step], b_big, step > 0 ? 1 : FIRST);
                    wgmma_rs(part, a_big[step], b_small, 1);
                    wgmma_rs(part, a_big[step], b_big, 1);
                }
            }
            wgmma_commit();
            // while the MMAs run: the next tile split, the one STAGES-1 ahead requested (into the stage of kt - 1,
            // which every thread finished with before the barrier that closed the previous iteration)
            copy_wait<STAGES - 3>();  // tile kt + 1
            __syncthreads();
            if (kt + 1 < k_tiles) split_stage(kt + 1);
            if (kt + STAGES - 1 < k_tiles) load_stage(kt + STAGES - 1);
            copy_commit();
            if constexpr (!A_SHARED && PREFETCH_A) {
                if (kt + 1 < k_tiles) load_a(kt + 1);  // landed and visible since the barrier above
            }
            wgmma_wait_all();
            pin_registers(part);
            if constexpr (!A_SHARED) {
                pin_registers(a_big);
                pin_registers(a_small);
            }
#pragma unroll
            for (int i = 0; i < NR; ++i)
                if constexpr (PARTIAL_SUMS) acc[i] += part_sum[i];
            __syncthreads();  // tile kt + 1's split is visible to both warpgroups
        }
        copy_wait<0>();
        __syncthreads();  // the next output tile's prologue refills the stages

        // epilogue in registers, one write: accumulator float 4j + e sits at row g (+8 for e >= 2), column
        // 8j + 2q + (e & 1) of this warp's 16 rows
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int64_t row = m0 + group * 64 + warp_row + g + half * 8;
            if (row >= p.M) continue;
            const int64_t row_start = (batch * p.M + row) * p.N;
#pragma unroll
            for (int j = 0; j < BN / 8; ++j) {
                const int64_t col = n0 + j * 8 + 2 * q;
                if (col < p.N) p.out[row_start + col] = epilogue(acc[4 * j + 2 * half], row_start + col);
                if (col + 1 < p.N) p.out[row_start + col + 1] = epilogue(acc[4 * j + 2 * half + 1], row_start + col + 1);
            }
        }
    }
    }
#else
    __trap();  // built for another architecture: launch_wgmma is only called on sm_90 with sm_90a code
#endif
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

// Bench experiments: STORE_BIG = false: B's (and A_SHARED: A's) big parts are not written back, the MMA reads the
// fp32 values and must truncate them itself; PARTIAL_SUMS = false: one accumulator over all of K; PREFETCH_A: the
// next K tile's A fragment is read from shared memory while the MMAs run (16 more registers).
template <int BN, int STAGES, bool A_SHARED, bool STORE_BIG = true, bool PARTIAL_SUMS = true, bool PREFETCH_A = false,
          class Epilogue>
static cudaError_t launch_wgmma(const Problem& p, const Epilogue& epilogue, int device, cudaStream_t stream) {
    using C = WgmmaConfig<BN, STAGES, A_SHARED>;
    if (p.batch == 0 || p.M == 0 || p.N == 0) return cudaSuccess;
    const bool fast = vectorizable(p.a, true, p.M, p.K) && vectorizable(p.b, true, p.N, p.K);
    auto kernel = fast ? gemm_3xtf32_wgmma<BN, STAGES, A_SHARED, STORE_BIG, PARTIAL_SUMS, PREFETCH_A, 4, Epilogue>
                       : gemm_3xtf32_wgmma<BN, STAGES, A_SHARED, STORE_BIG, PARTIAL_SUMS, PREFETCH_A, 1, Epilogue>;
    static bool configured[2][256] = {};  // per process only because this function is static: see launch_tiles
    if (!configured[fast][device]) {
        const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM_BYTES);
        if (err != cudaSuccess) return err;
        configured[fast][device] = true;
    }
    const int64_t m_tiles = (p.M + C::BM - 1) / C::BM, n_tiles = (p.N + BN - 1) / BN;
    if (m_tiles > INT32_MAX) return cudaErrorInvalidConfiguration;
    const dim3 grid((unsigned)m_tiles, (unsigned)std::min<int64_t>(n_tiles, 65535),
                    (unsigned)std::min<int64_t>(p.batch, 65535));
    kernel<<<grid, C::THREADS, C::SMEM_BYTES, stream>>>(p, epilogue);
    return cudaSuccess;
}
}  // namespace kf_gemm
#endif  // KF_SM90A
"""


_LAUNCH_TEMPLATE = r"""
namespace kf_gemm {
// The tiles on the best kernel compiled for the device: wgmma on sm_90 when this file has sm_90a code (KF_SM90A)
// and both operands are compiled K-contiguous (WGMMA_BN > 0), else mma.sync. KF_ONLY_SM90A: the build has no
// other architecture (the emitted files' flags on an sm_90 GPU), so the mma.sync fallback of those layouts is left
// out (it would double the build time for a kernel that cannot run).
template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES, bool A_K_CONTIGUOUS, bool B_K_CONTIGUOUS,
          int MIN_BLOCKS, int WGMMA_BN, int WGMMA_STAGES, bool WGMMA_A_SHARED, class Epilogue>
cudaError_t launch_best(const Problem& p, const Epilogue& epilogue, cudaStream_t stream) {
#if defined(KF_SM90A)
    if constexpr (WGMMA_BN > 0 && A_K_CONTIGUOUS && B_K_CONTIGUOUS) {
        int device = 0;
        const cudaError_t err = cudaGetDevice(&device);
        if (err != cudaSuccess) return err;
        if (hopper_device(device)) return launch_wgmma<WGMMA_BN, WGMMA_STAGES, WGMMA_A_SHARED>(p, epilogue, device, stream);
#if defined(KF_ONLY_SM90A)
        return cudaErrorNoKernelImageForDevice;  // no other code in this build: the fallback is not compiled
#else
        return launch_tiles<BM, BN, BK, WARPS_M, WARPS_N, STAGES, A_K_CONTIGUOUS, B_K_CONTIGUOUS, MIN_BLOCKS>(p, epilogue, stream);
#endif
    } else
#endif
    {
        return launch_tiles<BM, BN, BK, WARPS_M, WARPS_N, STAGES, A_K_CONTIGUOUS, B_K_CONTIGUOUS, MIN_BLOCKS>(p, epilogue, stream);
    }
}

// The product with its epilogue; SPLIT_K compiles the split path (chosen when the captured shape had few tiles),
// `workspace` then holds split_k_slices * M * N floats.
template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES, bool A_K_CONTIGUOUS, bool B_K_CONTIGUOUS,
          int MIN_BLOCKS, bool SPLIT_K, int WGMMA_BN, int WGMMA_STAGES, bool WGMMA_A_SHARED, class Epilogue>
cudaError_t launch(const Problem& p, const Epilogue& epilogue, float* workspace, int sms, cudaStream_t stream) {
    if constexpr (SPLIT_K) {
        const int slices = split_k_slices<BM, BN, BK>(p, sms);
        if (slices > 1 && p.M > 0 && p.N > 0) {
            Problem part = p;
            part.batch = slices;
            part.K = p.K / slices;
            part.a.batch_stride = part.K * p.a.k_stride;
            part.b.batch_stride = part.K * p.b.k_stride;
            part.out = workspace;
            const cudaError_t err = launch_best<BM, BN, BK, WARPS_M, WARPS_N, STAGES, A_K_CONTIGUOUS, B_K_CONTIGUOUS,
                                                MIN_BLOCKS, WGMMA_BN, WGMMA_STAGES, WGMMA_A_SHARED>(part, Store{}, stream);
            if (err != cudaSuccess) return err;
            const int64_t count = p.M * p.N;
            const unsigned blocks = (unsigned)std::max<int64_t>(1, std::min<int64_t>((count + 255) / 256, (int64_t)sms * 8));
            sum_slices<<<blocks, 256, 0, stream>>>(workspace, slices, count, p.out, epilogue);
            return cudaSuccess;
        }
    }
    return launch_best<BM, BN, BK, WARPS_M, WARPS_N, STAGES, A_K_CONTIGUOUS, B_K_CONTIGUOUS, MIN_BLOCKS, WGMMA_BN,
                       WGMMA_STAGES, WGMMA_A_SHARED>(p, epilogue, stream);
}
}  // namespace kf_gemm
"""

GEMM_TEMPLATE = _MMA_SYNC_TEMPLATE + WGMMA_TEMPLATE + _LAUNCH_TEMPLATE



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
    wgmma_a_shared: bool = False     # A split into shared memory too (else read and split in registers)

    def arguments(self, a_k_contiguous: bool, b_k_contiguous: bool, split_k: bool | None = None) -> str:
        """The template arguments of `launch` (split_k given) or `launch_tiles` (None)."""
        flag = lambda x: "true" if x else "false"  # noqa: E731
        split = ("" if split_k is None else
                 f", {flag(split_k)}, {self.wgmma_bn}, {self.wgmma_stages}, {flag(self.wgmma_a_shared)}")
        return (f"{self.bm}, {self.bn}, {self.bk}, {self.warps_m}, {self.warps_n}, {self.stages}, "
                f"{flag(a_k_contiguous)}, {flag(b_k_contiguous)}, {self.min_blocks}{split}")

    def split_k(self, batch: int, m: int, n: int, k: int, sms: int = 132) -> bool:
        """Whether the captured shape leaves most SMs idle without a split of K (the frozen choice)."""
        tiles = batch * -(-m // self.bm) * -(-n // self.bn)
        return batch == 1 and 4 * tiles <= sms and k >= 8 * self.bk


# The configuration kfuse emits (scripts/bench/gemm_3xtf32.py measured the variants; results/gemm-*.json).
DEFAULT = TileConfig()
