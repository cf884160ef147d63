"""Group a captured ATen graph into steps: library calls, fused pointwise kernels, and tuple unpacking.

Rules:
- pointwise ops connected producer -> consumer with equal shapes and dtypes form one kernel (a chain or a DAG:
  a value used twice inside it is computed once, in registers); a kernel is cut only where a value is needed
  outside it, since each kernel writes one result;
- a kernel whose input comes fresh from an anchor (GEMM, convolution) used by nothing else writes its result in
  place into that buffer: the anchor's output is read once and written once, with no new allocation;
- a convolution's bias moves into that kernel: cuDNN adds it in a pass of its own (a full read and write of
  the output), the kernel adds it for free as a per-channel operand (reduction and pooling kernels take it the
  same way: kfuse/kernels/reduce.py, kfuse/kernels/window.py);
- on the CUDA target, a 2D/3D convolution whose output feeds such a kernel runs channels-last (cuDNN's fast
  layout for TF32) where that costs no precision (CHANNELS_LAST_MIN_K; any under the tf32 policy), and the kernel
  reads it channels-last and writes the contiguous result: the layout change costs nothing beyond the epilogue's
  one read and one write; the same for a reduction kernel that keeps the channels and writes nothing full-shape
  (a pooled mean: it reads through strides);
- on the CUDA target, a convolution returned as it is gets a copy as its epilogue where the copy adds its bias or
  brings it back from channels-last (add_convolution_epilogues);
- on the CUDA target under the fp32 policy, whatever a TF32 call reads (directly or through earlier ops) keeps
  eager's own calls, bit for bit (kfuse.kernels.eager_precision.eager_bits_needed says why): only the ops of it that a
  kernel computes to eager's bit fuse (computes_eager_bits), and no other pass takes such a call
  (LibraryCall.eager_bits);
- everything else stays an ATen call (cuBLAS, cuDNN, or ATen's own kernels) and is listed as unfused.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import torch

from kfuse.kernels import attention, choices, conv, counters, gemm, ops, recurrent, reduce, window
from kfuse.kernels.eager_precision import channels_last_keeps_result, channels_last_slower, eager_bits_needed
from kfuse.kernels.steps import (BIASED_CONVS, FUSABLE_DTYPES, FusedKernel, LibraryCall, Step, TupleItem,
                                 bias_add_is_eager_s, movable_bias, mutates, short_name, tensor_meta, unique)

# Ops that run on a vendor library and return a fresh, contiguous tensor: their output may be overwritten.
ANCHORS = {
    "aten.linear.default", "aten.addmm.default", "aten.mm.default", "aten.bmm.default", "aten.matmul.default",
    "aten.conv1d.default", "aten.conv2d.default", "aten.conv3d.default", "aten.convolution.default",
    "aten.conv_transpose1d.default", "aten.conv_transpose2d.input", "aten.conv_transpose3d.input",
    "aten._convolution.default", "aten.baddbmm.default",
}
# Convolutions whose output may be produced channels-last (the input's layout decides cuDNN's output layout).
CHANNELS_LAST_CONVS = {"aten.conv2d.default", "aten.conv3d.default", "aten.conv_transpose2d.input",
                       "aten.conv_transpose3d.input"}


@dataclass
class Plan:
    steps: list[Step]

    @property
    def kernels(self) -> list[FusedKernel]:
        return [s for s in self.steps if isinstance(s, FusedKernel)]

    @property
    def library_calls(self) -> list[LibraryCall]:
        return [s for s in self.steps if isinstance(s, LibraryCall)]

    @property
    def gemms(self) -> list:
        """kfuse's own GEMM steps (kfuse.kernels.gemm.GemmStep), each with its fused epilogue."""
        return [s for s in self.steps if isinstance(s, gemm.GemmStep)]

    @property
    def convolutions(self) -> list:
        """Convolution kernels with their epilogues (kfuse.kernels.conv.ConvKernel)."""
        return [s for s in self.steps if isinstance(s, conv.ConvKernel)]

    @property
    def attentions(self) -> list:
        """Fused attention kernels (kfuse.kernels.attention.AttentionKernel)."""
        return [s for s in self.steps if isinstance(s, attention.AttentionKernel)]

    @property
    def reductions(self) -> list:
        """Fused reduction kernels (kfuse.kernels.reduce.ReduceKernel)."""
        return [s for s in self.steps if isinstance(s, reduce.ReduceKernel)]

    @property
    def windows(self) -> list:
        """Fused pooling and scan kernels (kfuse.kernels.window.WindowKernel)."""
        return [s for s in self.steps if isinstance(s, window.WindowKernel)]

    @property
    def recurrents(self) -> list:
        """Recurrent layers (kfuse.kernels.recurrent.RecurrentKernel)."""
        return [s for s in self.steps if isinstance(s, recurrent.RecurrentKernel)]

    @property
    def counters(self) -> list:
        """The batch counters' one launch (kfuse.kernels.counters.CounterStep), if the forward bumps any."""
        return [s for s in self.steps if isinstance(s, counters.CounterStep)]

    @property
    def has_kernels(self) -> bool:
        """Whether any step is a kfuse kernel for the model's computation, not only library calls, tuple items and
        the batch counters."""
        return bool(self.kernels or self.reductions or self.attentions or self.windows or self.gemms
                    or self.recurrents or self.convolutions)


# Pointwise ops a fused kernel computes to eager's bit: no rounding, or one rounding of the exact result (add and
# sub with alpha 1; products below).
EXACT_POINTWISE = {"aten.relu.default", "aten.hardtanh.default", "aten.clamp.default", "aten.clamp_min.default",
                   "aten.clamp_max.default", "aten.maximum.default", "aten.minimum.default", "aten.neg.default",
                   "aten.abs.default", "aten.where.self", "aten.clone.default", "aten.add.Tensor",
                   "aten.sub.Tensor"}


# A product or quotient of two values is one IEEE rounding in a kernel as in eager's (a division by a number as
# eager's reciprocal multiply, kfuse.kernels.ops), unless the compiler contracts it with an add that reads it into one
# FMA: so an add or sub reading one is left to eager.
PRODUCTS = {"aten.mul.Tensor", "aten.mul.Scalar", "aten.div.Tensor", "aten.div.Scalar"}


def _a_product(value) -> bool:
    """A product, or one negated, made absolute or copied (|a * b| is |a| * |b| exactly: the compiler may fold any of
    them into an FMA with an add)."""
    while isinstance(value, torch.fx.Node) and str(value.target) in ("aten.neg.default", "aten.abs.default",
                                                                     "aten.clone.default"):
        value = value.args[0]
    return isinstance(value, torch.fx.Node) and str(value.target) in PRODUCTS


def computes_eager_bits(node: torch.fx.Node) -> bool:
    target = str(node.target)
    if target in PRODUCTS:
        return len(node.args) == 2 and not node.kwargs
    if target in ("aten.add.Tensor", "aten.sub.Tensor") and any(_a_product(a) for a in node.args):
        return False
    return target in EXACT_POINTWISE and node.kwargs.get("alpha", 1) == 1 and len(node.args) <= 2


def _broadcasts_to(shape, target) -> bool:
    try:
        return tuple(torch.broadcast_shapes(tuple(shape), tuple(target))) == tuple(target)
    except RuntimeError:
        return False


def _is_bool_mask(node) -> bool:
    """A comparison (or logical op) of fp32 values giving a bool tensor: fusable as an interior value, rendered as
    1.0f / 0.0f, when every user is a pointwise op of its shape or of a shape it broadcasts to (a causal mask of
    (1, 1, T, T) in masked_fill over (B, H, T, T) scores, computed per element there): kernels write fp32 only."""
    out = tensor_meta(node)
    if (out is None or out.dtype != torch.bool or node.op != "call_function"
            or str(node.target) not in ops.BOOL_RESULT or not node.users):
        return False
    return all(u.op == "call_function" and ops.lookup(u.target) is not None and tensor_meta(u) is not None
               and _broadcasts_to(out.shape, tensor_meta(u).shape) for u in node.users)


def is_fusable(node: torch.fx.Node) -> bool:
    op = ops.lookup(node.target) if node.op == "call_function" else None
    if op is None or mutates(node):
        return False
    out = tensor_meta(node)
    if out is None or (out.dtype not in FUSABLE_DTYPES and not _is_bool_mask(node)):
        return False
    tensor_args = [a for a in _flat_args(node) if isinstance(a, torch.fx.Node)]
    if not all(tensor_meta(a) is not None and (tensor_meta(a).dtype in FUSABLE_DTYPES or _is_bool_mask(a))
               for a in tensor_args):
        return False
    placeholder = lambda a: "v" if isinstance(a, torch.fx.Node) else a  # noqa: E731
    try:  # the table declines argument values it has no expression for (an unknown rounding mode, ...)
        op.render([placeholder(a) for a in node.args], {k: placeholder(v) for k, v in node.kwargs.items()})
    except (ValueError, TypeError, KeyError):
        return False
    return True


def _epochs(nodes: list[torch.fx.Node]) -> dict[torch.fx.Node, int]:
    """A counter that moves at every op that writes into a tensor (x += 1 stays in-place in the graph): nodes of
    different epochs never share a kernel, so no kernel reads a value from before a write it runs after."""
    epoch, epochs = 0, {}
    for node in nodes:
        if mutates(node):
            epoch += 1
        epochs[node] = epoch
    return epochs


def _flat_args(node: torch.fx.Node) -> list:
    flat = []
    for a in list(node.args) + list(node.kwargs.values()):
        flat.extend(a if isinstance(a, (list, tuple)) else [a])
    return flat


def plan(graph: torch.fx.Graph, target: str = "cpu", precision: str = "fp32") -> Plan:
    nodes = [n for n in graph.nodes if n.op == "call_function" and not _is_dead_assert(n)]
    if choices.current().eager_bits == "all":
        eager_bits = set(nodes)
    else:
        eager_bits = eager_bits_needed(nodes) if target == "cuda" and precision == "fp32" else set()
    fusable = [n for n in nodes if is_fusable(n) and (n not in eager_bits or computes_eager_bits(n))]
    kernels = _fuse_without_bool_edges(fusable, _epochs(nodes))
    kernel_by_result = {k.result: k for k in kernels}
    members = {n for k in kernels for n in k.nodes}

    steps: list[Step] = []
    for node in nodes:
        if node.target is operator.getitem:
            steps.append(TupleItem(node, node.args[0].name, int(node.args[1])))
        elif node in kernel_by_result:
            steps.append(kernel_by_result[node])  # placed at its result: every input exists by then
        elif node not in members:
            steps.append(LibraryCall(node, anchor=str(node.target) in ANCHORS, eager_bits=node in eager_bits))

    names: dict[str, int] = {}
    for kernel in kernels:
        inside = set(kernel.nodes)
        for node in kernel.nodes:
            for a in _flat_args(node):
                if isinstance(a, torch.fx.Node) and a not in inside and a.name not in kernel.inputs:
                    kernel.inputs.append(a.name)
    # reductions absorb the pointwise kernels around them (kfuse/kernels/reduce.py)
    steps = reduce.fuse_reductions(steps, nodes, _epochs(nodes))
    # scaled_dot_product_attention as one kernel (kfuse/kernels/attention.py)
    steps = attention.fuse_attention(steps)
    # nn.GRU's layers: a GEMM and one recurrence kernel each (kfuse/kernels/recurrent.py)
    steps = recurrent.fuse_recurrent(steps)
    for kernel in steps:
        if isinstance(kernel, reduce.ReduceKernel):
            kernel.name = unique(reduce.kernel_name(kernel), names)
            if target == "cuda":
                _reduce_conv_channels_last(kernel, steps, precision)
        elif isinstance(kernel, attention.AttentionKernel):
            kernel.name = unique("fused_scaled_dot_product_attention", names)
        elif isinstance(kernel, recurrent.RecurrentKernel):
            kernel.name = unique("fused_gru", names)
        elif isinstance(kernel, FusedKernel):
            kernel.write_into = _reusable_buffer(kernel, steps)
            _move_conv_bias(kernel, steps)
            kernel.name = unique(_kernel_name(kernel), names)
            if target == "cuda":
                _read_conv_channels_last(kernel, steps, precision)
    # pooling and scans absorb the pointwise kernels around them (kfuse/kernels/window.py)
    steps = window.fuse_windows(steps, nodes, _epochs(nodes))
    for kernel in steps:
        if isinstance(kernel, window.WindowKernel):
            kernel.name = unique(window.kernel_name(kernel), names)
    # fp32 GEMMs on kfuse's template, with the kernel after them as epilogue (kfuse/kernels/gemm.py)
    steps = gemm.fuse_gemms(steps, names)
    # convolutions become kfuse kernels with their epilogue (kfuse/kernels/conv.py)
    steps = conv.fuse_convolutions(steps, names, unique, target, precision)
    # a training BatchNorm's num_batches_tracked += 1, all of them in one launch (kfuse/kernels/counters.py)
    steps = counters.fuse_counters(steps)
    return Plan(steps)


def _move_conv_bias(kernel: FusedKernel, steps: list[Step]) -> None:
    """A batched convolution feeding this kernel alone (in place) gives its bias to the kernel, also where its
    value must be eager's to the bit (a TF32 call reads it) if the add is eager's own (bias_add_is_eager_s): the
    kernel then holds exact ops only."""
    call = _anchor_written(kernel, steps, bias_only=True)
    bias = movable_bias(call.node) if call is not None else None
    if bias is None:
        return
    out = tensor_meta(call.node)
    call.bias_moved = True
    kernel.bias, kernel.bias_rank = (call.node.name, bias.name), out.dim()
    if bias.name not in kernel.inputs:
        kernel.inputs.append(bias.name)


def add_convolution_epilogues(captured, target: str, precision: str) -> None:
    """CUDA: a convolution whose result is returned as it is gets a copy after it (aten.clone) where that copy has
    work to do, so the planner hands it the bias and the layout like any epilogue and cuDNN keeps the convolution:
    adding the bias (cuDNN adds it in a pass of its own: the copy costs nothing more), or writing a channels-last
    result back in the caller's layout (cuDNN's channels-last kernels are the fast ones: _runs_channels_last).
    Without either, the copy would be pure overhead: such a file may get kfuse's own convolution kernels
    (kfuse.kernels.conv._kernels_on_cuda), unless the choice keeps every convolution on the library
    (`--choice conv_kernels=library`, which the speed search tries for a file slower than eager): then the copy is
    the file's one kernel, a pass over the output beside cuDNN's call (a grouped ConvTranspose3d ran 0.45x eager on
    kfuse's kernel, H200, results/devset-H200-2026-11-28-p). Updates captured.graph and captured.outputs."""
    if target != "cuda":
        return
    output = next(n for n in captured.graph.nodes if n.op == "output")
    for node in list(captured.graph.nodes):
        if node.op != "call_function" or str(node.target) not in BIASED_CONVS or set(node.users) != {output}:
            continue
        out = tensor_meta(node)
        if out is None or out.dtype not in FUSABLE_DTYPES:
            continue
        if (movable_bias(node) is None and not _runs_channels_last(node, precision)
                and choices.current().conv_kernels != "library"):
            continue
        with captured.graph.inserting_after(node):
            copy = captured.graph.call_function(torch.ops.aten.clone.default, (node,))
        copy.meta["val"] = out
        node.replace_all_uses_with(copy, delete_user_cb=lambda user: user is not copy)
        captured.outputs = [copy.name if name == node.name else name for name in captured.outputs]


def _anchor_written(kernel: FusedKernel, steps: list[Step], bias_only: bool = False) -> LibraryCall | None:
    """The library call whose output this kernel overwrites in place (it reads nothing else of it); one kept to
    eager's bits only where just its bias moves and that keeps them (`bias_only`)."""
    call = next((s for s in steps if isinstance(s, LibraryCall) and s.node.name == kernel.write_into), None)
    if call is None or (call.eager_bits and not (bias_only and bias_add_is_eager_s(call.node))):
        return None
    return call


# Channels-last where cuDNN runs it faster: measured on an H100 (scripts/gpu_conv_layout_survey.py,
# results/probes-NVIDIA-H100-80GB-HBM3-2026-11-22-s3.md), every suite convolution with groups 1 and a reduction of
# K = C_in * taps >= 288 was TF32 in NCHW and 1.2-2.1x faster channels-last (the transposed ones from K >= 1024).
# Under the fp32 policy that speed is taken only where the GPU shows channels-last giving eager's own output, within
# half of KernelBench's tolerance (_runs_channels_last): cuDNN's TF32 algorithms for the two layouts may differ by up
# to about 4e-4, past KernelBench's 1e-4.
CHANNELS_LAST_MIN_K = 256


def _read_conv_channels_last(kernel: FusedKernel, steps: list[Step], precision: str) -> None:
    """A 2D/3D convolution feeding this kernel alone runs channels-last; the kernel transposes as it goes."""
    call = _anchor_written(kernel, steps)
    if call is None or not _channels_last_pays(call.node, precision):
        return
    call.channels_last = True
    kernel.channels_last_input, kernel.write_into = kernel.write_into, None


def _reduce_conv_channels_last(kernel, steps: list[Step], precision: str) -> None:
    """A 2D/3D convolution read only by this reduction kernel runs channels-last where the kernel writes nothing of
    the full shape (a pooled or reduced result: no output changes layout). The kernel reads its operands through
    their strides (kfuse/kernels/reduce.py), so the layout costs it nothing, and cuDNN's NCHW path may make the same
    channels-last copy of the input and one more of the output itself (nchwToNhwc / nhwcToNchw: 0.82 of a
    ConvTranspose3d's 3.0 ms in level2/58, H200). A reduction over the channels reads each position's C floats
    contiguous (a row kernel's few lanes a row), one over the positions the column kernel's long runs. Whatever the
    reduction's length (K), the GPU decides (_channels_last_pays with short_k): the output must stay eager's and the
    call not turn slower; only CHANNELS_LAST_MIN_K's survey, which timed convolutions whose NCHW results were
    transposed back, asks for a long one. (Before: reductions over the channels stayed NCHW, a min over 64 channels
    ran as fast either way, suite/level2/4 on an H100: 1.80 ms against 1.81.)"""
    if kernel.full_outputs or kernel.spec.groups is not None:
        return
    calls = {s.node.name: s for s in steps if isinstance(s, LibraryCall) and not s.eager_bits}
    inside = set(kernel.nodes)
    for name, kind in kernel.operands:
        call = calls.get(name)
        if (kind == "full" and call is not None and call.anchor and set(call.node.users) <= inside
                and _channels_last_pays(call.node, precision, short_k=True)):
            call.channels_last = True


def _long_reduction(node: torch.fx.Node, short_k: bool = False) -> bool:
    """CHANNELS_LAST_MIN_K's rule: groups 1 and a long reduction (C_in * taps; a transposed convolution's weight
    is [C_in, C_out, taps...], a plain one's [C_out, C_in, taps...]). Both kinds have groups at argument 6.
    `short_k`: groups 1 alone."""
    args = list(node.args) + [None] * 7
    groups = args[6] if args[6] is not None else node.kwargs.get("groups", 1)
    weight = tensor_meta(args[1])
    if groups != 1 or weight is None:
        return False
    k = int(weight.shape[0] if "transpose" in str(node.target) else weight.shape[1])
    for size in weight.shape[2:]:
        k *= int(size)
    return short_k or k >= CHANNELS_LAST_MIN_K


def _runs_channels_last(node: torch.fx.Node, precision: str, short_k: bool = False) -> bool:
    """A batched 2D/3D convolution cuDNN runs faster channels-last, at no precision cost under the policy (`short_k`:
    a short reduction too, where the caller has the GPU time both layouts)."""
    out = tensor_meta(node)
    if str(node.target) not in CHANNELS_LAST_CONVS or out is None or out.dim() not in (4, 5):
        return False  # (an unbatched input has no channels-last layout)
    if not choices.current().channels_last:  # kfuse tune measuring NCHW
        return False
    if precision == "tf32":
        return True
    # fp32 policy: within 1e-4 of eager's own NCHW call only where the GPU shows the same output channels-last
    # (kfuse.kernels.eager_precision); without a GPU to ask, NCHW.
    return _long_reduction(node, short_k) and bool(channels_last_keeps_result(node))


def _channels_last_pays(node: torch.fx.Node, precision: str, short_k: bool = False) -> bool:
    """_runs_channels_last, where NCHW is the other way to run the convolution (it feeds a kernel either way): unless
    the GPU times channels-last, with its input's conversion, clearly slower (eager_precision.channels_last_slower).
    (add_convolution_epilogues does not ask: the copy it gives a bare convolution keeps cuDNN for it in either
    layout.)"""
    return _runs_channels_last(node, precision, short_k) and not channels_last_slower(node)


def _is_dead_assert(node: torch.fx.Node) -> bool:
    """export's metadata checks (`_assert_tensor_metadata`, ...): they name the capture's device, and nothing
    uses them."""
    return str(node.target).startswith("aten._assert") and not node.users


def _fuse_without_bool_edges(fusable: list[torch.fx.Node], epochs: dict) -> list[FusedKernel]:
    """Kernels read and write fp32 only: a bool mask must end up inside the kernel of its users. Masks that would be
    a kernel's result or another kernel's input leave the fusable set (with their users), and the grouping reruns."""
    while True:
        kernels = _fuse(fusable, epochs)
        home = {n: k for k in kernels for n in k.nodes}
        bad = set()
        for k in kernels:
            if tensor_meta(k.result).dtype == torch.bool:
                bad.add(k.result)
            for n in k.nodes:
                for a in _flat_args(n):
                    if isinstance(a, torch.fx.Node) and tensor_meta(a).dtype == torch.bool and home.get(a) is not k:
                        bad |= {a, n}
        if not bad:
            return kernels
        bad |= {u for b in bad if tensor_meta(b).dtype == torch.bool for u in b.users}
        fusable = [n for n in fusable if n not in bad]


def _sunk(members: list[torch.fx.Node], order: dict[torch.fx.Node, int]) -> list[torch.fx.Node]:
    """A group's nodes in a topological order that puts each producer just before the consumer it feeds: depth
    first from each node needed outside the group (in graph order), operands before users, the operand the graph
    computes last visited first. A value that one kernel of the group needs from another is then that kernel's
    last node, a cut, and not a producer the graph happens to compute early: an LSTM cell's output gate, computed
    before the cell state that it multiplies, had cut every gate into a kernel of its own (6 kernels, now 2)."""
    inside, done, ordered = set(members), set(), []
    by_order = sorted(members, key=order.get)
    sinks = [n for n in by_order if any(u not in inside for u in n.users)]
    for start in sinks + by_order:  # (every member is some sink's operand; the rest only as a guard)
        stack = [(start, False)]
        while stack:
            node, expanded = stack.pop()
            if node in done:
                continue
            if expanded:
                done.add(node)
                ordered.append(node)
                continue
            stack.append((node, True))
            # the operand the graph computes last first: an early one (a gate) then sits next to its user; a bool
            # mask last of all, right before its user, so that no cut can leave it a kernel's (bool) result
            operands = sorted({a for a in _flat_args(node) if isinstance(a, torch.fx.Node) and a in inside},
                              key=lambda a: (tensor_meta(a).dtype != torch.bool, order[a]))
            stack.extend((a, False) for a in operands if a not in done)
    return ordered


def _fuse(fusable: list[torch.fx.Node], epochs: dict[torch.fx.Node, int]) -> list[FusedKernel]:
    """Pointwise nodes joined through producer -> consumer edges of equal shape and dtype, then cut so that every
    value needed outside a kernel is that kernel's result (kernels have one output)."""
    group = {n: n for n in fusable}

    def root(n):
        while group[n] is not n:
            group[n] = group[group[n]]
            n = group[n]
        return n

    for node in fusable:
        out = tensor_meta(node)
        for a in _flat_args(node):
            if isinstance(a, torch.fx.Node) and a in group and epochs[a] == epochs[node]:
                val = tensor_meta(a)
                same = val.shape == out.shape and val.dtype == out.dtype
                if same or (val.dtype == torch.bool and _broadcasts_to(val.shape, out.shape)):
                    group[root(a)] = root(node)
    order = {n: i for i, n in enumerate(fusable)}
    groups: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    for node in fusable:
        groups.setdefault(root(node), []).append(node)

    cuts: set[torch.fx.Node] = set()
    while True:
        kernels = []
        for members in groups.values():
            current: list[torch.fx.Node] = []
            for node in _sunk(members, order):
                current.append(node)
                if node in cuts:
                    kernels.append(FusedKernel("", current))
                    current = []
            if current:
                kernels.append(FusedKernel("", current))
        needed_outside = {n for k in kernels for n in k.nodes[:-1] if any(u not in k.nodes for u in n.users)}
        if needed_outside <= cuts:
            return kernels
        cuts |= needed_outside


def _kernel_name(kernel: FusedKernel) -> str:
    parts: list[str] = ["bias"] if kernel.bias else []
    for node in kernel.nodes:
        part = short_name(node.target)
        if part == "clone" and parts:
            continue  # (a copy after a bias says nothing more: add_convolution_epilogues)
        if not parts or parts[-1] != part:
            parts.append(part)
    name = "fused_" + "_".join(parts)
    return name if len(name) <= 60 else name[:60].rstrip("_")


def _reusable_buffer(kernel: FusedKernel, steps: list[Step]) -> str | None:
    """An input produced by an anchor, read only by this kernel (by any number of its ops: `x * tanh(softplus(x))`
    reads each element once, before writing it), with the kernel's shape and dtype."""
    anchors = {s.node.name: s.node for s in steps if isinstance(s, LibraryCall) and s.anchor}
    out = tensor_meta(kernel.result)
    inside = set(kernel.nodes)
    for name in kernel.inputs:
        node = anchors.get(name)
        if node is None or not set(node.users) <= inside:
            continue
        val = tensor_meta(node)
        if val is not None and val.shape == out.shape and val.dtype == out.dtype:
            return name
    return None
