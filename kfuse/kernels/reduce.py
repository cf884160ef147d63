"""Fused reduction kernels: sums, means, extrema, arg-extrema, products, norms, softmax, logsumexp, variance and
the normalisation layers (layer, RMS, group, instance and batch norm, the last in training and eval mode).

A reduction kernel is three phases over one "source" tensor S (the value that is reduced):

1. accumulate: every element of S is computed from the kernel's operands (the pointwise *prologue*, fused from the
   ops that produced S) and folded into a per-row state (a sum, a Welford mean/M2, an online max + rescaled sum);
2. row: the state gives the row's statistics, the reduction's value and any pointwise ops over the reduced shape
   (the *row epilogue*: `tanh(sum(x) * 0.5)`), written once per row;
3. full (only when needed): the elements are visited again to write full-shape results that read the statistics:
   softmax's `exp(x - max) / sum`, a norm layer's `(x - mean) * rstd * w + b`, `x / norm(x)`, and the pointwise ops
   after them (the *full epilogue*).

Geometry: S is seen as [rows, reduced] after the reduced dims are moved last logically (no copy): every operand is
a strided view with the source's sizes; kept dims and reduced dims are coalesced separately, so a reduction over a
middle dim, over several dims, or a channel-wise batch norm costs no transpose. Kernels index through strides,
32-bit when every buffer fits.

CUDA mapping: when the reduced dim is contiguous, a warp (short rows) or a block (long rows) per row, warp shuffles
then shared memory; when the kept dim is the contiguous one (sum over a middle dim, softmax over channels), a
32x8 block covers 32 neighbouring rows, so loads stay coalesced. When there are too few rows to fill the GPU, the
reduced range is split over several blocks: a first kernel writes partial states, a second merges them (in a fixed
order: results are deterministic) and writes its slice. CPU: one row per iteration of `at::parallel_for`, states
accumulated in double (sequential fp32 sums would lose precision against PyTorch's cascaded sums).

Emitted code: those loops are written once per file (REDUCE_DRIVERS_CUDA: kf::reduce_rows, kf::reduce_cols,
kf::reduce_launch; REDUCE_DRIVER_CPU: kf::reduce_run), templates over a policy struct that each kernel prints
(`<kernel>_reduction`: its state, its phases' functions, a few constants). A network's file grows with its
reductions' own work, not with a copy of the loops per kernel (Swin V2: 8,921 -> 7,337 lines).
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass, field

import torch

from kfuse.kernels import ops, printing
from kfuse.kernels.steps import FusedKernel, LibraryCall, TupleItem, movable_bias, tensor_meta

# --------------------------------------------------------------------------------------------------------------
# Reducers: the per-row state, how one value updates it and how two states merge (the merge must treat the
# initial state as an identity: threads with no elements merge it).


@dataclass(frozen=True)
class Reducer:
    fields: tuple[tuple[str, str, str], ...]   # (C type, name, initial value)
    update: str                                # C statements: state `s`, value `v` (float), index `r` (int64_t),
                                               # which grows from one update of a state to the next
    merge: str                                 # C statements: merge state `b` into `a`
    # whether a thread may keep four partial states on its float4 path (merged after the row): worth it where a
    # merge is as cheap as an update; Welford's merge divides, the online softmax's takes exponentials
    partials: bool = True
    # C statements folding four consecutive values `v0`..`v3` (indices r..r+3) into `s` at once, used on the float4
    # path instead of four updates (a reducer with one is given one state there, not four partial ones)
    update4: str | None = None
    # a state of two fields that still fits the column kernels in 32 registers (an arg-extreme's value and index)
    light: bool = False


_SUM = Reducer((("kf_acc", "s", "0"),), "s.s += (kf_acc)v;", "a.s += b.s;")
REDUCERS = {
    "sum": _SUM,
    "sumsq": Reducer(_SUM.fields, "{ const kf_acc x = (kf_acc)v; s.s += x * x; }", _SUM.merge),
    "abssum": Reducer(_SUM.fields, "s.s += (kf_acc)fabsf(v);", _SUM.merge),
    "nonzero": Reducer(_SUM.fields, "s.s += (v != 0.0f) ? (kf_acc)1 : (kf_acc)0;", _SUM.merge),
    "powsum": Reducer(_SUM.fields, "s.s += kfr_pow((kf_acc)fabsf(v), (kf_acc)P);", _SUM.merge),
    "prod": Reducer((("kf_acc", "p", "1"),), "s.p *= (kf_acc)v;", "a.p *= b.p;"),
    "max": Reducer((("float", "m", "-INFINITY"),), "s.m = kfr_max(s.m, v);", "a.m = kfr_max(a.m, b.m);"),
    "min": Reducer((("float", "m", "INFINITY"),), "s.m = kfr_min(s.m, v);", "a.m = kfr_min(a.m, b.m);"),
    # the infinity norms: the extreme of |v| (not the absolute value of the extreme)
    "absmax": Reducer((("float", "m", "0.0f"),), "s.m = kfr_max(s.m, fabsf(v));", "a.m = kfr_max(a.m, b.m);"),
    "absmin": Reducer((("float", "m", "INFINITY"),), "s.m = kfr_min(s.m, fabsf(v));", "a.m = kfr_min(a.m, b.m);"),
    "argmax": Reducer((("float", "m", "-INFINITY"), ("int64_t", "i", "INT64_MAX")),
                      "kfr_argmax_next(s.m, s.i, v, r);", "kfr_argmax_step(a.m, a.i, b.m, b.i);",
                      partials=False, update4="kfr_argmax_next4(s.m, s.i, v0, v1, v2, v3, r);", light=True),
    "argmin": Reducer((("float", "m", "INFINITY"), ("int64_t", "i", "INT64_MAX")),
                      "kfr_argmin_next(s.m, s.i, v, r);", "kfr_argmin_step(a.m, a.i, b.m, b.i);",
                      partials=False, update4="kfr_argmin_next4(s.m, s.i, v0, v1, v2, v3, r);", light=True),
    # Welford: one read, numerically stable; Chan's formula merges two partial states.
    "welford": Reducer((("kf_acc", "mean", "0"), ("kf_acc", "m2", "0"), ("kf_acc", "n", "0")),
                       "kfr_welford_step(s.mean, s.m2, s.n, (kf_acc)v);",
                       "kfr_welford_merge(a.mean, a.m2, a.n, b.mean, b.m2, b.n);", partials=False,
                       update4="kfr_welford_step4(s.mean, s.m2, s.n, v0, v1, v2, v3);"),
    # Online softmax: running max m and the sum of exp(x - m), rescaled when m grows. -inf elements add 0.
    "softmax": Reducer((("kf_acc", "m", "-INFINITY"), ("kf_acc", "s", "0")),
                       "kfr_softmax_step(s.m, s.s, (kf_acc)v);", "kfr_softmax_merge(a.m, a.s, b.m, b.s);",
                       partials=False, update4="kfr_softmax_step4(s.m, s.s, v0, v1, v2, v3);"),
    # Two sources at once (`v` and `w0`): their dot product and both squared norms, in one read of each.
    "dot_norms": Reducer((("kf_acc", "xy", "0"), ("kf_acc", "xx", "0"), ("kf_acc", "yy", "0")),
                         "{ const kf_acc x = (kf_acc)v, y = (kf_acc)w0; s.xy += x * y; s.xx += x * x; s.yy += y * y; }",
                         "a.xy += b.xy; a.xx += b.xx; a.yy += b.yy;"),
    # Three sources: the squared distances |v - w0 + EPS|^2 and |v - w1 + EPS|^2 (pairwise_distance's formula:
    # the difference and eps rounded to float first), in one read of each.
    "two_dists": Reducer((("kf_acc", "dp", "0"), ("kf_acc", "dn", "0")),
                         "{ const float d1 = (v - w0) + EPS, d2 = (v - w1) + EPS; "
                         "s.dp += (kf_acc)d1 * (kf_acc)d1; s.dn += (kf_acc)d2 * (kf_acc)d2; }",
                         "a.dp += b.dp; a.dn += b.dn;"),
}

REDUCE_PRELUDE = r"""
/* kfuse reduction helpers (kfuse/kernels/reduce.py). Accumulators are float in CUDA (as PyTorch's kernels) and double on
   the CPU target, whose sequential loops would otherwise lose precision against PyTorch's cascaded sums. */
#ifdef __CUDACC__
typedef float kf_acc;
#else
typedef double kf_acc;
#endif
KF_INLINE float kfr_exp(float x) { return expf(x); }
KF_INLINE double kfr_exp(double x) { return exp(x); }
KF_INLINE float kfr_log(float x) { return logf(x); }
KF_INLINE double kfr_log(double x) { return log(x); }
KF_INLINE float kfr_sqrt(float x) { return sqrtf(x); }
KF_INLINE double kfr_sqrt(double x) { return sqrt(x); }
KF_INLINE kf_acc kfr_max_acc(kf_acc a) { return a > (kf_acc)0 ? a : (kf_acc)0; }
/* clamp_min as PyTorch's: NaN stays NaN */
KF_INLINE kf_acc kfr_max2(kf_acc a, kf_acc b) { return (a > b || a != a) ? a : b; }
KF_INLINE float kfr_pow(float x, float y) { return powf(x, y); }
KF_INLINE double kfr_pow(double x, double y) { return pow(x, y); }
/* max/min that propagate NaN, as torch.amax does. The comparison with b comes first here and in the arg-extremes'
   steps below: a NaN test of the state first let nvcc load each element only while the state was not NaN, each load
   then waiting on the one before (argmax over a middle dim at 0.84x eager, whatever the blocks in flight). */
KF_INLINE float kfr_max(float a, float b) { return (a > b || a != a) ? a : b; }
KF_INLINE float kfr_min(float a, float b) { return (a < b || a != a) ? a : b; }
/* (m, i) takes (v, j) when v is larger, or equal with a smaller index; the first NaN wins (torch.argmax) */
KF_INLINE void kfr_argmax_step(float& m, int64_t& i, float v, int64_t j) {
  const bool take = (v != v) ? (m == m || j < i) : (m == m && (v > m || (v == m && j < i)));
  if (take) { m = v; i = j; }
}
KF_INLINE void kfr_argmin_step(float& m, int64_t& i, float v, int64_t j) {
  const bool take = (v != v) ? (m == m || j < i) : (m == m && (v < m || (v == m && j < i)));
  if (take) { m = v; i = j; }
}
/* The same for a state's own elements, which every loop visits in increasing index order: a tie keeps the index
   it has, so no index comparison. A row of -inf (+inf for argmin) never takes one: KFR_ARG_INDEX reads that
   state's INT64_MAX as 0, the first index, as PyTorch answers. */
KF_INLINE void kfr_argmax_next(float& m, int64_t& i, float v, int64_t j) {
  if ((v > m || v != v) && m == m) { m = v; i = j; }
}
KF_INLINE void kfr_argmin_next(float& m, int64_t& i, float v, int64_t j) {
  if ((v < m || v != v) && m == m) { m = v; i = j; }
}
/* Four consecutive elements (indices j..j+3) at once: their extreme (NaN if any is NaN) is compared with the state
   once, and the lane is looked up only when the state changes, which after a row's first elements is rare. The
   same answer as four kfr_arg*_next steps: the first NaN, else the first lane holding the extreme. */
KF_INLINE int kfr_lane_of(float b, float v0, float v1, float v2, float v3) {
  if (b != b) return v0 != v0 ? 0 : v1 != v1 ? 1 : v2 != v2 ? 2 : 3;
  return v0 == b ? 0 : v1 == b ? 1 : v2 == b ? 2 : 3;
}
/* the element itself, not b: -0.0 and 0.0 compare equal */
KF_INLINE float kfr_lane(int k, float v0, float v1, float v2, float v3) { return k == 0 ? v0 : k == 1 ? v1 : k == 2 ? v2 : v3; }
KF_INLINE void kfr_argmax_next4(float& m, int64_t& i, float v0, float v1, float v2, float v3, int64_t j) {
  const float b = kfr_max(kfr_max(v0, v1), kfr_max(v2, v3));
  if ((b > m || b != b) && m == m) {
    const int k = kfr_lane_of(b, v0, v1, v2, v3);
    m = kfr_lane(k, v0, v1, v2, v3);
    i = j + k;
  }
}
KF_INLINE void kfr_argmin_next4(float& m, int64_t& i, float v0, float v1, float v2, float v3, int64_t j) {
  const float b = kfr_min(kfr_min(v0, v1), kfr_min(v2, v3));
  if ((b < m || b != b) && m == m) {
    const int k = kfr_lane_of(b, v0, v1, v2, v3);
    m = kfr_lane(k, v0, v1, v2, v3);
    i = j + k;
  }
}
#define KFR_ARG_INDEX(i) ((i) == INT64_MAX ? (int64_t)0 : (i))
KF_INLINE void kfr_welford_step(kf_acc& mean, kf_acc& m2, kf_acc& n, kf_acc x) {
  n += (kf_acc)1;
  const kf_acc d = x - mean;
  mean += d / n;
  m2 += d * (x - mean);
}
// Four values at once (the float4 path): their own mean and squared deviations, merged by Chan's formula. One
// division per four values instead of one per value: the step's division bound GroupNorm's statistics.
KF_INLINE void kfr_welford_step4(kf_acc& mean, kf_acc& m2, kf_acc& n, kf_acc v0, kf_acc v1, kf_acc v2, kf_acc v3) {
  const kf_acc q = (kf_acc)0.25;  // (each value scaled first: exact, and no sum of four can overflow)
  const kf_acc mean_b = (v0 * q + v1 * q) + (v2 * q + v3 * q);
  const kf_acc d0 = v0 - mean_b, d1 = v1 - mean_b, d2 = v2 - mean_b, d3 = v3 - mean_b;
  const kf_acc m2_b = (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3);
  const kf_acc total = n + (kf_acc)4, d = mean_b - mean, f = (kf_acc)4 / total;
  mean += d * f;
  m2 += m2_b + d * d * n * f;
  n = total;
}
KF_INLINE void kfr_welford_merge(kf_acc& mean, kf_acc& m2, kf_acc& n, kf_acc mean_b, kf_acc m2_b, kf_acc n_b) {
  if (n_b == (kf_acc)0) return;
  if (n == (kf_acc)0) { mean = mean_b; m2 = m2_b; n = n_b; return; }
  const kf_acc total = n + n_b;
  const kf_acc d = mean_b - mean;
  const kf_acc f = n_b / total;
  mean += d * f;
  m2 += m2_b + d * d * n * f;
  n = total;
}
KF_INLINE void kfr_softmax_step(kf_acc& m, kf_acc& s, kf_acc x) {
  if (x > m) { s = s * kfr_exp(m - x) + (kf_acc)1; m = x; }
  else if (x != -INFINITY) { s += kfr_exp(x - m); }  /* NaN falls here and poisons s, as in PyTorch */
}
// Four values at once (the float4 path): one rescale against their new maximum, then their four exponentials,
// branch-free (the per-value step diverges within a warp and takes an exponential per value on both sides).
// -inf values add 0; a NaN poisons s; until the first finite value the state stays empty.
KF_INLINE void kfr_softmax_step4(kf_acc& m, kf_acc& s, kf_acc v0, kf_acc v1, kf_acc v2, kf_acc v3) {
  const kf_acc top = fmax(fmax(m, fmax(v0, v1)), fmax(v2, v3));
  if (top == -INFINITY) return;
  s = s * kfr_exp(m - top) + ((kfr_exp(v0 - top) + kfr_exp(v1 - top)) + (kfr_exp(v2 - top) + kfr_exp(v3 - top)));
  m = top;
}
KF_INLINE void kfr_softmax_merge(kf_acc& m, kf_acc& s, kf_acc m_b, kf_acc s_b) {
  const kf_acc top = (m_b > m) ? m_b : m;
  const kf_acc sa = (m == -INFINITY) ? s : s * kfr_exp(m - top);
  const kf_acc sb = (m_b == -INFINITY) ? s_b : s_b * kfr_exp(m_b - top);
  m = top;
  s = sa + sb;
}
"""

_HELPER = re.compile(r"^(?:KF_INLINE\s+[\w:]+\s+(\w+)\(|#define\s+(\w+))")
_HELPER_NAME = re.compile(r"\b(?:kfr|KFR)_\w+\b")


def _prelude_parts() -> tuple[list[str], list[tuple[str, list[str]]]]:
    """REDUCE_PRELUDE as what precedes its first helper, and each helper's definition (name, lines: the comment
    above it, its signature line, its body)."""
    head, helpers, comment, in_comment = [], [], [], False
    for line in REDUCE_PRELUDE.strip("\n").splitlines():
        if in_comment or line.startswith(("/*", "//")):
            comment.append(line)
            in_comment = (in_comment or line.startswith("/*")) and "*/" not in line
            continue
        match = _HELPER.match(line)
        if match:
            helpers.append((match.group(1) or match.group(2), comment + [line]))
        elif helpers:
            helpers[-1][1].extend(comment + [line])  # the body (a comment inside one stays with it)
        else:
            head.extend(comment + [line])
        comment = []
    return head, helpers


def prelude_for(code: str) -> str:
    """REDUCE_PRELUDE without the helpers `code` never calls, directly or through another helper: a file holds the
    helpers of its own reductions only (what comes before the first helper, the accumulator type, always stays)."""
    head, helpers = _prelude_parts()
    wanted, found = set(), set(_HELPER_NAME.findall(code))
    while found - wanted:
        wanted |= found
        found = {n for name, lines in helpers if name in wanted for n in _HELPER_NAME.findall("\n".join(lines))}
        found |= wanted
    kept = [line for name, lines in helpers if name in wanted for line in lines]
    return "\n" + "\n".join(head + kept) + "\n"


# Shared by host and device: the geometry of one reduction and one strided view with the source's sizes.
REDUCE_DECLS = printing.FAST_DIVISION_DECLS + r"""
namespace kf {
// [rows, reduced] view of a source tensor: kept dims (ond, osz) and reduced dims (rnd, rsz), each coalesced; rdiv
// divides by rsz (an element's reduced index split into its dims without a divide instruction: GroupNorm over
// (channels of a group, pixels) spent more time dividing than reading)
struct RGeom {
    int ond, rnd;
    int64_t osz[KF_MAX_DIMS], rsz[KF_MAX_DIMS];
    Div rdiv[KF_MAX_DIMS];
    int64_t rows, rlen;
};
// An operand or a full-shape output, viewed with the source's sizes: strides along kept and reduced dims.
struct RView {
    float* data;
    int64_t os[KF_MAX_DIMS], rs[KF_MAX_DIMS];
};
}  // namespace kf
"""

# The reduced offsets of an element, in every reduction file's kernels (the CUDA target's host code fills the
# geometry and never calls it: REDUCE_DECLS alone goes there).
REDUCE_OFFSETS = r"""
namespace kf {
// e[k] = the offset of reduced index r in view k, for each view k in V (the row's offset is added by the caller):
// r split into the reduced dims once for all of them.
template <typename index_t, int... V>
#ifdef __CUDACC__
__host__ __device__ __forceinline__
#else
inline
#endif
void reduced_offsets(const RView* v, const RGeom& g, index_t r, index_t* e) {
    if (g.rnd == 1) {
        ((e[V] = r * (index_t)v[V].rs[0]), ...);
        return;
    }
    if (g.rnd == 2) {  // (batch x spatial, a norm's common case: straight-line code, no loop over the dims)
        const index_t q = div_by(r, g.rdiv[1]);
        const index_t c = r - q * (index_t)g.rsz[1];
        ((e[V] = q * (index_t)v[V].rs[0] + c * (index_t)v[V].rs[1]), ...);
        return;
    }
    ((e[V] = 0), ...);
    index_t rest = r;
    for (int d = g.rnd - 1; d > 0; --d) {
        const index_t q = div_by(rest, g.rdiv[d]);
        const index_t c = rest - q * (index_t)g.rsz[d];
        rest = q;
        ((e[V] += c * (index_t)v[V].rs[d]), ...);
    }
    ((e[V] += rest * (index_t)v[V].rs[0]), ...);
}
}  // namespace kf
"""

REDUCE_HOST = printing.FAST_DIVISION_HOST + r"""
namespace kf {
// The reduced output's shape: the source's sizes without the reduced dims (or with 1 there, keepdim).
inline std::vector<int64_t> row_shape(const std::vector<int64_t>& sizes, const std::vector<int64_t>& dims, bool keepdim) {
    std::vector<int64_t> out;
    for (int64_t d = 0; d < (int64_t)sizes.size(); ++d) {
        const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
        if (!reduced) out.push_back(sizes[d]);
        else if (keepdim) out.push_back(1);
    }
    return out;
}
// A value of the reduced shape (row epilogue operand) seen with the source's sizes: stride 0 along reduced dims.
inline at::Tensor as_row(const at::Tensor& t, const std::vector<int64_t>& sizes, const std::vector<int64_t>& dims, bool keepdim) {
    at::Tensor v = t.expand(row_shape(sizes, dims, keepdim));
    if (!keepdim) for (int64_t d : dims) v = v.unsqueeze(d);  // dims ascending
    return v.expand(sizes);
}
// A per-channel vector (weight, bias, running statistics of a norm layer) along dim 1 of the source.
// A full-shape output laid out like `like` when that is a dense permutation of the same sizes (a transposed input
// gives a transposed output, so reads and writes stay coalesced together), else contiguous.
inline at::Tensor alloc_like(const at::Tensor& like, const std::vector<int64_t>& sizes, const at::TensorOptions& opts) {
    if (like.sizes().vec() == sizes && like.is_non_overlapping_and_dense() && !like.is_contiguous())
        return at::empty_strided(sizes, like.strides(), opts);
    return kf::empty(sizes, opts);
}
inline at::Tensor as_channel(const at::Tensor& t, const std::vector<int64_t>& sizes) {
    std::vector<int64_t> shape(sizes.size(), 1);
    shape[1] = t.numel();
    return t.reshape(shape).expand(sizes);
}
inline std::vector<int64_t> broadcast_shape(const std::vector<at::Tensor>& ts) {
    std::vector<int64_t> sizes(ts[0].sizes().begin(), ts[0].sizes().end());
    for (size_t k = 1; k < ts.size(); ++k) sizes = at::infer_size(sizes, ts[k].sizes());
    return sizes;
}
// The kept dims, outermost first: in order of view `lead`'s strides, largest first, where that view is dense (a
// permuted source, e.g. a channels-last convolution's output, is walked in memory order: a mean over its depth
// reads along the contiguous channels, which the column kernels coalesce, not a strided row per output; H200:
// 5.7 ms where torch.compile's kernel took 1.3), else in the logical order.
inline std::vector<int64_t> kept_order(const std::vector<at::Tensor>& views, const std::vector<int64_t>& dims, int lead) {
    std::vector<int64_t> kept;
    for (int64_t d = 0; d < views[0].dim(); ++d)
        if (std::find(dims.begin(), dims.end(), d) == dims.end()) kept.push_back(d);
    if (lead >= 0 && views[lead].is_non_overlapping_and_dense()) {
        const at::Tensor& v = views[lead];
        std::stable_sort(kept.begin(), kept.end(), [&](int64_t a, int64_t b) { return v.stride(a) > v.stride(b); });
    }
    return kept;
}
// A row output (one value per kept index) laid out in the kept dims' order, so that row o of the kernels is element
// o of its memory: contiguous where that order is the logical one.
inline at::Tensor row_output(const std::vector<int64_t>& sizes, const std::vector<int64_t>& dims, bool keepdim,
                             const std::vector<int64_t>& kept, const at::TensorOptions& opts) {
    const std::vector<int64_t> shape = row_shape(sizes, dims, keepdim);
    if (std::is_sorted(kept.begin(), kept.end())) return kf::empty(shape, opts);
    std::vector<int64_t> stride(sizes.size(), 1);
    int64_t step = 1;
    for (auto d = kept.rbegin(); d != kept.rend(); ++d) { stride[*d] = step; step *= sizes[*d]; }
    std::vector<int64_t> strides;
    for (int64_t d = 0; d < (int64_t)sizes.size(); ++d) {
        const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
        if (!reduced) strides.push_back(stride[d]);
        else if (keepdim) strides.push_back(step);
    }
    return at::empty_strided(shape, strides, opts);
}
// Fills the geometry and the views' strides; dims of size 1 drop out, neighbours merge where every view allows.
// Kept dims are walked in `kept`'s order (kept_order), reduced ones in the logical order (an index output counts
// along it).
inline void reduce_geometry(const std::vector<at::Tensor>& views, const std::vector<int64_t>& dims,
                            const std::vector<int64_t>& kept, RGeom& g, RView* out) {
    const int64_t nd = views[0].dim();
    TORCH_CHECK(nd <= KF_MAX_DIMS, "kfuse reductions support up to ", KF_MAX_DIMS, " dimensions");
    const size_t nv = views.size();
    for (size_t k = 0; k < nv; ++k) {
        // float32 values; int64 ones only as class targets (read through an int64 pointer at the same offsets)
        TORCH_CHECK(views[k].scalar_type() == at::kFloat || views[k].scalar_type() == at::kLong,
                    "kfuse reduction expects float32 operands (int64 class targets)");
        TORCH_CHECK(views[k].sizes() == views[0].sizes(), "kfuse reduction: operand shapes disagree");
        out[k].data = static_cast<float*>(const_cast<void*>(views[k].data_ptr()));
    }
    for (int level = 0; level < 2; ++level) {
        int n = 0;
        int64_t* sz = level == 0 ? g.osz : g.rsz;
        std::vector<int64_t> reduced(dims);
        std::sort(reduced.begin(), reduced.end());
        for (int64_t d : level == 0 ? kept : reduced) {
            if (views[0].size(d) == 1) continue;
            bool merge = n > 0;
            for (size_t k = 0; k < nv && merge; ++k) {
                const int64_t* st = level == 0 ? out[k].os : out[k].rs;
                merge = st[n - 1] == views[k].stride(d) * views[k].size(d);
            }
            if (merge) {
                sz[n - 1] *= views[0].size(d);
                for (size_t k = 0; k < nv; ++k) (level == 0 ? out[k].os : out[k].rs)[n - 1] = views[k].stride(d);
            } else {
                sz[n] = views[0].size(d);
                for (size_t k = 0; k < nv; ++k) (level == 0 ? out[k].os : out[k].rs)[n] = views[k].stride(d);
                ++n;
            }
        }
        int64_t total = 1;
        for (int i = 0; i < n; ++i) total *= sz[i];
        if (level == 0) { g.ond = n; g.rows = total; } else { g.rnd = n; g.rlen = total; }
    }
    for (int i = 0; i < g.rnd; ++i) g.rdiv[i] = make_div(g.rsz[i]);
}
// 32-bit indexing only when every offset, row and reduced index fits. The kernels form 32-bit offsets of elements
// only (a slice's start, which need not be one, is checked as an address: kfr_vec_head). Their counters overshoot
// the row count by at most a grid's step, and a row's length by a grid's step plus the slices' rounding up to fours
// (at most rlen / 128: slices hold 512 elements or more), hence the room there. (KernelBench sizes its reductions
// just under 2^31 elements: 128 x 4096 x 4095 is 524,287 short of INT32_MAX, and a room on the offsets as well sent
// them to 64-bit indexing, with half the blocks per SM in the column kernels.)
inline bool reduce_small_index(const std::vector<at::Tensor>& views, const RGeom& g) {
    int64_t worst = 0;
    for (const at::Tensor& v : views) {
        int64_t off = 0;
        for (int64_t d = 0; d < v.dim(); ++d) off += (v.size(d) - 1) * v.stride(d);
        worst = std::max(worst, off);
    }
    const int64_t room = (int64_t)1 << 20;
    return worst < INT32_MAX && g.rows < INT32_MAX - room && g.rlen + g.rlen / 128 < INT32_MAX - room;
}
}  // namespace kf
"""

# A loss's final scalar: the rows' values summed (divided by the rows' summed weights for a weighted mean) by one
# block, each thread a fixed stride of the rows, then a fixed tree: the same order every run (no atomics), in double.
REDUCE_TOTAL_CUDA = r"""
namespace kf {
__global__ void reduce_total_kernel(const float* rows, const float* weights, int64_t n, bool mean, float* out) {
    __shared__ double sv[1024], sw[1024];
    const int t = threadIdx.x;
    double v = 0.0, w = 0.0;
    for (int64_t i = t; i < n; i += blockDim.x) {
        v += (double)rows[i];
        if (weights != nullptr) w += (double)weights[i];
    }
    sv[t] = v;
    sw[t] = w;
    __syncthreads();
    for (int off = blockDim.x / 2; off > 0; off >>= 1) {
        if (t < off) { sv[t] += sv[t + off]; sw[t] += sw[t + off]; }
        __syncthreads();
    }
    if (t == 0) out[0] = (float)(weights != nullptr ? sv[0] / sw[0] : (mean ? sv[0] / (double)n : sv[0]));
}
void reduce_total(const float* rows, const float* weights, int64_t n, bool mean, float* out, cudaStream_t stream) {
    reduce_total_kernel<<<1, 1024, 0, stream>>>(rows, weights, n, mean, out);
}
}  // namespace kf
"""
REDUCE_TOTAL_CUDA_DECL = """
namespace kf {
void reduce_total(const float* rows, const float* weights, int64_t n, bool mean, float* out, cudaStream_t stream);
}
"""
REDUCE_TOTAL_CPU = r"""
namespace kf {
// A loss's final scalar: the rows' values summed in order, in double (divided by the summed weights, or by n).
inline void reduce_total(const float* rows, const float* weights, int64_t n, bool mean, float* out) {
    double v = 0.0, w = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        v += (double)rows[i];
        if (weights != nullptr) w += (double)weights[i];
    }
    out[0] = (float)(weights != nullptr ? v / w : (mean ? v / (double)n : v));
}
}  // namespace kf
"""

# Launch shapes for CUDA (in the .cu file, next to the kernels).
REDUCE_DEVICE_RUNTIME = r"""
namespace kf {
struct RConfig { bool column; int width; int group; int splits; unsigned blocks; unsigned threads; bool two_pass; };
// column: the kept dim is the contiguous one (a 32x8 block covers 32 rows, or 128 when each thread takes `width`
// 4 neighbouring rows a float4 at a time; `group` 8 threads along the reduced range, or 1 in 256 x 1 blocks); else
// `group` threads per row (2-16 lanes of a warp for rows shorter than 1024, 8 float4s a lane where the row is that
// long; a warp for rows up to 2048 when there are enough of them to fill the GPU; the whole block for long ones).
// Few rows and long reductions split the reduced range.
inline RConfig reduce_config(const RGeom& g, bool column, int width, int sms, bool no_full = false) {
    RConfig c;
    c.column = column;
    c.width = width;
    c.splits = 1;
    c.two_pass = false;
    const int64_t target = (int64_t)sms * 4;  // blocks wanted in flight
    if (column) {
        // short reductions with no full-shape output (no_full) over enough rows to fill the GPU: a thread per row
        // (256 x 1 blocks), where the 32 x 8 blocks' merge through shared memory and three barriers per tile cost
        // more than the reading (H200, results/devset-H200-2026-11-28-p: logsumexp over 16 channels of a 1 GB NCDHW
        // tensor 5.27 -> 3.92 ms for the file; a mean over a channels-last depth of 32 10.6 -> 5.7). A softmax or
        // RMS norm over 64 channels, which read their column twice, ran slower so (1.25 -> 1.42, 4.9 -> 7.9 ms).
        c.group = no_full && g.rlen <= 128 && g.rows >= (int64_t)sms * 1024 ? 1 : 8;
        if (c.group == 1) c.width = width = 1;  // (scalar loads, a warp's 32 neighbouring rows: 128 bytes)
        const int64_t tiles = (g.rows + 256 / c.group * width - 1) / (256 / c.group * width);
        if (tiles < target && g.rlen >= 2048) c.splits = (int)std::max<int64_t>(1, std::min<int64_t>((target + tiles - 1) / tiles, g.rlen / 512));
        c.threads = 256;
        // a block per tile, not a grid-stride wave: blocks dispatched in order keep neighbouring tiles in step, so
        // the 32-byte sectors two tiles share (kept rows not a multiple of 8 floats long) come from DRAM once (H100,
        // mean over dim 1 of 128 x 4096 x 4095: 3.56 -> 3.07 ms, eager 3.03; read 9.9 GB of 8.6 in a wave)
        c.blocks = (unsigned)std::max<int64_t>(1, std::min<int64_t>(tiles * c.splits, INT32_MAX));
    } else if (g.rlen <= 256 || (g.rlen <= 2048 && g.rows >= (int64_t)sms * 32)) {
        // a warp per row: no block-wide barriers between rows (min over rows of 1024: 3.66 -> 1.55 ms on an H100);
        // shorter rows part of a warp each, 8 float4 loads a lane where the row is that long (2 lanes at the least):
        // loads in flight, fewer shuffles. A float4 a lane left a min over 64 channels-last channels and LayerNorms
        // over rows of 64 latency-bound at a fifth of DRAM's bandwidth; 2, 4 and 8 a lane: 24-26%, 32-36%, 34-40%
        // faster (H200, results/unseen-H200-2026-11-28/reduce-group-*.md: 4.22 -> 2.77 ms, torch.compile 2.85)
        c.group = 32;
        while (c.group > 2 && (int64_t)c.group * 32 > g.rlen) c.group /= 2;
        c.threads = 256;
        const int per_block = c.threads / c.group;
        c.blocks = (unsigned)std::max<int64_t>(1, std::min<int64_t>((g.rows + per_block - 1) / per_block, (int64_t)sms * 16));
    } else {
        c.group = g.rlen <= 2048 ? 128 : (g.rlen <= 16384 ? 256 : 512);
        c.threads = c.group;
        // split until each block of the grid has eight units (H100: Frobenius norm over 2^29 floats in 4224 slices
        // of 512 KB rather than 528 of 4 MB, 2.72 -> 2.38 ms; batch norm over 64 channels 3.47 -> 2.80). (Splitting
        // up to 8 * target rows did not help a group norm of 896 rows of 8.4M floats, 7.14 -> 7.17 ms, and cost
        // another 6%: H200, results/devset-H200-2026-11-28-p.)
        if (g.rows < target && g.rlen >= (int64_t)16 * c.group)
            c.splits = (int)std::max<int64_t>(1, std::min<int64_t>((8 * target + g.rows - 1) / g.rows, g.rlen / (8 * c.group)));
        // Rows too long for a block's shared memory (more than 32K floats) with a full-shape output: the statistics
        // in one launch (a kernel for that stage alone, fewer registers: a BatchNorm's 40, three 512-thread blocks
        // an SM), the merge and the full phase in a second, rather than both phases in one kernel of 64-96
        // registers at one or two blocks an SM, which read a group norm's rows at a third of DRAM's bandwidth (H200:
        // 1024 rows of 258064 floats after a sigmoid, 2.13 ms, torch.compile's two kernels 1.07; two launches: the
        // file 3.02 -> 2.47 ms, results/devset-H200-2026-11-28-s).
        if (c.splits == 1 && !no_full && g.rlen > 32768) c.two_pass = true;
        c.blocks = (unsigned)std::max<int64_t>(1, std::min<int64_t>(g.rows * c.splits, (int64_t)sms * (2048 / c.group)));
    }
    return c;
}
}  // namespace kf

// float4 access along the innermost reduced dim: views contiguous there (after a scalar head of 0-3 elements that
// aligns them all to 16 bytes; every run of the inner dim must start aligned) or constant there (one value).
// `head`: -2 while no view has decided, -1 when some view rules the float4 path out.
// The slice's start (row offset `row` plus `r0`) is an address only: with a broadcast reduced dim it need not be an
// element's offset, nor fit index_t, so it is formed from the row's (valid) start in unsigned pointer arithmetic.
template <typename index_t>
__device__ __forceinline__ void kfr_vec_head(const kf::RView& v, const kf::RGeom& g, index_t row, index_t r0, int& head) {
    if (head == -1) return;
    const int64_t inner = v.rs[g.rnd - 1];
    if (inner == 0) return;
    const uintptr_t address = reinterpret_cast<uintptr_t>(v.data + row) + (uintptr_t)r0 * sizeof(float);
    bool ok = inner == 1 && (address & 3) == 0;
    for (int d = 0; ok && d + 1 < g.rnd; ++d) ok = v.rs[d] % 4 == 0;
    const int want = (int)((4 - ((address >> 2) & 3)) & 3);
    if (!ok || (g.rnd > 1 && want != 0) || (head >= 0 && head != want)) head = -1;
    else head = want;
}
template <typename index_t>
__device__ __forceinline__ float4 kfr_load4(const kf::RView& v, const kf::RGeom& g, index_t at) {
    if (v.rs[g.rnd - 1] == 0) { const float x = v.data[at]; return make_float4(x, x, x, x); }
    return *reinterpret_cast<const float4*>(v.data + at);
}

namespace kf {
// The grid, cut to the blocks that are resident on the GPU at once: every kernel strides over its work units, so
// one full wave does it all, with no partly filled last one (H100: softmax over 4096 rows of 131072 2.68 -> 2.35
// ms, cross-entropy over rows of 4096 1.77 -> 1.66, argmin over rows of 1024 1.66 -> 1.62; LayerNorm over rows of
// 64 2.5% slower). `per_sm` caches the occupancy query (0: not asked yet).
template <typename Kernel>
inline unsigned one_wave(Kernel kernel, int threads, int sms, unsigned wanted, int& per_sm, size_t smem = 0) {
    if (per_sm == 0 && (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem) != cudaSuccess ||
                        per_sm < 1)) {
        (void)cudaGetLastError();
        per_sm = 1 << 20;  // unknown: keep the grid asked for
    }
    return (unsigned)std::max<int64_t>(1, std::min<int64_t>(wanted, (int64_t)per_sm * sms));
}
// Whether a view can be read (or written) a float4 at a time along the contiguous kept dim, four rows at once:
// contiguous there and 16-byte aligned at every row and reduced index, or constant there (one value).
inline bool cols4_view_ok(const RView& v, const RGeom& g) {
    const int64_t inner = v.os[g.ond - 1];
    if (inner == 0) return true;
    if (inner != 1 || reinterpret_cast<uintptr_t>(v.data) % 16 != 0) return false;
    for (int d = 0; d + 1 < g.ond; ++d)
        if (v.os[d] % 4 != 0) return false;
    for (int d = 0; d < g.rnd; ++d)
        if (v.rs[d] % 4 != 0) return false;
    return true;
}
}  // namespace kf
template <typename index_t>
__device__ __forceinline__ float4 kfr_load_cols4(const kf::RView& v, const kf::RGeom& g, index_t at) {
    if (v.os[g.ond - 1] == 0) { const float x = v.data[at]; return make_float4(x, x, x, x); }
    return *reinterpret_cast<const float4*>(v.data + at);
}
"""

# The loops every fused reduction runs on CUDA, one template each, instantiated per kernel with its policy struct R
# (_Printer.policy: R::state, R::row, R::args, the per-element and per-row functions, and the constants below).
REDUCE_DRIVERS_CUDA = r"""
namespace kf {
// A reduction's state moved between lanes a 32-bit word at a time (its fields are 4 or 8 bytes wide).
template <class State>
__device__ __forceinline__ State shfl_down_state(const State& s, int off, int width) {
    static_assert(sizeof(State) % 4 == 0, "a state is whole 32-bit words");
    State t;
    const int* in = reinterpret_cast<const int*>(&s);
    int* out = reinterpret_cast<int*>(&t);
#pragma unroll
    for (int i = 0; i < (int)(sizeof(State) / 4); ++i) out[i] = __shfl_down_sync(0xffffffffu, in[i], off, width);
    return t;
}
template <class State>
__device__ __forceinline__ State shfl_first_state(const State& s, int width) {
    State t;
    const int* in = reinterpret_cast<const int*>(&s);
    int* out = reinterpret_cast<int*>(&t);
#pragma unroll
    for (int i = 0; i < (int)(sizeof(State) / 4); ++i) out[i] = __shfl_sync(0xffffffffu, in[i], 0, width);
    return t;
}

// Merge over the `group` threads of a row (part of a warp, a warp, or the whole block): every thread gets the same
// state. Every lane of the warp takes part (the rows kernel keeps its loop warp-uniform); a group narrower than a
// warp reduces its own row only.
template <class R>
__device__ __forceinline__ typename R::state reduce_group(typename R::state s, int group, typename R::state* red) {
    const int width = group < 32 ? group : 32;
    for (int off = width / 2; off > 0; off >>= 1) R::merge(s, shfl_down_state(s, off, width));
    if (group <= 32) return shfl_first_state(s, width);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) red[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = lane < group / 32 ? red[lane] : R::init();
        for (int off = 16; off > 0; off >>= 1) R::merge(s, shfl_down_state(s, off, 32));
        if (lane == 0) red[0] = s;
    }
    __syncthreads();
    s = red[0];
    __syncthreads();
    return s;
}

// A thread's float4 groups r, r + step, ... below `end`, each loaded (`load(r)`) and then used (`use(group, r)`):
// the next group's loads are issued before this one is used, so two are in flight whatever the use costs (a Welford
// step's division, its slow path a call, or a store sat between any two loads of the unrolled loops before: one load
// in flight per thread, two 512-thread blocks per SM at 56 registers, about half the bytes in flight an H100's
// bandwidth needs). A full phase's next group may be read before this one is written: a kernel's full outputs are
// fresh tensors, never a view it reads.
template <typename index_t, class Load, class Use>
__device__ __forceinline__ void pipelined(index_t r, index_t end, index_t step, Load load, Use use) {
    if (r >= end) return;
    auto q = load(r);
    while (true) {
        const index_t next = r + step;
        const bool more = next < end;
        decltype(q) ahead;
        if (more) ahead = load(next);
        use(q, r);
        if (!more) return;
        q = ahead;
        r = next;
    }
}

// A group's share of one slice [r0, r1) of a row (both row kernels): the scalar head [r0, v0), float4 groups up to
// `tail` (each put in its `slot` of the row cache too, where the launch holds one), then the scalar tail.
template <class R, typename index_t, class Slot>
__device__ __forceinline__ void accumulate_slice(const typename R::args& A, const RGeom& g, const index_t* ob,
                                                 index_t r0, index_t v0, index_t tail, index_t r1, int lane, int group,
                                                 Slot slot, index_t stride, typename R::state& s) {
    using state = typename R::state;
    for (index_t r = r0 + lane; r < v0; r += group) R::template accumulate<index_t>(A, g, ob, r, s);
    auto load4 = [&](index_t r) { return R::template load4<index_t>(A, g, ob, r); };
    if constexpr (R::PARTIALS) {  // four independent chains, merged in order
        state part[4] = {R::init(), R::init(), R::init(), R::init()};
        pipelined(v0 + 4 * lane, tail, (index_t)(4 * group), load4, [&](const auto& q, index_t r) {
            R::template accumulate4<index_t>(q, r, part, slot(r), stride);
        });
        for (int j = 0; j < 4; ++j) R::merge(s, part[j]);
    } else {
        pipelined(v0 + 4 * lane, tail, (index_t)(4 * group), load4, [&](const auto& q, index_t r) {
            R::template accumulate4<index_t>(q, r, &s, slot(r), stride);
        });
    }
    for (index_t r = tail + lane; r < r1; r += group) R::template accumulate<index_t>(A, g, ob, r, s);
}
// ... and its full-shape outputs, the float4 groups read from the row cache where the launch holds one.
template <class R, typename index_t, class Slot>
__device__ __forceinline__ void full_slice(const typename R::args& A, const RGeom& g, const index_t* ob, index_t r0,
                                           index_t v0, index_t tail, index_t r1, int lane, int group, Slot slot,
                                           index_t stride, const typename R::row& rv) {
    for (index_t r = r0 + lane; r < v0; r += group) R::template full<index_t>(A, g, ob, r, rv);
    pipelined(v0 + 4 * lane, tail, (index_t)(4 * group),
              [&](index_t r) { return R::template full_load4<index_t>(A, g, ob, r, slot(r), stride); },
              [&](const auto& q, index_t) { R::template full4<index_t>(A, ob, q, rv); });
    for (index_t r = tail + lane; r < r1; r += group) R::template full<index_t>(A, g, ob, r, rv);
}

// A group of threads per row (stage 0: everything; 1: partial states of one slice into ws; 2: merge the row's
// partial states, then write the slice).
// CACHED: each thread keeps the float4s of the views the full phase reads again (R::CACHED of them) in shared
// memory (its own slots: no barrier), so that phase reads them there, not from DRAM or L2: one row per block, stage 0.
// ONLY: the instantiation for one stage of a split launch (1 or 2), compiled without the other's phases: the one
// that runs every stage held a BatchNorm's statistics pass at 64 registers, two 512-thread blocks an SM, 55% of
// DRAM's bandwidth (H200: results/devset-H200-2026-11-28-r/ncu-33_BatchNorm-stats.txt), and a group norm after a
// sigmoid at 96 registers, one block an SM.
template <class R, typename index_t, bool CACHED, int ONLY = 0>
__global__ void reduce_rows(typename R::args A, RGeom g, int group, int splits, int stage, typename R::state* ws) {
    using state = typename R::state;
    __shared__ state red[32];
    extern __shared__ float4 reduce_row_cache[];
    float4* const cache = CACHED ? reduce_row_cache : nullptr;
    const index_t stride = (index_t)((g.rlen + 3) / 4);  // float4 slots per view
    const int lane = threadIdx.x % group, per_block = blockDim.x / group;
    const index_t chunk = (index_t)((((g.rlen + splits - 1) / splits) + 3) / 4 * 4);
    const int64_t units = g.rows * splits;
    // Groups narrower than a warp: the warp steps through its units together (`first` is its lowest), so the
    // shuffles always have every lane; a group past the last unit reduces an empty range and writes nothing.
    const int sub = group < 32 ? (threadIdx.x % 32) / group : 0;
    for (int64_t first = (int64_t)blockIdx.x * per_block + threadIdx.x / group - sub; first < units;
         first += (int64_t)gridDim.x * per_block) {
        const bool live = first + sub < units;
        const int64_t u = live ? first + sub : first;
        const index_t o = (index_t)(u / splits);
        const int split = (int)(u % splits);
        const index_t r0 = (index_t)split * chunk;
        const int64_t end = (int64_t)r0 + chunk;
        const index_t r1 = live ? (index_t)(end < g.rlen ? end : g.rlen) : r0;
        index_t ob[R::VIEWS];
        R::template row_offsets<index_t>(A, g, o, ob);
        const int head = R::template vec_head<index_t>(A, g, ob, r0);
        const index_t v0 = head < 0 ? r0 : (r0 + head < r1 ? r0 + head : r1);
        const index_t tail = head < 0 ? r0 : v0 + ((r1 - v0) / 4) * 4;
        state s = R::init();
        // the float4 slot of reduced index r (>= v0) in this thread's row cache, if the launch holds one
        auto slot = [&](index_t r) { return cache == nullptr ? nullptr : cache + (r - v0) / 4; };
        if constexpr (R::ACCUMULATES && ONLY != 2) {
            if (stage != 2) accumulate_slice<R>(A, g, ob, r0, v0, tail, r1, lane, group, slot, stride, s);
        }
        if constexpr (ONLY != 1) {
            if (stage == 2) { for (int j = lane; j < splits; j += group) R::merge(s, ws[u - split + j]); }
        }
        s = reduce_group<R>(s, group, red);
        if (ONLY == 1 || stage == 1) {
            if (live && lane == 0) ws[u] = s;
            continue;
        }
        if constexpr (ONLY != 1) {
            const typename R::row rv = R::template finish<index_t>(A, g, s, (kf_acc)g.rlen, ob);
            if (live && split == 0 && lane == 0) R::template write_row<index_t>(A, s, rv, o, ob);
            if constexpr (R::HAS_FULL) full_slice<R>(A, g, ob, r0, v0, tail, r1, lane, group, slot, stride, rv);
        }
    }
}

// WIDTH 1: 32 neighbouring rows per block (threadIdx.x), the reduced range strided over threadIdx.y (8 threads):
// coalesced when the kept dim is the contiguous one. WIDTH 4: the same with four neighbouring rows per thread (a
// float4 per view along the contiguous kept dim: 128 rows per block), for views that allow it (R::cols4_ok) and rows
// in fours. NY 1 (256 x 1 blocks, WIDTH 1: short reductions over many rows, reduce_config) gives each thread its
// row's whole reduced range: no shared-memory merge and no barrier per tile.
template <class R, typename index_t, int WIDTH, int NY = 8>
__device__ __forceinline__ void reduce_cols_body(const typename R::args& A, const RGeom& g, int splits, int stage,
                                                 typename R::state* ws) {
    using state = typename R::state;
    __shared__ state red[8][32 * WIDTH + 1];
    const int tx = threadIdx.x, ty = NY > 1 ? threadIdx.y : 0, ny = NY;
    const index_t chunk = (index_t)((((g.rlen + splits - 1) / splits) + 3) / 4 * 4);
    constexpr int64_t span = (NY > 1 ? 32 : 256) * WIDTH;  // rows per tile (blockDim.x = 256 / NY)
    const int64_t tiles = (g.rows + span - 1) / span;
    for (int64_t u = blockIdx.x; u < tiles * splits; u += gridDim.x) {
        const int64_t tile = u / splits;
        const int split = (int)(u % splits);
        const int64_t row = tile * span + WIDTH * tx;
        const bool valid = row < g.rows;  // (rows come in fours where WIDTH is 4: all four valid or none)
        const index_t o = (index_t)(valid ? row : 0);
        const index_t r0 = (index_t)split * chunk;
        const int64_t end = (int64_t)r0 + chunk;
        const index_t r1 = (index_t)(end < g.rlen ? end : g.rlen);
        index_t ob[R::VIEWS];
        R::template row_offsets<index_t>(A, g, o, ob);
        state s[WIDTH];
        for (int q = 0; q < WIDTH; ++q) s[q] = R::init();
        if (valid) {
            if constexpr (R::ACCUMULATES) {
                if (stage != 2) {
                    // a light kernel's scalar loop 8 rows deep: more loads in flight (H200, mean over dim 1 of
                    // 128 x 4096 x 4095: 2.62 -> 2.11 ms, eager 2.11; its float4 loop spills at 8)
                    constexpr int unroll = R::LIGHT != 0 && WIDTH == 1 ? 8 : 4;
                    if constexpr (WIDTH == 4 && R::LIGHT == 0) {
                        // pipelined; a light kernel keeps its unrolled loop, held to 32 registers, its blocks
                        // enough in flight
                        pipelined(r0 + ty, r1, (index_t)ny,
                                  [&](index_t r) { return R::template load_cols4<index_t>(A, g, ob, r); },
                                  [&](const auto& q, index_t r) { R::template accumulate_cols4<index_t>(q, r, s); });
                    } else {
#pragma unroll unroll
                        for (index_t r = r0 + ty; r < r1; r += ny) {
                            if constexpr (WIDTH == 4)
                                R::template accumulate_cols4<index_t>(R::template load_cols4<index_t>(A, g, ob, r), r, s);
                            else R::template accumulate<index_t>(A, g, ob, r, s[0]);
                        }
                    }
                }
            }
            if (stage == 2) {
                for (int j = ty; j < splits; j += ny)
                    for (int q = 0; q < WIDTH; ++q) R::merge(s[q], ws[(int64_t)(o + q) * splits + j]);
            }
        }
        if constexpr (NY > 1) {  // (blockDim 32 x 8)
            for (int q = 0; q < WIDTH; ++q) red[ty][WIDTH * tx + q] = s[q];
            __syncthreads();
            if (ty == 0) {
                for (int q = 0; q < WIDTH; ++q) {
                    for (int j = 1; j < ny; ++j) R::merge(s[q], red[j][WIDTH * tx + q]);
                    red[0][WIDTH * tx + q] = s[q];
                }
            }
            __syncthreads();
            for (int q = 0; q < WIDTH; ++q) s[q] = red[0][WIDTH * tx + q];
            __syncthreads();
        }
        if (!valid) continue;
        if (stage == 1) {
            if (ty == 0) for (int q = 0; q < WIDTH; ++q) ws[(int64_t)(o + q) * splits + split] = s[q];
            continue;
        }
        typename R::row rv[WIDTH];
        for (int q = 0; q < WIDTH; ++q) {
            // row o + q: one step along the contiguous kept dim (stride 1, or 0 for a constant view)
            index_t obq[R::VIEWS];
            for (int k = 0; k < R::VIEWS; ++k) obq[k] = ob[k] + (index_t)q * (index_t)A.v[k].os[g.ond - 1];
            rv[q] = R::template finish<index_t>(A, g, s[q], (kf_acc)g.rlen, obq);
            if (split == 0 && ty == 0) R::template write_row<index_t>(A, s[q], rv[q], o + q, obq);
        }
        if constexpr (R::HAS_FULL) {
            if constexpr (WIDTH == 4) {
                pipelined(r0 + ty, r1, (index_t)ny,
                          [&](index_t r) { return R::template full_load_cols4<index_t>(A, g, ob, r); },
                          [&](const auto& q, index_t) { R::template full_cols4<index_t>(A, ob, q, rv); });
            } else {
#pragma unroll 4
                for (index_t r = r0 + ty; r < r1; r += ny) R::template full<index_t>(A, g, ob, r, rv[0]);
            }
        }
    }
}
template <class R, typename index_t, int WIDTH, int NY>
__global__ void reduce_cols(typename R::args A, RGeom g, int splits, int stage, typename R::state* ws) {
    reduce_cols_body<R, index_t, WIDTH, NY>(A, g, splits, stage, ws);
}
// [light]
// A light reduction (R::LIGHT: one input, a small state, no full output) keeps 8 blocks per SM in the column
// kernels with 32-bit indexing: 32 registers, no spill (H100: argmax over a middle dim 1.72 -> 1.49 ms, sum 1.52 ->
// 1.49). Heavier ones spill there (softmax, Welford: 24-212 bytes), so they keep the compiler's choice. But the
// scalar kernel of a one-field state (R::LIGHT 2) runs faster at 4 blocks and 64 registers, its loop keeping more
// loads in flight (H100, sum over dim 1 of 128 x 4096 x 4095: 3.31 -> 3.07 ms; an arg-extreme's there 3.84 -> 5.34).
template <class R, typename index_t, int WIDTH, int NY, int MIN_BLOCKS>
__global__ void __launch_bounds__(256, MIN_BLOCKS)
reduce_cols_light(typename R::args A, RGeom g, int splits, int stage, typename R::state* ws) {
    reduce_cols_body<R, index_t, WIDTH, NY>(A, g, splits, stage, ws);
}
template <class R, typename index_t, int WIDTH, int NY = 8>
inline auto reduce_cols_kernel() {
    constexpr int blocks = R::LIGHT == 0 ? 0 : (R::LIGHT == 2 && WIDTH == 1) ? 4 : sizeof(index_t) == 4 ? 8 : 4;
    if constexpr (blocks == 0) return reduce_cols<R, index_t, WIDTH, NY>;
    else return reduce_cols_light<R, index_t, WIDTH, NY, blocks>;
}

// [end light]
template <class R>
RConfig reduce_config_of(const typename R::args& A, const RGeom& g, int sms) {
    const int v = R::COLUMN_VIEW;
    const bool column = g.rnd > 0 && g.ond > 0 && A.v[v].rs[g.rnd - 1] != 1 && A.v[v].os[g.ond - 1] == 1;
    const bool four = column && g.osz[g.ond - 1] % 4 == 0 && R::cols4_ok(A, g);
    return reduce_config(g, column, four ? 4 : 1, sms, !R::HAS_FULL);
}

template <class R>
int64_t reduce_workspace(const typename R::args& A, const RGeom& g, int sms) {
    const RConfig c = reduce_config_of<R>(A, g, sms);
    return c.splits > 1 || c.two_pass ? g.rows * c.splits * (int64_t)sizeof(typename R::state) : 0;
}

template <class R, typename index_t>
void reduce_launch_t(const typename R::args& A, const RGeom& g, int sms, void* ws, cudaStream_t stream) {
    const RConfig c = reduce_config_of<R>(A, g, sms);
    typename R::state* states = static_cast<typename R::state*>(ws);
    if (c.column) {  // (a block per tile: reduce_config; c.group threads along the reduced range)
        const dim3 block(256 / c.group, c.group);
        auto kernel = c.width == 4 ? reduce_cols_kernel<R, index_t, 4>() : reduce_cols_kernel<R, index_t, 1>();
        if constexpr (!R::HAS_FULL) {  // (the only ones reduce_config gives 256 x 1 blocks)
            if (c.group == 1) kernel = reduce_cols_kernel<R, index_t, 1, 1>();
        }
        const unsigned blocks = c.blocks;
        if (c.splits == 1) {
            kernel<<<blocks, block, 0, stream>>>(A, g, 1, 0, states);
        } else {
            kernel<<<blocks, block, 0, stream>>>(A, g, c.splits, 1, states);
            kernel<<<blocks, block, 0, stream>>>(A, g, c.splits, 2, states);
        }
        return;
    }
    // Unsplit row launches: at most one full wave (blocks resident at once per SM, per block size, found once).
    // [cached]
    if constexpr (R::CACHED > 0) {
        // The row held in shared memory where one row per block fits three blocks per SM, 512 threads a row past
        // 8192 floats (H100, results/softmax-rows-H100-2026-11-27/: softmax over 2^15 rows of 16384 floats 2.23 ->
        // 1.90 ms, LayerNorm there 2.39 -> 1.92, log_softmax over 2^16 rows of 8192 2.12 -> 1.60).
        constexpr int64_t most = 72 * 1024;  // three blocks per SM on an H100
        const int64_t cache_bytes = (int64_t)R::CACHED * ((g.rlen + 3) / 4) * 16;
        if (c.splits == 1 && c.group == (int)c.threads && cache_bytes <= most) {
            const int threads = g.rlen > 8192 ? 512 : c.group;
            const int kb = (int)((cache_bytes + 1023) / 1024);
            static int cached_per_sm[17][most / 1024 + 1] = {};
            auto kernel = reduce_rows<R, index_t, true>;
            if (kb <= 48 || cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kb * 1024) == cudaSuccess) {
                const unsigned blocks = one_wave(kernel, threads, sms, c.blocks, cached_per_sm[threads / 64][kb],
                                                 (size_t)kb * 1024);
                kernel<<<blocks, threads, (size_t)kb * 1024, stream>>>(A, g, threads, 1, 0, states);
                return;
            }
            (void)cudaGetLastError();
        }
    }
    // [end cached]
    static int per_sm[17] = {};
    auto rows = reduce_rows<R, index_t, false>;
    if (c.splits == 1 && !c.two_pass) {
        rows<<<one_wave(rows, c.threads, sms, c.blocks, per_sm[c.threads / 64]), c.threads, 0, stream>>>(
            A, g, c.group, 1, 0, states);
        return;
    }
    if constexpr (sizeof(index_t) > 4) {
        // 64-bit indexing (8 GB tensors): the kernel of every stage for both launches, so that no file builds two
        // more instantiations of each reduction for sizes it rarely meets (nvcc on a BatchNorm file's device code:
        // 4 s before the stage kernels, 17 s with them for both index types, 5 s for 32-bit indexing only)
        rows<<<c.blocks, c.threads, 0, stream>>>(A, g, c.group, c.splits, 1, states);
        rows<<<c.blocks, c.threads, 0, stream>>>(A, g, c.group, c.splits, 2, states);
    } else {
        // Each stage's own kernel, which may fit more blocks an SM than the one for all stages. The partials run at
        // most one wave, so that no part of a wave runs alone at the end; a split merge keeps its grid (cut to a
        // wave, a LayerNorm over 128 rows of 4M lost 2.4%). The merge and full phase in blocks of at most 256
        // threads (a group of threads per slice as wide, the slices the partials' own): a heavy epilogue's
        // registers (80 after a group norm's sigmoid) leave room for one 512-thread block an SM but three of 256.
        // (Long rows: c.group is c.threads.)
        static int stage_per_sm[2][17] = {};
        auto partials = reduce_rows<R, index_t, false, 1>;
        auto merge_full = reduce_rows<R, index_t, false, 2>;
        const unsigned first = one_wave(partials, c.threads, sms, c.blocks, stage_per_sm[0][c.threads / 64]);
        const int narrow = (int)std::min(c.threads, 256u);
        const unsigned wanted = (unsigned)std::max<int64_t>(1, std::min<int64_t>(g.rows * c.splits,
                                                                                (int64_t)sms * (2048 / narrow)));
        const unsigned second = c.splits > 1 ? wanted
                                             : one_wave(merge_full, narrow, sms, wanted, stage_per_sm[1][narrow / 64]);
        partials<<<first, c.threads, 0, stream>>>(A, g, c.group, c.splits, 1, states);
        merge_full<<<second, narrow, 0, stream>>>(A, g, narrow, c.splits, 2, states);
    }
}

template <class R>
void reduce_launch(const typename R::args& A, const RGeom& g, bool small_index, int sms, void* ws, cudaStream_t stream) {
    if (small_index) reduce_launch_t<R, int32_t>(A, g, sms, ws, stream);
    else reduce_launch_t<R, int64_t>(A, g, sms, ws, stream);
}
}  // namespace kf
"""

def reduce_drivers_cuda(light: bool, cached: bool) -> str:
    """REDUCE_DRIVERS_CUDA without what no kernel of the file takes: the launch-bounded column kernels where none is
    light (R::LIGHT 0 everywhere), the launch holding a row in shared memory where none caches (R::CACHED 0). The
    parts are the lines between `// [NAME]` and `// [end NAME]` markers, which never reach the file."""
    text = REDUCE_DRIVERS_CUDA
    if not light:
        text = _cut(text, "light", "template <class R, typename index_t, int WIDTH, int NY = 8>\n"
                    "inline auto reduce_cols_kernel() { return reduce_cols<R, index_t, WIDTH, NY>; }\n\n")
    if not cached:
        text = _cut(text, "cached")
    return "".join(line for line in text.splitlines(keepends=True) if not _MARKER.fullmatch(line))


_MARKER = re.compile(r"\s*// \[(end )?\w+\]\n")


def _cut(text: str, name: str, replacement: str = "") -> str:
    """`text` with its part `name`, marker lines included, replaced by `replacement`."""
    start = text.rindex("\n", 0, text.index(f"// [{name}]\n")) + 1  # (from the marker line's indentation)
    end = text.index(f"// [end {name}]\n") + len(f"// [end {name}]\n")
    return text[:start] + replacement + text[end:]


# The CPU loop: a row per iteration of at::parallel_for, the policy's phases in order.
REDUCE_DRIVER_CPU = r"""
namespace kf {
template <class R>
void reduce_run(const typename R::args& A, const RGeom& g) {
    const int64_t grain = std::max<int64_t>(1, (int64_t)32768 / std::max<int64_t>(1, g.rlen));
    at::parallel_for(0, g.rows, grain, [&](int64_t begin, int64_t end) {
        int64_t ob[R::VIEWS];
        for (int64_t o = begin; o < end; ++o) {
            R::template row_offsets<int64_t>(A, g, o, ob);
            typename R::state s = R::init();
            if constexpr (R::ACCUMULATES)
                for (int64_t r = 0; r < g.rlen; ++r) R::template accumulate<int64_t>(A, g, ob, r, s);
            const typename R::row rv = R::template finish<int64_t>(A, g, s, (kf_acc)g.rlen, ob);
            R::template write_row<int64_t>(A, s, rv, o, ob);
            if constexpr (R::HAS_FULL)
                for (int64_t r = 0; r < g.rlen; ++r) R::template full<int64_t>(A, g, ob, r, rv);
        }
    });
}
}  // namespace kf
"""

# --------------------------------------------------------------------------------------------------------------
# Specs: what each supported ATen reduction means


class Unsupported(Exception):
    """This reduction node cannot be fused; the message says why (listed as the unfused reason)."""


@dataclass
class Spec:
    reducer: str
    source: torch.fx.Node
    dims: list[int]                        # reduced dims, in the (viewed) source's rank, ascending
    keepdim: bool = False
    groups: int | None = None              # group_norm: dim 1 split into (groups, C / groups)
    full: str | None = None                # C expression of the full-shape result from x and rv.*
    row: str | None = None                 # C expression of the row value (float)
    index: str | None = None               # C expression of the row index (int64_t)
    stats: list[tuple[str, str]] = field(default_factory=list)   # (name, C expression of s and n), kf_acc
    operands: dict[str, tuple[torch.fx.Node, str]] = field(default_factory=dict)  # role -> (node, kind)
    row_write: list[str] = field(default_factory=list)            # extra row statements (running statistics)
    skip_accumulate: bool = False          # eval-mode batch norm: the statistics are operands
    first_item: bool = False               # a tuple result of which only item 0 is used (the normalised tensor, or
                                           # max.dim's / min.dim's values)
    # more full-shape sources read with the first, `w0`, `w1`, ... in the reducer's update (dot_norms, two_dists)
    extra: list[torch.fx.Node] = field(default_factory=list)
    # A final reduction of the row values into one scalar (the losses' mean or sum), after the rows: "sum", "mean",
    # or "weighted" (sum of the row values / sum of `row_weight`): a second, deterministic pass over the rows.
    total: str | None = None
    row_weight: str | None = None          # C expression (float) of a row's weight, for total "weighted"


def _bound(node: torch.fx.Node) -> dict:
    return ops.bind_arguments(node.target._schema, list(node.args), dict(node.kwargs))


def _rank(node) -> int:
    return tensor_meta(node).dim()


def _norm_dims(dims, rank: int) -> list[int]:
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    out = sorted({(d + rank) % rank if rank else 0 for d in dims})
    return [d for d in out if d < max(rank, 1)] if rank else []


def _f32(x) -> str:
    return ops.scalar_literal(x)


def _acc(x: float) -> str:
    """A double constant as C source (used in kf_acc arithmetic)."""
    return f"(kf_acc){float(x)!r}"


def _check_dtype(node, *values):
    for v in values:
        meta = tensor_meta(v) if isinstance(v, torch.fx.Node) else None
        if meta is None or meta.dtype != torch.float32:
            raise Unsupported(f"on {meta.dtype if meta is not None else 'non-tensor'} values (fp32 kernels only)")


def _no_dtype(p: dict):
    if p.get("dtype") not in (None, torch.float32):
        raise Unsupported(f"with dtype={p['dtype']} (fp32 kernels only)")


def spec_for(node: torch.fx.Node) -> Spec:
    """The Spec of a supported reduction node; Unsupported (with the reason) otherwise."""
    name = str(node.target)
    parser = _PARSERS.get(name)
    if parser is None:
        raise Unsupported("not a reduction kfuse fuses")
    p = _bound(node)
    source = next((p[k] for k in ("self", "input", "x1", "anchor") if k in p), None)
    if not isinstance(source, torch.fx.Node):
        raise Unsupported("its input is not a tensor")
    _check_dtype(node, source)
    return parser(node, p, source)


def _plain(reducer: str, row: str | None = None, index: str | None = None, all_dims=False):
    def parse(node, p, source):
        _no_dtype(p)
        rank = _rank(source)
        dims = list(range(rank)) if all_dims else _norm_dims(p.get("dim"), rank)
        return Spec(reducer, source, dims, bool(p.get("keepdim", False)), row=row, index=index)
    return parse


def _mean(all_dims=False):
    return _plain("sum", "(float)(s.s / n)", all_dims=all_dims)


def _var(std: bool):
    def parse(node, p, source):
        rank = _rank(source)
        if "correction" in p:
            c = p["correction"]
            correction = 1.0 if c is None else float(c)
        else:
            correction = 1.0 if p.get("unbiased", True) else 0.0
        var = f"(s.m2 / kfr_max_acc(n - {_acc(correction)}))"
        return Spec("welford", source, _norm_dims(p.get("dim"), rank), bool(p.get("keepdim", False)),
                    row=f"(float)kfr_sqrt({var})" if std else f"(float){var}")
    return parse


def _argext(kind: str):
    def parse(node, p, source):
        rank = _rank(source)
        dims = _norm_dims(p.get("dim"), rank)
        return Spec(kind, source, dims, bool(p.get("keepdim", False)), index="KFR_ARG_INDEX(s.i)")
    return parse


def _ext_dim(kind: str):  # max.dim / min.dim: (values, indices); kind "max" or "min"
    def parse(node, p, source):
        if any(u.target is not operator.getitem for u in node.users):
            raise Unsupported("its tuple is used whole")
        dims = _norm_dims(p["dim"], _rank(source))
        if not any(int(u.args[1]) == 1 and u.users for u in node.users):
            # only the values are used: amax / amin, without carrying an index through every step (the same
            # values, NaN included)
            return Spec(kind, source, dims, bool(p["keepdim"]), row="s.m", first_item=True)
        return Spec(f"arg{kind}", source, dims, bool(p["keepdim"]), row="s.m", index="KFR_ARG_INDEX(s.i)")
    return parse


def _softmax(log: bool):
    def parse(node, p, source):
        _no_dtype(p)
        if p.get("half_to_float"):
            raise Unsupported("with half_to_float")
        full = ("(float)((kf_acc)x - rv.st_m - kfr_log(rv.st_s))" if log
                else "(float)(kfr_exp((kf_acc)x - rv.st_m) / rv.st_s)")
        return Spec("softmax", source, _norm_dims(p["dim"], _rank(source)), full=full,
                    stats=[("st_m", "s.m"), ("st_s", "s.s")])
    return parse


def _logsumexp(node, p, source):
    # PyTorch shifts by the max unless it is infinite (then by 0): +inf gives +inf, an all -inf row gives -inf
    row = "(float)((s.m == INFINITY || (s.m == -INFINITY && s.s == (kf_acc)0)) ? s.m : s.m + kfr_log(s.s))"
    return Spec("softmax", source, _norm_dims(p["dim"], _rank(source)), bool(p["keepdim"]), row=row)


def _vector_norm(node, p, source):
    _no_dtype(p)
    o = p["ord"]
    if isinstance(o, bool) or not isinstance(o, (int, float)):
        raise Unsupported(f"with ord={o!r}")
    o = float(o)
    dims, keep = _norm_dims(p["dim"], _rank(source)), bool(p["keepdim"])
    if o == 2.0:
        return Spec("sumsq", source, dims, keep, row="(float)kfr_sqrt(s.s)")
    if o == 1.0:
        return Spec("abssum", source, dims, keep, row="(float)s.s")
    if o == float("inf"):
        return Spec("absmax", source, dims, keep, row="s.m")
    if o == float("-inf"):
        return Spec("absmin", source, dims, keep, row="s.m")
    if o == 0.0:
        return Spec("nonzero", source, dims, keep, row="(float)s.s")
    spec = Spec("powsum", source, dims, keep, row=f"(float)kfr_pow(s.s, (kf_acc)1 / (kf_acc){o!r})")
    spec.reducer = f"powsum:{o!r}"
    return spec


def _cross_entropy(node, p, source):
    """cross_entropy with class-index targets: one pass per row (online logsumexp) and the target's logit read
    once, -(x[t] - max - log(sum)) as PyTorch's log_softmax + nll_loss compute it; 0 where t == ignore_index; then
    the mean over the rows that count (or the sum) in a final deterministic pass."""
    target, reduction = p["target"], p["reduction"]
    if p.get("weight") is not None:
        raise Unsupported("with class weights")
    if p.get("label_smoothing", 0.0) != 0.0:
        raise Unsupported("with label_smoothing")
    meta = tensor_meta(target) if isinstance(target, torch.fx.Node) else None
    if meta is None or meta.dtype != torch.int64:
        raise Unsupported("with class-probability (non-int64) targets")
    rank = _rank(source)
    if meta.dim() != max(rank - 1, 0) or reduction not in (0, 1, 2):
        raise Unsupported("with a target of unexpected rank")
    ignore = int(p["ignore_index"])
    # an out-of-range class (PyTorch raises) gives NaN rather than a number
    row = (f"(({{target}} == (int64_t){ignore}) ? 0.0f : (({{target}} < 0 || {{target}} >= (int64_t)g.rlen) ? NAN : "
           f"(float)(-(((kf_acc)SOURCE_AT((int64_t){{target}}) - s.m) - kfr_log(s.s)))))")
    spec = Spec("softmax", source, [1 if rank > 1 else 0], row=row)
    spec.operands["target"] = (target, "index")
    if reduction == 1:
        spec.total, spec.row_weight = "weighted", f"(({{target}} == (int64_t){ignore}) ? 0.0f : 1.0f)"
    elif reduction == 2:
        spec.total = "sum"
    return spec


def _cosine_similarity(node, p, source):
    """cosine_similarity: the dot product and both squared norms in one read of x1 and x2, then PyTorch's formula
    (Distance.cpp: each norm clamped to eps, x1 / n1 . x2 / n2) as dot / (max(n1, eps) * max(n2, eps))."""
    other, eps = p["x2"], p["eps"]
    if not isinstance(other, torch.fx.Node) or not isinstance(eps, (int, float)):
        raise Unsupported("with a non-tensor operand or eps")
    _check_dtype(node, other)
    rank = _rank(source)
    if rank == 0 or _shape(source) != _shape(other):
        raise Unsupported("on operands of different shapes (broadcast)")
    e = _acc(eps)
    row = (f"(float)(s.xy / (kfr_max2(kfr_sqrt(s.xx), {e}) * kfr_max2(kfr_sqrt(s.yy), {e})))")
    spec = Spec("dot_norms", source, _norm_dims(p["dim"], rank), row=row, extra=[other])
    spec.operands["second"] = (other, "full")
    return spec


def _triplet_margin_loss(node, p, source):
    """triplet_margin_loss (p=2, no swap): both distances in one read of anchor, positive and negative
    (pairwise_distance: the norm of a - x + eps over the last dim), then clamp_min(margin + d_pos - d_neg, 0)
    rounded as PyTorch's float ops, and the mean (or sum) over the rows in a final deterministic pass."""
    positive, negative = p["positive"], p["negative"]
    margin, norm, eps, swap, reduction = p["margin"], p["p"], p["eps"], p["swap"], p["reduction"]
    if swap:
        raise Unsupported("with swap=True")
    if isinstance(norm, bool) or not isinstance(norm, (int, float)) or float(norm) != 2.0:
        raise Unsupported(f"with p={norm!r} (p=2 only)")
    if not isinstance(margin, (int, float)) or not isinstance(eps, (int, float)) or reduction not in (0, 1, 2):
        raise Unsupported("with non-numeric margin or eps")
    for t in (positive, negative):
        if not isinstance(t, torch.fx.Node):
            raise Unsupported("with a non-tensor operand")
        _check_dtype(node, t)
        if _shape(t) != _shape(source):
            raise Unsupported("on operands of different shapes (broadcast)")
    rank = _rank(source)
    if rank == 0:
        raise Unsupported("on 0-dim tensors")
    m = _f32(margin)
    row = "(float)kfr_max2((kf_acc)((" + m + " + (float)kfr_sqrt(s.dp)) - (float)kfr_sqrt(s.dn)), (kf_acc)0)"
    spec = Spec(f"two_dists:{_f32(eps)}", source, [rank - 1], row=row, extra=[positive, negative])
    spec.operands["positive"] = (positive, "full")
    spec.operands["negative"] = (negative, "full")
    spec.total = {0: None, 1: "mean", 2: "sum"}[reduction]
    return spec


def _weights(spec: Spec, p: dict, kind: str, names=("weight", "bias")) -> str:
    """`y` scaled by the optional weight and shifted by the optional bias, in kf_acc."""
    expr = "y"
    for role in names:
        t = p.get(role)
        if t is None:
            continue
        if not isinstance(t, torch.fx.Node):
            raise Unsupported(f"with a non-tensor {role}")
        _check_dtype(None, t)
        spec.operands[role] = (t, kind)
        expr = f"({expr} * (kf_acc){{{role}}})" if role == "weight" else f"({expr} + (kf_acc){{{role}}})"
    return expr


_WELFORD_STATS = [("st_mean", "s.mean"), ("st_rstd", "(kf_acc)1 / kfr_sqrt(s.m2 / s.n + EPS)")]


def _normalize(spec: Spec, p: dict, kind: str, eps) -> Spec:
    if not isinstance(eps, (int, float)):
        raise Unsupported(f"with eps={eps!r}")
    spec.stats = [(n, e.replace("EPS", _acc(eps))) for n, e in _WELFORD_STATS]
    affine = _weights(spec, p, kind)
    spec.full = f"(float)({affine.replace('y', '(((kf_acc)x - rv.st_mean) * rv.st_rstd)', 1)})"
    return spec


def _layer_norm(node, p, source):
    rank, k = _rank(source), len(p["normalized_shape"])
    return _normalize(Spec("welford", source, list(range(rank - k, rank))), p, "full", p["eps"])


def _rms_norm(node, p, source):
    rank, k = _rank(source), len(p["normalized_shape"])
    eps = p.get("eps")
    eps = float(torch.finfo(torch.float32).eps) if eps is None else eps
    spec = Spec("sumsq", source, list(range(rank - k, rank)),
                stats=[("st_rstd", f"(kf_acc)1 / kfr_sqrt(s.s / n + {_acc(eps)})")])
    w = p.get("weight")
    spec.full = "((float)((kf_acc)x * rv.st_rstd))"
    if w is not None:
        _check_dtype(None, w)
        spec.operands["weight"] = (w, "full")
        spec.full = "(((float)((kf_acc)x * rv.st_rstd)) * {weight})"
    return spec


def _group_norm(node, p, source):
    rank = _rank(source)
    if rank < 2:
        raise Unsupported("on a tensor of rank < 2")
    g = p["num_groups"]
    spec = Spec("welford", source, list(range(2, rank + 1)), groups=int(g))
    return _normalize(spec, p, "channel", p["eps"])


def _instance_norm(node, p, source):
    rank = _rank(source)
    if not p["use_input_stats"] or p.get("running_mean") is not None or p.get("running_var") is not None:
        raise Unsupported("with running statistics (track_running_stats=True)")
    if rank < 3:
        raise Unsupported("on a tensor of rank < 3")
    return _normalize(Spec("welford", source, list(range(2, rank))), p, "channel", p["eps"])


def _batch_norm(node, p, source):
    rank = _rank(source)
    if rank < 2:
        raise Unsupported("on a tensor of rank < 2")
    dims = [0] + list(range(2, rank))
    rm, rv, eps, momentum = p["running_mean"], p["running_var"], p["eps"], p["momentum"]
    if not isinstance(eps, (int, float)):
        raise Unsupported(f"with eps={eps!r}")
    for t in (rm, rv):
        if t is not None:
            _check_dtype(None, t)
    if not p["training"]:
        if rm is None or rv is None:
            raise Unsupported("in eval mode without running statistics")
        spec = Spec("sum", source, dims, skip_accumulate=True)
        spec.operands["running_mean"] = (rm, "channel")
        spec.operands["running_var"] = (rv, "channel")
        spec.stats = [("st_mean", "(kf_acc){running_mean}"),
                      ("st_rstd", f"(kf_acc)1 / kfr_sqrt((kf_acc){{running_var}} + {_acc(eps)})")]
        affine = _weights(spec, p, "channel")
        spec.full = f"(float)({affine.replace('y', '(((kf_acc)x - rv.st_mean) * rv.st_rstd)', 1)})"
        return spec
    spec = _normalize(Spec("welford", source, dims), p, "channel", eps)
    if (rm is None) != (rv is None):
        raise Unsupported("with only one of running_mean and running_var")
    if rm is not None:
        if not isinstance(momentum, (int, float)):
            raise Unsupported("with momentum=None (cumulative moving average)")
        spec.operands["running_mean"] = (rm, "channel")
        spec.operands["running_var"] = (rv, "channel")
        m = _acc(momentum)
        # PyTorch: running = momentum * batch statistic + (1 - momentum) * running; the variance unbiased.
        spec.row_write = [
            f"{{running_mean@}} = (float)({m} * s.mean + ((kf_acc)1 - {m}) * (kf_acc){{running_mean@}});",
            f"{{running_var@}} = (float)({m} * (s.m2 / (s.n - (kf_acc)1)) + ((kf_acc)1 - {m}) * "
            f"(kf_acc){{running_var@}});",
        ]
    return spec


def _first_item_only(parse):
    """native_layer_norm / native_group_norm / _native_batch_norm_legit_no_training: (out, statistics...) of which
    only `out` may be used (the statistics are not written)."""
    def wrapped(node, p, source):
        users = list(node.users)
        if any(u.target is not operator.getitem for u in users):
            raise Unsupported("its tuple is used whole")
        if any(int(u.args[1]) != 0 and u.users for u in users):
            raise Unsupported("with its saved statistics used")
        spec = parse(node, p, source)
        spec.first_item = True
        return spec
    return wrapped


def _native_group_norm(node, p, source):
    return _group_norm(node, {**p, "num_groups": p["group"]}, source)


def _native_batch_norm_eval(node, p, source):
    return _batch_norm(node, {**p, "training": False, "running_mean": p["running_mean"],
                              "running_var": p["running_var"], "momentum": p["momentum"]}, source)


def _global_avg_pool(node, p, source):
    """adaptive_avg_pool to output size 1 everywhere: a mean over the spatial dims, kept (PyTorch computes it
    with mean() too). Other output sizes are kfuse/kernels/window.py's."""
    from kfuse.kernels.window import global_mean_dims
    dims = global_mean_dims(node)
    if dims is None:
        raise Unsupported("to output sizes other than 1 (a pooling kernel's job, not a reduction's)")
    return Spec("sum", source, dims, True, row="(float)(s.s / n)")


_PARSERS = {
    "aten.sum.dim_IntList": _plain("sum", "(float)s.s"),
    "aten.sum.default": _plain("sum", "(float)s.s", all_dims=True),
    "aten.mean.dim": _mean(),
    "aten.mean.default": _mean(all_dims=True),
    "aten.prod.dim_int": _plain("prod", "(float)s.p"),
    "aten.prod.default": _plain("prod", "(float)s.p", all_dims=True),
    "aten.amax.default": _plain("max", "s.m"),
    "aten.amin.default": _plain("min", "s.m"),
    "aten.max.default": _plain("max", "s.m", all_dims=True),
    "aten.min.default": _plain("min", "s.m", all_dims=True),
    "aten.max.dim": _ext_dim("max"),
    "aten.min.dim": _ext_dim("min"),
    "aten.argmax.default": _argext("argmax"),
    "aten.argmin.default": _argext("argmin"),
    "aten.var.dim": _var(False),
    "aten.var.correction": _var(False),
    "aten.std.dim": _var(True),
    "aten.std.correction": _var(True),
    "aten.softmax.int": _softmax(False),
    "aten._softmax.default": _softmax(False),
    "aten.log_softmax.int": _softmax(True),
    "aten._log_softmax.default": _softmax(True),
    "aten.logsumexp.default": _logsumexp,
    "aten.cross_entropy_loss.default": _cross_entropy,
    "aten.cosine_similarity.default": _cosine_similarity,
    "aten.triplet_margin_loss.default": _triplet_margin_loss,
    "aten.adaptive_avg_pool1d.default": _global_avg_pool,
    "aten.adaptive_avg_pool2d.default": _global_avg_pool,
    "aten.adaptive_avg_pool3d.default": _global_avg_pool,
    "aten._adaptive_avg_pool2d.default": _global_avg_pool,
    "aten._adaptive_avg_pool3d.default": _global_avg_pool,
    "aten.linalg_vector_norm.default": _vector_norm,
    "aten.layer_norm.default": _layer_norm,
    "aten.rms_norm.default": _rms_norm,
    "aten.group_norm.default": _group_norm,
    "aten.instance_norm.default": _instance_norm,
    "aten.batch_norm.default": _batch_norm,
    # the forms a decomposition (run_decompositions) leaves
    "aten.native_layer_norm.default": _first_item_only(_layer_norm),
    "aten.native_group_norm.default": _first_item_only(_native_group_norm),
    "aten._native_batch_norm_legit_no_training.default": _first_item_only(_native_batch_norm_eval),
}

EXPANDS = {"aten.expand.default", "aten.expand_as.default"}


# Reductions whose value over one element is that element, bit for bit, in kfuse's kernels as in eager's: a sum, a
# mean (x / 1), an extreme (its index 0), a logsumexp (x + log(exp(x - x)) = x + 0).
IDENTITY_ON_ONE = {"aten.sum.dim_IntList", "aten.sum.default", "aten.mean.dim", "aten.mean.default",
                   "aten.amax.default", "aten.amin.default", "aten.max.default", "aten.min.default",
                   "aten.max.dim", "aten.min.dim", "aten.logsumexp.default"}


def reduces_single_elements(node: torch.fx.Node) -> bool:
    """A reduction kfuse fuses whose reduced dims all have length 1: its kernel computes eager's bits (the planner
    may fuse it where a TF32 call reads it, or under eager's rounding: max, mean and logsumexp over a dim that an
    earlier sum kept, 18_Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp)."""
    if str(node.target) not in IDENTITY_ON_ONE:
        return False
    try:
        spec = spec_for(node)
    except Exception:  # noqa: BLE001 - not a reduction kfuse fuses
        return False
    shape = _shape(spec.source)
    return (shape is not None and bool(spec.dims) and spec.groups is None
            and all(shape[d] == 1 for d in spec.dims))


def is_fusable_reduction(node: torch.fx.Node) -> bool:
    """A reduction kfuse plans as a kernel (its pointwise readers can join it)."""
    if str(node.target) not in _PARSERS:
        return False
    try:
        spec_for(node)
    except Exception:  # noqa: BLE001 - Unsupported, or an argument form the parser does not expect
        return False
    return True


def unfused_reason(node: torch.fx.Node) -> str | None:
    """Why a reduction stayed an ATen call (None when the node is not a reduction kfuse knows)."""
    if str(node.target) not in _PARSERS:
        return None
    try:
        spec_for(node)
    except Unsupported as err:
        return f"reduction {err}: kept as an ATen call"
    except Exception as err:  # noqa: BLE001 - a surprising argument form is a reason, not a crash
        return f"reduction with unexpected arguments ({type(err).__name__}: {err}): kept as an ATen call"
    return "reduction: kept as an ATen call"


# --------------------------------------------------------------------------------------------------------------
# Planning


@dataclass
class ReduceKernel:
    name: str
    spec: Spec
    core: torch.fx.Node
    items: dict[int, torch.fx.Node]                  # getitem nodes of a (values, indices) result
    prologue: list[torch.fx.Node]                    # pointwise ops computing the source, source's shape
    row_nodes: list[torch.fx.Node]                   # pointwise ops over the reduced shape
    full_nodes: list[torch.fx.Node]                  # pointwise ops (and expands) over the source's shape
    operands: list[tuple[str, str]] = field(default_factory=list)   # (value name, kind: full / row / channel)
    row_outputs: list[torch.fx.Node] = field(default_factory=list)
    index_outputs: list[torch.fx.Node] = field(default_factory=list)
    full_outputs: list[torch.fx.Node] = field(default_factory=list)
    bias: tuple[str, str] | None = None   # (convolution output, its bias): added to it as it is read, per channel

    @property
    def value_node(self) -> torch.fx.Node | None:
        """The node carrying the reduction's row value (None for normalise ops and pure arg-reductions)."""
        if self.spec.full is not None or self.spec.row is None:
            return None
        return self.items.get(0) if self.items else self.core

    @property
    def full_node(self) -> torch.fx.Node | None:
        """The node carrying a normalise op's full-shape value (item 0 of a native_* tuple)."""
        if self.spec.full is None:
            return None
        return self.items.get(0) if self.items else self.core

    @property
    def index_node(self) -> torch.fx.Node | None:
        if self.spec.index is None:
            return None
        return self.items.get(1) if self.items else self.core

    @property
    def nodes(self) -> list[torch.fx.Node]:
        members = self.prologue + [self.core] + self.row_nodes + self.full_nodes
        return sorted(members, key=_position)

    @property
    def ops(self) -> list[str]:
        moved = [f"kfuse.bias_of_{self.bias[0]}"] if self.bias else []
        return moved + [str(n.target) for n in self.nodes]

    @property
    def outputs(self) -> list[torch.fx.Node]:
        return self.row_outputs + self.index_outputs + self.full_outputs


def _position(node: torch.fx.Node) -> int:
    return _ORDER.get(node, 1 << 60)


_ORDER: dict[torch.fx.Node, int] = {}


def fuse_reductions(steps: list, nodes: list[torch.fx.Node], epochs: dict) -> list:
    """Replace reduction library calls (with the pointwise kernels around them) by ReduceKernel steps."""
    _ORDER.clear()
    _ORDER.update({n: i for i, n in enumerate(nodes)})
    kernel_of = {n: s for s in steps if isinstance(s, FusedKernel) for n in s.nodes}
    expands = {s.node: s for s in steps if isinstance(s, LibraryCall) and str(s.node.target) in EXPANDS}
    used: set[int] = set()
    made: list[tuple[ReduceKernel, list]] = []
    for step in steps:
        if (not isinstance(step, LibraryCall) or str(step.node.target) not in _PARSERS
                or (step.eager_bits and not reduces_single_elements(step.node))):
            continue
        try:
            spec = spec_for(step.node)
        except Exception:  # noqa: BLE001 - stays an ATen call; codegen lists the reason
            continue
        found = _grow(step.node, spec, kernel_of, expands, epochs, used)
        if found is None:
            continue
        kernel, pieces = found
        items = set(kernel.items.values())
        absorbed = [step] + pieces + [s for s in steps if isinstance(s, TupleItem) and s.node in items]
        used |= {id(s) for s in absorbed}
        made.append((kernel, absorbed))

    calls = {s.node.name: s for s in steps if isinstance(s, LibraryCall)}
    for kernel, _ in made:
        _take_conv_bias(kernel, calls)
    replace: dict[int, ReduceKernel] = {}
    drop: set[int] = set()
    for kernel, absorbed in made:
        last = max(absorbed, key=lambda s: _position(_step_node(s)))
        replace[id(last)] = kernel
        drop |= {id(s) for s in absorbed}
    out = []
    for step in steps:
        if id(step) in replace:
            out.append(replace[id(step)])
        elif id(step) not in drop:
            out.append(step)
    return out


def _step_node(step) -> torch.fx.Node:
    return step.result if isinstance(step, FusedKernel) else step.node


def _take_conv_bias(k: ReduceKernel, calls: dict[str, LibraryCall]) -> None:
    """A batched convolution read only where this kernel computes its source (the prologue, or the reduction
    itself) gives the kernel its bias: cuDNN adds a bias in a pass of its own (a full read and write of the
    output), the kernel adds it as it reads the output, one per-channel value."""
    readers = set(k.prologue) | ({k.core} if not k.prologue else set())
    for name, kind in k.operands:
        call = calls.get(name)
        if kind != "full" or call is None or call.bias_moved or call.eager_bits:
            continue
        bias = movable_bias(call.node)
        if bias is None or _shape(call.node) != _shape(k.spec.source) or not set(call.node.users) <= readers:
            continue
        k.bias = (name, bias.name)
        k.operands.append((bias.name, "channel"))
        call.bias_moved = True
        return


def _shape(node) -> tuple:
    meta = tensor_meta(node)
    return tuple(meta.shape) if meta is not None else None


def _row_broadcast_ok(row_shape: tuple, full_shape: tuple, dims: list[int]) -> bool:
    """Does a value of `row_shape` broadcast against the source's shape as one value per row?"""
    if len(row_shape) > len(full_shape):
        return False
    padded = (1,) * (len(full_shape) - len(row_shape)) + tuple(row_shape)
    for d, (r, f) in enumerate(zip(padded, full_shape)):
        want = 1 if d in dims else f
        if r != want and f != 1:
            return False
    return True


def _grow(core, spec: Spec, kernel_of: dict, expands: dict, epochs: dict, used: set):
    """The largest valid kernel around the reduction `core`: (ReduceKernel, absorbed steps) or None."""
    full_shape = _shape(spec.source)
    items = {}
    if (spec.index is not None and spec.row is not None) or spec.first_item:
        items = {int(u.args[1]): u for u in core.users}
    epoch = epochs.get(core)

    kernel = ReduceKernel("", spec, core, items, [], [], [])
    value = kernel.value_node
    row_shape = _shape(value) if value is not None else None

    # Pieces, in the order they may be added: each is (level, FusedKernel or expand step).
    def grow(with_prologue: bool):
        pieces = []
        members: dict[torch.fx.Node, str] = {core: "core"}
        for n in items.values():
            members[n] = "core"
        if value is not None:
            members[value] = "row" if spec.total is None else "core"
        if spec.full is not None:
            members[kernel.full_node] = "full"
        if with_prologue:
            k = kernel_of.get(spec.source)
            if (k is None or id(k) in used or k.result is not spec.source or _shape(k.result) != full_shape
                    or any(epochs.get(n) != epoch for n in k.nodes)):
                return None
            pieces.append(("pro", k))
            for n in k.nodes:
                members[n] = "pro"
        changed = True
        while changed:
            changed = False
            for m, level in list(members.items()):
                if level not in ("row", "full", "pro", "expand"):
                    continue
                for u in m.users:
                    if u in members:
                        continue
                    k = kernel_of.get(u)
                    if k is not None and level != "pro" and _feeds_only_reductions(k):
                        continue  # the next reduction takes it as its prologue: no extra full-size write
                    if k is not None and id(k) not in used and all(n not in members for n in k.nodes):
                        lvl = _piece_level(k, members, row_shape, full_shape, spec.dims, epoch, epochs)
                        if lvl is None:
                            continue
                        pieces.append((lvl, k))
                        for n in k.nodes:
                            members[n] = lvl
                        changed = True
                    elif u in expands and level == "row" and epochs.get(u) == epoch:
                        if _shape(u) == full_shape and _row_broadcast_ok(_shape(m), full_shape, spec.dims):
                            pieces.append(("expand", expands[u]))
                            members[u] = "expand"
                            changed = True
        return pieces

    best = None
    for with_prologue in (True, False):
        pieces = grow(with_prologue)
        if pieces is None:
            continue
        for n in range(len(pieces), -1, -1):
            candidate = _build(kernel, pieces[:n], full_shape, row_shape)
            if candidate is not None:
                if best is None or len(candidate[1]) > len(best[1]):
                    best = candidate
                break
    return best


def _feeds_only_reductions(k: FusedKernel) -> bool:
    users = list(k.result.users)
    if not users:
        return False
    for u in users:
        try:
            if str(u.target) not in _PARSERS or spec_for(u).source is not k.result:
                return False
        except Exception:  # noqa: BLE001 - not a reduction kfuse fuses
            return False
    return True


def _piece_level(k: FusedKernel, members: dict, row_shape, full_shape, dims, epoch, epochs) -> str | None:
    if any(epochs.get(n) != epoch for n in k.nodes):
        return None
    shape = _shape(k.result)
    args = [a for n in k.nodes for a in _node_args(n) if isinstance(a, torch.fx.Node) and a in members]
    if row_shape is not None and shape == row_shape and all(members[a] == "row" for a in args):
        return "row"
    if shape == full_shape:
        for a in args:
            lvl = members[a]
            if lvl == "row":
                if not _row_broadcast_ok(_shape(a), full_shape, dims):
                    return None
            elif lvl not in ("full", "pro", "expand"):
                return None
        return "full"
    return None


def _node_args(node) -> list:
    flat = []
    for a in list(node.args) + list(node.kwargs.values()):
        flat.extend(a if isinstance(a, (list, tuple)) else [a])
    return flat


def _build(template: ReduceKernel, pieces: list, full_shape, row_shape):
    """The kernel made of the core and `pieces`, or None when some value needed outside cannot be written or
    would be needed before the kernel runs."""
    k = ReduceKernel("", template.spec, template.core, dict(template.items), [], [], [])
    level: dict[torch.fx.Node, str] = {template.core: "core"}
    for n in template.items.values():
        level[n] = "core"
    value, index = k.value_node, k.index_node
    if value is not None:
        level[value] = "row"
    if index is not None:
        level[index] = "index"
    if k.spec.full is not None:
        level[k.full_node] = "full"
    for lvl, piece in pieces:
        for n in (piece.nodes if isinstance(piece, FusedKernel) else [piece.node]):
            level[n] = lvl
            {"pro": k.prologue, "row": k.row_nodes, "full": k.full_nodes, "expand": k.full_nodes}[lvl].append(n)
    last = max(_position(n) for n in level)
    for n, lvl in level.items():
        outside = [u for u in n.users if u not in level]
        if not outside:
            continue
        if any(u.op != "output" and _position(u) <= last for u in outside):
            return None
        if lvl == "row":
            k.row_outputs.append(n)
        elif lvl == "index":
            k.index_outputs.append(n)
        elif lvl == "full" and n not in k.prologue:
            k.full_outputs.append(n)
        else:
            return None  # a prologue value, an expand or a whole tuple needed outside
    if not k.outputs:
        return None
    for lst in (k.prologue, k.row_nodes, k.full_nodes, k.row_outputs, k.index_outputs, k.full_outputs):
        lst.sort(key=_position)
    if not _collect_operands(k, level):
        return None
    return k, [p for _, p in pieces]


def _collect_operands(k: ReduceKernel, level: dict):
    ops_: list[tuple[str, str]] = []

    def add(name, kind):
        if (name, kind) not in ops_:
            ops_.append((name, kind))

    if not k.prologue:
        add(k.spec.source.name, "full")
    for n in k.prologue + k.full_nodes + k.row_nodes:
        if str(n.target) in EXPANDS:
            continue
        kind = "row" if level[n] == "row" else "full"
        for a in _node_args(n):
            if isinstance(a, torch.fx.Node) and a not in level:
                add(a.name, kind)
    for role, (node, kind) in k.spec.operands.items():
        add(node.name, kind)
    k.operands = ops_
    return any(kind == "full" for _, kind in ops_)


def kernel_name(kernel: ReduceKernel) -> str:
    parts: list[str] = ["bias"] if kernel.bias else []
    for node in kernel.nodes:
        part = str(node.target).split(".")[1]
        if not parts or parts[-1] != part:
            parts.append(part)
    name = "fused_" + "_".join(p.lstrip("_") for p in parts)
    return name if len(name) <= 60 else name[:60].rstrip("_")


# --------------------------------------------------------------------------------------------------------------
# Printing: one set of phase functions (host + device), then CUDA kernels or a CPU loop, and the host wrapper


@dataclass
class ReduceSources:
    helpers: str      # REDUCE_PRELUDE, (CUDA) REDUCE_DEVICE_RUNTIME, each kernel's types and policy struct
    decls: str        # geometry and argument structs (host and device)
    device: str       # the shared loops (CUDA kernels and launch, or the CPU loop), each kernel's entry points
    host: str         # ATen-side wrappers
    expressions: str  # the pointwise expressions used, for ops' prelude selection


def _reducer(spec: Spec) -> Reducer:
    if spec.reducer.startswith("two_dists:"):
        base = REDUCERS["two_dists"]
        return Reducer(base.fields, base.update.replace("EPS", spec.reducer.split(":")[1]), base.merge)
    if spec.reducer.startswith("powsum:"):
        base = REDUCERS["powsum"]
        return Reducer(base.fields, base.update.replace("P", spec.reducer.split(":")[1]), base.merge)
    return REDUCERS[spec.reducer]


def _slot(j: int) -> str:
    """The row cache's float4 of the j-th cached view (the rows kernel: `cache` at this position, `stride` apart)."""
    return f"cache[{j} * stride]" if j else "cache[0]"


def _render(node: torch.fx.Node, names: dict[str, str]) -> str:
    if str(node.target) in EXPANDS:
        return names[node.args[0].name]
    return ops.render_node(node, names)


class _Printer:
    def __init__(self, k: ReduceKernel):
        self.k = k
        self.n = k.name
        self.spec = k.spec
        self.slot = {op: i for i, op in enumerate(k.operands)}
        self.nop = len(k.operands)
        self.nviews = self.nop + len(k.full_outputs)
        self.red = _reducer(k.spec)

    @property
    def light_level(self) -> int:
        """The policy's LIGHT (REDUCE_DRIVERS_CUDA: reduce_cols_light): 0 for a reduction with a full output, a
        prologue's second value, several views or a heavy state; else 2 for a one-field state, 1 otherwise."""
        light = (not self.k.full_outputs and not self.spec.extra and self.nviews == 1
                 and (len(self.red.fields) == 1 or self.red.light))
        return (2 if len(self.red.fields) == 1 else 1) if light else 0

    def operand(self, name: str, kind: str | None = None) -> int:
        for (n, kd), i in self.slot.items():
            if n == name and (kind is None or kd == kind):
                return i
        raise KeyError(name)

    def full_operand(self, name: str) -> int:
        for kind in ("full", "channel"):
            if (name, kind) in self.slot:
                return self.slot[(name, kind)]
        raise KeyError(name)

    # -- element phases ----------------------------------------------------------------------------------
    def _elem_offsets(self, used: list[int]) -> str:
        views = "".join(f", {k}" for k in used)
        return (f"    index_t e[{self.nviews}];\n"
                f"    kf::reduced_offsets<index_t{views}>(A.v, g, r, e);\n")

    def _source_lines(self, names: dict[str, str]) -> tuple[list[str], list[int]]:
        """Loads and prologue SSA for one element; returns the lines and the views they read."""
        k, lines, used = self.k, [], []
        needed = [self.full_operand(a.name) for n in k.prologue for a in _node_args(n)
                  if isinstance(a, torch.fx.Node) and a not in k.prologue]
        if not k.prologue:
            needed.append(self.full_operand(self.spec.source.name))
        needed += [self.full_operand(x.name) for x in self.spec.extra]
        for i in needed:
            if i not in used:
                used.append(i)
        for i in used:
            names[k.operands[i][0]] = f"a{i}"
        if k.bias is not None and self.full_operand(k.bias[0]) in used:  # the convolution's bias, as it is read
            i, j = self.full_operand(k.bias[0]), self.operand(k.bias[1], "channel")
            used.append(j)
            names[k.bias[0]] = f"(a{i} + a{j})"
        for node in k.prologue:
            lines.append(f"    const float v_{node.name} = {_render(node, names)};  // {node.target}")
            names[node.name] = f"v_{node.name}"
        return lines, used

    def _loads(self, used: list[int], row_only=False) -> str:
        if row_only:
            return "".join(f"    const float a{i} = A.v[{i}].data[ob[{i}]];\n" for i in used)
        return "".join(f"    const float a{i} = A.v[{i}].data[ob[{i}] + e[{i}]];\n" for i in used)

    def accumulate(self) -> str:
        names: dict[str, str] = {}
        lines, used = self._source_lines(names)
        self.acc_views = used
        source = names[self.spec.source.name]
        params = "".join(f", float a{i}" for i in used)
        args = "".join(f", a{i}" for i in used)
        body = "\n".join(lines)
        second = "".join(f"    const float w{j} = {names[x.name]};\n" for j, x in enumerate(self.spec.extra))
        gather = ""
        if "SOURCE_AT(" in (self.spec.row or ""):  # the source's value at one reduced index (a class target)
            gather = (f"template <typename index_t>\n"
                      f"KF_INLINE float {self.n}_source_at(const {self.n}_args& A, const kf::RGeom& g, "
                      f"const index_t* ob, index_t r) {{\n"
                      f"{self._elem_offsets(used)}{self._loads(used)}{body}\n    return {source};\n}}\n\n")
        return (gather + f"KF_INLINE void {self.n}_acc_body({self.n}_state& s, int64_t r{params}) {{\n"
                f"    (void)r;\n{body}\n    const float v = {source};\n{second}    {self.red.update}\n}}\n\n"
                f"template <typename index_t>\n"
                f"KF_INLINE void {self.n}_accumulate(const {self.n}_args& A, const kf::RGeom& g, const index_t* ob, "
                f"index_t r, {self.n}_state& s) {{\n"
                f"{self._elem_offsets(used)}{self._loads(used)}"
                f"    {self.n}_acc_body(s, (int64_t)r{args});\n}}\n")

    def full(self) -> str:
        k, spec = self.k, self.spec
        names: dict[str, str] = {}
        if k.value_node is not None:
            names[k.value_node.name] = f"rv.v_{k.value_node.name}"
        for n in k.row_nodes:
            names[n.name] = f"rv.v_{n.name}"
        lines, used = self._source_lines(names)
        extra: list[int] = []
        if spec.full is not None:
            expr = spec.full
            constants = dict(self._row_constants())
            for role, (node, kind) in spec.operands.items():
                if "{" + role + "}" not in expr:
                    continue
                i = self.slot[(node.name, kind)]
                if role in constants:  # read once a row (finish), not once an element
                    expr = expr.replace("{" + role + "}", f"rv.c{i}")
                    continue
                extra.append(i)
                expr = expr.replace("{" + role + "}", f"a{i}")
            lines.append(f"    const float x = {names[spec.source.name]};")
            full = k.full_node
            lines.append(f"    const float v_{full.name} = {expr};  // {k.core.target}")
            names[full.name] = f"v_{full.name}"
        for n in k.full_nodes:
            for a in _node_args(n):
                if isinstance(a, torch.fx.Node) and a.name not in names:
                    i = self.full_operand(a.name)
                    extra.append(i)
                    names[a.name] = f"a{i}"
            lines.append(f"    const float v_{n.name} = {_render(n, names)};  // {n.target}")
            names[n.name] = f"v_{n.name}"
        views = list(dict.fromkeys(used + [i for i in extra if i not in used]))
        self.full_views = views
        outs = list(range(self.nop, self.nviews))
        params = "".join(f", float a{i}" for i in views)
        args = "".join(f", a{i}" for i in views)
        results = "".join(f"    y[{j}] = {names[n.name]};\n" for j, n in enumerate(k.full_outputs))
        writes = "".join(f"    A.v[{self.nop + j}].data[ob[{self.nop + j}] + e[{self.nop + j}]] = y[{j}];\n"
                         for j in range(len(k.full_outputs)))
        return (f"KF_INLINE void {self.n}_full_body(const {self.n}_row& rv, float* y{params}) {{\n"
                f"    (void)rv;\n" + "\n".join(lines) + "\n" + results + "}\n\n"
                f"template <typename index_t>\n"
                f"KF_INLINE void {self.n}_full(const {self.n}_args& A, const kf::RGeom& g, const index_t* ob, "
                f"index_t r, const {self.n}_row& rv) {{\n"
                f"{self._elem_offsets(views + outs)}{self._loads(views)}"
                f"    float y[{len(k.full_outputs)}];\n    {self.n}_full_body(rv, y{args});\n{writes}}}\n")

    @property
    def cached(self) -> list[int]:
        """The views the full phase reads again after the reduction read them (after accumulate() and full()):
        held in shared memory by launches that can (the rows kernel); none where the statistics are operands
        (eval-mode batch norm reads its input once)."""
        if not self.k.full_outputs or self.spec.skip_accumulate:
            return []
        return [i for i in self.acc_views if i in self.full_views]

    def vec4(self) -> str:
        """CUDA: 4 neighbouring elements along the innermost reduced dim at once (float4 loads and stores), for
        rows whose views are contiguous (or constant) there and aligned; with several reduced dims the inner
        size must be a multiple of 4, so no group of 4 crosses a run."""
        n, k = self.n, self.k
        views = list(dict.fromkeys(self.acc_views + (self.full_views if k.full_outputs else [])))
        views += list(range(self.nop, self.nviews))
        checks = "".join(f"    kfr_vec_head(A.v[{i}], g, ob[{i}], r0, head);\n" for i in views)
        out = [f"""
// elements [r0, r0 + head) one at a time, then float4 groups; -1: this row has no float4 path
template <typename index_t>
__device__ __forceinline__ int {n}_vec_head(const {n}_args& A, const kf::RGeom& g, const index_t* ob, index_t r0) {{
    if (g.rnd < 1 || (g.rnd > 1 && g.rsz[g.rnd - 1] % 4 != 0)) return -1;
    int head = -2;
{checks}    return head == -2 ? 0 : head;
}}
"""]
        fields = "".join(f" float4 q{i};" for i in self.acc_views)
        out.append(f"// one group's float4s, loaded ahead of their use (kf::pipelined)\n"
                   f"struct {n}_quad {{{fields} }};\n"
                   f"template <typename index_t>\n__device__ __forceinline__ {n}_quad {n}_load4(const {n}_args& A, "
                   f"const kf::RGeom& g, const index_t* ob, index_t r) {{\n"
                   f"{self._elem_offsets(self.acc_views)}    {n}_quad Q;\n"
                   + "".join(f"    Q.q{i} = kfr_load4(A.v[{i}], g, ob[{i}] + e[{i}]);\n" for i in self.acc_views)
                   + "    return Q;\n}\n")
        loads = "".join(f"    const float4 q{i} = Q.q{i};\n" for i in self.acc_views)
        if self.cached:
            stores = " ".join(f"{_slot(j)} = q{i};" for j, i in enumerate(self.cached))
            loads += f"    if (cache != nullptr) {{ {stores} }}\n"
        if self.red.update4 is None or self.spec.extra:
            lanes = 4 if self.red.partials else 1
            calls = "".join(f"    {n}_acc_body(part[{j % lanes}], (int64_t)r + {j}"
                            f"{''.join(f', q{i}.{c}' for i in self.acc_views)});\n" for j, c in enumerate("xyzw"))
            what = ("one partial state per lane of the float4: four independent chains (more in flight, and a "
                    "product's or\n// a sum's rounding spread over four short chains rather than one long one)"
                    if lanes == 4 else
                    "the four values into one state, in order (this reducer's merge costs more than its updates)")
        else:
            names: dict[str, str] = {}
            lines, used = self._source_lines(names)
            params = ", ".join(f"float a{i}" for i in used)
            out.append(f"KF_INLINE float {n}_value({params}) {{\n" + "".join(x + "\n" for x in lines)
                       + f"    return {names[self.spec.source.name]};\n}}\n")
            values = ", ".join(f"v{j} = {n}_value({', '.join(f'q{i}.{c}' for i in used)})"
                               for j, c in enumerate("xyzw"))
            calls = f"    const float {values};\n    {n}_state& s = *part;\n    {self.red.update4}\n"
            what = "the four values folded into one state at once"
        out.append(f"// {what}\n"
                   f"template <typename index_t>\n__device__ __forceinline__ void {n}_accumulate4(const {n}_quad& Q, "
                   f"index_t r, {n}_state* part, float4* cache, index_t stride) {{\n"
                   f"    (void)r; (void)cache; (void)stride;\n{loads}{calls}}}\n")
        if k.full_outputs:
            out.append(self._full_rows4())
        return "".join(out)

    def _full_quad(self, read, row) -> tuple[str, str, str, str]:
        """A four-element full phase's parts (both kernels): the quad's fields, its loads (`read(i)`: view i's
        float4) and the outputs' offsets, the full body per lane (`row(j)`: lane j's row values) and a float4 store
        per output."""
        n = self.n
        outs = list(range(self.nop, self.nviews))
        fields = "".join(f" float4 q{i};" for i in self.full_views) + "".join(f" index_t e{i};" for i in outs)
        loads = "".join(f"    Q.q{i} = {read(i)};\n" for i in self.full_views)
        loads += "".join(f"    Q.e{i} = e[{i}];\n" for i in outs)
        calls = "".join(f"    {n}_full_body({row(j)}, y{c}{''.join(f', Q.q{i}.{c}' for i in self.full_views)});\n"
                        for j, c in enumerate("xyzw"))
        stores = "".join(f"    *reinterpret_cast<float4*>(A.v[{i}].data + ob[{i}] + Q.e{i}) = "
                         f"make_float4(yx[{j}], yy[{j}], yz[{j}], yw[{j}]);\n" for j, i in enumerate(outs))
        return fields, loads, calls, stores

    def _full_rows4(self) -> str:
        """The rows kernel's full phase for four neighbouring elements, in two steps (kf::pipelined issues the
        next group's loads before this group's stores): the float4 of each view read (from the row cache where the
        launch holds one) with the outputs' offsets, then the full body per lane and a float4 store per output."""
        n, nf = self.n, len(self.k.full_outputs)
        outs = list(range(self.nop, self.nviews))
        slot = {i: j for j, i in enumerate(self.cached)}

        def read(i):
            load = f"kfr_load4(A.v[{i}], g, ob[{i}] + e[{i}])"
            return f"cache != nullptr ? {_slot(slot[i])} : {load}" if i in slot else load
        fields, loads, calls, stores = self._full_quad(read, lambda j: "rv")
        return (f"template <typename index_t>\nstruct {n}_full_quad {{{fields} }};\n"
                f"template <typename index_t>\n__device__ __forceinline__ {n}_full_quad<index_t> {n}_full_load4("
                f"const {n}_args& A, const kf::RGeom& g, const index_t* ob, index_t r, const float4* cache, "
                f"index_t stride) {{\n    (void)cache; (void)stride;\n"
                f"{self._elem_offsets(self.full_views + outs)}    {n}_full_quad<index_t> Q;\n{loads}    return Q;\n}}\n"
                f"template <typename index_t>\n__device__ __forceinline__ void {n}_full4(const {n}_args& A, "
                f"const index_t* ob, const {n}_full_quad<index_t>& Q, const {n}_row& rv) {{\n"
                f"    float yx[{nf}], yy[{nf}], yz[{nf}], yw[{nf}];\n{calls}{stores}}}\n")

    def _full_cols4(self) -> str:
        """The column kernel's full phase for four neighbouring rows, in two steps like the rows kernel's
        (_full_rows4): a float4 load per view with the outputs' offsets, then the full body per lane with that row's
        values and a float4 store per full output."""
        n, nf = self.n, len(self.k.full_outputs)
        outs = list(range(self.nop, self.nviews))
        fields, loads, calls, stores = self._full_quad(lambda i: f"kfr_load_cols4(A.v[{i}], g, ob[{i}] + e[{i}])",
                                                       lambda j: f"rv[{j}]")
        return (f"template <typename index_t>\nstruct {n}_full_cols_quad {{{fields} }};\n"
                f"template <typename index_t>\n__device__ __forceinline__ {n}_full_cols_quad<index_t> "
                f"{n}_full_load_cols4(const {n}_args& A, const kf::RGeom& g, const index_t* ob, index_t r) {{\n"
                f"{self._elem_offsets(self.full_views + outs)}    {n}_full_cols_quad<index_t> Q;\n{loads}"
                f"    return Q;\n}}\n"
                f"template <typename index_t>\n__device__ __forceinline__ void {n}_full_cols4(const {n}_args& A, "
                f"const index_t* ob, const {n}_full_cols_quad<index_t>& Q, const {n}_row* rv) {{\n"
                f"    float yx[{nf}], yy[{nf}], yz[{nf}], yw[{nf}];\n{calls}{stores}}}\n")

    def cols4(self) -> str:
        """CUDA, column mapping: four neighbouring rows per thread, one float4 per view along the contiguous kept
        dim (a warp reads 512 bytes per load, and a thread carries four independent states)."""
        n, k = self.n, self.k
        fields = "".join(f" float4 q{i};" for i in self.acc_views)
        loads = "".join(f"    Q.q{i} = kfr_load_cols4(A.v[{i}], g, ob[{i}] + e[{i}]);\n" for i in self.acc_views)
        calls = "".join(f"    {n}_acc_body(s[{j}], (int64_t)r{''.join(f', Q.q{i}.{c}' for i in self.acc_views)});\n"
                        for j, c in enumerate("xyzw"))
        out = [f"// one step's float4s across four rows, loaded ahead of their use (kf::reduce_cols_body)\n"
               f"struct {n}_cols_quad {{{fields} }};\n"
               f"template <typename index_t>\n__device__ __forceinline__ {n}_cols_quad {n}_load_cols4("
               f"const {n}_args& A, const kf::RGeom& g, const index_t* ob, index_t r) {{\n"
               f"{self._elem_offsets(self.acc_views)}    {n}_cols_quad Q;\n{loads}    return Q;\n}}\n"
               f"template <typename index_t>\n__device__ __forceinline__ void {n}_accumulate_cols4("
               f"const {n}_cols_quad& Q, index_t r, {n}_state* s) {{\n    (void)r;\n{calls}}}\n"]
        if k.full_outputs:
            out.append(self._full_cols4())
        return "".join(out)

    def cols4_views(self) -> list[int]:
        """The views the four-rows column kernel reads or writes a float4 at a time."""
        views = self.acc_views + (self.full_views if self.k.full_outputs else [])
        return list(dict.fromkeys(views + list(range(self.nop, self.nviews))))

    # -- row phase ---------------------------------------------------------------------------------------
    def _row_constants(self) -> list[tuple[str, int]]:
        """(role, view) of the full expression's operands that hold one value a row: a norm's per-channel weight and
        bias where the channels are kept (batch and instance norm; a group norm reduces over its channels). Their
        views are as_channel's, stride 0 along every other dim, so each row reads one value: finish() reads it into
        the row, once, where the full phase read it again with every element (its float4s in the vector loops: a
        load, the offset arithmetic and a stride-0 test per view per float4)."""
        spec = self.spec
        if spec.full is None or spec.groups is not None or 1 in spec.dims:
            return []
        return [(role, self.slot[(node.name, kind)]) for role, (node, kind) in spec.operands.items()
                if kind == "channel" and "{" + role + "}" in spec.full]

    def row_struct(self) -> str:
        k = self.k
        fields = [f"    kf_acc {name};\n" for name, _ in self.spec.stats]
        fields += [f"    float c{i};\n" for _, i in self._row_constants()]
        if k.value_node is not None:
            fields.append(f"    float v_{k.value_node.name};\n")
        fields += [f"    float v_{n.name};\n" for n in k.row_nodes]
        if k.index_node is not None:
            fields.append(f"    int64_t i_{k.index_node.name};\n")
        if self.spec.row_weight is not None:
            fields.append("    float weight;\n")
        if not fields:
            fields.append("    int unused;\n")
        return f"struct {self.n}_row {{\n{''.join(fields)}}};\n"

    def _channel_refs(self, expr: str, at: str) -> str:
        for role, (node, kind) in self.spec.operands.items():
            i = self.slot[(node.name, kind)]
            if kind == "index":  # an int64 value per row (a class target), read through the float view's offsets
                expr = expr.replace("{" + role + "}", f"reinterpret_cast<const int64_t*>(A.v[{i}].data)[ob[{i}]]")
                continue
            expr = expr.replace("{" + role + "@}", f"A.v[{i}].data[ob[{i}]{at}]")
            expr = expr.replace("{" + role + "}", f"A.v[{i}].data[ob[{i}]{at}]")
        return expr

    def finish(self) -> str:
        k, spec = self.k, self.spec
        lines = [f"    rv.{name} = {self._channel_refs(expr, '')};" for name, expr in spec.stats]
        lines += [f"    rv.c{i} = A.v[{i}].data[ob[{i}]];" for _, i in self._row_constants()]
        names: dict[str, str] = {}
        if k.value_node is not None:
            row = self._channel_refs(spec.row, "").replace("SOURCE_AT(", f"{self.n}_source_at<index_t>(A, g, ob, ")
            lines.append(f"    rv.v_{k.value_node.name} = {row};")
            names[k.value_node.name] = f"rv.v_{k.value_node.name}"
        if k.index_node is not None:
            lines.append(f"    rv.i_{k.index_node.name} = {spec.index};")
        if spec.row_weight is not None:
            lines.append(f"    rv.weight = {self._channel_refs(spec.row_weight, '')};")
        for n in k.row_nodes:
            for a in _node_args(n):
                if isinstance(a, torch.fx.Node) and a.name not in names:
                    i = self.slot[(a.name, "row")]
                    lines.append(f"    const float a{i} = A.v[{i}].data[ob[{i}]];")
                    names[a.name] = f"a{i}"
            lines.append(f"    rv.v_{n.name} = {_render(n, names)};  // {n.target}")
            names[n.name] = f"rv.v_{n.name}"
        return (f"template <typename index_t>\n"
                f"KF_INLINE {self.n}_row {self.n}_finish(const {self.n}_args& A, const kf::RGeom& g, "
                f"const {self.n}_state& s, kf_acc n, const index_t* ob) {{\n    {self.n}_row rv;\n"
                f"    (void)n; (void)ob; (void)A; (void)g;\n"
                + "\n".join(lines) + "\n    return rv;\n}\n")

    def write_row(self) -> str:
        k = self.k
        lines = [f"    A.rowout[{j}][o] = rv.v_{n.name};" for j, n in enumerate(k.row_outputs)]
        lines += [f"    A.idxout[{j}][o] = rv.i_{n.name};" for j, n in enumerate(k.index_outputs)]
        if self.spec.row_weight is not None:
            lines.append(f"    A.rowout[{len(k.row_outputs)}][o] = rv.weight;")
        lines += [f"    {self._channel_refs(line, '')}" for line in self.spec.row_write]
        return (f"template <typename index_t>\n"
                f"KF_INLINE void {self.n}_write_row(const {self.n}_args& A, const {self.n}_state& s, "
                f"const {self.n}_row& rv, index_t o, const index_t* ob) {{\n"
                f"    (void)A; (void)s; (void)rv; (void)o; (void)ob;\n" + "\n".join(lines) + "\n}\n")

    def row_offsets(self) -> str:
        nv = self.nviews
        return (f"template <typename index_t>\n"
                f"KF_INLINE void {self.n}_row_offsets(const {self.n}_args& A, const kf::RGeom& g, index_t o, "
                f"index_t* ob) {{\n"
                f"    for (int k = 0; k < {nv}; ++k) ob[k] = 0;\n"
                f"    for (int d = g.ond - 1; d >= 0; --d) {{\n"
                f"        const index_t c = o % (index_t)g.osz[d];\n"
                f"        o /= (index_t)g.osz[d];\n"
                f"        for (int k = 0; k < {nv}; ++k) ob[k] += c * (index_t)A.v[k].os[d];\n"
                f"    }}\n}}\n")

    def state(self) -> str:
        fields = "".join(f"    {t} {name};\n" for t, name, _ in self.red.fields)
        return f"struct {self.n}_state {{\n{fields}}};\n"

    def state_functions(self) -> str:
        init = "".join(f" s.{name} = {value};" for _, name, value in self.red.fields)
        return (f"KF_INLINE {self.n}_state {self.n}_init() {{ {self.n}_state s;{init} return s; }}\n"
                f"KF_INLINE void {self.n}_merge({self.n}_state& a, const {self.n}_state& b) {{ {self.red.merge} }}\n")

    def helpers(self, target: str) -> str:
        """The kernel's state and row types, then its policy struct (what the shared drivers instantiate)."""
        return (f"// ---- {self.n}: {' -> '.join(self.k.ops)}\n" + self.state() + "\n" + self.row_struct()
                + "\n" + self.policy(target))

    def decls(self) -> str:
        nr, ni = len(self.k.row_outputs) + (self.spec.row_weight is not None), len(self.k.index_outputs)
        return (f"struct {self.n}_args {{\n    kf::RView v[{self.nviews}];\n"
                f"    float* rowout[{max(nr, 1)}];\n    int64_t* idxout[{max(ni, 1)}];\n}};\n")

    def policy(self, target: str) -> str:
        """`{n}_reduction`: the types, constants and per-element / per-row functions kf::reduce_rows, _cols,
        kf::reduce_launch (CUDA) and kf::reduce_run (CPU) are instantiated with (REDUCE_DRIVERS_CUDA,
        REDUCE_DRIVER_CPU). The functions are printed with the kernel's name as a prefix, which the struct drops (its
        types are `state`, `row` and `args` inside it)."""
        n, k = self.n, self.k
        parts = [self.state_functions(), self.row_offsets(), self.accumulate(), self.finish(), self.write_row()]
        if k.full_outputs:
            parts.append(self.full())
        if target == "cuda":
            views = dict.fromkeys([self.column_view()] + self.cols4_views())
            checks = " && ".join(f"kf::cols4_view_ok(A.v[{i}], g)" for i in views)
            parts += [self.vec4(), self.cols4(),
                      f"// the four-rows column kernel's float4 views allow it\n"
                      f"static bool cols4_ok(const {n}_args& A, const kf::RGeom& g) {{ return {checks}; }}\n"]
        body = re.sub(rf"\b{n}_(\w+)", r"\1", "\n".join(parts))  # (its types too: the struct names them)
        body = re.sub(r"(?m)^(KF_INLINE|__device__ __forceinline__) ", r"static \1 ", body)
        body = "\n".join(f"    {line}" if line.strip() else "" for line in body.strip("\n").split("\n"))
        has_full = bool(k.full_outputs)
        flag = lambda x: "true" if x else "false"  # noqa: E731
        constants = (f"    static constexpr int VIEWS = {self.nviews}, CACHED = {len(self.cached)}, "
                     f"COLUMN_VIEW = {self.column_view()}, LIGHT = {self.light_level};\n"
                     f"    static constexpr bool ACCUMULATES = {flag(not self.spec.skip_accumulate)}, "
                     f"PARTIALS = {flag(self.red.partials)}, HAS_FULL = {flag(has_full)};\n")
        return (f"// What {n} does per element and per row: the loops around it are the shared drivers'.\n"
                f"struct {n}_reduction {{\n    using args = {n}_args;\n    using state = {n}_state;\n"
                f"    using row = {n}_row;\n{constants}\n{body}\n}};\n")

    def cuda(self) -> str:
        """The kernel's entry points for the host file: the shared drivers instantiated with its policy."""
        n = self.n
        return (f"int64_t {n}_workspace(const {n}_args& A, const kf::RGeom& g, int sms) {{\n"
                f"    return kf::reduce_workspace<{n}_reduction>(A, g, sms);\n}}\n"
                f"void {n}_launch(const {n}_args& A, const kf::RGeom& g, bool small_index, int sms, void* ws, "
                f"cudaStream_t stream) {{\n"
                f"    kf::reduce_launch<{n}_reduction>(A, g, small_index, sms, ws, stream);\n}}\n")
    # -- host --------------------------------------------------------------------------------------------
    def host(self, target: str) -> str:
        k, spec, n = self.k, self.spec, self.n
        params = ", ".join(f"const at::Tensor& t{i}" for i in range(self.nop))
        fulls = ", ".join(f"t{i}" for i, (_, kind) in enumerate(k.operands) if kind == "full")
        rank = _rank(spec.source)
        if spec.groups is not None:
            dims_src = list(range(1, rank))     # unused for row shapes (norm layers have no row outputs)
        else:
            dims_src = spec.dims
        dims_text = ", ".join(str(d) for d in dims_src)
        view_dims = ", ".join(str(d) for d in spec.dims)
        keep = "true" if spec.keepdim else "false"
        lines = [f"    const std::vector<int64_t> S = kf::broadcast_shape({{{fulls}}});",
                 f"    const std::vector<int64_t> dims = {{{dims_text}}};",
                 f"    const std::vector<int64_t> view_dims = {{{view_dims}}};",
                 f"    const at::TensorOptions opts = t{self._first_full()}.options().dtype(at::kFloat);"]
        if spec.groups is not None:
            lines.append(f"    TORCH_CHECK(S[1] % {spec.groups} == 0, \"group_norm: channels not divisible by groups\");")
            split = f".unflatten(1, {{{spec.groups}, S[1] / {spec.groups}}})"
        else:
            split = ""
        lines.append("    std::vector<at::Tensor> views;")
        for i, (_, kind) in enumerate(k.operands):
            if kind == "full":
                view = f"t{i}.expand(S)"
            elif kind in ("row", "index"):
                view = f"kf::as_row(t{i}, S, dims, {keep})"
            else:
                view = f"kf::as_channel(t{i}, S)"
            lines.append(f"    views.push_back({view}{split});")
        outs = []
        for j, node in enumerate(k.full_outputs):
            lines.append(f"    at::Tensor f{j} = kf::alloc_like(t{self.column_view()}, S, opts);")
            lines.append(f"    views.push_back(f{j}{split});")
            outs.append(f"f{j}")
        lines += [f"    const std::vector<int64_t> kept = kf::kept_order(views, view_dims, {self.column_view()});",
                  f"    {n}_args A;", "    kf::RGeom g;", "    kf::reduce_geometry(views, view_dims, kept, g, A.v);"]
        for j, node in enumerate(k.row_outputs):
            lines.append(f"    at::Tensor r{j} = kf::row_output(S, dims, {keep}, kept, opts);"
                         + ("  // the rows' values, summed below" if spec.total else ""))
        if spec.row_weight is not None:
            lines.append(f"    at::Tensor weights = kf::row_output(S, dims, {keep}, kept, opts);"
                         "  // each row's weight in the mean")
        for j, node in enumerate(k.index_outputs):
            lines.append(f"    at::Tensor i{j} = kf::row_output(S, dims, {keep}, kept, opts.dtype(at::kLong));")
        lines += [f"    A.rowout[{j}] = r{j}.data_ptr<float>();" for j in range(len(k.row_outputs))]
        if spec.row_weight is not None:
            lines.append(f"    A.rowout[{len(k.row_outputs)}] = weights.data_ptr<float>();")
        lines += [f"    A.idxout[{j}] = i{j}.data_ptr<int64_t>();" for j in range(len(k.index_outputs))]
        if target == "cuda":
            lines += [
                "    if (g.rows > 0) {",
                "        const int sms = kf::sm_count(views[0].get_device());",
                f"        const int64_t bytes = {n}_workspace(A, g, sms);",
                "        at::Tensor ws = kf::empty({std::max<int64_t>(bytes, 1)}, opts.dtype(at::kByte));",
                f"        {n}_launch(A, g, kf::reduce_small_index(views, g), sms, ws.data_ptr(), "
                "c10::cuda::getCurrentCUDAStream());",
                "        C10_CUDA_KERNEL_LAUNCH_CHECK();",
                "    }",
            ]
        else:
            lines.append(f"    if (g.rows > 0) kf::reduce_run<{n}_reduction>(A, g);")
        if spec.total is not None:
            weights = "weights.data_ptr<float>()" if spec.row_weight is not None else "nullptr"
            stream = ", c10::cuda::getCurrentCUDAStream()" if target == "cuda" else ""
            lines += ["    at::Tensor total = kf::empty({}, opts);",
                      f"    kf::reduce_total(r0.data_ptr<float>(), {weights}, r0.numel(), "
                      f"{'true' if spec.total == 'mean' else 'false'}, total.data_ptr<float>(){stream});"]
            if target == "cuda":
                lines.append("    C10_CUDA_KERNEL_LAUNCH_CHECK();")
            lines.append("    r0 = total;")
        returned = [f"r{j}" for j in range(len(k.row_outputs))] + [f"i{j}" for j in range(len(k.index_outputs))] + outs
        lines.append(f"    return {{{', '.join(returned)}}};")
        return (f"\n// {n}: {' -> '.join(k.ops)}; outputs: {', '.join(o.name for o in k.outputs)}\n"
                f"std::vector<at::Tensor> {n}({params}) {{\n" + "\n".join(lines) + "\n}\n")

    def _first_full(self) -> int:
        return next(i for i, (_, kind) in enumerate(self.k.operands) if kind == "full")

    def column_view(self) -> int:
        """The view whose layout picks the CUDA mapping: the reduced source (or its first full operand)."""
        try:
            return self.full_operand(self.spec.source.name)
        except KeyError:
            return self._first_full()


def render(kernels: list[ReduceKernel], target: str) -> ReduceSources:
    helpers, decls, device, host, printers = [], [], [], [], []
    for k in kernels:
        p = _Printer(k)
        printers.append(p)
        helpers.append(p.helpers(target))
        decls.append(p.decls())
        host.append(p.host(target))
        if target == "cuda":
            device.append(p.cuda())
            host.insert(0, f"int64_t {k.name}_workspace(const {k.name}_args& A, const kf::RGeom& g, int sms);\n"
                           f"void {k.name}_launch(const {k.name}_args& A, const kf::RGeom& g, bool small_index, "
                           f"int sms, void* ws, cudaStream_t stream);\n")
    if not kernels:
        return ReduceSources("", "", "", "", "")
    # (the policies' float4 functions read through REDUCE_DEVICE_RUNTIME's helpers: it comes first)
    code = REDUCE_OFFSETS + (REDUCE_DEVICE_RUNTIME if target == "cuda" else "") + "\n".join(helpers)
    runtime = (reduce_drivers_cuda(any(p.light_level for p in printers), any(p.cached for p in printers))
               if target == "cuda" else REDUCE_DRIVER_CPU)
    host_runtime = REDUCE_HOST
    if any(k.spec.total is not None for k in kernels):
        if target == "cuda":
            runtime += REDUCE_TOTAL_CUDA
            host_runtime += REDUCE_TOTAL_CUDA_DECL
        else:
            host_runtime += REDUCE_TOTAL_CPU
    device_code, declarations = runtime + "".join(device), REDUCE_DECLS + "".join(decls)
    prelude = prelude_for(code + device_code + declarations + "".join(host))
    return ReduceSources(prelude + code, declarations, device_code, host_runtime + "".join(host), code)


def forward_lines(kernel: ReduceKernel, names: dict[str, str]) -> list[str]:
    """The lines of `forward` that call the kernel and name its outputs."""
    args = ", ".join(names[name] for name, _ in kernel.operands)
    lines = [f"    std::vector<at::Tensor> {kernel.name}_out = {kernel.name}({args});"]
    for j, node in enumerate(kernel.outputs):
        lines.append(f"    at::Tensor {node.name} = {kernel.name}_out[{j}];")
        names[node.name] = node.name
    return lines
