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
