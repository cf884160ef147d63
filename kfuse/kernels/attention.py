"""Fused attention: scaled_dot_product_attention as one kernel that never materialises the score matrix.

softmax(Q K^T * scale [causal mask] [boolean mask]) V for fp32 q (..., L, E), k (..., S, E), v (..., S, Ev), with
equal batch dims, no dropout, no GQA; the default scale 1/sqrt(E) or an explicit one; is_causal (PyTorch's
top-left aligned lower triangle: query i sees keys j <= i); a boolean attn_mask that broadcasts to (..., L, S)
(True: the key takes part, as in PyTorch), read per score (a causal GPT's `masked_fill(tril == 0, -inf)`, rewritten
so at capture: kfuse/compiler/rewrite.py). A float mask stays ATen's.

CUDA: flash-attention style. A block owns 64 query rows of one batch entry; it walks the keys in blocks of 64:
S = Q K^T (fp32 FFMA, Q and K transposed in shared memory so each thread reads float4 rows), an online softmax per
row (running max m and sum l; the partial output is rescaled by exp(m_old - m_new) when the max grows), then
O += P V with P and V in shared memory. 128 threads: a thread holds 8 query rows x 4 key columns of S and 8 rows x
8 columns of O (head dims up to 128, in registers); the 16 threads that share rows reduce a row's max and sum with
half-warp shuffles. Every thread's order of operations is fixed: results are deterministic. Shapes the kernel does
not cover at run time (head dim > 128, no keys) call ATen's operator instead.

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

# The CUDA kernel: 64 query rows x 64 keys per step, 128 threads, head dims up to 128 (padded to a multiple of 4
# with zeros in shared memory).
ATTENTION_CUDA = r"""
namespace kf {
constexpr int ATT_BM = 64, ATT_BN = 64, ATT_THREADS = 128, ATT_MAX_D = 128;

__device__ __forceinline__ float att_half_warp_max(float x) {
    for (int off = 8; off > 0; off >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, off));
    return x;
}
__device__ __forceinline__ float att_half_warp_sum(float x) {
    for (int off = 8; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
    return x;
}

// Rows [r0, r0 + 64) of one batch entry's (rows x E) matrix into shared memory transposed (dst[e * 64 + j]), zero
// past the end: consecutive threads take consecutive rows, so the transposed stores hit 32 different banks; each
// thread reads 4 neighbouring features (one float4 when the view allows).
template <typename index_t>
__device__ __forceinline__ void att_load_transposed(float* dst, const AttnView& m, index_t base, int64_t r0,
                                                    int64_t rows, int64_t E, int Dp) {
    for (int idx = threadIdx.x; idx < 64 * (Dp / 4); idx += ATT_THREADS) {
        const int j = idx % 64, e = (idx / 64) * 4;
        const int64_t r = r0 + j;
        float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (r < rows) {
            const float* src = m.data + base + (index_t)r * (index_t)m.row;
            if (m.vec) {
                x = *reinterpret_cast<const float4*>(src + e);
            } else {
                x.x = e < E ? src[(index_t)e * (index_t)m.col] : 0.0f;
                x.y = e + 1 < E ? src[(index_t)(e + 1) * (index_t)m.col] : 0.0f;
                x.z = e + 2 < E ? src[(index_t)(e + 2) * (index_t)m.col] : 0.0f;
                x.w = e + 3 < E ? src[(index_t)(e + 3) * (index_t)m.col] : 0.0f;
            }
        }
        dst[(e + 0) * 64 + j] = x.x;
        dst[(e + 1) * 64 + j] = x.y;
        dst[(e + 2) * 64 + j] = x.z;
        dst[(e + 3) * 64 + j] = x.w;
    }
}

// Shared memory (floats): Qt[Dp][64] (Q transposed), Kt[Dp][64] (K transposed), V[64][128], Pt[64][64] (P
// transposed: column j of P is one float4-readable row). WIDE: value columns 64-127 too (Ev > 64); without it a
// thread's second 4 columns, zero for Ev <= 64, are neither loaded nor multiplied: P V was 4 times Q K^T's
// multiply-adds at any Ev, for 31_VisionAttention's Ev = 32 three quarters of them on zeros.
template <typename index_t, bool WIDE>
__global__ void __launch_bounds__(ATT_THREADS)
attention_fwd(AttnView q, AttnView k, AttnView v, float* __restrict__ out, AttnGeom g, int Dp) {
    constexpr int VCOLS = WIDE ? ATT_MAX_D : 64, VC = WIDE ? 8 : 4;  // value columns loaded; per thread
    extern __shared__ float4 att_smem4[];
    float* smem = reinterpret_cast<float*>(att_smem4);
    float* Qt = smem;
    float* Kt = Qt + Dp * ATT_BM;
    float* Vs = Kt + Dp * ATT_BN;
    float* Pt = Vs + ATT_BN * ATT_MAX_D;

    const int t = threadIdx.x, tx = t % 16, ty = t / 16;   // S: rows ty*8..+8, keys tx*4..+4
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
    att_load_transposed<index_t>(Qt, q, qo, i0, g.L, g.E, Dp);  // zero-padded: rows past L, features past E

    float o[8][8];
    float m[8], l[8];
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int c = 0; c < 8; ++c) o[r][c] = 0.0f;
    }
    const int64_t key_end = g.causal ? (i0 + ATT_BM < g.S ? i0 + ATT_BM : g.S) : g.S;
    for (int64_t j0 = 0; j0 < key_end; j0 += ATT_BN) {
        if (g.mask) {
            // A tile the mask drops whole adds exp(-inf) = 0 to every sum: skipped (a causal mask's upper half).
            // Reading its 64 x 64 flags costs little beside the tile's 64 x 64 x (E + Ev) multiply-adds.
            int kept = 0;
            for (int idx = t; idx < ATT_BM * ATT_BN && !kept; idx += ATT_THREADS) {
                const int64_t row = i0 + idx / ATT_BN, key = j0 + idx % ATT_BN;
                kept = row < g.L && key < g.S && g.mask[mo + row * g.mask_row + key * g.mask_col];
            }
            if (!__syncthreads_or(kept)) continue;  // (uniform: every thread skips; the barrier below still pairs)
        }
        __syncthreads();  // the previous step's readers of Kt, Vs and Pt are done
        att_load_transposed<index_t>(Kt, k, ko, j0, g.S, g.E, Dp);
        for (int idx = t; idx < ATT_BN * (VCOLS / 4); idx += ATT_THREADS) {  // V as it is, zero-padded
            const int j = idx / (VCOLS / 4), c = (idx % (VCOLS / 4)) * 4;
            const int64_t key = j0 + j;
            float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (key < g.S && c < g.Ev) {
                const float* src = v.data + vo + (index_t)key * (index_t)v.row;
                if (v.vec) {
                    x = *reinterpret_cast<const float4*>(src + c);
                } else {
                    x.x = src[(index_t)c * (index_t)v.col];
                    x.y = c + 1 < g.Ev ? src[(index_t)(c + 1) * (index_t)v.col] : 0.0f;
                    x.z = c + 2 < g.Ev ? src[(index_t)(c + 2) * (index_t)v.col] : 0.0f;
                    x.w = c + 3 < g.Ev ? src[(index_t)(c + 3) * (index_t)v.col] : 0.0f;
                }
            }
            *reinterpret_cast<float4*>(Vs + j * ATT_MAX_D + c) = x;
        }
        __syncthreads();

        // S = Q K^T for rows ty*8..+8, keys tx*4..+4
        float s[8][4];
#pragma unroll
        for (int r = 0; r < 8; ++r)
#pragma unroll
            for (int c = 0; c < 4; ++c) s[r][c] = 0.0f;
#pragma unroll 4
        for (int e = 0; e < Dp; ++e) {
            const float4 a0 = *reinterpret_cast<const float4*>(Qt + e * ATT_BM + ty * 8);
            const float4 a1 = *reinterpret_cast<const float4*>(Qt + e * ATT_BM + ty * 8 + 4);
            const float4 kb = *reinterpret_cast<const float4*>(Kt + e * ATT_BN + tx * 4);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float kk[4] = {kb.x, kb.y, kb.z, kb.w};
#pragma unroll
            for (int r = 0; r < 8; ++r)
#pragma unroll
                for (int c = 0; c < 4; ++c) s[r][c] = fmaf(a[r], kk[c], s[r][c]);
        }

        // online softmax per row: scale, mask, new max, rescale the running sum and output
#pragma unroll
        for (int r = 0; r < 8; ++r) {
            const int64_t row = i0 + ty * 8 + r;
            float top = -INFINITY;
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const int64_t key = j0 + tx * 4 + c;
                const bool masked = key >= g.S || (g.causal && key > row)
                                    || (g.mask && row < g.L && !g.mask[mo + row * g.mask_row + key * g.mask_col]);
                s[r][c] = masked ? -INFINITY : s[r][c] * g.scale;
                top = fmaxf(top, s[r][c]);
            }
            top = att_half_warp_max(top);
            const float m_new = fmaxf(m[r], top);
            const float base = m_new == -INFINITY ? 0.0f : m_new;   // a row with no key yet: nothing to shift
            const float alpha = expf(m[r] - base);
            float sum = 0.0f;
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                s[r][c] = expf(s[r][c] - base);
                sum += s[r][c];
            }
            l[r] = l[r] * alpha + att_half_warp_sum(sum);
            m[r] = m_new;
#pragma unroll
            for (int c = 0; c < VC; ++c) o[r][c] *= alpha;
        }
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            *reinterpret_cast<float4*>(Pt + (tx * 4 + c) * ATT_BM + ty * 8) = make_float4(s[0][c], s[1][c], s[2][c], s[3][c]);
            *reinterpret_cast<float4*>(Pt + (tx * 4 + c) * ATT_BM + ty * 8 + 4) = make_float4(s[4][c], s[5][c], s[6][c], s[7][c]);
        }
        __syncthreads();

        // O += P V for rows ty*8..+8, value columns tx*4..+4 and 64 + tx*4..+4
        const int jn = (int)(key_end - j0 < ATT_BN ? key_end - j0 : ATT_BN);
#pragma unroll 4
        for (int j = 0; j < jn; ++j) {
            const float4 p0 = *reinterpret_cast<const float4*>(Pt + j * ATT_BM + ty * 8);
            const float4 p1 = *reinterpret_cast<const float4*>(Pt + j * ATT_BM + ty * 8 + 4);
            const float4 v0 = *reinterpret_cast<const float4*>(Vs + j * ATT_MAX_D + tx * 4);
            const float4 v1 = WIDE ? *reinterpret_cast<const float4*>(Vs + j * ATT_MAX_D + 64 + tx * 4) : v0;
            const float pp[8] = {p0.x, p0.y, p0.z, p0.w, p1.x, p1.y, p1.z, p1.w};
            const float vv[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
#pragma unroll
            for (int r = 0; r < 8; ++r)
#pragma unroll
                for (int c = 0; c < VC; ++c) o[r][c] = fmaf(pp[r], vv[c], o[r][c]);
        }
    }

#pragma unroll
    for (int r = 0; r < 8; ++r) {
        const int64_t row = i0 + ty * 8 + r;
        if (row >= g.L) continue;
        const float inv = 1.0f / l[r];
        float* dst = out + ((int64_t)b * g.L + row) * g.Ev;
#pragma unroll
        for (int c = 0; c < 8; ++c) {
            const int col = (c < 4 ? 0 : 64) + tx * 4 + (c % 4);
            if (col < g.Ev) dst[col] = o[r][c] * inv;
        }
    }
}

// false: a shape this kernel does not cover (the caller falls back to ATen)
bool attention_launch(const AttnView& q, const AttnView& k, const AttnView& v, float* out, const AttnGeom& g,
                      bool small_index, cudaStream_t stream) {
    if (g.E > ATT_MAX_D || g.Ev > ATT_MAX_D || g.S == 0) return false;
    const int Dp = (int)((g.E + 3) / 4 * 4);
    const size_t bytes = sizeof(float) * ((size_t)Dp * ATT_BM + (size_t)Dp * ATT_BN + (size_t)ATT_BN * ATT_MAX_D
                                          + (size_t)ATT_BN * ATT_BM);
    const int64_t blocks = g.batches * ((g.L + ATT_BM - 1) / ATT_BM);
    if (blocks == 0) return true;
    if (blocks > INT32_MAX) return false;
    // more than 48 KiB of dynamic shared memory needs an opt-in, once per kernel and device (the largest size it
    // may use); a failure here makes the launch fail, which the caller's launch check reports
    static bool opted_in[256] = {false};
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess || device >= 256) return false;
    if (!opted_in[device]) {
        const int most = (int)(sizeof(float) * (2 * ATT_MAX_D * ATT_BM + ATT_BN * ATT_MAX_D + ATT_BN * ATT_BM));
        const auto opt_in = [most](const void* kernel) {
            return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, most) == cudaSuccess;
        };
        opted_in[device] = opt_in((const void*)attention_fwd<int32_t, true>) && opt_in((const void*)attention_fwd<int64_t, true>)
                           && opt_in((const void*)attention_fwd<int32_t, false>) && opt_in((const void*)attention_fwd<int64_t, false>);
    }
    const auto kernel = g.Ev > 64 ? (small_index ? attention_fwd<int32_t, true> : attention_fwd<int64_t, true>)
                                  : (small_index ? attention_fwd<int32_t, false> : attention_fwd<int64_t, false>);
    kernel<<<(unsigned)blocks, ATT_THREADS, bytes, stream>>>(q, k, v, out, g, Dp);
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
