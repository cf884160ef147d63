"""kfuse's own GEMM step: an fp32 matrix product (linear, mm, matmul, bmm, addmm, baddbmm, `...l,lk->...k` einsum)
with the pointwise chain after it applied in registers, the output written once.

Planning (`fuse_gemms`, called by plan.plan after the other passes): a GEMM anchor left as a library call becomes a
GemmStep when its form is one the template covers; the fused kernel that wrote in place into its output becomes
its epilogue (bias, scalar multipliers, activations, residual adds: anything the pointwise table prints), and a
2D transpose feeding it only is absorbed as strides. Anything else stays as it was (library call + epilogue
kernel): a row vector times a matrix (M = 1 at capture), non-fp32 dtypes, broadcast batches beyond 3D,
alpha/beta != 1. A matrix times a vector (N = 1 at capture) gets the memory-bound GEMV kernel instead of the
tiles, and a product with a short K (at most 32: memory-bound on its output) an FFMA kernel with streaming
writes; an output with few tiles for a long K (512x512, K = 262144) splits K (all in kfuse/kernels/gemm_cuda.py).

Printing: the CUDA target instantiates the 3xTF32 tensor-core template (kfuse/kernels/gemm_cuda.py: mma.sync, and a
wgmma kernel used on sm_90 for K-contiguous operands when the file is built for sm_90a) with an epilogue
functor built from the fused kernel's op function (printing.op_function, the same C expressions as every other
kernel); the CPU target prints blocked loops over rows (at::parallel_for) accumulating in double, same epilogue.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from kfuse.kernels import choices, printing
from kfuse.kernels.gemm_cuda import DEFAULT, GEMM_DECLS, SMALL_K, TileConfig, gemm_template, skinny_tiles
from kfuse.kernels.steps import FusedKernel, LibraryCall, mutates, short_name, tensor_meta, unique

TRANSPOSES = {"aten.numpy_T.default", "aten.t.default", "aten.transpose.int", "aten.permute.default"}


@dataclass
class GemmStep:
    name: str
    node: torch.fx.Node                 # the GEMM anchor
    a: str                              # value names of the operands
    b: str
    batched: bool                       # (L, M, K) x (L, K, N); else (..., M, K) x (K, N)
    batch_dims: int = 1                 # batched: leading dims (> 1: a matmul of equal batch dims, flattened)
    a_transposed: bool = False          # the operand is given as its transpose's source (read through strides)
    b_transposed: bool = False          # (linear's weight is always (N, K): b_transposed)
    bias: str | None = None             # added to the product first (linear's bias, addmm's input), broadcast
    epilogue: FusedKernel | None = None
    absorbed: list[torch.fx.Node] = field(default_factory=list)
    a_k_contiguous: bool = True         # the layouts compiled as the fast path (from the captured strides)
    b_k_contiguous: bool = False
    config: TileConfig = DEFAULT
    split_k: bool = False               # compile the split-K path (the captured shape had few output tiles)
    gemv: bool = False                  # a matrix-vector product (N = 1 at capture): the memory-bound kernel
    small_k: bool = False               # K <= SMALL_K at capture: memory-bound on the output, the FFMA kernel

    @property
    def result(self) -> torch.fx.Node:
        return self.epilogue.result if self.epilogue else self.node

    @property
    def ops(self) -> list[str]:
        return ([str(n.target) for n in self.absorbed] + [str(self.node.target)]
                + ([str(n.target) for n in self.epilogue.nodes] if self.epilogue else []))

    @property
    def epilogue_inputs(self) -> list[str]:
        """Operands the epilogue reads besides the product, in order (the bias first)."""
        rest = [n for n in self.epilogue.inputs if n != self.node.name] if self.epilogue else []
        return ([self.bias] if self.bias else []) + rest

    @property
    def inputs(self) -> list[str]:
        return [self.a, self.b] + self.epilogue_inputs


def _float32(*nodes) -> bool:
    return all(isinstance(n, torch.fx.Node) and tensor_meta(n) is not None and tensor_meta(n).dtype == torch.float32
               for n in nodes)


def _einsum_is_matmul(equation: str) -> bool:
    """'...l,lk->...k' with letters: a tensor (any rank >= 2) times a matrix over its last dim."""
    lhs, _, out = equation.replace(" ", "").partition("->")
    x, _, y = lhs.partition(",")
    return (len(y) == 2 and len(x) >= 2 and x[-1] == y[0] and out == x[:-1] + y[1] and len(set(x)) == len(x)
            and y[1] not in x and "." not in equation)


# The shortest K at which a 4D product of attention runs on kfuse's tiles rather than cuBLAS's batched GEMM (_form):
# four K tiles of 32 (K = 64 measured slower, 512 and 1,024 faster; between them not measured).
LONG_K = 128


def _form(node: torch.fx.Node) -> tuple | None:
    """(a, b, bias, batched, b_transposed) for a GEMM the template covers, else None."""
    op, args, kwargs = str(node.target), node.args, node.kwargs
    ranks = lambda *xs: [tensor_meta(x).dim() for x in xs]  # noqa: E731
    if op == "aten.linear.default":
        x, w = args[0], args[1]
        bias = args[2] if len(args) > 2 else kwargs.get("bias")
        if _float32(x, w) and ranks(x)[0] >= 2 and ranks(w)[0] == 2 and (bias is None or (_float32(bias) and ranks(bias)[0] == 1)):
            return x, w, bias, False, True
    elif op in ("aten.mm.default", "aten.matmul.default", "aten.bmm.default"):
        a, b = args[0], args[1]
        if not _float32(a, b):
            return None
        ra, rb = ranks(a, b)
        if op != "aten.bmm.default" and ra >= 2 and rb == 2:
            return a, b, None, False, False
        if (ra, rb) == (3, 3):
            return a, b, None, True, False
        # attention's products over (batch, heads): the batch dims as one, where each product fills 64 x 64 tiles (a
        # window attention's 49 x 49 scores, Swin's, stay cuBLAS's batched GEMM: not measured against the tiles) and
        # K is long. The Hopper kernel runs one block per SM and fills its TMA pipeline once per output tile: at
        # K = 64 (two K tiles) 12,288 tiles of 128 x 128 scores took 2.99 ms against cuBLAS's 1.17 (run r's profile
        # of 50_ReLUSelfAttention, H200); at K = 512 and 1,024 the tiles beat cuBLAS (97: 25.1 -> 16.3 ms).
        if op == "aten.matmul.default" and ra == rb > 3 and tensor_meta(a).shape[:-2] == tensor_meta(b).shape[:-2] \
                and tensor_meta(a).shape[-2] >= 64 and tensor_meta(b).shape[-1] >= 64 \
                and tensor_meta(a).shape[-1] >= LONG_K:
            return a, b, None, True, False
    elif op == "aten.einsum.default" and len(args) == 2 and len(args[1]) == 2 and _einsum_is_matmul(args[0]):
        a, b = args[1]
        if _float32(a, b) and ranks(b)[0] == 2:
            return a, b, None, False, False
    elif op in ("aten.addmm.default", "aten.baddbmm.default"):
        bias, a, b = args[0], args[1], args[2]
        unit = all(kwargs.get(k, 1) == 1 for k in ("beta", "alpha")) and len(args) == 3
        batched = op == "aten.baddbmm.default"
        if unit and _float32(bias, a, b) and ranks(a, b) == ([3, 3] if batched else [2, 2]):
            return a, b, bias, batched, False
    return None


def _transpose_source(node: torch.fx.Node, anchor: torch.fx.Node) -> torch.fx.Node | None:
    """The source of a 2D transpose used by the anchor alone (its strides are swapped instead)."""
    if str(node.target) not in TRANSPOSES or len(node.users) != 1 or tensor_meta(node) is None:
        return None
    source = node.args[0]
    if not isinstance(source, torch.fx.Node) or tensor_meta(source) is None or tensor_meta(source).dim() != 2:
        return None
    if str(node.target) == "aten.transpose.int" and sorted(d % 2 for d in node.args[1:3]) != [0, 1]:
        return None
    if str(node.target) == "aten.permute.default" and list(node.args[1]) not in ([1, 0], [-1, -2], [1, -2], [-1, 0]):
        return None
    return source


def _k_contiguous(node: torch.fx.Node, k_dim: int) -> bool:
    meta = tensor_meta(node)
    return meta.stride(k_dim) == 1 and meta.size(k_dim) > 1 or (meta.size(k_dim) == 1 and meta.stride(-1) == 1)


def fuse_gemms(steps: list, names: dict[str, int]) -> list:
    """Library-call GEMMs the template covers become GemmSteps, with their epilogue kernel and transposes."""
    if not choices.current().gemm_kernels:  # kfuse tune measuring the library path
        return steps
    config = DEFAULT if choices.current().gemm_wgmma else replace(DEFAULT, wgmma_bn=0)
    candidates = [s for s in steps if isinstance(s, LibraryCall) and not s.eager_bits
                  and (s.anchor or str(s.node.target) == "aten.einsum.default")]
    for anchor in candidates:
        node = anchor.node
        form = _form(node)
        out = tensor_meta(node)
        if form is None or out is None or out.dim() < 2 or out.dtype != torch.float32:
            continue
        a, b, bias, batched, b_transposed = form
        meta_a = tensor_meta(a)
        m = meta_a.size(-2)
        n = out.size(-1)
        if m == 1:
            continue  # a row vector times a matrix: cuBLAS reads the matrix once, coalesced; the tiles would not
        step = GemmStep("", node, a.name, b.name, batched, out.dim() - 2 if batched else 1, b_transposed=b_transposed,
                        bias=bias.name if isinstance(bias, torch.fx.Node) else None, gemv=n == 1,
                        config=skinny_tiles(config, out.size(-2) if batched else out.numel() // max(n, 1), n))
        calls = {s.node: s for s in steps if isinstance(s, LibraryCall)}
        a_source, b_source = a, b
        if not batched and a in calls and meta_a.dim() == 2 and (src := _transpose_source(a, node)) is not None:
            step.a, step.a_transposed, a_source = src.name, True, src
            step.absorbed.append(a)
        if not batched and not b_transposed and b in calls and (src := _transpose_source(b, node)) is not None:
            step.b, step.b_transposed, b_source = src.name, True, src
            step.absorbed.append(b)
        # fast-path layouts from the captured strides: A is K-contiguous when its last dim (K) is dense
        step.a_k_contiguous = _k_contiguous(a_source, 0 if step.a_transposed else -1)
        step.b_k_contiguous = _k_contiguous(b_source, -1 if step.b_transposed else -2)
        k = tensor_meta(a_source).size(0 if step.a_transposed else -1)
        batch = out.numel() // (out.size(-2) * n) if batched else 1
        step.split_k = step.config.split_k(batch, out.numel() // (batch * n), n, k)
        step.small_k = not step.gemv and k <= SMALL_K
        position = steps.index(anchor)
        epilogue = next((s for s in steps if isinstance(s, FusedKernel) and s.write_into == node.name
                         and not s.bias and not s.channels_last_input), None)
        if epilogue is not None:
            between = steps[position + 1:steps.index(epilogue)]
            if not any(isinstance(s, LibraryCall) and mutates(s.node) for s in between):
                step.epilogue = epilogue
        removed = [anchor] + [calls[t] for t in step.absorbed] + ([step.epilogue] if step.epilogue else [])
        target = steps.index(step.epilogue) if step.epilogue else position
        steps[target] = step
        steps = [s for s in steps if not any(s is r for r in removed)]
        parts = [short_name(t) for t in step.ops if short_name(t) not in ("numpy_T", "t", "transpose", "permute")]
        merged = [p for i, p in enumerate(parts) if i == 0 or parts[i - 1] != p]
        step.name = unique((("gemv_" if step.gemv else "gemm_") + "_".join(merged))[:60].rstrip("_"), names)
    return steps


# --------------------------------------------------------------------------------------------------------------
# Printing

EPILOGUE_HELPERS = r"""
namespace kf_gemm {
// Operand `o` at flat output index i, every mode (kf::load's, plus the strided one through the output's shape).
KF_HD float operand_at(const kf::Operand& o, const kf::Shape& shape, int64_t i) {
    if (o.step == 2 && i <= INT32_MAX && o.inner <= INT32_MAX && o.count <= INT32_MAX) {
        // A per-row or per-column operand (a bias) in 32-bit division: a 64-bit one is a long subroutine, and
        // the epilogue runs at one block per SM, where nothing hides it.
        const uint32_t along = (uint32_t)i / (uint32_t)o.inner % (uint32_t)o.count;
        return o.data[(int64_t)along * o.stride];
    }
    if (o.step != -1) return kf::load(o, i);
    int64_t offset = 0, rest = i;
    for (int d = shape.ndim - 1; d >= 0; --d) {
        const int64_t c = rest % shape.sizes[d];
        rest /= shape.sizes[d];
        offset += c * o.strides[d];
    }
    return o.data[offset];
}
}  // namespace kf_gemm
"""


def _epilogue_struct(step: GemmStep) -> str:
    """The functor applied to each product element: bias, then the fused chain's op function. One that reads no
    operand besides the product holds nothing (a bare product's writes the value as it is)."""
    count = len(step.epilogue_inputs)
    slot = {name: k for k, name in enumerate(step.epilogue_inputs)}
    if not count and not step.epilogue:
        return f"""
// The epilogue of {step.name}: {' -> '.join(step.ops)}: none, the product is written as it is.
struct {step.name}_epilogue {{
    KF_HD float operator()(float value, int64_t) const {{ return value; }}
}};
"""
    lines = ["        float v = value;"]
    if step.bias:
        lines.append(f"        v += kf_gemm::operand_at(o[{slot[step.bias]}], shape, i);  // {step.bias}, added first")
    if step.epilogue:
        args = ", ".join("v" if name == step.node.name else f"kf_gemm::operand_at(o[{slot[name]}], shape, i)"
                         for name in step.epilogue.inputs)
        lines.append(f"        v = {step.epilogue.name}_op({args});")
    body = "\n".join(lines)
    members = ("    kf::Operand o[%d];  // operands viewed with the output's shape\n    kf::Shape shape;\n" % count
               if count else "")
    index = " i" if count else ""
    return f"""
// The epilogue of {step.name}: {' -> '.join(step.ops)}, in registers before the one write.
struct {step.name}_epilogue {{
{members}    KF_HD float operator()(float value, int64_t{index}) const {{
{body}
        return v;
    }}
}};
"""


def _device_code(step: GemmStep, target: str) -> str:
    count = len(step.epilogue_inputs)
    fill = (f"    {step.name}_epilogue e;\n"
            f"    for (int k = 0; k < {count}; ++k) e.o[k] = operands[k];\n"
            f"    e.shape = shape;\n") if count else f"    const {step.name}_epilogue e{{}};\n"
    params = _problem_parameters(step)
    if target == "cuda":
        c = step.config
        args = c.arguments(step.a_k_contiguous, step.b_k_contiguous, step.split_k)
        flag = lambda x: "true" if x else "false"  # noqa: E731
        # small K: the staging of the captured layouts, an operand contiguous along its rows (not along K) 16 bytes
        # a copy (kf_gemm::sk_rows16 decides at run time, the general staging otherwise)
        call = ("kf_gemm::launch_gemv(p, e, sms, stream)" if step.gemv
                else f"kf_gemm::launch_small_k<{flag(not step.a_k_contiguous)}, {flag(not step.b_k_contiguous)}>"
                     f"(p, e, sms, stream)" if step.small_k
                else f"kf_gemm::launch<{args}>(p, e, workspace, sms, stream)")
        workspace = ("0" if step.gemv or step.small_k else
                     f"kf_gemm::workspace_floats<{c.bm}, {c.bn}, {c.bk}, {flag(step.a_k_contiguous)}, "
                     f"{flag(step.b_k_contiguous)}, {flag(step.split_k)}, {c.wgmma_bn}>(p, sms)")
        return (_epilogue_struct(step)
                + f"\ncudaError_t {step.name}_launch({params}, float* workspace, int sms, cudaStream_t stream) "
                  f"{{\n{fill}"
                  f"    return {call};\n}}\n"
                  f"int64_t {step.name}_workspace(const kf_gemm::Problem& p, int sms) {{\n"
                  f"    return {workspace};\n}}\n")
    return _epilogue_struct(step) + f"""
// {step.name} on the CPU: one output row per iteration, accumulated in double over K, then the epilogue.
void {step.name}_run({params}) {{
{fill}    at::parallel_for(0, p.batch * p.M, 1, [&](int64_t begin, int64_t end) {{
        std::vector<double> row(p.N);
        for (int64_t r = begin; r < end; ++r) {{
            const int64_t l = r / p.M, m = r % p.M;
            std::fill(row.begin(), row.end(), 0.0);
            const float* a = p.a.data + l * p.a.batch_stride + m * p.a.row_stride;
            const float* b = p.b.data + l * p.b.batch_stride;
            for (int64_t k = 0; k < p.K; ++k) {{
                const double x = a[k * p.a.k_stride];
                const float* column = b + k * p.b.k_stride;
                for (int64_t n = 0; n < p.N; ++n) row[n] += x * column[n * p.b.row_stride];
            }}
            for (int64_t n = 0; n < p.N; ++n) p.out[r * p.N + n] = e((float)row[n], r * p.N + n);
        }}
    }});
}}
"""


def _problem_lines(step: GemmStep) -> str:
    """C++ that checks the operand shapes and fills `p` and `out_sizes` from the tensors a_in and b_in."""
    if step.batched and step.batch_dims > 1:  # equal batch dims, one batch of their product (a view where possible)
        return """    TORCH_CHECK(a_in.dim() == b_in.dim() && a_in.dim() > 3 && a_in.size(-1) == b_in.size(-2), "batched product: shapes do not match");
    TORCH_CHECK(a_in.sizes().slice(0, a_in.dim() - 2) == b_in.sizes().slice(0, b_in.dim() - 2), "batch dims do not match");
    const at::Tensor a3 = a_in.flatten(0, -3), b3 = b_in.flatten(0, -3);
    kf_gemm::Problem p{a3.size(0), a3.size(1), b3.size(2), a3.size(2),
                       {a3.data_ptr<float>(), a3.stride(0), a3.stride(1), a3.stride(2)},
                       {b3.data_ptr<float>(), b3.stride(0), b3.stride(2), b3.stride(1)},
                       nullptr};
    std::vector<int64_t> out_sizes(a_in.sizes().begin(), a_in.sizes().end() - 1);
    out_sizes.push_back(p.N);
"""
    if step.batched:
        return """    TORCH_CHECK(a_in.dim() == 3 && b_in.dim() == 3 && a_in.size(2) == b_in.size(1), "batched product: shapes do not match");
    TORCH_CHECK(a_in.size(0) == b_in.size(0) || a_in.size(0) == 1 || b_in.size(0) == 1, "batch sizes do not broadcast");
    const int64_t batch = std::max(a_in.size(0), b_in.size(0));
    kf_gemm::Problem p{batch, a_in.size(1), b_in.size(2), a_in.size(2),
                       {a_in.data_ptr<float>(), a_in.size(0) == 1 ? 0 : a_in.stride(0), a_in.stride(1), a_in.stride(2)},
                       {b_in.data_ptr<float>(), b_in.size(0) == 1 ? 0 : b_in.stride(0), b_in.stride(2), b_in.stride(1)},
                       nullptr};
    const std::vector<int64_t> out_sizes{batch, p.M, p.N};
"""
    if step.a_transposed:  # given A^T (K, M)
        a = """    const at::Tensor& a = a_in;
    const int64_t M = a.size(1), K = a.size(0);
    const kf_gemm::Matrix A{a.data_ptr<float>(), 0, a.stride(1), a.stride(0)};
    std::vector<int64_t> out_sizes{M};
"""
    else:  # (..., M, K): leading dims folded into M (a view when the strides allow, else a copy)
        a = """    const at::Tensor a = a_in.dim() == 2 ? a_in : a_in.reshape({-1, a_in.size(-1)});
    const int64_t M = a.size(0), K = a.size(1);
    const kf_gemm::Matrix A{a.data_ptr<float>(), 0, a.stride(0), a.stride(1)};
    std::vector<int64_t> out_sizes(a_in.sizes().begin(), a_in.sizes().end() - 1);
"""
    if step.b_transposed:  # given B^T (N, K): linear's weight
        b = """    TORCH_CHECK(b_in.dim() == 2 && b_in.size(1) == K, "matrix product: shapes do not match");
    const int64_t N = b_in.size(0);
    const kf_gemm::Matrix B{b_in.data_ptr<float>(), 0, b_in.stride(0), b_in.stride(1)};
"""
    else:
        b = """    TORCH_CHECK(b_in.dim() == 2 && b_in.size(0) == K, "matrix product: shapes do not match");
    const int64_t N = b_in.size(1);
    const kf_gemm::Matrix B{b_in.data_ptr<float>(), 0, b_in.stride(1), b_in.stride(0)};
"""
    return a + b + """    out_sizes.push_back(N);
    kf_gemm::Problem p{1, M, N, K, A, B, nullptr};
"""


def _problem_parameters(step: GemmStep) -> str:
    """The first parameters of a step's launch (or CPU run) function: the problem, then the epilogue's operands
    where it reads any."""
    operands = ["const kf::Operand* operands", "const kf::Shape& shape"] if step.epilogue_inputs else []
    return ", ".join(["const kf_gemm::Problem& p", *operands])


def _host_wrapper(step: GemmStep, target: str) -> str:
    extra = step.epilogue_inputs
    params = ", ".join(["const at::Tensor& a_in", "const at::Tensor& b_in"]
                       + [f"const at::Tensor& e{k}" for k in range(len(extra))])
    inputs = ", ".join(["&out"] + [f"&e{k}" for k in range(len(extra))])
    passed = ["p"] + (["operands + 1", "shape"] if extra else [])
    if target == "cuda":
        run = (f"    const int sms = kf::sm_count(out.get_device());\n"
               f"    const int64_t workspace_floats = {step.name}_workspace(p, sms);  // split K, Hopper planes\n"
               f"    at::Tensor workspace = kf::empty({{workspace_floats}}, out.options());\n"
               f"    C10_CUDA_CHECK({step.name}_launch({', '.join(passed)}, workspace.data_ptr<float>(), sms,\n"
               f"                                        c10::cuda::getCurrentCUDAStream()));\n"
               f"    C10_CUDA_KERNEL_LAUNCH_CHECK();\n")
    else:
        run = f"    {step.name}_run({', '.join(passed)});\n"
    # the epilogue's operands broadcast to the product's shape, their descriptors filled (none: nothing to check)
    described = (f"""    kf::Operand operands[{len(extra) + 1}];
    kf::Shape shape;
    const at::Tensor* inputs[{len(extra) + 1}] = {{{inputs}}};
    TORCH_CHECK(kf::prepare(inputs, {len(extra) + 1}, &out, operands, shape).is_same(out),
                "kfuse GEMM: an epilogue operand does not broadcast to the product's shape");
""" if extra else "")
    return f"""
// {step.name}: {' -> '.join(step.ops)}: the product and its epilogue in one kernel, the output written once
at::Tensor {step.name}({params}) {{
    TORCH_CHECK(a_in.scalar_type() == at::kFloat && b_in.scalar_type() == at::kFloat, "kfuse GEMM expects float32");
    TORCH_CHECK(a_in.device() == b_in.device(), "kfuse GEMM: operands on different devices");
{_problem_lines(step)}    at::Tensor out = kf::empty(out_sizes, a_in.options().memory_format(at::MemoryFormat::Contiguous));
{described}    if (out.numel() == 0) return out;
    p.out = out.data_ptr<float>();
{run}    return out;
}}
"""


@dataclass
class GemmSources:
    device: str        # epilogue op functions, functors and kernels/loops (CUDA file, or the C++ file)
    host: str          # declarations and ATen-side wrappers
    decls: str         # structs both sides see
    expressions: str   # the pointwise expressions used, for ops' prelude selection
    sm90a: bool = False  # a step runs the wgmma kernel: the file is built for sm_90a on Hopper


def _planned_on_hopper() -> bool:
    """Is the plan being made on a compute capability 9.0 GPU (whose files are built for sm_90a alone)?"""
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


def render(steps: list[GemmStep], target: str) -> GemmSources:
    if not steps:
        return GemmSources("", "", "", "")
    # the same op -> C expression printer as every fused kernel
    functions = "".join(printing.op_function(s.epilogue) for s in steps if s.epilogue)
    tiled = [s for s in steps if not s.gemv and not s.small_k]
    wgmma = target == "cuda" and any(s.config.wgmma_bn > 0 for s in tiled)
    # planned on a Hopper GPU with every tiled product on its wgmma kernel: the mma.sync kernel would never run there
    hopper_only = wgmma and all(s.config.wgmma_bn > 0 for s in tiled) and _planned_on_hopper()
    template = (gemm_template(bool(tiled), wgmma, any(s.gemv for s in steps), any(s.small_k for s in steps),
                              hopper_only) if target == "cuda" else "")
    helpers = EPILOGUE_HELPERS if any(s.epilogue_inputs for s in steps) else ""  # (operand_at: no reader, none)
    device = template + helpers + functions + "".join(_device_code(s, target) for s in steps)
    host = "".join(_host_wrapper(s, target) for s in steps)
    if target == "cuda":
        host = "".join(f"cudaError_t {s.name}_launch({_problem_parameters(s)}, float* workspace, int sms, "
                       f"cudaStream_t stream);\n"
                       f"int64_t {s.name}_workspace(const kf_gemm::Problem& p, int sms);\n" for s in steps) + host
    return GemmSources(device, host, GEMM_DECLS, functions, sm90a=wgmma)


def forward_lines(step: GemmStep, names: dict[str, str]) -> list[str]:
    args = ", ".join(names[n] for n in step.inputs)
    names[step.result.name] = step.result.name
    kind = "fp32 FFMA" if step.gemv or step.small_k else "3xTF32"
    return [f"    at::Tensor {step.result.name} = {step.name}({args});  // kfuse GEMM ({kind} on CUDA)"]
