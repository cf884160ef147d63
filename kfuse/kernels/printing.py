"""C++ printers the kernel families share with the planner's pointwise kernels: a fused kernel's op function (the
same op -> C expression table for every kernel: each family's epilogue is one) and its arguments at the call.
"""

from __future__ import annotations

from kfuse.kernels import ops
from kfuse.kernels.steps import FusedKernel


def render_kernel_body(kernel: FusedKernel) -> tuple[list[str], str]:
    """SSA lines computing the kernel's result from its inputs a0, a1, ... (floats); and the result variable."""
    names = {name: f"a{k}" for k, name in enumerate(kernel.inputs)}
    lines = []
    if kernel.bias:
        conv, bias = kernel.bias
        lines.append(f"const float biased = {names[conv]} + {names[bias]};  // {conv}'s bias, moved here")
        names[conv] = "biased"
    for i, node in enumerate(kernel.nodes):
        var = f"t{i}"
        lines.append(f"const float {var} = {ops.render_node(node, names)};  // {node.target}")
        names[node.name] = var
    return lines, names[kernel.result.name]


def op_function(kernel: FusedKernel) -> str:
    params = ", ".join(f"float a{k}" for k in range(len(kernel.inputs)))
    lines, result = render_kernel_body(kernel)
    body = "\n".join("    " + line for line in lines)
    return f"KF_INLINE float {kernel.name}_op({params}) {{\n{body}\n    return {result};\n}}\n"


def kernel_argument(kernel: FusedKernel, name: str, names: dict[str, str]) -> str:
    if kernel.bias and name == kernel.bias[1]:  # (C,) viewed as (C, 1, 1): one value per channel
        return f"{names[name]}.view({{{', '.join(['-1'] + ['1'] * (kernel.bias_rank - 2))}}})"
    return names[name]


# Division by a run-time constant (a size the kernel walks), shared by the reduction and window kernels; guarded, so
# that a file with both families holds it once.
FAST_DIVISION_DECLS = r"""
#ifndef KF_FAST_DIVISION
#define KF_FAST_DIVISION
namespace kf {
// Division by a run-time constant without a divide instruction for 32-bit indices: n / d == (hi32(n * m) + n) >> s
// for 0 <= n < 2^31 (Granlund-Montgomery's multiplier, as PyTorch's IntDivider); 64-bit indices divide plainly.
struct Div {
    int64_t d;
    uint32_t m, s;
};
#ifdef __CUDACC__
__host__ __device__ __forceinline__
#else
inline
#endif
int32_t div_by(int32_t n, const Div& d) {
#ifdef __CUDA_ARCH__
    const uint32_t hi = __umulhi((uint32_t)n, d.m);
#else
    const uint32_t hi = (uint32_t)(((uint64_t)(uint32_t)n * d.m) >> 32);
#endif
    return (int32_t)((hi + (uint32_t)n) >> d.s);
}
#ifdef __CUDACC__
__host__ __device__ __forceinline__
#else
inline
#endif
int64_t div_by(int64_t n, const Div& d) { return n / d.d; }
}  // namespace kf
#endif
"""

FAST_DIVISION_HOST = r"""
#ifndef KF_MAKE_DIV
#define KF_MAKE_DIV
namespace kf {
inline Div make_div(int64_t d) {
    Div r;
    r.d = d;
    r.s = 0;
    while (r.s < 31 && ((int64_t)1 << r.s) < d) ++r.s;
    r.m = d < INT32_MAX ? (uint32_t)(((((uint64_t)1 << 32) * (((uint64_t)1 << r.s) - (uint64_t)d)) / (uint64_t)d) + 1) : 0;
    return r;
}
}  // namespace kf
#endif
"""
