"""Print a plan as C++ source: one fused-kernel IR, two printers (CUDA C++ and plain C++ for the CPU target).

The CUDA target yields two sources: `cuda` holds the kernels and includes only the CUDA runtime (it compiles in
seconds), `cpp` holds the host side (ATen calls, launches, the pybind entry `forward`). The CPU target puts
everything in `cpp`. Every size is read at run time: kernels work for any shape of the captured rank.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

import torch

from kfuse import ops
from kfuse import reduce as reductions
from kfuse.capture import Captured
from kfuse.plan import FusedKernel, LibraryCall, Plan, TupleItem, tensor_meta

MAX_DIMS = 8

# Plain C++ shared by both compilers: how a kernel sees each operand and the output's shape.
COMMON = f"""
#include <cstdint>
#define KF_MAX_DIMS {MAX_DIMS}
namespace kf {{
// One operand of a fused kernel, viewed with the output's shape: strides in elements, 0 along broadcast dims.
struct Operand {{
    const float* data;
    int64_t strides[KF_MAX_DIMS];
    int64_t step;  // 1: laid out like the output; 0: one value for all elements; -1: strided (general indexing)
}};
struct Shape {{
    int ndim;
    int64_t sizes[KF_MAX_DIMS];
    int64_t numel;
}};
}}  // namespace kf
"""

# Host helpers (ATen side): broadcasting operands to the output's shape, and calling any ATen op by name.
HOST_RUNTIME = r"""
namespace kf {
// Broadcasts the operands, fills their descriptors, and returns the output: `into` when it already has the
// right shape and layout (an anchor's fresh buffer, overwritten in place), else a new contiguous tensor.
inline at::Tensor prepare(std::vector<at::Tensor> inputs, const at::Tensor* into, Operand* operands, Shape& shape) {
    std::vector<int64_t> sizes(inputs[0].sizes().begin(), inputs[0].sizes().end());
    for (size_t k = 1; k < inputs.size(); ++k) sizes = at::infer_size(sizes, inputs[k].sizes());
    TORCH_CHECK(sizes.size() <= KF_MAX_DIMS, "kfuse kernels support up to ", KF_MAX_DIMS, " dimensions");
    shape.ndim = static_cast<int>(sizes.size());
    shape.numel = 1;
    for (int d = 0; d < shape.ndim; ++d) { shape.sizes[d] = sizes[d]; shape.numel *= sizes[d]; }
    for (size_t k = 0; k < inputs.size(); ++k) {
        TORCH_CHECK(inputs[k].scalar_type() == at::kFloat, "kfuse kernel expects float32 operands");
        at::Tensor view = inputs[k].expand(sizes);
        operands[k].data = view.data_ptr<float>();
        bool dense = view.is_contiguous();
        bool single = inputs[k].numel() == 1;
        for (int d = 0; d < shape.ndim; ++d) operands[k].strides[d] = view.stride(d);
        operands[k].step = single ? 0 : (dense ? 1 : -1);
    }
    bool reuse = into != nullptr && into->sizes().vec() == sizes && into->is_contiguous()
                 && into->scalar_type() == at::kFloat;
    return reuse ? *into : at::empty(sizes, inputs[0].options().dtype(at::kFloat)
                                            .memory_format(at::MemoryFormat::Contiguous));
}

// An ATen op through the dispatcher: any op the graph holds that kfuse does not fuse.
inline std::vector<c10::IValue> call(const c10::OperatorHandle& op, std::vector<c10::IValue> args) {
    op.callBoxed(args);
    return args;
}
// A Python number passed where an op takes a Tensor: a 0-dim CPU tensor marked as a wrapped number, so type
// promotion treats it as a scalar (as eager PyTorch does).
inline c10::IValue wrapped_number(const at::Scalar& value) {
    at::Tensor t = c10::scalar_to_tensor(value);
    t.unsafeGetTensorImpl()->set_wrapped_number(true);
    return t;
}
inline c10::OperatorHandle aten(const char* name, const char* overload) {
    return c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
}
}  // namespace kf
"""


def _prelude_units(body: str) -> list[str]:
    """ops.PRELUDE's helpers one by one: a definition with the comment above it, or a whole #if ... #endif."""
    units, current, depth, open_ifs = [], [], 0, 0
    for line in body.splitlines():
        text = line.strip()
        at_top = depth == 0 and open_ifs == 0
        only_comments = all(x.strip().startswith(("/*", "*", "//")) for x in current)
        if at_top and (not text or (text.startswith(("KF_INLINE", "/*", "#if")) and not only_comments)):
            if current:
                units.append("\n".join(current))
            current = []
        if text:
            current.append(line)
        if depth == 0 and text.startswith("#if"):
            open_ifs += 1
        elif depth == 0 and text.startswith("#endif"):
            open_ifs -= 1
        depth += line.count("{") - line.count("}")
    if current:
        units.append("\n".join(current))
    return units


def prelude_for(code: str) -> str:
    """The helpers of ops.PRELUDE that `code` uses, directly or through other helpers: short generated files."""
    header, _, body = ops.PRELUDE.strip("\n").partition("\n\n")
    units = _prelude_units(body)
    defines = [set(re.findall(r"KF_INLINE\s+\w+\s+(kf_\w+)\s*\(", unit)) for unit in units]
    wanted = set(re.findall(r"\bkf_\w+", code))
    keep: set[int] = set()
    while True:
        more = {i for i, names in enumerate(defines) if names & wanted} - keep
        if not more:
            break
        keep |= more
        for i in more:
            wanted |= set(re.findall(r"\bkf_\w+", units[i]))
    return "\n".join([header, ""] + [units[i] for i in sorted(keep)]) + "\n"


@dataclass
class Sources:
    cpp: str
    cuda: str | None
    kernels: list[dict]          # what each generated kernel fuses
    library_calls: list[str]     # ATen ops kept as library calls (anchors and the rest)
    unfused: list[dict]          # ops left unfused, with the reason


def render_kernel_body(kernel: FusedKernel) -> tuple[list[str], str]:
    """SSA lines computing the kernel's result from its inputs a0, a1, ... (floats); and the result variable."""
    names = {name: f"a{k}" for k, name in enumerate(kernel.inputs)}
    lines = []
    for i, node in enumerate(kernel.nodes):
        op = ops.lookup(node.target)

        def value(a):
            if isinstance(a, torch.fx.Node):
                return names[a.name]
            if isinstance(a, (list, tuple)):
                return type(a)(value(x) for x in a)
            return a

        args = [value(a) for a in node.args]
        kwargs = {k: value(v) for k, v in node.kwargs.items()}
        var = f"t{i}"
        lines.append(f"const float {var} = {op.render(args, kwargs)};  // {node.target}")
        names[node.name] = var
    return lines, names[kernel.result.name]


def _op_function(kernel: FusedKernel) -> str:
    params = ", ".join(f"float a{k}" for k in range(len(kernel.inputs)))
    lines, result = render_kernel_body(kernel)
    body = "\n".join("    " + line for line in lines)
    return f"KF_INLINE float {kernel.name}_op({params}) {{\n{body}\n    return {result};\n}}\n"


def _offsets(n_inputs: int, index: str) -> str:
    """C++ that computes each operand's element offset for output element `index` (general indexing)."""
    decl = "".join(f"        index_t off{k} = 0;\n" for k in range(n_inputs))
    acc = "".join(f" off{k} += c * o{k}.strides[d];" for k in range(n_inputs))
    return (f"{decl}        index_t rest = {index};\n"
            f"        for (int d = shape.ndim - 1; d >= 0; --d) {{\n"
            f"            const index_t c = rest % (index_t)shape.sizes[d];\n"
            f"            rest /= (index_t)shape.sizes[d];{acc}\n"
            f"        }}\n")


def _cuda_kernels(kernel: FusedKernel) -> str:
    n = len(kernel.inputs)
    operands = ", ".join(f"kf::Operand o{k}" for k in range(n))
    dense_loads = ", ".join(f"o{k}.data[o{k}.step ? i : 0]" for k in range(n))
    general_loads = ", ".join(f"o{k}.data[off{k}]" for k in range(n))
    vec_loads = "".join(
        f"        const float4 v{k} = o{k}.step ? reinterpret_cast<const float4*>(o{k}.data)[q]"
        f" : make_float4(o{k}.data[0], o{k}.data[0], o{k}.data[0], o{k}.data[0]);\n" for k in range(n))
    lanes = "".join(
        f"        r.{c} = {kernel.name}_op({', '.join(f'v{k}.{c}' for k in range(n))});\n" for c in "xyzw")
    tail_operands = ", ".join(f"tail{k}" for k in range(n))
    tail_setup = "".join(
        f"    kf::Operand tail{k} = o[{k}];\n    if (tail{k}.step) tail{k}.data += done;\n" for k in range(n))
    args = ", ".join(f"o[{k}]" for k in range(n))
    return f"""
// Elements laid out like the output (or single values): index i for every operand, 4 at a time.
__global__ void {kernel.name}_vec4({operands}, int64_t groups, float* __restrict__ out) {{
    const int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; q < groups; q += stride) {{
{vec_loads}        float4 r;
{lanes}        reinterpret_cast<float4*>(out)[q] = r;
    }}
}}

template <typename index_t>
__global__ void {kernel.name}_dense({operands}, index_t n, float* __restrict__ out) {{
    const index_t stride = (index_t)blockDim.x * gridDim.x;
    for (index_t i = (index_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {{
        out[i] = {kernel.name}_op({dense_loads});
    }}
}}

// Broadcast or strided operands: each operand's offset from the output element's coordinates.
template <typename index_t>
__global__ void {kernel.name}_general({operands}, kf::Shape shape, float* __restrict__ out) {{
    const index_t stride = (index_t)blockDim.x * gridDim.x;
    for (index_t i = (index_t)blockIdx.x * blockDim.x + threadIdx.x; i < (index_t)shape.numel; i += stride) {{
{_offsets(n, "i")}        out[i] = {kernel.name}_op({general_loads});
    }}
}}

void {kernel.name}_launch(const kf::Operand* o, const kf::Shape& shape, float* out, bool small_index,
                          int sms, cudaStream_t stream) {{
    const int threads = 256;
    auto blocks_for = [&](int64_t work) {{
        return (unsigned)std::max<int64_t>(1, std::min<int64_t>((work + threads - 1) / threads, (int64_t)sms * 8));
    }};
    bool dense = true, aligned = (reinterpret_cast<uintptr_t>(out) % 16) == 0;
    for (int k = 0; k < {n}; ++k) {{
        dense = dense && o[k].step >= 0;
        aligned = aligned && (o[k].step == 0 || reinterpret_cast<uintptr_t>(o[k].data) % 16 == 0);
    }}
    if (!dense) {{
        if (small_index) {kernel.name}_general<int32_t><<<blocks_for(shape.numel), threads, 0, stream>>>({args}, shape, out);
        else {kernel.name}_general<int64_t><<<blocks_for(shape.numel), threads, 0, stream>>>({args}, shape, out);
        return;
    }}
    int64_t done = 0;
    if (aligned && shape.numel >= 4) {{
        const int64_t groups = shape.numel / 4;
        {kernel.name}_vec4<<<blocks_for(groups), threads, 0, stream>>>({args}, groups, out);
        done = groups * 4;
    }}
    if (done < shape.numel) {{  // the tail the vector loop left, or everything when unaligned
{textwrap.indent(tail_setup, "    ")}        const int64_t rest = shape.numel - done;
        if (small_index) {kernel.name}_dense<int32_t><<<blocks_for(rest), threads, 0, stream>>>({tail_operands}, (int32_t)rest, out + done);
        else {kernel.name}_dense<int64_t><<<blocks_for(rest), threads, 0, stream>>>({tail_operands}, rest, out + done);
    }}
}}
"""


def _cpu_kernel(kernel: FusedKernel) -> str:
    n = len(kernel.inputs)
    dense_loads = ", ".join(f"o[{k}].data[o[{k}].step ? i : 0]" for k in range(n))
    general_loads = ", ".join(f"o[{k}].data[off{k}]" for k in range(n))
    decl = "".join(f"                int64_t off{k} = 0;\n" for k in range(n))
    acc = "".join(f" off{k} += c * o[{k}].strides[d];" for k in range(n))
    offsets = (f"{decl}                int64_t rest = i;\n"
               f"                for (int d = shape.ndim - 1; d >= 0; --d) {{\n"
               f"                    const int64_t c = rest % shape.sizes[d];\n"
               f"                    rest /= shape.sizes[d];{acc}\n"
               f"                }}\n")
    return f"""
void {kernel.name}_run(const kf::Operand* o, const kf::Shape& shape, float* out) {{
    bool dense = true;
    for (int k = 0; k < {n}; ++k) dense = dense && o[k].step >= 0;
    at::parallel_for(0, shape.numel, 1 << 14, [&](int64_t begin, int64_t end) {{
        if (dense) {{
            for (int64_t i = begin; i < end; ++i) out[i] = {kernel.name}_op({dense_loads});
        }} else {{
            for (int64_t i = begin; i < end; ++i) {{
{offsets}                out[i] = {kernel.name}_op({general_loads});
            }}
        }}
    }});
}}
"""


def _host_wrapper(kernel: FusedKernel, target: str) -> str:
    n = len(kernel.inputs)
    params = ", ".join(f"const at::Tensor& a{k}" for k in range(n))
    replaced = " -> ".join(short for short in (str(t) for t in kernel.ops))
    if target == "cuda":
        run = (f"    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;\n"
               f"    // a grid-stride index runs up to one grid (sms * 8 blocks of 256) past the end before it stops\n"
               f"    const int64_t overshoot = (int64_t)sms * 8 * 256;\n"
               f"    const bool small_index = shape.numel + overshoot < INT32_MAX && max_offset < INT32_MAX;\n"
               f"    {kernel.name}_launch(operands, shape, out.data_ptr<float>(), small_index, sms,\n"
               f"                         at::cuda::getCurrentCUDAStream());\n"
               f"    C10_CUDA_KERNEL_LAUNCH_CHECK();\n")
        offset_check = ("    int64_t max_offset = 0;  // 32-bit indexing only when every buffer fits\n"
                        f"    for (int k = 0; k < {n}; ++k)\n"
                        "        for (int d = 0; d < shape.ndim; ++d)\n"
                        "            max_offset += (shape.sizes[d] - 1) * operands[k].strides[d];\n")
    else:
        run = f"    {kernel.name}_run(operands, shape, out.data_ptr<float>());\n"
        offset_check = ""
    inputs = ", ".join(f"a{k}" for k in range(n))
    return f"""
// {kernel.name}: {replaced}, reading each operand once and writing once
at::Tensor {kernel.name}({params}, const at::Tensor* into) {{
    kf::Operand operands[{n}];
    kf::Shape shape;
    at::Tensor out = kf::prepare({{{inputs}}}, into, operands, shape);
    if (shape.numel == 0) return out;
{offset_check}{run}    return out;
}}
"""


def render_ivalue(a, names: dict[str, str]) -> str:
    """A C++ expression for one argument of a boxed ATen call."""
    if isinstance(a, torch.fx.Node):
        return names[a.name]
    if a is None:
        return "c10::IValue()"
    if isinstance(a, bool):
        return "c10::IValue(true)" if a else "c10::IValue(false)"
    if isinstance(a, int):
        return f"c10::IValue(int64_t({a}))"
    if isinstance(a, float):
        return f"c10::IValue({float.__repr__(a) if a == a and abs(a) != float('inf') else _special(a)})"
    if isinstance(a, str):
        return f'c10::IValue(std::string("{a}"))'
    if isinstance(a, torch.dtype):
        return f"c10::IValue(int64_t(c10::ScalarType::{_scalar_type(a)}))"
    if isinstance(a, torch.device):  # captured on the meta device: the run's device is the inputs' device
        return f"c10::IValue({names['__device__']})"
    if isinstance(a, torch.layout):
        return "c10::IValue(int64_t(c10::Layout::Strided))" if a == torch.strided else _unsupported(a)
    if isinstance(a, torch.memory_format):
        fmt = {torch.contiguous_format: "Contiguous", torch.channels_last: "ChannelsLast",
               torch.preserve_format: "Preserve", torch.channels_last_3d: "ChannelsLast3d"}[a]
        return f"c10::IValue(int64_t(c10::MemoryFormat::{fmt}))"
    if isinstance(a, (list, tuple)):
        if all(isinstance(x, torch.fx.Node) for x in a) and a:
            return "c10::IValue(c10::List<at::Tensor>({" + ", ".join(names[x.name] for x in a) + "}))"
        if all(isinstance(x, bool) for x in a) and a:
            return "c10::IValue(std::vector<bool>{" + ", ".join("true" if x else "false" for x in a) + "})"
        if all(isinstance(x, int) and not isinstance(x, bool) for x in a):
            return "c10::IValue(std::vector<int64_t>{" + ", ".join(str(x) for x in a) + "})"
        if all(isinstance(x, (int, float)) for x in a):
            return "c10::IValue(std::vector<double>{" + ", ".join(repr(float(x)) for x in a) + "})"
    return _unsupported(a)


def _unsupported(a) -> str:
    raise NotImplementedError(f"argument {a!r} of type {type(a).__name__}")


def _scalar(value: bool | int | float) -> str:
    """A C++ at::Scalar for a Python number, keeping its kind (bool, int64 or double)."""
    if isinstance(value, bool):
        return f"at::Scalar({'true' if value else 'false'})"
    if isinstance(value, int):
        return f"at::Scalar(int64_t({value}))"
    literal = repr(value) if value == value and abs(value) != float("inf") else _special(value)
    return f"at::Scalar(double({literal}))"


def _special(a: float) -> str:
    if a != a:
        return "std::numeric_limits<double>::quiet_NaN()"
    return ("" if a > 0 else "-") + "std::numeric_limits<double>::infinity()"


def _scalar_type(dtype: torch.dtype) -> str:
    return {torch.float32: "Float", torch.float64: "Double", torch.float16: "Half", torch.bfloat16: "BFloat16",
            torch.int64: "Long", torch.int32: "Int", torch.int16: "Short", torch.int8: "Char",
            torch.uint8: "Byte", torch.bool: "Bool"}[dtype]


def boxed_arguments(node: torch.fx.Node) -> list:
    """The node's arguments in schema order, defaults filled in (a boxed call takes them all)."""
    schema = node.target._schema
    values = []
    for i, arg in enumerate(schema.arguments):
        if i < len(node.args):
            values.append(node.args[i])
        elif arg.name in node.kwargs:
            values.append(node.kwargs[arg.name])
        elif arg.has_default_value():
            values.append(arg.default_value)
        else:
            values.append(None)
    return values


def _library_call(call: LibraryCall, names: dict[str, str], handles: list[str]) -> str:
    node = call.node
    schema = node.target._schema
    handle = f"op_{node.name}"
    handles.append(f'    static const c10::OperatorHandle {handle} = kf::aten("{schema.name}", '
                   f'"{schema.overload_name}");')
    rendered = []
    for arg, value in zip(schema.arguments, boxed_arguments(node)):
        if isinstance(value, (int, float)) and str(arg.type).startswith("Tensor"):
            # A Python number where the op takes a Tensor: a wrapped number, as eager PyTorch passes it.
            rendered.append(f"kf::wrapped_number({_scalar(value)})")
        else:
            rendered.append(render_ivalue(value, names))
    args = ", ".join(rendered)
    kind = "library call" if call.anchor else "ATen call, unfused"
    returns = schema.returns
    if len(returns) == 1 and str(returns[0].type) == "Tensor":
        names[node.name] = node.name
        return f"    at::Tensor {node.name} = kf::call({handle}, {{{args}}})[0].toTensor();  // {kind}: {node.target}"
    names[node.name] = node.name
    return f"    std::vector<c10::IValue> {node.name} = kf::call({handle}, {{{args}}});  // {kind}: {node.target}"


def _tuple_item(item: TupleItem, names: dict[str, str], plan: Plan) -> str:
    source = next(s for s in plan.steps if isinstance(s, LibraryCall) and s.node.name == item.source)
    returns = source.node.target._schema.returns
    names[item.node.name] = item.node.name
    if len(returns) == 1:  # a Tensor[] result
        return f"    at::Tensor {item.node.name} = {item.source}[0].toTensorVector()[{item.index}];"
    return f"    at::Tensor {item.node.name} = {item.source}[{item.index}].toTensor();"


def _forward(captured: Captured, plan: Plan, names: dict[str, str]) -> str:
    # Buffers the model updates (running statistics) come by value: the handle shares their storage.
    # Numbers among the user's inputs were folded into the graph at capture: they are not parameters here.
    tensors = [i for i in captured.inputs if i.kind != "user" or i.dtype is not None]
    params = ", ".join(f"at::Tensor {i.name}" if i.name in captured.buffer_updates else f"const at::Tensor& {i.name}"
                       for i in tensors)
    handles: list[str] = []
    body = []
    for step in plan.steps:
        if isinstance(step, LibraryCall):
            body.append(_library_call(step, names, handles))
        elif isinstance(step, TupleItem):
            body.append(_tuple_item(step, names, plan))
        elif isinstance(step, reductions.ReduceKernel):
            body.extend(reductions.forward_lines(step, names))
        else:
            args = ", ".join(names[i] for i in step.inputs)
            into = f"&{names[step.write_into]}" if step.write_into else "nullptr"
            note = f"  // in place into {step.write_into}" if step.write_into else ""
            body.append(f"    at::Tensor {step.result.name} = {step.name}({args}, {into});{note}")
            names[step.result.name] = step.result.name
    for buffer, value in captured.buffer_updates.items():
        body.append(f"    {buffer}.copy_({names[value]});  // buffer update, as the model does")
    outputs = ", ".join(names[o] for o in captured.outputs)
    lines = "\n".join(handles + body)
    return (f"std::vector<at::Tensor> forward({params}) {{\n"
            f"    torch::NoGradGuard no_grad;\n{lines}\n    return {{{outputs}}};\n}}\n")


def generate(captured: Captured, plan: Plan, target: str) -> Sources:
    names = {i.name: i.name for i in captured.inputs}
    first_tensor = next((i.name for i in captured.inputs if i.dtype is not None), None)
    names["__device__"] = f"{first_tensor}.device()" if first_tensor else "at::Device(at::kCPU)"
    kernel_functions = "".join(_op_function(k) for k in plan.kernels)
    host_wrappers = "".join(_host_wrapper(k, target) for k in plan.kernels)
    forward = _forward(captured, plan, names)
    red = reductions.render(plan.reductions, target)
    if target == "cuda":
        launches = "".join(f"void {k.name}_launch(const kf::Operand* o, const kf::Shape& shape, float* out, "
                           f"bool small_index, int sms, cudaStream_t stream);\n" for k in plan.kernels)
        cuda = ("#include <cuda_runtime.h>\n#include <algorithm>\n" + COMMON
                + prelude_for(kernel_functions + red.expressions)
                + kernel_functions
                + "".join(_cuda_kernels(k) for k in plan.kernels)
                + red.decls + red.helpers + red.device)
        cpp = ("#include <torch/extension.h>\n#include <ATen/cuda/CUDAContext.h>\n"
               "#include <c10/cuda/CUDAException.h>\n" + COMMON + HOST_RUNTIME + launches + host_wrappers
               + red.decls + red.host + forward)
    else:
        cuda = None
        cpp = ("#include <torch/extension.h>\n#include <ATen/Parallel.h>\n" + COMMON
               + prelude_for(kernel_functions + red.expressions)
               + HOST_RUNTIME
               + kernel_functions + "".join(_cpu_kernel(k) for k in plan.kernels) + host_wrappers
               + red.decls + red.helpers + red.device + red.host + forward)
    kernels = [{"name": k.name, "fuses": k.ops, "in_place_into": k.write_into} for k in plan.kernels]
    kernels += [{"name": k.name, "fuses": k.ops, "in_place_into": None} for k in plan.reductions]
    kernels.sort(key=lambda k: _step_index(plan, k["name"]))
    library = [c.op for c in plan.library_calls]
    unfused = [{"op": c.op, "node": c.node.name,
                "reason": "anchor: runs on the vendor library, its epilogue fused after it" if c.anchor
                else _unfused_reason(c)} for c in plan.library_calls]
    return Sources(cpp, cuda, kernels, library, unfused)


def _step_index(plan: Plan, name: str) -> int:
    return next(i for i, s in enumerate(plan.steps) if getattr(s, "name", None) == name)


def _unfused_reason(call: LibraryCall) -> str:
    reason = reductions.unfused_reason(call.node)
    if reason is not None:
        return reason
    if ops.lookup(call.node.target) is not None:
        meta = tensor_meta(call.node)
        return f"pointwise, but on {meta.dtype if meta is not None else 'non-tensor'} values (fp32 kernels only)"
    return "no kfuse kernel for this op yet: kept as an ATen call"
