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
# that a file with both families holds it once. The arithmetic is kf::div32 and kf::set_divisor, in every file's
# common part (kfuse.compiler.codegen.COMMON), which the pointwise kernels use directly.
FAST_DIVISION_DECLS = r"""
#ifndef KF_FAST_DIVISION
#define KF_FAST_DIVISION
namespace kf {
// A divisor for div_by: 32-bit indices divide by its magic number and shift (div32), 64-bit ones plainly.
struct Div {
    int64_t d;
    uint32_t m, s;
};
KF_HD int32_t div_by(int32_t n, const Div& d) { return (int32_t)div32((uint32_t)n, d.m, d.s); }
KF_HD int64_t div_by(int64_t n, const Div& d) { return n / d.d; }
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
    set_divisor(d, r.m, r.s);
    return r;
}
}  // namespace kf
#endif
"""
