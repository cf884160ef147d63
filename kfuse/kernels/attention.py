"""Fused attention: scaled_dot_product_attention as one kernel that never materialises the score matrix.

softmax(Q K^T * scale [causal mask] [boolean mask]) V for fp32 q (..., L, E), k (..., S, E), v (..., S, Ev), with
equal batch dims, no dropout, no GQA; the default scale 1/sqrt(E) or an explicit one; is_causal (PyTorch's
top-left aligned lower triangle: query i sees keys j <= i); a boolean attn_mask that broadcasts to (..., L, S)
(True: the key takes part, as in PyTorch), read per score (a causal GPT's `masked_fill(tril == 0, -inf)`, rewritten
so at capture: kfuse/compiler/rewrite.py). A float mask stays ATen's.

CUDA: flash-attention style on tensor cores. A block owns 64 query rows of one batch entry (4 warps of 16 rows); it
walks the keys in blocks of 64 (32 past 64 value columns): S = Q K^T, an online softmax per row in base 2 (running
max m and sum l; the partial output is rescaled by 2^(m_old - m_new) when the max grows), then O += P V with P
straight from S's registers. Both products are 3xTF32 `mma.sync` MMAs (every operand split into big and small
TF32 parts, three MMAs per product: fp32-faithful, as kfuse's GEMMs), head dims up to 128. The fp32 FFMA kernel it
replaced ran 31_VisionAttention's head dim 32 at ~13 TFLOPS. Every thread's order of operations is fixed: results are
deterministic. Shapes the kernel does not cover at run time (head dim > 128, no keys) call ATen's operator instead.

CPU: one query row per iteration of at::parallel_for; scores, softmax and the weighted sum in double.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kfuse.kernels.steps import replace_library_calls, tensor_meta

SDPA = "aten.scaled_dot_product_attention.default"


class Unsupported(Exception):
    """This attention call stays an ATen call; the message says why."""


@dataclass
class AttentionKernel:
    name: str
    node: torch.fx.Node
    causal: bool
    scale: float | None           # None: 1 / sqrt(E), read at run time
    mask: torch.fx.Node | None = None  # a boolean attn_mask

    @property
    def ops(self) -> list[str]:
        return [SDPA]

    @property
    def inputs(self) -> list[str]:
        return [a.name for a in self.node.args[:3]] + ([self.mask.name] if self.mask is not None else [])


def _bound(node: torch.fx.Node) -> dict:
    from kfuse.kernels import ops
    return ops.bind_arguments(node.target._schema, list(node.args), dict(node.kwargs))


def spec_for(node: torch.fx.Node) -> AttentionKernel:
    p = _bound(node)
    mask = p["attn_mask"]
    if p["dropout_p"] != 0.0:
        raise Unsupported("with dropout")
    if p["enable_gqa"]:
        raise Unsupported("with enable_gqa (grouped-query attention)")
    q, k, v = p["query"], p["key"], p["value"]
    metas = [tensor_meta(t) if isinstance(t, torch.fx.Node) else None for t in (q, k, v)]
    if any(m is None or m.dtype != torch.float32 for m in metas):
        raise Unsupported("on non-fp32 tensors (fp32 kernels only)")
    mq, mk, mv = metas
    if mq.dim() < 2 or not (mq.dim() == mk.dim() == mv.dim()):
        raise Unsupported("on tensors of different ranks or rank < 2")
    if not (mq.shape[:-2] == mk.shape[:-2] == mv.shape[:-2]):
        raise Unsupported("with broadcast batch dims")
    scale = p["scale"]
    if scale is not None and not isinstance(scale, (int, float)):
        raise Unsupported(f"with scale={scale!r}")
    if mask is not None:
        mm = tensor_meta(mask) if isinstance(mask, torch.fx.Node) else None
        if mm is None or mm.dtype != torch.bool:
            raise Unsupported("with a float or non-tensor attention mask")
        target = tuple(mq.shape[:-1]) + (mk.shape[-2],)
        if mm.dim() > len(target) or any(m not in (1, t) for m, t in zip(reversed(mm.shape), reversed(target))):
            raise Unsupported("with an attention mask that does not broadcast to (..., L, S)")
    return AttentionKernel("", node, bool(p["is_causal"]), None if scale is None else float(scale), mask)


def unfused_reason(node: torch.fx.Node) -> str | None:
    if str(node.target) != SDPA:
        return None
    try:
        spec_for(node)
    except Unsupported as err:
        return f"attention {err}: kept as an ATen call"
    return "attention: kept as an ATen call"


def fuse_attention(steps: list) -> list:
    """Replace supported scaled_dot_product_attention calls by AttentionKernel steps."""
    return replace_library_calls(steps, SDPA, spec_for, Unsupported)


# --------------------------------------------------------------------------------------------------------------
# Printing

# Host side shared by both targets: the problem's geometry, the batch dims flattened (each view keeps its strides).
ATTENTION_DECLS = r"""
namespace kf {
struct AttnView {
    const float* data;
    int64_t bs[KF_MAX_DIMS];   // strides of the batch dims
    int64_t row, col;          // strides of the sequence dim and the feature dim
    bool vec;                  // rows read as float4 (features contiguous, every row 16-byte aligned)
};
struct AttnGeom {
    int nb;                    // batch dims
    int64_t bsz[KF_MAX_DIMS];
    int64_t batches, L, S, E, Ev;
    float scale;
    bool causal;
    const bool* mask;          // a boolean attn_mask (true: the key takes part), or nullptr
    int64_t mask_bs[KF_MAX_DIMS], mask_row, mask_col;  // its strides, 0 along broadcast dims
};
}  // namespace kf
"""

ATTENTION_HOST = r"""
namespace kf {
inline AttnView attn_view(const at::Tensor& t, int nb) {
    TORCH_CHECK(t.scalar_type() == at::kFloat, "kfuse attention expects float32 tensors");
    AttnView v;
    v.data = t.data_ptr<float>();
    for (int d = 0; d < nb; ++d) v.bs[d] = t.stride(d);
    v.row = t.stride(nb);
    v.col = t.stride(nb + 1);
    v.vec = v.col == 1 && t.size(nb + 1) % 4 == 0 && v.row % 4 == 0 && reinterpret_cast<uintptr_t>(v.data) % 16 == 0;
    for (int d = 0; d < nb; ++d) v.vec = v.vec && v.bs[d] % 4 == 0;
    return v;
}
inline AttnGeom attn_geometry(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale, bool causal) {
    const int64_t r = q.dim();
    TORCH_CHECK(r >= 2 && r - 2 <= KF_MAX_DIMS && k.dim() == r && v.dim() == r, "kfuse attention: unexpected ranks");
    AttnGeom g;
    g.nb = (int)(r - 2);
    g.batches = 1;
    for (int d = 0; d < g.nb; ++d) {
        TORCH_CHECK(k.size(d) == q.size(d) && v.size(d) == q.size(d), "kfuse attention: batch dims differ");
        g.bsz[d] = q.size(d);
        g.batches *= q.size(d);
    }
    g.L = q.size(r - 2);
    g.S = k.size(r - 2);
    g.E = q.size(r - 1);
    g.Ev = v.size(r - 1);
    TORCH_CHECK(k.size(r - 1) == g.E && v.size(r - 2) == g.S, "kfuse attention: key/value shapes do not match");
    g.scale = (float)scale;
    g.causal = causal;
    g.mask = nullptr;
    for (int d = 0; d < KF_MAX_DIMS; ++d) g.mask_bs[d] = 0;
    g.mask_row = g.mask_col = 0;
    return g;
}
// A boolean mask read as if expanded to (batch dims..., L, S): its dims aligned at the right, stride 0 where it
// broadcasts.
inline void attn_set_mask(AttnGeom& g, const at::Tensor& mask) {
    TORCH_CHECK(mask.scalar_type() == at::kBool, "kfuse attention: the mask must be boolean");
    const int64_t r = g.nb + 2, mr = mask.dim();
    TORCH_CHECK(mr <= r, "kfuse attention: the mask has more dims than the scores");
    int64_t strides[KF_MAX_DIMS + 2];
    for (int64_t d = 0; d < r; ++d) {
        const int64_t at_d = d - (r - mr);
        const int64_t want = d < g.nb ? g.bsz[d] : d == g.nb ? g.L : g.S;
        const int64_t size = at_d >= 0 ? mask.size(at_d) : 1;
        TORCH_CHECK(size == want || size == 1, "kfuse attention: the mask does not broadcast to the scores");
        strides[d] = at_d >= 0 && size != 1 ? mask.stride(at_d) : 0;
    }
    for (int d = 0; d < g.nb; ++d) g.mask_bs[d] = strides[d];
    g.mask_row = strides[g.nb];
    g.mask_col = strides[g.nb + 1];
    g.mask = mask.data_ptr<bool>();
}
// The output shape: q's batch dims and rows, v's features.
inline std::vector<int64_t> attn_out_shape(const at::Tensor& q, const at::Tensor& v) {
    std::vector<int64_t> shape(q.sizes().begin(), q.sizes().end());
    shape.back() = v.size(-1);
    return shape;
}
}  // namespace kf
"""

ATTENTION_CPU = r"""
namespace kf {
// One query row per iteration: scores against every key, softmax and the weighted sum of values, in double.
inline void attention_cpu(const AttnView& q, const AttnView& k, const AttnView& v, float* out, const AttnGeom& g) {
    at::parallel_for(0, g.batches * g.L, 16, [&](int64_t begin, int64_t end) {
        std::vector<double> p((size_t)std::max<int64_t>(g.S, 1)), acc((size_t)std::max<int64_t>(g.Ev, 1));
        for (int64_t row = begin; row < end; ++row) {
            const int64_t b = row / g.L, i = row % g.L;
            int64_t qo = 0, ko = 0, vo = 0, mo = 0, rest = b;
            for (int d = g.nb - 1; d >= 0; --d) {
                const int64_t c = rest % g.bsz[d];
                rest /= g.bsz[d];
                qo += c * q.bs[d];
                ko += c * k.bs[d];
                vo += c * v.bs[d];
                if (g.mask) mo += c * g.mask_bs[d];
            }
            const int64_t keys = g.causal ? std::min<int64_t>(g.S, i + 1) : g.S;
            double m = -INFINITY;
            for (int64_t j = 0; j < keys; ++j) {
                double dot = 0.0;
                for (int64_t e = 0; e < g.E; ++e)
                    dot += (double)q.data[qo + i * q.row + e * q.col] * (double)k.data[ko + j * k.row + e * k.col];
                const bool dropped = g.mask && !g.mask[mo + i * g.mask_row + j * g.mask_col];
                p[j] = dropped ? -INFINITY : dot * (double)g.scale;
                m = std::max(m, p[j]);
            }
            double l = 0.0;
            for (int64_t j = 0; j < keys; ++j) {
                p[j] = (m == -INFINITY) ? 0.0 : std::exp(p[j] - m);
                l += p[j];
            }
            // (every key masked: l = 0 and the row is 0/0, NaN, as eager's softmax over -inf scores gives)
            for (int64_t c = 0; c < g.Ev; ++c) acc[c] = 0.0;
            for (int64_t j = 0; j < keys; ++j)
                for (int64_t c = 0; c < g.Ev; ++c) acc[c] += p[j] * (double)v.data[vo + j * v.row + c * v.col];
            float* o = out + row * g.Ev;
            for (int64_t c = 0; c < g.Ev; ++c) o[c] = (float)(acc[c] / l);
        }
    });
}
}  // namespace kf
"""

# The CUDA kernel: 64 query rows x 64 keys per step on tensor cores (3xTF32), 128 threads, head dims up to 128.
ATTENTION_CUDA = r"""
namespace kf {
constexpr int ATT_BM = 64, ATT_THREADS = 128, ATT_MAX_D = 128;
// Keys per step: 64, or 32 with more than 64 value columns, whose 64 output registers a thread and 103 KB of
// shared memory a block at 64 keys left two blocks (8 warps) an SM
template <int EV_TILES>
__host__ __device__ constexpr int att_keys_per_step() { return EV_TILES > 8 ? 32 : 64; }

// x = big + small exactly: big keeps the top 10 significand bits (a TF32 number); the MMA reads small truncated to
// TF32. The product of two split numbers taken as three MMAs (small*big, big*small, big*big; the small terms first,
// so the big one does not swallow them) stays within ~2^-20 of fp32's, as kfuse's GEMMs (DESIGN.md §5).
__device__ __forceinline__ void att_split(float x, uint32_t& big, uint32_t& small) {
    big = __float_as_uint(x) & 0xffffe000u;
    small = __float_as_uint(x - __uint_as_float(big));
}
__device__ __forceinline__ void att_mma(float* c, const uint32_t* a, const uint32_t* b) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void att_mma3(float* c, const uint32_t* a_big, const uint32_t* a_small,
                                         const uint32_t* b_big, const uint32_t* b_small) {
    att_mma(c, a_small, b_big);
    att_mma(c, a_big, b_small);
    att_mma(c, a_big, b_big);
}
__device__ __forceinline__ float att_quad_max(float x) {  // over the 4 lanes that hold one row's scores
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float att_quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Rows [r0, r0 + ROWS) of one batch entry's (rows x cols) matrix into dst[j * pitch + c] for c < padded, zero past
// either end; each thread moves 4 neighbouring features (one float4 when the view allows).
template <int ROWS, typename index_t>
__device__ __forceinline__ void att_load_rows(float* dst, int pitch, const AttnView& m, index_t base, int64_t r0,
                                              int64_t rows, int64_t cols, int padded) {
    const int quads = padded / 4;
    for (int idx = threadIdx.x; idx < ROWS * quads; idx += ATT_THREADS) {
        const int j = idx / quads, c = (idx % quads) * 4;
        const int64_t r = r0 + j;
        float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (r < rows && c < cols) {
            const float* src = m.data + base + (index_t)r * (index_t)m.row;
            if (m.vec) {
                x = *reinterpret_cast<const float4*>(src + c);
            } else {
                x.x = src[(index_t)c * (index_t)m.col];
                x.y = c + 1 < cols ? src[(index_t)(c + 1) * (index_t)m.col] : 0.0f;
                x.z = c + 2 < cols ? src[(index_t)(c + 2) * (index_t)m.col] : 0.0f;
                x.w = c + 3 < cols ? src[(index_t)(c + 3) * (index_t)m.col] : 0.0f;
            }
        }
        *reinterpret_cast<float4*>(dst + j * pitch + c) = x;
    }
}

// Shared memory (floats): Q[64][qk_pitch], K[BN][qk_pitch], V[BN][v_pitch], row-major as in global memory.
// Warp w owns query rows 16w..16w+15 of the block's 64; lane (gr = lane / 4, tq = lane % 4) holds rows gr and gr + 8
// of them, and of each 8-column tile of S and O the columns 2tq and 2tq + 1 (the MMA's accumulator layout).
// Inside one 8-deep MMA step the order of the summed index is free, so the fragments read it permuted: the MMA's
// k = tq and tq + 4 are features (or keys) 2tq and 2tq + 1. Q and K fragments are then one 8-byte load each, and
// P's accumulator registers are P V's A fragment as they are, with no shuffle. The pitches (qk_pitch = 8 mod 32,
// v_pitch = 4 mod 32) put each load's 32 lanes in 32 banks. EV_TILES: value columns / 8 (4, 8 or 16).
template <typename index_t, int EV_TILES>
// Blocks an SM the registers must allow: 4 at 4 value tiles (128 registers), 3 above (16 tiles: 172 held to 168).
// (A minimum of 1 let ptxas take 167 registers at 4 tiles, one block an SM fewer.)
__global__ void __launch_bounds__(ATT_THREADS, EV_TILES == 4 ? 4 : 3)
attention_fwd(AttnView q, AttnView k, AttnView v, float* __restrict__ out, AttnGeom g, int Dp, int qk_pitch,
              int v_pitch) {
    constexpr int BN = att_keys_per_step<EV_TILES>(), KT = BN / 8;  // keys per step, their 8-key tiles
    extern __shared__ float4 att_smem4[];
    float* Qs = reinterpret_cast<float*>(att_smem4);
    float* Ks = Qs + ATT_BM * qk_pitch;
    float* Vs = Ks + BN * qk_pitch;

    const int t = threadIdx.x, warp = t / 32, gr = (t % 32) / 4, tq = t % 4;
    const int64_t tiles = (g.L + ATT_BM - 1) / ATT_BM;
    const int64_t b = blockIdx.x / tiles;
    const int64_t i0 = (blockIdx.x % tiles) * ATT_BM;
    index_t qo = 0, ko = 0, vo = 0;
    int64_t mo = 0;  // the mask's offset for this batch entry
    {
        int64_t rest = b;
        #pragma unroll  // constant indices into g, q, k, v: a loop variable there put them in local memory
        for (int d = KF_MAX_DIMS - 1; d >= 0; --d) {
            if (d >= g.nb) continue;
            const int64_t c = rest % g.bsz[d];
            rest /= g.bsz[d];
            qo += (index_t)c * (index_t)q.bs[d];
            ko += (index_t)c * (index_t)k.bs[d];
            vo += (index_t)c * (index_t)v.bs[d];
            mo += c * g.mask_bs[d];  // (0 without a mask)
        }
    }
    // zero-padded: rows past L, features past E
    att_load_rows<ATT_BM, index_t>(Qs, qk_pitch, q, qo, i0, g.L, g.E, Dp);

    const int64_t rows[2] = {i0 + warp * 16 + gr, i0 + warp * 16 + gr + 8};
    const float* q_row = Qs + (warp * 16 + gr) * qk_pitch + 2 * tq;
    const float log2_scale = g.scale * 1.4426950408889634f;  // softmax in base 2: exp(x s) = 2^(x s log2 e)
    float o[EV_TILES][4];
#pragma unroll
    for (int n = 0; n < EV_TILES; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) o[n][i] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // l: this lane's share of the row's sum
    const int64_t key_end = g.causal ? (i0 + ATT_BM < g.S ? i0 + ATT_BM : g.S) : g.S;
    for (int64_t j0 = 0; j0 < key_end; j0 += BN) {
        if (g.mask) {
            // A tile the mask drops whole adds exp(-inf) = 0 to every sum: skipped (a causal mask's upper half).
            int kept = 0;
            for (int idx = t; idx < ATT_BM * BN && !kept; idx += ATT_THREADS) {
                const int64_t row = i0 + idx / BN, key = j0 + idx % BN;
                kept = row < g.L && key < g.S && g.mask[mo + row * g.mask_row + key * g.mask_col];
            }
            if (!__syncthreads_or(kept)) continue;  // (uniform: every thread skips; the barrier below still pairs)
        }
        __syncthreads();  // the previous step's readers of Ks and Vs are done
        att_load_rows<BN, index_t>(Ks, qk_pitch, k, ko, j0, g.S, g.E, Dp);
        att_load_rows<BN, index_t>(Vs, v_pitch, v, vo, j0, g.S, g.Ev, EV_TILES * 8);  // keys past S: zero rows
        __syncthreads();

        // S = Q K^T: this warp's 16 rows x BN keys, KT accumulator tiles
        float s[KT][4];
#pragma unroll
        for (int n = 0; n < KT; ++n)
#pragma unroll
            for (int i = 0; i < 4; ++i) s[n][i] = 0.0f;
        for (int e = 0; e < Dp; e += 8) {
            const float2 qa = *reinterpret_cast<const float2*>(q_row + e);
            const float2 qb = *reinterpret_cast<const float2*>(q_row + 8 * qk_pitch + e);
            uint32_t a_big[4], a_small[4];
            att_split(qa.x, a_big[0], a_small[0]);
            att_split(qb.x, a_big[1], a_small[1]);
            att_split(qa.y, a_big[2], a_small[2]);
            att_split(qb.y, a_big[3], a_small[3]);
#pragma unroll
            for (int n = 0; n < KT; ++n) {
                const float2 kk = *reinterpret_cast<const float2*>(Ks + (n * 8 + gr) * qk_pitch + e + 2 * tq);
                uint32_t b_big[2], b_small[2];
                att_split(kk.x, b_big[0], b_small[0]);
                att_split(kk.y, b_big[1], b_small[1]);
                att_mma3(s[n], a_big, a_small, b_big, b_small);
            }
        }

        // online softmax per row: scale, mask, new max, rescale the running sum and output
        // Masks cost ~12 integer instructions a score: only a tile that crosses the keys' end or the causal
        // diagonal, or has a mask, tests them (uniform across the block)
        const bool edge = j0 + BN > g.S || (g.causal && j0 + BN - 1 > i0) || g.mask;
        float top[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int n = 0; n < KT; ++n)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int64_t row = rows[i / 2], key = j0 + n * 8 + 2 * tq + (i % 2);
                const bool masked = edge && (key >= g.S || (g.causal && key > row)
                                    || (g.mask && row < g.L && !g.mask[mo + row * g.mask_row + key * g.mask_col]));
                s[n][i] = masked ? -INFINITY : s[n][i] * log2_scale;
                top[i / 2] = fmaxf(top[i / 2], s[n][i]);
            }
        float alpha[2], base[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const float m_new = fmaxf(m[r], att_quad_max(top[r]));
            base[r] = m_new == -INFINITY ? 0.0f : m_new;   // a row with no key yet: nothing to shift
            alpha[r] = exp2f(m[r] - base[r]);
            m[r] = m_new;
            l[r] *= alpha[r];
        }
#pragma unroll
        for (int n = 0; n < KT; ++n)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                s[n][i] = exp2f(s[n][i] - base[i / 2]);
                l[i / 2] += s[n][i];
            }
        // O = O alpha + P V, one value tile at a time. P V of this key block starts from zero and joins O with an
        // fp32 add: the tensor cores round (toward zero) each MMA's sum, and 16,384 keys of one chain of MMAs lost
        // ~1e-4 of O that way (31_VisionAttention); 24 MMAs per chain keep it near fp32's.
        // P's tile kk is the A fragment as it is (k = tq: key 2tq, k = tq + 4: key 2tq + 1).
        uint32_t p_big[KT][4], p_small[KT][4];
#pragma unroll
        for (int kk = 0; kk < KT; ++kk) {
            att_split(s[kk][0], p_big[kk][0], p_small[kk][0]);
            att_split(s[kk][2], p_big[kk][1], p_small[kk][1]);
            att_split(s[kk][1], p_big[kk][2], p_small[kk][2]);
            att_split(s[kk][3], p_big[kk][3], p_small[kk][3]);
        }
        // value tiles 8 at a time: 8 independent MMA chains in flight, 32 accumulator registers
#pragma unroll
        for (int n0 = 0; n0 < EV_TILES; n0 += 8) {
            constexpr int CHUNK = EV_TILES < 8 ? EV_TILES : 8;
            float pv[CHUNK][4];
#pragma unroll
            for (int n = 0; n < CHUNK; ++n)
#pragma unroll
                for (int i = 0; i < 4; ++i) pv[n][i] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < KT; ++kk) {
                const float* v_rows = Vs + (kk * 8 + 2 * tq) * v_pitch + n0 * 8 + gr;
#pragma unroll
                for (int n = 0; n < CHUNK; ++n) {
                    uint32_t b_big[2], b_small[2];
                    att_split(v_rows[n * 8], b_big[0], b_small[0]);
                    att_split(v_rows[v_pitch + n * 8], b_big[1], b_small[1]);
                    att_mma3(pv[n], p_big[kk], p_small[kk], b_big, b_small);
                }
            }
#pragma unroll
            for (int n = 0; n < CHUNK; ++n)
#pragma unroll
                for (int i = 0; i < 4; ++i) o[n0 + n][i] = fmaf(o[n0 + n][i], alpha[i / 2], pv[n][i]);
        }
    }

#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const float inv = 1.0f / att_quad_sum(l[r]);  // (every key masked: 0 / 0, NaN, as eager's softmax gives)
        if (rows[r] >= g.L) continue;
        float* dst = out + ((int64_t)b * g.L + rows[r]) * g.Ev;
#pragma unroll
        for (int n = 0; n < EV_TILES; ++n)
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                const int col = n * 8 + 2 * tq + i;
                if (col < g.Ev) dst[col] = o[n][2 * r + i] * inv;
            }
    }
}

// false: a shape this kernel does not cover (the caller falls back to ATen)
bool attention_launch(const AttnView& q, const AttnView& k, const AttnView& v, float* out, const AttnGeom& g,
                      bool small_index, cudaStream_t stream) {
    if (g.E > ATT_MAX_D || g.Ev > ATT_MAX_D || g.S == 0) return false;
    const int Dp = (int)((g.E + 7) / 8 * 8);
    const int qk_pitch = (Dp + 23) / 32 * 32 + 8;          // >= Dp, 8 mod 32
    const int ev_tiles = g.Ev <= 32 ? 4 : g.Ev <= 64 ? 8 : 16;
    const int v_pitch = (ev_tiles * 8 + 27) / 32 * 32 + 4;  // >= the columns loaded, 4 mod 32
    const int keys = ev_tiles == 4 ? att_keys_per_step<4>()
                     : ev_tiles == 8 ? att_keys_per_step<8>() : att_keys_per_step<16>();
    const size_t bytes = sizeof(float) * ((size_t)(ATT_BM + keys) * qk_pitch + (size_t)keys * v_pitch);
    const int64_t blocks = g.batches * ((g.L + ATT_BM - 1) / ATT_BM);
    if (blocks == 0) return true;
    if (blocks > INT32_MAX) return false;
    // more than 48 KiB of dynamic shared memory needs an opt-in, once per kernel and device (the largest size it
    // may use); a failure here makes the launch fail, which the caller's launch check reports
    static bool opted_in[256] = {false};
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess || device >= 256) return false;
    if (!opted_in[device]) {
        const int most = (int)(sizeof(float) * ((ATT_BM + 64) * 136 + 64 * 132));  // (64 keys: more than needed)
        const auto opt_in = [most](const void* kernel) {
            return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, most) == cudaSuccess;
        };
        const void* kernels[] = {(const void*)attention_fwd<int32_t, 4>, (const void*)attention_fwd<int64_t, 4>,
                                 (const void*)attention_fwd<int32_t, 8>, (const void*)attention_fwd<int64_t, 8>,
                                 (const void*)attention_fwd<int32_t, 16>, (const void*)attention_fwd<int64_t, 16>};
        opted_in[device] = std::all_of(kernels, kernels + 6, opt_in);
    }
    const auto kernel = ev_tiles == 4 ? (small_index ? attention_fwd<int32_t, 4> : attention_fwd<int64_t, 4>)
                        : ev_tiles == 8 ? (small_index ? attention_fwd<int32_t, 8> : attention_fwd<int64_t, 8>)
                                        : (small_index ? attention_fwd<int32_t, 16> : attention_fwd<int64_t, 16>);
    kernel<<<(unsigned)blocks, ATT_THREADS, bytes, stream>>>(q, k, v, out, g, Dp, qk_pitch, v_pitch);
    return true;
}
}  // namespace kf
"""

ATTENTION_CUDA_DECL = """
namespace kf {
bool attention_launch(const AttnView& q, const AttnView& k, const AttnView& v, float* out, const AttnGeom& g,
                      bool small_index, cudaStream_t stream);
}
"""


def _fallback(kernel: AttentionKernel) -> str:
    """ATen's operator with the same arguments (inside an `if` of the host function)."""
    scale = "c10::IValue()" if kernel.scale is None else f"c10::IValue({kernel.scale!r})"
    causal = "true" if kernel.causal else "false"
    mask = "mask" if kernel.mask is not None else "c10::IValue()"
    return ("        static const c10::OperatorHandle sdpa = kf::aten(\"aten::scaled_dot_product_attention\", \"\");\n"
            f"        return kf::call(sdpa, {{q, k, v, {mask}, c10::IValue(0.0), c10::IValue({causal}), "
            f"{scale}, c10::IValue(false)}})[0].toTensor();\n")


def _host(kernel: AttentionKernel, target: str) -> str:
    n = kernel.name
    scale = "1.0 / std::sqrt((double)q.size(-1))" if kernel.scale is None else repr(kernel.scale)
    causal = "true" if kernel.causal else "false"
    masked = ", a boolean mask" if kernel.mask is not None else ""
    mask_param = ", const at::Tensor& mask" if kernel.mask is not None else ""
    set_mask = "    kf::attn_set_mask(g, mask);\n" if kernel.mask is not None else ""
    if target == "cuda":
        run = (f"    int64_t worst = 0;  // 32-bit offsets only when every buffer fits\n"
               f"    const at::Tensor* buffers[4] = {{&q, &k, &v, &out}};  // (the mask's offsets are 64-bit)\n"
               f"    for (const at::Tensor* t : buffers) {{\n"
               f"        int64_t off = 0;\n"
               f"        for (int64_t d = 0; d < t->dim(); ++d) off += (t->size(d) - 1) * t->stride(d);\n"
               f"        worst = std::max(worst, off);\n"
               f"    }}\n"
               f"    if (!kf::attention_launch(qv, kv, vv, out.data_ptr<float>(), g, worst < INT32_MAX,\n"
               f"                              c10::cuda::getCurrentCUDAStream())) {{\n"
               f"        // a shape the kernel does not cover (head dim > 128, no keys): ATen's operator\n"
               f"{_fallback(kernel)}"
               f"    }}\n"
               f"    C10_CUDA_KERNEL_LAUNCH_CHECK();\n")
    else:
        run = ("    if (g.S == 0) {  // no keys: ATen's operator decides what that means\n"
               f"{_fallback(kernel)}"
               "    }\n"
               "    kf::attention_cpu(qv, kv, vv, out.data_ptr<float>(), g);\n")
    return f"""
// {n}: aten.scaled_dot_product_attention (is_causal={kernel.causal}, scale={kernel.scale or '1/sqrt(E)'}{masked}) in
// one kernel: scores, softmax and the weighted sum of values, never writing the L x S score matrix
at::Tensor {n}(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v{mask_param}) {{
    kf::AttnGeom g = kf::attn_geometry(q, k, v, {scale}, {causal});
{set_mask}
    at::Tensor out = kf::empty(kf::attn_out_shape(q, v), q.options());
    if (out.numel() == 0) return out;
    const kf::AttnView qv = kf::attn_view(q, g.nb), kv = kf::attn_view(k, g.nb), vv = kf::attn_view(v, g.nb);
{run}    return out;
}}
"""


@dataclass
class AttentionSources:
    decls: str
    device: str     # CUDA kernels (or "" on the CPU target)
    host: str


def render(kernels: list[AttentionKernel], target: str) -> AttentionSources:
    if not kernels:
        return AttentionSources("", "", "")
    hosts = "".join(_host(k, target) for k in kernels)
    if target == "cuda":
        return AttentionSources(ATTENTION_DECLS, ATTENTION_CUDA, ATTENTION_HOST + ATTENTION_CUDA_DECL + hosts)
    return AttentionSources(ATTENTION_DECLS, "", ATTENTION_HOST + ATTENTION_CPU + hosts)


def forward_line(kernel: AttentionKernel, names: dict[str, str]) -> str:
    args = ", ".join(names[a] for a in kernel.inputs)
    names[kernel.node.name] = kernel.node.name
    return f"    at::Tensor {kernel.node.name} = {kernel.name}({args});"
