"""Pooling and scans, each one kernel with its pointwise producers and consumers fused in.

Pooling (max_pool / avg_pool / adaptive_avg_pool over 1-3 spatial dims, PyTorch's semantics and output sizes):
one thread per output element walks its window. The pointwise ops that produced the pooled tensor (the
*prologue*: conv output -> x * scale -> pool) are computed on the fly for every window element, so that tensor is
never written; the pointwise ops after the pool (the *epilogue*: pool -> sigmoid) are applied before the single
write. Consecutive threads take consecutive output columns: writes are coalesced, and where windows do not overlap
every input element is read by one thread only (overlapping windows re-read neighbours from L1/L2). Average pools
over 2-3 dims take the strip kernel instead (strip_length): a thread computes a strip of up to 8 outputs down dim
nd - 2 (H) at one output column, finds coordinates, bounds and lead offsets once for them, and loads each input
row the strip's windows hold once, adding it to every window holding it, in PyTorch's summation order. A global
average pool (output size 1 everywhere) is a mean over the spatial dims and goes to kfuse/kernels/reduce.py instead, as
PyTorch itself computes it with mean().

Scans (cumsum, cumprod over any dim): a reverse scan written flip -> cumsum -> flip becomes one backward scan; an
exclusive scan written as a concatenation, cat([zeros (ones for a product) of length 1, scan(x[:n-1])], dim), one
scan writing each prefix a step along and the identity first (the concatenation's copy was more than half of such a
file's time: H200, run o's profile); other exclusive forms (cumsum(x) - x) and masks (x * mask, the mask a bool
tensor read as 0/1) are the epilogue and the prologue. CUDA, scanned dim contiguous: a warp per row, 256 elements
per step as 8 coalesced loads per lane, a warp-shuffle scan of each 32-element piece and a prefix carried in double
between pieces; other dims: a thread per row (neighbouring rows are neighbours in memory), a sequential double
accumulation. CPU: sequential in double
(PyTorch's CPU scans accumulate in double too). Both are at least as accurate as PyTorch's own CUDA scans.

Geometry (both): every operand is a strided view (stride 0 along broadcast dims) of the source's shape (prologue
operands) or of the result's shape (epilogue operands and outputs). The dims a window or scan runs along are
"inner" dims; the others are "lead" dims (batch and channels), coalesced where every view allows; each thread
finds its lead offsets once. Offsets are 32-bit only when every buffer fits.
"""

from __future__ import annotations

import heapq
import operator
from dataclasses import dataclass, field

import torch

from kfuse.kernels import ops, printing
from kfuse.kernels.steps import (EXACT_WINDOWS, FusedKernel, LibraryCall, TupleItem, bias_add_is_eager_s, movable_bias,
                                 tensor_meta)


class Unsupported(Exception):
    """This pooling or scan node cannot be fused; the message says why (listed as the unfused reason)."""


# --------------------------------------------------------------------------------------------------------------
# Specs: what each supported ATen op means


@dataclass
class PoolSpec:
    kind: str                              # "max", "avg" or "adaptive" (adaptive average)
    nd: int                                # spatial dims (the last nd dims of the source)
    kernel: tuple[int, ...] = ()
    stride: tuple[int, ...] = ()
    padding: tuple[int, ...] = ()
    dilation: tuple[int, ...] = ()
    ceil_mode: bool = False
    count_include_pad: bool = True
    divisor: int | None = None             # avg_pool's divisor_override
    output_size: tuple[int, ...] = ()      # adaptive
    tuple_form: bool = False               # max_pool*_with_indices: (values, indices) through getitem


@dataclass
class ScanSpec:
    op: str                                # "sum" or "prod"
    dim: int                               # in the source's rank, >= 0
    reverse: bool = False                  # flip -> scan -> flip along dim, absorbed
    exclusive: bool = False                # cat([identity fill, scan(x[:n-1])], dim): outputs one step along dim,
                                           # the identity first (the exclusive scan of x)


POOL_OPS = {
    "aten.max_pool1d.default": ("max", 1), "aten.max_pool2d.default": ("max", 2),
    "aten.max_pool3d.default": ("max", 3),
    "aten.max_pool1d_with_indices.default": ("max", 1), "aten.max_pool2d_with_indices.default": ("max", 2),
    "aten.max_pool3d_with_indices.default": ("max", 3),
    "aten.avg_pool1d.default": ("avg", 1), "aten.avg_pool2d.default": ("avg", 2),
    "aten.avg_pool3d.default": ("avg", 3),
    "aten.adaptive_avg_pool1d.default": ("adaptive", 1), "aten.adaptive_avg_pool2d.default": ("adaptive", 2),
    "aten.adaptive_avg_pool3d.default": ("adaptive", 3), "aten._adaptive_avg_pool2d.default": ("adaptive", 2),
    "aten._adaptive_avg_pool3d.default": ("adaptive", 3),
}
SCAN_OPS = {"aten.cumsum.default": "sum", "aten.cumprod.default": "prod"}
FLIP = "aten.flip.default"
CAT = "aten.cat.default"
# Fills that a concatenation may put before a scan (their value must be the scan's identity): value of the fill
# from its arguments.
FILLS = {"aten.zeros_like.default": lambda args: 0.0, "aten.zeros.default": lambda args: 0.0,
         "aten.ones_like.default": lambda args: 1.0, "aten.ones.default": lambda args: 1.0,
         "aten.full_like.default": lambda args: args[1] if len(args) > 1 else None,
         "aten.full.default": lambda args: args[1] if len(args) > 1 else None}
OPERAND_DTYPES = {torch.float32: "float", torch.bool: "bool"}


def _ints(value, nd: int, what: str, empty=None) -> tuple[int, ...]:
    """A pooling size argument as nd ints (one int, or a 1-element list, stands for all dims)."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise Unsupported(f"with {what}={value!r}")
    if len(value) == 0 and empty is not None:
        return empty
    if len(value) == 1:
        return tuple(value) * nd
    if len(value) != nd:
        raise Unsupported(f"with {what}={value!r}")
    return tuple(value)


def _source_of(node: torch.fx.Node) -> torch.fx.Node:
    source = node.args[0] if node.args else node.kwargs.get("self")
    if not isinstance(source, torch.fx.Node):
        raise Unsupported("its input is not a tensor")
    meta = tensor_meta(source)
    if meta is None or meta.dtype != torch.float32:
        raise Unsupported(f"on {meta.dtype if meta is not None else 'non-tensor'} values (fp32 kernels only)")
    return source


def global_mean_dims(node: torch.fx.Node) -> list[int] | None:
    """The spatial dims of an adaptive average pool to output size 1 everywhere (a mean over them), else None."""
    kind = POOL_OPS.get(str(node.target))
    if kind is None or kind[0] != "adaptive":
        return None
    p = ops.bind_arguments(node.target._schema, list(node.args), dict(node.kwargs))
    size, rank = p["output_size"], tensor_meta(node.args[0]).dim() if tensor_meta(node.args[0]) is not None else 0
    if isinstance(size, (list, tuple)) and size and all(s == 1 for s in size) and rank > kind[1]:
        return list(range(rank - kind[1], rank))
    return None


def pool_spec(node: torch.fx.Node) -> PoolSpec:
    kind, nd = POOL_OPS[str(node.target)]
    source = _source_of(node)
    rank = tensor_meta(source).dim()
    if rank not in (nd + 1, nd + 2):
        raise Unsupported(f"on a tensor of rank {rank}")
    p = ops.bind_arguments(node.target._schema, list(node.args), dict(node.kwargs))
    if kind == "adaptive":
        if global_mean_dims(node) is not None:
            raise Unsupported("to output size 1 (a mean: the reduction kernel's job)")
        return PoolSpec("adaptive", nd, output_size=_ints(p["output_size"], nd, "output_size"))
    kernel = _ints(p["kernel_size"], nd, "kernel_size")
    stride = _ints(p["stride"], nd, "stride", empty=kernel)
    padding = _ints(p["padding"], nd, "padding")
    dilation = _ints(p.get("dilation", 1), nd, "dilation")
    if min(kernel + stride + dilation) < 1 or min(padding) < 0:
        raise Unsupported("with a non-positive kernel, stride or dilation")
    spec = PoolSpec(kind, nd, kernel, stride, padding, dilation, bool(p["ceil_mode"]))
    if kind == "avg":
        spec.count_include_pad = bool(p["count_include_pad"])
        divisor = p.get("divisor_override")
        if divisor is not None and (not isinstance(divisor, int) or divisor == 0):
            raise Unsupported(f"with divisor_override={divisor!r}")
        spec.divisor = divisor
    if "with_indices" in str(node.target):
        if any(u.target is not operator.getitem for u in node.users):
            raise Unsupported("its (values, indices) tuple is used whole")
        spec.tuple_form = True
    return spec


def scan_spec(node: torch.fx.Node) -> ScanSpec:
    source = _source_of(node)
    p = ops.bind_arguments(node.target._schema, list(node.args), dict(node.kwargs))
    if p.get("dtype") not in (None, torch.float32):
        raise Unsupported(f"with dtype={p['dtype']} (fp32 kernels only)")
    rank = tensor_meta(source).dim()
    if rank == 0:
        raise Unsupported("on a 0-dim tensor")
    dim = p["dim"]
    if not isinstance(dim, int) or not -rank <= dim < rank:
        raise Unsupported(f"with dim={dim!r}")
    return ScanSpec(SCAN_OPS[str(node.target)], dim % rank)


def unfused_reason(node: torch.fx.Node) -> str | None:
    """Why a pooling or scan op stayed an ATen call (None when the node is neither)."""
    name = str(node.target)
    if name not in POOL_OPS and name not in SCAN_OPS:
        return None
    try:
        pool_spec(node) if name in POOL_OPS else scan_spec(node)
    except Unsupported as err:
        return f"{'pooling' if name in POOL_OPS else 'scan'} {err}: kept as an ATen call"
    except Exception as err:  # noqa: BLE001 - a surprising argument form is a reason, not a crash
        return f"pooling/scan with unexpected arguments ({type(err).__name__}: {err}): kept as an ATen call"
    return "pooling/scan whose producers or consumers could not be arranged around it: kept as an ATen call"


# --------------------------------------------------------------------------------------------------------------
# Planning


@dataclass
class WindowKernel:
    """One pooling or scan kernel (a plan step)."""
    name: str
    spec: PoolSpec | ScanSpec
    core: torch.fx.Node                     # the pooling / scan node
    value: torch.fx.Node                    # the node carrying the result's values (core, item 0, or the 2nd flip)
    index: torch.fx.Node | None             # max pool's indices (item 1), when used
    source: torch.fx.Node                   # what is pooled / scanned (before a reverse scan's first flip)
    hidden: list[torch.fx.Node]             # getitems and flips absorbed with the core
    prologue: list[torch.fx.Node]           # pointwise ops computing the source, per element
    epilogue: list[torch.fx.Node]           # pointwise ops over the result's shape
    bias: tuple[str, str] | None = None     # (convolution output, its bias): added to it first, per channel
    inputs: list[tuple[str, str, str]] = field(default_factory=list)  # (value name, "in"/"out"/"channel", dtype)
    outputs: list[torch.fx.Node] = field(default_factory=list)         # written, in this order

    @property
    def is_pool(self) -> bool:
        return isinstance(self.spec, PoolSpec)

    @property
    def nodes(self) -> list[torch.fx.Node]:
        return sorted(self.prologue + [self.core] + self.hidden + self.epilogue, key=_position)

    @property
    def ops(self) -> list[str]:
        moved = [f"kfuse.bias_of_{self.bias[0]}"] if self.bias else []
        return moved + [str(n.target) for n in self.nodes if n.target is not operator.getitem]


_ORDER: dict[torch.fx.Node, int] = {}


def _position(node: torch.fx.Node) -> int:
    return _ORDER.get(node, 1 << 60)


def _shape(node) -> tuple | None:
    meta = tensor_meta(node)
    return tuple(meta.shape) if meta is not None else None


def _args(node: torch.fx.Node) -> list:
    flat = []
    for a in list(node.args) + list(node.kwargs.values()):
        flat.extend(a if isinstance(a, (list, tuple)) else [a])
    return flat


def pointwise_with_masks(node: torch.fx.Node) -> bool:
    """A pointwise op with a float32 result whose tensor operands are float32 or bool (x * mask): the planner's
    kernels take float32 only; these kernels read a bool operand as 0.0 / 1.0, which is PyTorch's promotion."""
    op = ops.lookup(node.target) if node.op == "call_function" else None
    meta = tensor_meta(node)
    if op is None or meta is None or meta.dtype != torch.float32:
        return False
    if getattr(node.target, "_schema", None) is not None and node.target._schema.is_mutable:
        return False
    for a in _args(node):
        if isinstance(a, torch.fx.Node) and (tensor_meta(a) is None or tensor_meta(a).dtype not in OPERAND_DTYPES):
            return False
    placeholder = lambda a: "v" if isinstance(a, torch.fx.Node) else a  # noqa: E731
    try:
        op.render([placeholder(a) for a in node.args], {k: placeholder(v) for k, v in node.kwargs.items()})
    except (ValueError, TypeError, KeyError):
        return False
    return True


def fuse_windows(steps: list, nodes: list[torch.fx.Node], epochs: dict) -> list:
    """Replace pooling and scan library calls (with the pointwise steps around them) by WindowKernel steps."""
    _ORDER.clear()
    _ORDER.update({n: i for i, n in enumerate(nodes)})
    # (a call kept to eager's bits only where its window is exact: a max pool, whose kernel gives those bits)
    for call in [s for s in steps if isinstance(s, LibraryCall)
                 and (not s.eager_bits or str(s.node.target) in EXACT_WINDOWS)]:
        name = str(call.node.target)
        if name not in POOL_OPS and name not in SCAN_OPS:
            continue
        if call not in steps:
            continue  # absorbed by an earlier kernel (cannot happen for a core, but stay safe)
        try:
            spec = pool_spec(call.node) if name in POOL_OPS else scan_spec(call.node)
        except Unsupported:
            continue
        except Exception:  # noqa: BLE001 - stays an ATen call; codegen lists the reason
            continue
        steps = _absorb(call, spec, steps, epochs)
    return steps


def _absorb(call: LibraryCall, spec, steps: list, epochs: dict) -> list:
    core = call.node
    epoch = epochs.get(core)
    hidden: list[torch.fx.Node] = []
    value, index, source = core, None, _source_of(core)
    absorbed: list = [call]
    step_of = {}
    for s in steps:
        for n in (s.nodes if isinstance(s, FusedKernel) else [s.node] if isinstance(s, (LibraryCall, TupleItem))
                  else []):
            step_of[n] = s
    if isinstance(spec, PoolSpec) and spec.tuple_form:
        items = {int(u.args[1]): u for u in core.users}
        hidden += list(items.values())
        absorbed += [step_of[u] for u in items.values()]
        value = items.get(0)
        index = items.get(1) if items.get(1) is not None and items[1].users else None
        if value is None or not value.users:
            value = None
    if isinstance(spec, ScanSpec):
        flips = _reverse_flips(core, source, spec.dim, epochs)
        if flips is not None:
            first, second = flips
            spec.reverse, source, value = True, first.args[0], second
            hidden += [first, second]
            absorbed += [step_of[first], step_of[second]]
            if tensor_meta(source) is None or tensor_meta(source).dtype != torch.float32:
                return steps
        else:
            shifted = _exclusive_cat(core, spec, epochs)
            if shifted is not None:
                spec.exclusive, value = True, shifted[0]
                hidden += shifted
                absorbed += [step_of[n] for n in shifted if n in step_of]
    inside = set(hidden) | {core}

    prologue, pro_steps, bias = _prologue(source, inside, step_of, epoch, epochs)
    absorbed += pro_steps
    inside |= set(prologue)
    bias_call = None
    if not prologue:
        bias_call = _biased_conv(source, inside, step_of)
        if bias_call is not None:
            bias = (source.name, bias_call.node.args[2].name)

    result_nodes = [n for n in (value, index) if n is not None]
    if not result_nodes:
        return steps
    result_shape = _shape(result_nodes[0])
    epi_steps = _epilogue_candidates(value, inside, steps, step_of, result_shape, epoch, epochs)
    for n in range(len(epi_steps), -1, -1):
        kernel = _build(spec, core, value, index, source, hidden, prologue, bias, epi_steps[:n], result_nodes)
        if kernel is not None:
            break
    else:
        return steps
    if bias_call is not None:
        bias_call.bias_moved = True
    absorbed += epi_steps[:n]
    last = max(absorbed, key=lambda s: _position(_step_node(s)))
    drop = {id(s) for s in absorbed}
    out = []
    for s in steps:
        if s is last:
            out.append(kernel)
        elif id(s) not in drop:
            out.append(s)
    return out


def _step_node(step) -> torch.fx.Node:
    return step.result if isinstance(step, FusedKernel) else step.node


def _reverse_flips(core, source, dim: int, epochs):
    """flip(x, [dim]) -> scan -> flip(.., [dim]), each flip used only there: the two flips, else None."""
    def flips_dim(node) -> bool:
        if node.op != "call_function" or str(node.target) != FLIP or epochs.get(node) != epochs.get(core):
            return False
        dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dims")
        rank = tensor_meta(node).dim()
        return isinstance(dims, (list, tuple)) and sorted({d % rank for d in dims}) == [dim]

    users = list(core.users)
    if not flips_dim(source) or len(source.users) != 1 or len(users) != 1 or not flips_dim(users[0]):
        return None
    if users[0].args[0] is not core:
        return None
    return source, users[0]


def _exclusive_cat(core, spec: ScanSpec, epochs) -> list[torch.fx.Node] | None:
    """cat([fill, scan], dim) along the scanned dim, the scan's only reader, the fill the scan's identity and one
    long along dim (zeros_like(x.select(dim, 0).unsqueeze(dim)), a common way to write an exclusive scan): the
    concatenation, the fill and the views only the fill reads (they become dead), else None."""
    users = list(core.users)
    if len(users) != 1 or users[0].op != "call_function" or str(users[0].target) != CAT:
        return None
    cat = users[0]
    tensors = cat.args[0] if cat.args else None
    dim = cat.args[1] if len(cat.args) > 1 else cat.kwargs.get("dim", 0)
    rank = tensor_meta(core).dim()
    if not isinstance(tensors, (list, tuple)) or len(tensors) != 2 or tensors[1] is not core:
        return None
    if not isinstance(dim, int) or dim % rank != spec.dim or epochs.get(cat) != epochs.get(core):
        return None
    fill = tensors[0]
    value = FILLS.get(str(fill.target)) if isinstance(fill, torch.fx.Node) and fill.op == "call_function" else None
    identity = 0.0 if spec.op == "sum" else 1.0
    if value is None or value(list(fill.args)) != identity or list(fill.users) != [cat]:
        return None
    fill_meta, core_meta = tensor_meta(fill), tensor_meta(core)
    want = list(core_meta.shape)
    want[spec.dim] = 1
    if fill_meta is None or fill_meta.dtype != torch.float32 or list(fill_meta.shape) != want:
        return None
    if core_meta.dtype != torch.float32 or tensor_meta(cat) is None or tensor_meta(cat).dtype != torch.float32:
        return None
    nodes = [cat, fill]
    # views that only the fill read (its shape's source: x.select(dim, 0).unsqueeze(dim)) go with it
    frontier = [a for a in fill.args if isinstance(a, torch.fx.Node)]
    while frontier:
        a = frontier.pop()
        schema = getattr(a.target, "_schema", None)
        if (a.op == "call_function" and schema is not None and not schema.is_mutable and str(a.target) in VIEW_OPS
                and all(u in nodes for u in a.users)):
            nodes.append(a)
            frontier += [b for b in a.args if isinstance(b, torch.fx.Node)]
    return nodes


# Views whose only reader a kernel absorbs (an exclusive scan's fill) are dropped with it: they compute nothing.
VIEW_OPS = {"aten.select.int", "aten.unsqueeze.default", "aten.slice.Tensor", "aten.narrow.default",
            "aten.view.default", "aten.reshape.default", "aten.expand.default", "aten.squeeze.dim"}


def _prologue(source, inside: set, step_of: dict, epoch, epochs):
    """The pointwise steps (whole fused kernels, or single ops with bool operands) that compute `source` and
    whose values nothing else reads, walking back from `source`: (nodes, steps, moved conv bias)."""
    shape = _shape(source)
    taken: list[torch.fx.Node] = []
    steps_taken: list = []
    bias = None
    members = set(inside)
    heap = [(-_position(source), id(source), source)]
    seen = set()
    while heap:
        _, _, v = heapq.heappop(heap)
        if v in seen:
            continue
        seen.add(v)
        step = step_of.get(v)
        if any(u not in members for u in v.users) or _shape(v) != shape or epochs.get(v) != epoch:
            continue
        if isinstance(step, FusedKernel) and step.result is v:
            if step.channels_last_input or any(epochs.get(n) != epoch for n in step.nodes):
                continue
            if step.bias is not None:
                if bias is not None:
                    continue
                bias = step.bias
            group = step.nodes
        elif isinstance(step, LibraryCall) and not step.eager_bits and pointwise_with_masks(v):
            group = [v]
        else:
            continue
        taken += group
        steps_taken.append(step)
        members |= set(group)
        for n in group:
            for a in _args(n):
                if isinstance(a, torch.fx.Node) and a not in members:
                    heapq.heappush(heap, (-_position(a), id(a), a))
    return sorted(taken, key=_position), steps_taken, bias


def _biased_conv(source, inside: set, step_of: dict) -> LibraryCall | None:
    """A batched convolution with a bias whose output only this kernel reads: the kernel adds its bias."""
    call = step_of.get(source)
    if not isinstance(call, LibraryCall) or call.channels_last or call.bias_moved:
        return None
    if call.eager_bits and not bias_add_is_eager_s(call.node):
        return None
    if any(u not in inside for u in source.users) or movable_bias(call.node) is None:
        return None
    out = tensor_meta(source)
    return call if out.dtype == torch.float32 and out.dim() >= 2 else None


def _epilogue_candidates(value, inside: set, steps: list, step_of: dict, shape, epoch, epochs) -> list:
    """Fused pointwise kernels after the result, of the result's shape, reading it or each other (in order)."""
    if value is None:
        return []
    members = set(inside)
    chosen = []
    for step in steps:
        if not isinstance(step, FusedKernel) or step.bias is not None or step.channels_last_input:
            continue
        if _position(step.result) < _position(value) or _shape(step.result) != shape:
            continue
        if any(epochs.get(n) != epoch for n in step.nodes):
            continue
        reads = [a for n in step.nodes for a in _args(n) if isinstance(a, torch.fx.Node) and a in members]
        if not reads:
            continue
        chosen.append(step)
        members |= set(step.nodes)
    return chosen


def _build(spec, core, value, index, source, hidden, prologue, bias, epi_steps, result_nodes):
    """The kernel, or None when a value needed outside would be needed before the kernel runs or cannot be
    written (a prologue value)."""
    epilogue = sorted([n for s in epi_steps for n in s.nodes], key=_position)
    k = WindowKernel("", spec, core, value, index, source, list(hidden), list(prologue), epilogue, bias)
    members = set(k.nodes)
    last = max(_position(n) for n in members)
    writable = set(result_nodes) | set(epilogue)
    for n in k.nodes:
        outside = [u for u in n.users if u not in members]
        if not outside:
            continue
        if n not in writable or any(u.op != "output" and _position(u) <= last for u in outside):
            return None
        k.outputs.append(n)
    if not k.outputs:
        return None
    # operands: what the prologue (or the pool/scan directly) and the epilogue read from outside
    inputs: list[tuple[str, str, str]] = []

    def add(node, kind):
        entry = (node.name, kind, OPERAND_DTYPES[tensor_meta(node).dtype])
        if entry not in inputs:
            inputs.append(entry)

    if not prologue:
        add(source, "in")
    for n in prologue:
        for a in _args(n):
            if isinstance(a, torch.fx.Node) and a not in members:
                add(a, "in")
    if bias is not None:
        inputs.append((bias[1], "channel", "float"))
        if (bias[0], "in", "float") not in inputs:
            inputs.append((bias[0], "in", "float"))
    for n in epilogue:
        for a in _args(n):
            if isinstance(a, torch.fx.Node) and a not in members:
                if tensor_meta(a) is None or tensor_meta(a).dtype != torch.float32:
                    return None
                add(a, "out")
    k.inputs = inputs
    return k


# A strip kernel unrolls every load of its windows: at most this many per strip (registers and code size).
STRIP_LOADS = 96
STRIP_LENGTHS = (8, 4, 2)


def strip_length(spec: PoolSpec) -> int:
    """Outputs per thread for the strip kernel, 0 for the general one. Average pools over 2 or 3 dims take strips
    of consecutive outputs down dim nd - 2 at one output column: coordinates, bounds and the lead offsets are found
    once per strip, and an input row that several windows of the strip hold is read once for all of them (the
    general kernel's per-output index math left it issue-bound at a quarter of the memory bandwidth)."""
    if spec.kind != "avg" or spec.nd < 2:
        return 0
    *outer, (kh, sh), (kw, _) = zip(spec.kernel, spec.stride)
    planes = 1
    for k, _ in outer:
        planes *= k
    for length in STRIP_LENGTHS:
        rows = sum(1 for i in range((length - 1) * sh + kh) if any(0 <= i - r * sh < kh for r in range(length)))
        if planes * rows * kw <= STRIP_LOADS:
            return length
    return 0


# Row strips: a thread takes this many consecutive outputs along the last dim and loads the input columns their
# windows span once, as 16-byte loads, where every input's rows are contiguous and aligned (checked at run time).
ROW_STRIP = 4
# ... as long as a window row's span (from the float4 before its first column) stays in this many floats (registers).
ROW_STRIP_FLOATS = 64


def takes_row_strips(kernel: WindowKernel) -> bool:
    """Whether the pool may run the row-strip kernel (its vector width is chosen at run time). Max pools (without
    indices) and 1D average pools: one output per thread ran issue-bound (a MaxPool1d of 8 taps at 31% of the memory
    roofline, torch.compile's kernel 1.7x faster, H200): its index arithmetic, bounds checks and K scalar loads per
    output. A strip of 4 outputs finds its offsets once, reads its span with float4 loads that a warp covers
    contiguously (float2 where rows are 8-byte aligned only), and skips every check where its span lies inside the
    input; strips at the edges take the per-output path. Average pools over 2-3 dims keep the strip kernel down dim
    nd - 2 (strip_length) where it takes them; wider windows take row strips too (AvgPool2d of 11 x 11 over 2048 x 2048
    images: one output per thread read 44 bytes apart across a warp, 0.58x eager's speed, H200)."""
    spec = kernel.spec
    if not isinstance(spec, PoolSpec) or spec.kind not in ("max", "avg") or kernel.index is not None:
        return False
    if spec.kind == "avg" and spec.nd > 1 and strip_length(spec):
        return False
    if any(dtype != "float" for _, kind, dtype in kernel.inputs if kind == "in"):
        return False
    floats = -spec.padding[-1] % 4 + (ROW_STRIP - 1) * spec.stride[-1] + (spec.kernel[-1] - 1) * spec.dilation[-1] + 1
    return -(-floats // 4) * 4 <= ROW_STRIP_FLOATS


def kernel_name(kernel: WindowKernel) -> str:
    parts: list[str] = ["bias"] if kernel.bias else []
    for node in kernel.nodes:
        if node.target is operator.getitem:
            continue
        part = str(node.target).split(".")[1].lstrip("_")
        if kernel.is_pool is False and kernel.spec.reverse and part == "flip":
            continue
        if kernel.is_pool is False and kernel.spec.exclusive and node in kernel.hidden:
            continue  # (the concatenation, its fill and the fill's views)
        if not parts or parts[-1] != part:
            parts.append(part)
    if not kernel.is_pool and (kernel.spec.reverse or kernel.spec.exclusive):
        prefix = "reverse_" if kernel.spec.reverse else "exclusive_"
        parts = [(prefix + p if p in ("cumsum", "cumprod") else p) for p in parts]
    name = "fused_" + "_".join(parts)
    return name if len(name) <= 60 else name[:60].rstrip("_")


# --------------------------------------------------------------------------------------------------------------
# Printing: per-element functions shared by both targets (source, emit), then CUDA kernels or CPU loops, and the
# host wrapper.

WINDOW_DECLS = printing.FAST_DIVISION_DECLS + r"""
namespace kf {
// An operand or output of a pooling/scan kernel: its strides along the lead dims and along the inner dims (the
// window's dims, or the scanned dim), in elements; 0 along broadcast dims.
struct WView {
    void* data;
    int64_t lst[KF_MAX_DIMS];
    int64_t sst[3];
};
// The lead dims (batch and channels; for a scan every dim but the scanned one), coalesced; rows = their product.
struct WGeom {
    int nlead;
    int64_t lead[KF_MAX_DIMS];
    Div ldiv[KF_MAX_DIMS];  // lead[d] as a divisor (div_by: a multiply-high for 32-bit indices)
    int64_t rows;
};
}  // namespace kf
"""

# What the kernels use beside the geometry (the CUDA target's host code fills the geometry and never calls them:
# WINDOW_DECLS alone goes there).
WINDOW_KERNEL_HELPERS = r"""
namespace kf {
// Pooling strips: whether any of a strip's R windows (kernel k, stride s) holds its input row i (not with a
// stride over the kernel, between windows). Called with constants in unrolled loops: folded away.
#ifdef __CUDACC__
__host__ __device__ __forceinline__
#else
inline
#endif
constexpr bool strip_row_used(int i, int R, int k, int s) {
    for (int r = 0; r < R; ++r)
        if (i - r * s >= 0 && i - r * s < k) return true;
    return false;
}
// VEC (4 or 2) consecutive floats from an address aligned to their size (row strips): one vector load on the GPU.
template <int VEC>
KF_HD void load_floats(const float* p, float* x) {
#ifdef __CUDA_ARCH__
    if constexpr (VEC == 4) {
        const float4 v = *reinterpret_cast<const float4*>(p);
        x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
    } else {
        const float2 v = *reinterpret_cast<const float2*>(p);
        x[0] = v.x, x[1] = v.y;
    }
#else
    for (int i = 0; i < VEC; ++i) x[i] = p[i];
#endif
}
}  // namespace kf
"""

WINDOW_HOST = printing.FAST_DIVISION_HOST + r"""
namespace kf {
inline std::vector<int64_t> window_broadcast(const std::vector<at::Tensor>& ts) {
    std::vector<int64_t> sizes(ts[0].sizes().begin(), ts[0].sizes().end());
    for (size_t k = 1; k < ts.size(); ++k) sizes = at::infer_size(sizes, ts[k].sizes());
    return sizes;
}
// A per-channel vector (a convolution's bias) along dim 1 of `sizes`.
inline at::Tensor channel_view(const at::Tensor& t, const std::vector<int64_t>& sizes) {
    std::vector<int64_t> shape(sizes.size(), 1);
    shape[1] = t.numel();
    return t.reshape(shape).expand(sizes);
}
// Fills the views' strides and the lead geometry. Every view has the same lead sizes (its inner sizes may
// differ: a pool's input and output); lead dims of size 1 drop out, neighbours merge where every view allows.
inline void window_views(const std::vector<at::Tensor>& views, const std::vector<int64_t>& inner, WGeom& g, WView* out) {
    const int64_t nd = views[0].dim();
    TORCH_CHECK(nd <= KF_MAX_DIMS, "kfuse kernels support up to ", KF_MAX_DIMS, " dimensions");
    for (size_t k = 0; k < views.size(); ++k) {
        TORCH_CHECK(views[k].dim() == nd, "kfuse window kernel: operand ranks disagree");
        out[k].data = const_cast<void*>(views[k].data_ptr());
        for (int j = 0; j < 3; ++j) out[k].sst[j] = 0;
        for (size_t j = 0; j < inner.size(); ++j) out[k].sst[j] = views[k].stride(inner[j]);
    }
    int n = 0;
    for (int64_t d = 0; d < nd; ++d) {
        if (std::find(inner.begin(), inner.end(), d) != inner.end() || views[0].size(d) == 1) continue;
        bool merge = n > 0;
        for (size_t k = 0; k < views.size() && merge; ++k)
            merge = out[k].lst[n - 1] == views[k].stride(d) * views[k].size(d);
        if (merge) {
            g.lead[n - 1] *= views[0].size(d);
            for (size_t k = 0; k < views.size(); ++k) out[k].lst[n - 1] = views[k].stride(d);
        } else {
            g.lead[n] = views[0].size(d);
            for (size_t k = 0; k < views.size(); ++k) out[k].lst[n] = views[k].stride(d);
            ++n;
        }
    }
    g.nlead = n;
    for (int i = 0; i < n; ++i) g.ldiv[i] = make_div(g.lead[i]);
    g.rows = 1;
    for (int i = 0; i < n; ++i) g.rows *= g.lead[i];
}
// The widest vector (4 or 2 floats, 0: none) the row-strip kernel may read view v with: unit stride along the last
// window dim, every other stride a multiple of it and the data aligned to it, so every row starts aligned (rows of
// an odd multiple of 2 floats, a 3x3 convolution's 126 columns: 2).
inline int window_row_vector(const WView& v, const WGeom& g, int nd) {
    if (v.sst[nd - 1] != 1) return 0;
    for (int vec = 4; vec >= 2; vec /= 2) {
        bool ok = reinterpret_cast<uintptr_t>(v.data) % (4 * vec) == 0;
        for (int d = 0; ok && d < g.nlead; ++d) ok = v.lst[d] % vec == 0;
        for (int j = 0; ok && j + 1 < nd; ++j) ok = v.sst[j] % vec == 0;
        if (ok) return vec;
    }
    return 0;
}
// 32-bit indexing only when every offset and the work count fit (with room for a grid's overshoot).
inline bool window_small_index(const std::vector<at::Tensor>& views, int64_t work) {
    int64_t worst = work;
    for (const at::Tensor& v : views) {
        int64_t off = 0;
        for (int64_t d = 0; d < v.dim(); ++d) off += (v.size(d) - 1) * v.stride(d);
        worst = std::max(worst, off);
    }
    return worst < INT32_MAX - ((int64_t)1 << 24);
}
// PyTorch's pooling output size (pooling_output_shape), with its checks.
inline int64_t pool_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
    TORCH_CHECK(p <= ((k - 1) * d + 1) / 2, "pad should be at most half of effective kernel size");
    const int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
    int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
    if (ceil_mode && (out - 1) * s >= in + p) --out;
    TORCH_CHECK(out > 0, "pooling: output size is too small (input ", in, ", kernel ", k, ")");
    return out;
}
}  // namespace kf
"""




@dataclass
class WindowSources:
    helpers: str      # per-kernel element functions (need the ops prelude before them)
    decls: str        # views, geometry and argument structs (host and device)
    device: str       # CUDA kernels and launchers, or CPU loops
    host: str         # ATen-side wrappers
    expressions: str  # the pointwise expressions used, for the prelude's selection


# The strip kernel's per-thread function (see _Printer.strip_fn); {rows}: STRIP_ROWS, in STRIP_PLANES for 3D.
STRIP_FN = """template <typename index_t>
KF_INLINE void {n}_strip(const {n}_args& A, const index_t* base{params}) {{
    constexpr int R = {r};  // outputs in the strip, down dim {h}
    constexpr int KH = {kh}, SH = {sh}, PH = {ph};  // the window down dim {h}
    constexpr int KW = {kw}, SW = {sw}, PW = {pw};  // and along dim {w}
    constexpr int ROWS = (R - 1) * SH + KH;  // the input rows the strip's windows span
    const index_t in_h = (index_t)A.in[{h}], in_w = (index_t)A.in[{w}];
    const index_t h0 = {oh} * SH - PH, w0 = {ow} * SW - PW;
    float sum[R];
    #pragma unroll
    for (int r = 0; r < R; ++r) sum[r] = 0.0f;
    // Strips whose windows stay inside the input load without a check. The others load at coordinates clamped
    // into the input and drop the values outside: +0.0 instead, which changes no sum (a sum that starts at +0.0
    // is never -0.0); straight-line code either way, so all of a strip's loads can be in flight at once.
    const bool interior_cols = w0 >= 0 && w0 + KW <= in_w;
    bool col_in[KW];
    index_t col[KW];
    #pragma unroll
    for (int kw = 0; kw < KW; ++kw) {{
        col_in[kw] = w0 + kw >= 0 && w0 + kw < in_w;
        col[kw] = w0 + kw < 0 ? 0 : (w0 + kw < in_w ? w0 + kw : in_w - 1);
    }}
{rows}{divisor}
    #pragma unroll
    for (int r = 0; r < R; ++r) {{
        if ({oh} + r >= (index_t)A.out[{h}]) break;{divisor_per_output}
        {n}_emit<index_t>(A, base{emit_args}, sum[r] / (float)({divide}), 0);
    }}
}}
"""
# PyTorch's divisor: each extent [start, min(start + k, in + pad)) whole (count_include_pad, `pool`) or clipped to
# the input (`count`: >= 1 with PyTorch's output sizes, every window holds an input element); the extents along the
# last dim (and dim 0 in 3D) once per strip, down the strip per output. divisor_override: a constant, none of this.
STRIP_DIVISOR = {
    "pool": ("""
    const index_t w_end = w0 + KW < in_w + PW ? w0 + KW : in_w + PW;
    index_t pool = w_end - w0;{plane}""", """
    pool *= d_end - d0;""", """
        const index_t h_start = h0 + r * SH;
        const index_t h_end = h_start + KH < in_h + PH ? h_start + KH : in_h + PH;""", "pool * (h_end - h_start)"),
    "count": ("""
    const index_t w_end = w0 + KW < in_w ? w0 + KW : in_w;
    index_t count = w_end - (w0 > 0 ? w0 : 0);{plane}""", """
    count *= (d_end < (index_t)A.in[0] ? d_end : (index_t)A.in[0]) - (d0 > 0 ? d0 : 0);""", """
        const index_t h_start = h0 + r * SH;
        const index_t h_end = h_start + KH < in_h ? h_start + KH : in_h;""",
              "count * (h_end - (h_start > 0 ? h_start : 0))"),
}
STRIP_ROWS = """    if (interior_cols && h0 >= 0 && h0 + ROWS <= in_h) {{
        #pragma unroll
        for (int i = 0; i < ROWS; ++i) {{
            if (!kf::strip_row_used(i, R, KH, SH)) continue;
            #pragma unroll
            for (int kw = 0; kw < KW; ++kw) {{
                const float x = {interior};
                #pragma unroll
                for (int r = 0; r < R; ++r)
                    if (i - r * SH >= 0 && i - r * SH < KH) sum[r] += x;
            }}
        }}
    }} else {{
        #pragma unroll
        for (int i = 0; i < ROWS; ++i) {{
            if (!kf::strip_row_used(i, R, KH, SH)) continue;
            const index_t ch = h0 + i;
            const bool row_in = ch >= 0 && ch < in_h;
            const index_t row = ch < 0 ? 0 : (ch < in_h ? ch : in_h - 1);
            #pragma unroll
            for (int kw = 0; kw < KW; ++kw) {{
                const float v = {edge};
                const float x = row_in && col_in[kw] ? v : 0.0f;
                #pragma unroll
                for (int r = 0; r < R; ++r)
                    if (i - r * SH >= 0 && i - r * SH < KH) sum[r] += x;
            }}
        }}
    }}"""
STRIP_PLANES = """    constexpr int KD = {kd}, SD = {sd}, PD = {pd};  // the window along dim 0, walked whole by every output
    const index_t d0 = o0 * SD - PD;
    #pragma unroll
    for (int kd = 0; kd < KD; ++kd) {{
        const index_t c0 = d0 + kd;
        if (c0 < 0 || c0 >= (index_t)A.in[0]) continue;  // (a padding plane: nothing to add)
{rows}
    }}"""
STRIP_PLANE_END = """
    const index_t d_end = d0 + KD < (index_t)A.in[0] + PD ? d0 + KD : (index_t)A.in[0] + PD;"""


class _Printer:
    def __init__(self, k: WindowKernel):
        self.k, self.n = k, k.name
        self.nin = len(k.inputs)
        self.nviews = self.nin + len(k.outputs)
        self.pool = k.is_pool
        self.nd = k.spec.nd if self.pool else 1
        self.strip = strip_length(k.spec) if self.pool else 0
        self.rows = self.pool and takes_row_strips(k)

    # -- element functions -------------------------------------------------------------------------------
    def _load(self, i: int, offset: str) -> str:
        if self.k.inputs[i][2] == "bool":
            return f"(((const bool*)A.v[{i}].data)[{offset}] ? 1.0f : 0.0f)"
        return f"((const float*)A.v[{i}].data)[{offset}]"

    def _offset(self, i: int, coords: list[str]) -> str:
        return "base[%d]" % i + "".join(f" + {c} * (index_t)A.v[{i}].sst[{j}]" for j, c in enumerate(coords))

    def _coords(self, prefix: str) -> list[str]:
        return [f"{prefix}{j}" for j in range(self.nd)]

    def source(self) -> str:
        """The pooled/scanned value at one element of the source: loads, the bias, the prologue."""
        k = self.k
        coords = self._coords("c")
        names: dict[str, str] = {}
        lines = []
        for i, (name, kind, _) in enumerate(k.inputs):
            if kind in ("in", "channel"):
                lines.append(f"    const float a{i} = {self._load(i, self._offset(i, coords))};")
                names.setdefault(name, f"a{i}")
        if k.bias is not None:
            conv, bias = k.bias
            b = next(i for i, e in enumerate(k.inputs) if e[0] == bias and e[1] == "channel")
            c = next(i for i, e in enumerate(k.inputs) if e[0] == conv and e[1] == "in")
            lines.append(f"    const float biased = a{c} + a{b};  // {conv}'s bias, moved here")
            names[conv] = "biased"
        for node in k.prologue:
            lines.append(f"    const float v_{node.name} = {ops.render_node(node, names)};  // {node.target}")
            names[node.name] = f"v_{node.name}"
        params = "".join(f", index_t {c}" for c in coords)
        return (f"template <typename index_t>\n"
                f"KF_INLINE float {self.n}_source(const {self.n}_args& A, const index_t* base{params}) {{\n"
                + "\n".join(lines) + f"\n    return {names[k.source.name]};\n}}\n")

    def source_vec(self, vec: int) -> str:
        """Row strips: the source at `vec` consecutive columns c{w} .. of one window row into x[0..vec): each
        input's values one vector load (its rows contiguous and aligned: window_row_vector), a per-channel operand
        one value, the bias and the prologue per column."""
        k, w = self.k, self.nd - 1
        coords = self._coords("c")
        lanes: list[dict[str, str]] = [{} for _ in range(vec)]
        lines = []
        for i, (name, kind, _) in enumerate(k.inputs):
            if kind == "in":
                offset = "base[%d]" % i + "".join(f" + {c} * (index_t)A.v[{i}].sst[{j}]" for j, c in
                                                  enumerate(coords[:w])) + f" + {coords[w]}"
                lines.append(f"    float a{i}[{vec}];")
                lines.append(f"    kf::load_floats<{vec}>(&((const float*)A.v[{i}].data)[{offset}], a{i});")
                for lane, names in enumerate(lanes):
                    names.setdefault(name, f"a{i}[{lane}]")
            elif kind == "channel":
                lines.append(f"    const float a{i} = {self._load(i, self._offset(i, coords))};")
                for names in lanes:
                    names.setdefault(name, f"a{i}")
        for lane, names in enumerate(lanes):
            if k.bias is not None:
                conv, bias = k.bias
                b = next(i for i, e in enumerate(k.inputs) if e[0] == bias and e[1] == "channel")
                lines.append(f"    const float biased_{lane} = {names[conv]} + a{b};")
                names[conv] = f"biased_{lane}"
            for node in k.prologue:
                lines.append(f"    const float v_{node.name}_{lane} = {ops.render_node(node, names)};")
                names[node.name] = f"v_{node.name}_{lane}"
            lines.append(f"    x[{lane}] = {names[k.source.name]};")
        params = "".join(f", index_t {c}" for c in coords)
        return (f"template <typename index_t>\n"
                f"KF_INLINE void {self.n}_source{vec}(const {self.n}_args& A, const index_t* base{params}, "
                f"float* x) {{\n"
                + "\n".join(lines) + "\n}\n")

    def row_fn(self) -> str:
        """Row strips: outputs o{w} .. o{w} + 3 along the last dim, the others fixed. Each window row's span of
        input columns is loaded once (VEC floats at a time: source4 or source2, from the aligned column at or before
        the first window's start), every window reads its taps from registers in the per-output kernel's order (the
        same bits), and one check decides whether the span lies inside the input: strips at an edge, or past the
        end, take point() per output."""
        spec, nd, n = self.k.spec, self.nd, self.n
        w = nd - 1
        o, c = self._coords("o"), self._coords("c")
        lines = [f"    constexpr int SW = {spec.stride[w]}, KW = {spec.kernel[w]}, DW = {spec.dilation[w]};",
                 f"    constexpr int LEAD = (VEC - {spec.padding[w]} % VEC) % VEC;  // columns before the first "
                 f"window, from an aligned one",
                 f"    constexpr int NV = (LEAD + {ROW_STRIP - 1} * SW + (KW - 1) * DW + VEC) / VEC;  // loads per "
                 f"window row",
                 f"    const index_t wa = {o[w]} * SW - {spec.padding[w]} - LEAD;",
                 f"    if ({o[w]} + {ROW_STRIP} > (index_t)A.out[{w}] || wa < 0 "
                 f"|| wa + VEC * NV > (index_t)A.in[{w}]) {{",
                 f"        for (int r = 0; r < {ROW_STRIP}; ++r)",
                 f"            if ({o[w]} + r < (index_t)A.out[{w}]) "
                 f"{n}_point<index_t>(A, base{''.join(f', {x}' for x in o[:w])}, {o[w]} + r);",
                 "        return;",
                 "    }"]
        if spec.kind == "max":
            lines.append(f"    float m[{ROW_STRIP}];")
            lines.append(f"    for (int r = 0; r < {ROW_STRIP}; ++r) m[r] = -INFINITY;")
        else:
            lines.append(f"    float sum[{ROW_STRIP}];")
            lines.append(f"    for (int r = 0; r < {ROW_STRIP}; ++r) sum[r] = 0.0f;")
        pad = "    "
        for j in range(w):  # the window's other dims: rows outside the input hold only padding (max: skipped)
            lines.append(f"{pad}const index_t s{j} = {o[j]} * {spec.stride[j]} - {spec.padding[j]};")
        if spec.kind == "avg" and spec.divisor is None and w:
            # PyTorch's divisor along the other dims, as point(): each extent clipped to the padded input (`pool`,
            # count_include_pad) or to the input (`count`; 0 only for a window of padding alone: 0, as point())
            lines.append(f"{pad}int64_t pool = 1, count = 1;")
            for j in range(w):
                end = f"(s{j} + {spec.kernel[j]} < (index_t)A.in[{j}] + {spec.padding[j]} ? s{j} + {spec.kernel[j]} " \
                      f": (index_t)A.in[{j}] + {spec.padding[j]})"
                lines.append(f"{pad}pool *= (int64_t)({end} - s{j});")
                lines.append(f"{pad}count *= (int64_t)((s{j} + {spec.kernel[j]} < (index_t)A.in[{j}] ? "
                             f"s{j} + {spec.kernel[j]} : (index_t)A.in[{j}]) - (s{j} > 0 ? s{j} : 0));")
        for j in range(w):
            lines.append(f"{pad}#pragma unroll")
            lines.append(f"{pad}for (int k{j} = 0; k{j} < {spec.kernel[j]}; ++k{j}) {{")
            pad += "    "
            lines.append(f"{pad}const index_t {c[j]} = s{j} + k{j} * {spec.dilation[j]};")
            lines.append(f"{pad}if ({c[j]} < 0 || {c[j]} >= (index_t)A.in[{j}]) continue;")
        lines.append(f"{pad}float x[VEC * NV];")
        lines.append(f"{pad}#pragma unroll")
        lines.append(f"{pad}for (int v = 0; v < NV; ++v) {{")
        at = f"A, base{''.join(f', {x}' for x in c[:w])}, wa + VEC * v, x + VEC * v"
        lines.append(f"{pad}    if constexpr (VEC == 4) {n}_source4<index_t>({at});")
        lines.append(f"{pad}    else {n}_source2<index_t>({at});")
        lines.append(f"{pad}}}")
        lines.append(f"{pad}#pragma unroll")
        lines.append(f"{pad}for (int r = 0; r < {ROW_STRIP}; ++r) {{")
        lines.append(f"{pad}    #pragma unroll")
        lines.append(f"{pad}    for (int kw = 0; kw < KW; ++kw) {{")
        lines.append(f"{pad}        const float v = x[LEAD + r * SW + kw * DW];")
        if spec.kind == "max":
            lines.append(f"{pad}        if (v > m[r] || v != v) m[r] = v;  // NaN wins, as in PyTorch")
        else:
            lines.append(f"{pad}        sum[r] += v;")
        lines.append(f"{pad}    }}")
        lines.append(f"{pad}}}")
        for j in reversed(range(w)):
            pad = pad[:-4]
            lines.append(f"{pad}}}")
        emit_args = "".join(f", {x}" for x in o[:w]) + f", {o[w]} + r"
        if spec.kind == "max":
            value = "m[r]"
        elif spec.divisor is not None:
            value = f"sum[r] / (float)({int(spec.divisor)})"
        elif w == 0:  # the window lies inside the input: PyTorch's divisor is its kernel size
            value = f"sum[r] / (float)({spec.kernel[w]})"
        else:  # and the kernel size along the last dim times the other dims' extents
            extents = "pool" if spec.count_include_pad else "count"
            value = f"(count > 0 ? sum[r] / (float)({spec.kernel[w]} * {extents}) : 0.0f)"
        lines.append(f"    for (int r = 0; r < {ROW_STRIP}; ++r) {n}_emit<index_t>(A, base{emit_args}, {value}, 0);")
        params = "".join(f", index_t {x}" for x in o)
        return (f"template <typename index_t, int VEC>\n"
                f"KF_INLINE void {n}_rows(const {n}_args& A, const index_t* base{params}) {{\n"
                + "\n".join(lines) + "\n}\n")

    def emit(self) -> str:
        """One result element: the epilogue over the value (and index), then every output written."""
        k = self.k
        coords = self._coords("o")
        names: dict[str, str] = {}
        if k.value is not None:
            names[k.value.name] = "value"
        lines = []
        for i, (name, kind, _) in enumerate(k.inputs):
            if kind == "out":
                lines.append(f"    const float a{i} = {self._load(i, self._offset(i, coords))};")
                names[name] = f"a{i}"
        for node in k.epilogue:
            lines.append(f"    const float v_{node.name} = {ops.render_node(node, names)};  // {node.target}")
            names[node.name] = f"v_{node.name}"
        for j, node in enumerate(k.outputs):
            v = self.nin + j
            if node is k.index:
                lines.append(f"    ((int64_t*)A.v[{v}].data)[{self._offset(v, coords)}] = index;")
            else:
                lines.append(f"    ((float*)A.v[{v}].data)[{self._offset(v, coords)}] = {names[node.name]};")
        params = "".join(f", index_t {c}" for c in coords)
        return (f"template <typename index_t>\n"
                f"KF_INLINE void {self.n}_emit(const {self.n}_args& A, const index_t* base{params}, float value, "
                f"int64_t index) {{\n    (void)value; (void)index;\n" + "\n".join(lines) + "\n}\n")

    def bases(self) -> str:
        nv = self.nviews
        return (f"template <typename index_t>\n"
                f"KF_INLINE void {self.n}_bases(const {self.n}_args& A, const kf::WGeom& g, index_t row, "
                f"index_t* base) {{\n"
                f"    for (int k = 0; k < {nv}; ++k) base[k] = 0;\n"
                f"    // unrolled over the largest rank, so every index into g and A is a constant: a loop variable there\n"
                f"    // made nvcc copy both parameter structs to local memory in each thread (an 80-byte stack frame)\n"
                f"    #pragma unroll\n"
                f"    for (int d = KF_MAX_DIMS - 1; d >= 0; --d) {{\n"
                f"        if (d >= g.nlead) continue;\n"
                f"        index_t c = row;  // (the outermost needs no division)\n"
                f"        if (d > 0) {{\n"
                f"            const index_t q = kf::div_by(row, g.ldiv[d]);\n"
                f"            c = row - q * (index_t)g.lead[d];\n"
                f"            row = q;\n"
                f"        }}\n"
                f"        for (int k = 0; k < {nv}; ++k) base[k] += c * (index_t)A.v[k].lst[d];\n"
                f"    }}\n}}\n")

    def _walk_window(self, lines: list[str], coord, inside) -> str:
        """The window's loops, one per dim, at compile-time offsets k0.. (unrolled): coordinate c{j} = coord(j) and
        in{j}, whether it and every outer one is inside (inside(j)). Returns the innermost indentation."""
        c, pad = self._coords("c"), "    "
        for j in range(self.nd):
            lines.append(f"{pad}#pragma unroll")
            lines.append(f"{pad}for (int k{j} = 0; k{j} < {self.k.spec.kernel[j]}; ++k{j}) {{")
            pad += "    "
            lines.append(f"{pad}const index_t {c[j]} = {coord(j)};")
            lines.append(f"{pad}const bool in{j} = {'in' + str(j - 1) + ' && ' if j else ''}{inside(j)};")
        return pad

    def point(self) -> str:
        """Pooling: the window of output element (o0, ...), reduced and emitted."""
        spec, nd, n = self.k.spec, self.nd, self.n
        o = self._coords("o")
        c = self._coords("c")
        params = "".join(f", index_t {x}" for x in o)
        src_args = "".join(f", {x}" for x in c)
        emit_args = "".join(f", {x}" for x in o)
        clamped = "".join(f", in{nd - 1} ? {x} : 0" for x in c)  # (a window element's coordinates, or 0 outside)
        lines = []
        if spec.kind == "max":
            with_index = self.k.index is not None
            lines.append("    float m = -INFINITY;")
            if with_index:
                lines.append("    int64_t at = -1;  // the first in-bounds element until a larger one (PyTorch's)")
            for j in range(nd):
                lines.append(f"    const index_t s{j} = {o[j]} * {spec.stride[j]} - {spec.padding[j]};")
            pad = self._walk_window(lines, lambda j: f"s{j} + k{j} * {spec.dilation[j]}",
                                    lambda j: f"{c[j]} >= 0 && {c[j]} < (index_t)A.in[{j}]")
            flat = c[0]
            for j in range(1, nd):
                flat = f"({flat}) * A.in[{j}] + {c[j]}"
            lines.append(f"{pad}const float v = {n}_source<index_t>(A, base{clamped});  // (read in bounds)")
            if with_index:
                lines.append(f"{pad}if (in{nd - 1} && (at < 0 || v > m || v != v)) {{ m = v; at = (int64_t){flat}; }}"
                             f"  // NaN wins, as in PyTorch")
            else:
                lines.append(f"{pad}if (in{nd - 1} && (v > m || v != v)) m = v;  // NaN wins, as in PyTorch")
            for j in reversed(range(nd)):
                pad = pad[:-4]
                lines.append(f"{pad}}}")
            lines.append(f"    {n}_emit<index_t>(A, base{emit_args}, m, {'at' if with_index else '0'});")
        else:
            lines.append("    float sum = 0.0f;")
            if spec.kind == "avg":
                lines.append("    int64_t pool = 1, count = 1;")
                for j in range(nd):
                    lines.append(f"    index_t s{j} = {o[j]} * {spec.stride[j]} - {spec.padding[j]};")
                    lines.append(f"    index_t e{j} = s{j} + {spec.kernel[j]} < (index_t)A.in[{j}] + "
                                 f"{spec.padding[j]} ? s{j} + {spec.kernel[j]} : (index_t)A.in[{j}] + "
                                 f"{spec.padding[j]};")
                    lines.append(f"    pool *= (int64_t)(e{j} - s{j});")
                    lines.append(f"    const index_t w{j} = s{j};  // the window's start, padding included")
                    lines.append(f"    s{j} = s{j} > 0 ? s{j} : 0;")
                    lines.append(f"    e{j} = e{j} < (index_t)A.in[{j}] ? e{j} : (index_t)A.in[{j}];")
                    lines.append(f"    count *= (int64_t)(e{j} - s{j});")
            else:  # adaptive: PyTorch's start_index / end_index
                for j in range(nd):
                    lines.append(f"    const index_t s{j} = (index_t)(((int64_t){o[j]} * A.in[{j}]) / A.out[{j}]);")
                    lines.append(f"    const index_t e{j} = (index_t)((((int64_t){o[j]} + 1) * A.in[{j}] + "
                                 f"A.out[{j}] - 1) / A.out[{j}]);")
            pad = "    "
            if spec.kind == "avg":
                # the whole window walked at compile-time offsets, each read at a coordinate clamped into the input
                # and +0.0 added for those outside it (the same sum: in order, from +0.0): straight-line loads,
                # all in flight at once, where a loop over the clipped extent read one element at a time
                pad = self._walk_window(lines, lambda j: f"w{j} + k{j}", lambda j: f"{c[j]} >= s{j} && {c[j]} < e{j}")
                lines.append(f"{pad}const float v = {n}_source<index_t>(A, base{clamped});  // (read in bounds)")
                lines.append(f"{pad}sum += in{nd - 1} ? v : 0.0f;")
            else:
                for j in range(nd):
                    lines.append(f"{pad}for (index_t {c[j]} = s{j}; {c[j]} < e{j}; ++{c[j]}) {{")
                    pad += "    "
                lines.append(f"{pad}sum += {n}_source<index_t>(A, base{src_args});")
            for j in reversed(range(nd)):
                pad = pad[:-4]
                lines.append(f"{pad}}}")
            if spec.kind == "avg":
                if spec.divisor is not None:
                    divide = str(int(spec.divisor))
                else:
                    divide = "pool" if spec.count_include_pad else "count"
                lines.append(f"    const float avg = count > 0 ? sum / (float)({divide}) : 0.0f;  "
                             f"// (an empty window only with padding: 0, as PyTorch's CPU kernel)")
            else:  # PyTorch divides by each window extent in turn
                lines.append("    const float avg = sum" + "".join(f" / (float)(e{j} - s{j})" for j in range(nd)) + ";")
            lines.append(f"    {n}_emit<index_t>(A, base{emit_args}, avg, 0);")
        return (f"template <typename index_t>\n"
                f"KF_INLINE void {n}_point(const {n}_args& A, const index_t* base{params}) {{\n"
                + "\n".join(lines) + "\n}\n")

    def strip_fn(self) -> str:
        """Average pooling, a strip of outputs (o[nd-2] .. o[nd-2] + R - 1, the others fixed): each input element
        any of its windows holds is loaded once and added to the sums of the windows holding it, in PyTorch's
        order (planes, rows, then columns). Then PyTorch's divisor: the window clipped to the padded input
        (count_include_pad), or to the input, or divisor_override; one IEEE division, as PyTorch's kernels."""
        spec, nd, n = self.k.spec, self.nd, self.n
        h, w = nd - 2, nd - 1
        o = self._coords("o")
        plane = "c0, " if nd == 3 else ""
        if spec.divisor is not None:
            divisor, per_output, divide = "", "", str(int(spec.divisor))
        else:
            divisor, plane_extent, per_output, divide = STRIP_DIVISOR["pool" if spec.count_include_pad else "count"]
            divisor = divisor.format(plane=STRIP_PLANE_END + plane_extent if nd == 3 else "")
        rows = STRIP_ROWS.format(n=n, interior=f"{n}_source<index_t>(A, base, {plane}h0 + i, w0 + kw)",
                                 edge=f"{n}_source<index_t>(A, base, {plane}row, col[kw])")
        if nd == 3:
            rows = STRIP_PLANES.format(rows="\n".join("    " + line if line else line for line in rows.split("\n")),
                                       kd=spec.kernel[0], sd=spec.stride[0], pd=spec.padding[0])
        return STRIP_FN.format(
            n=n, params="".join(f", index_t {x}" for x in o), r=self.strip, h=h, w=w,
            kh=spec.kernel[h], sh=spec.stride[h], ph=spec.padding[h],
            kw=spec.kernel[w], sw=spec.stride[w], pw=spec.padding[w], oh=o[h], ow=o[w], rows=rows,
            divisor=divisor, divisor_per_output=per_output, divide=divide,
            emit_args="".join(f", {x}" for x in o[:h]) + f", {o[h]} + r, {o[w]}")

    def helpers(self) -> str:
        parts = [self.bases(), self.source(), self.emit()]
        if self.strip:
            parts.append(self.strip_fn())
        elif self.pool:
            parts.append(self.point())
        if self.rows:
            parts += [self.source_vec(4), self.source_vec(2), self.row_fn()]
        return f"// ---- {self.n}: {' -> '.join(self.k.ops)}\n" + "\n".join(parts)

    def decls(self) -> str:
        return (f"struct {self.n}_args {{\n    kf::WView v[{self.nviews}];\n"
                f"    int64_t in[3], out[3];  // spatial sizes (pooling); in[0]: the scanned length\n"
                f"    int64_t grid[3];        // the threads' spatial grid: out[], or strips along dim nd - 2 (kf::Div: by them)\n"
                f"    kf::Div dgrid[3];\n}};\n")

    # -- pooling loops -----------------------------------------------------------------------------------
    def _decompose(self, index: str, index_t: str, indent: str) -> str:
        lines = [f"{indent}{index_t} rest = {index};"]
        for j in reversed(range(self.nd)):
            lines.append(f"{indent}const {index_t} q{j} = kf::div_by(rest, A.dgrid[{j}]);")
            lines.append(f"{indent}const {index_t} o{j} = rest - q{j} * ({index_t})A.grid[{j}];")
            lines.append(f"{indent}rest = q{j};")
        lines.append(f"{indent}{index_t} base[{self.nviews}];")
        lines.append(f"{indent}{self.n}_bases<{index_t}>(A, g, rest, base);")
        return "\n".join(lines) + "\n"

    def _per_thread(self) -> str:
        """The call that does one thread's work: a strip (its first output's coordinates) or one output."""
        nd = self.nd
        if self.strip:
            args = "".join(f", o{j} * {self.strip}" if j == nd - 2 else f", o{j}" for j in range(nd))
            return f"{self.n}_strip<index_t>(A, base{args});"
        return f"{self.n}_point<index_t>(A, base{''.join(f', o{j}' for j in range(nd))});"

    def _row_call(self) -> str:
        nd = self.nd
        args = "".join(f", o{j} * {ROW_STRIP}" if j == nd - 1 else f", o{j}" for j in range(nd))
        return f"{self.n}_rows<index_t, ROWS>(A, base{args});"

    def pool_cpu(self) -> str:
        n = self.n
        if self.rows:
            return f"""
template <typename index_t, int ROWS>
void {n}_run_t(const {n}_args& A, const kf::WGeom& g, int64_t total) {{
    at::parallel_for(0, total, 4096, [&](int64_t begin, int64_t end) {{
        for (int64_t i = begin; i < end; ++i) {{
{self._decompose("(index_t)i", "index_t", "            ")}            if constexpr (ROWS > 0) {self._row_call()}
            else {self._per_thread()}
        }}
    }});
}}

// 32-bit indices when every offset fits (the same index arithmetic as the CUDA kernel's); row strips read ROWS
// floats at a time where every input's rows are aligned to them (0: one output per iteration)
template <typename index_t>
void {n}_run_i(const {n}_args& A, const kf::WGeom& g, int64_t total, int rows) {{
    if (rows == 4) {n}_run_t<index_t, 4>(A, g, total);
    else if (rows == 2) {n}_run_t<index_t, 2>(A, g, total);
    else {n}_run_t<index_t, 0>(A, g, total);
}}
void {n}_run(const {n}_args& A, const kf::WGeom& g, int64_t total, bool small_index, int rows) {{
    if (small_index) {n}_run_i<int32_t>(A, g, total, rows);
    else {n}_run_i<int64_t>(A, g, total, rows);
}}
"""
        return f"""
template <typename index_t>
void {n}_run_t(const {n}_args& A, const kf::WGeom& g, int64_t total) {{
    at::parallel_for(0, total, 4096, [&](int64_t begin, int64_t end) {{
        for (int64_t i = begin; i < end; ++i) {{
{self._decompose("(index_t)i", "index_t", "            ")}            {self._per_thread()}
        }}
    }});
}}

// 32-bit indices when every offset fits (the same index arithmetic as the CUDA kernel's)
void {n}_run(const {n}_args& A, const kf::WGeom& g, int64_t total, bool small_index) {{
    if (small_index) {n}_run_t<int32_t>(A, g, total);
    else {n}_run_t<int64_t>(A, g, total);
}}
"""

    def pool_cuda(self) -> str:
        n = self.n
        work = (f"a strip of {self.strip} outputs down dim {self.nd - 2}" if self.strip else "one output element")
        if self.rows:
            return f"""
// One thread per strip of {ROW_STRIP} outputs along dim {self.nd - 1} (ROWS: every input's rows aligned to ROWS floats,
// read so many at a time), else (ROWS 0) per output element; consecutive threads take consecutive output columns
// (coalesced reads and writes).
template <typename index_t, int ROWS>
__global__ void {n}_kernel({n}_args A, kf::WGeom g, index_t total) {{
    const index_t step = (index_t)blockDim.x * gridDim.x;
    for (index_t i = (index_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {{
{self._decompose("i", "index_t", "        ")}        if constexpr (ROWS > 0) {self._row_call()}
        else {self._per_thread()}
    }}
}}

template <typename index_t>
void {n}_launch_i(const {n}_args& A, const kf::WGeom& g, index_t total, int rows, unsigned blocks, cudaStream_t stream) {{
    const auto kernel = rows == 4 ? {n}_kernel<index_t, 4> : rows == 2 ? {n}_kernel<index_t, 2> : {n}_kernel<index_t, 0>;
    kernel<<<blocks, 256, 0, stream>>>(A, g, total);
}}
void {n}_launch(const {n}_args& A, const kf::WGeom& g, int64_t total, bool small_index, int rows, int sms, cudaStream_t stream) {{
    const unsigned blocks = (unsigned)std::max<int64_t>(1, std::min<int64_t>((total + 255) / 256, (int64_t)sms * 64));
    if (small_index) {n}_launch_i<int32_t>(A, g, (int32_t)total, rows, blocks, stream);
    else {n}_launch_i<int64_t>(A, g, total, rows, blocks, stream);
}}
"""
        return f"""
// One thread per {work}; consecutive threads take consecutive output columns (coalesced reads and writes).
template <typename index_t>
__global__ void {n}_kernel({n}_args A, kf::WGeom g, index_t total) {{
    const index_t step = (index_t)blockDim.x * gridDim.x;
    for (index_t i = (index_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {{
{self._decompose("i", "index_t", "        ")}        {self._per_thread()}
    }}
}}

void {n}_launch(const {n}_args& A, const kf::WGeom& g, int64_t total, bool small_index, int sms, cudaStream_t stream) {{
    const int threads = 256;
    const unsigned blocks = (unsigned)std::max<int64_t>(1, std::min<int64_t>((total + threads - 1) / threads, (int64_t)sms * 64));
    if (small_index) {n}_kernel<int32_t><<<blocks, threads, 0, stream>>>(A, g, (int32_t)total);
    else {n}_kernel<int64_t><<<blocks, threads, 0, stream>>>(A, g, total);
}}
"""

    # -- scan loops --------------------------------------------------------------------------------------
    def _scan_ops(self) -> tuple[str, str, str]:
        """(identity, float combine of x and y, double combine of carry and x)"""
        if self.k.spec.op == "sum":
            return "0.0", "x + y", "carry + (double)x"
        return "1.0", "x * y", "carry * (double)x"

    def scan_cpu(self) -> str:
        n = self.n
        ident, _, _ = self._scan_ops()
        combine = "acc + (double)" if self.k.spec.op == "sum" else "acc * (double)"
        pos = "len - 1 - p" if self.k.spec.reverse else "p"
        shift = " + 1" if self.k.spec.exclusive else ""
        first = (f"\n            {n}_emit<int64_t>(A, base, 0, (float){ident}, 0);  // (exclusive: the identity first)"
                 if self.k.spec.exclusive else "")
        return f"""
// A row at a time, accumulated in double (as PyTorch's CPU scans).
void {n}_run(const {n}_args& A, const kf::WGeom& g) {{
    const int64_t len = A.in[0];
    at::parallel_for(0, g.rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, len)), [&](int64_t begin, int64_t end) {{
        int64_t base[{self.nviews}];
        for (int64_t row = begin; row < end; ++row) {{
            {n}_bases<int64_t>(A, g, row, base);
            double acc = {ident};{first}
            for (int64_t p = 0; p < len; ++p) {{
                const int64_t c0 = {pos};
                acc = {combine}{n}_source<int64_t>(A, base, c0);
                {n}_emit<int64_t>(A, base, c0{shift}, (float)acc, 0);
            }}
        }}
    }});
}}
"""

    def scan_cuda(self) -> str:
        n = self.n
        ident, combine, carry = self._scan_ops()
        pos = "len - 1 - p" if self.k.spec.reverse else "p"
        exclusive = self.k.spec.exclusive
        shift = " + 1" if exclusive else ""
        first = f"{n}_emit<index_t>(A, base, 0, (float){ident}, 0);  // (exclusive: the identity first)"
        first_rows = f"\n        if (lane == 0) {first}" if exclusive else ""
        first_cols = f"\n        {first}" if exclusive else ""
        return f"""
// Scanned dim contiguous: a warp per row. Each step covers 256 elements as 8 pieces of 32 (one coalesced load per
// lane and piece); a piece is scanned with warp shuffles in float, and the prefix of everything before it is
// carried in double: the error stays that of a 32-element tree, whatever the row's length.
template <typename index_t>
__global__ void {n}_rows({n}_args A, kf::WGeom g) {{
    const int lane = threadIdx.x & 31;
    const int64_t per_block = blockDim.x / 32;
    const index_t len = (index_t)A.in[0];
    for (int64_t row = (int64_t)blockIdx.x * per_block + threadIdx.x / 32; row < g.rows;
         row += (int64_t)gridDim.x * per_block) {{
        index_t base[{self.nviews}];
        {n}_bases<index_t>(A, g, (index_t)row, base);
        double carry = {ident};{first_rows}
        for (index_t p0 = 0; p0 < len; p0 += 256) {{
            float v[8];
#pragma unroll
            for (int j = 0; j < 8; ++j) {{
                const index_t p = p0 + 32 * j + lane;
                v[j] = p < len ? {n}_source<index_t>(A, base, {pos}) : (float){ident};
            }}
#pragma unroll
            for (int j = 0; j < 8; ++j) {{
                float x = v[j];
#pragma unroll
                for (int off = 1; off < 32; off <<= 1) {{
                    const float y = __shfl_up_sync(0xffffffffu, x, off);
                    if (lane >= off) x = {combine};
                }}
                const index_t p = p0 + 32 * j + lane;
                if (p < len) {n}_emit<index_t>(A, base, {pos}{shift}, (float)({carry}), 0);
                x = __shfl_sync(0xffffffffu, x, 31);
                carry = {carry};
            }}
        }}
    }}
}}

// Another dim scanned: a thread per row, neighbouring rows neighbours in memory; sequential, in double.
template <typename index_t>
__global__ void {n}_cols({n}_args A, kf::WGeom g) {{
    const index_t len = (index_t)A.in[0];
    for (int64_t row = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; row < g.rows;
         row += (int64_t)gridDim.x * blockDim.x) {{
        index_t base[{self.nviews}];
        {n}_bases<index_t>(A, g, (index_t)row, base);
        double carry = {ident};{first_cols}
        for (index_t p = 0; p < len; ++p) {{
            const float x = {n}_source<index_t>(A, base, {pos});
            carry = {carry};
            {n}_emit<index_t>(A, base, {pos}{shift}, (float)carry, 0);
        }}
    }}
}}

void {n}_launch(const {n}_args& A, const kf::WGeom& g, int64_t total, bool small_index, int sms, cudaStream_t stream) {{
    (void)total;
    const bool column = A.v[0].sst[0] != 1 && g.nlead > 0 && A.v[0].lst[g.nlead - 1] == 1;
    const int threads = 256;
    if (column) {{
        const unsigned blocks = (unsigned)std::max<int64_t>(1, std::min<int64_t>((g.rows + threads - 1) / threads, (int64_t)sms * 32));
        if (small_index) {n}_cols<int32_t><<<blocks, threads, 0, stream>>>(A, g);
        else {n}_cols<int64_t><<<blocks, threads, 0, stream>>>(A, g);
    }} else {{
        // a row per warp for up to 8 blocks per SM in ~8 waves: a short tail, whatever the resident count
        const unsigned blocks = (unsigned)std::max<int64_t>(1, std::min<int64_t>((g.rows + 7) / 8, (int64_t)sms * 64));
        if (small_index) {n}_rows<int32_t><<<blocks, threads, 0, stream>>>(A, g);
        else {n}_rows<int64_t><<<blocks, threads, 0, stream>>>(A, g);
    }}
}}
"""

    # -- host --------------------------------------------------------------------------------------------
    def host(self, target: str) -> str:
        k, n = self.k, self.n
        params = ", ".join(f"const at::Tensor& t{i}" for i in range(self.nin))
        ins = [f"t{i}" for i, (_, kind, _) in enumerate(k.inputs) if kind == "in"]
        lines = [f"    const std::vector<int64_t> S = kf::window_broadcast({{{', '.join(ins)}}});",
                 "    const int64_t rank = (int64_t)S.size();",
                 f"    const at::TensorOptions opts = t{k.inputs.index(next(e for e in k.inputs if e[1] == 'in'))}"
                 f".options().dtype(at::kFloat);",
                 f"    {n}_args A;"]
        if self.pool:
            spec, nd = k.spec, self.nd
            lines.append(f"    TORCH_CHECK(rank == {nd + 1} || rank == {nd + 2}, \"{n}: expected a {nd + 1}D or "
                         f"{nd + 2}D input\");")
            lines.append("    std::vector<int64_t> R(S.begin(), S.end() - " + str(nd) + ");")
            lines.append("    std::vector<int64_t> inner;")
            for j in range(nd):
                lines.append(f"    A.in[{j}] = S[rank - {nd - j}];")
                if spec.kind == "adaptive":
                    lines.append(f"    A.out[{j}] = {spec.output_size[j]};")
                else:
                    lines.append(f"    A.out[{j}] = kf::pool_out_size(A.in[{j}], {spec.kernel[j]}, {spec.stride[j]}, "
                                 f"{spec.padding[j]}, {spec.dilation[j] if spec.kind == 'max' else 1}, "
                                 f"{'true' if spec.ceil_mode else 'false'});")
                lines.append(f"    TORCH_CHECK(A.in[{j}] > 0, \"{n}: empty spatial dim\");")
                if self.strip and j == nd - 2:
                    lines.append(f"    A.grid[{j}] = (A.out[{j}] + {self.strip - 1}) / {self.strip};  "
                                 f"// strips of {self.strip} outputs")
                else:
                    lines.append(f"    A.grid[{j}] = A.out[{j}];")
                lines.append(f"    A.dgrid[{j}] = kf::make_div(A.grid[{j}]);")
                lines.append(f"    R.push_back(A.out[{j}]);")
                lines.append(f"    inner.push_back(rank - {nd - j});")
        else:
            lines.append(f"    TORCH_CHECK(rank == {tensor_meta(k.source).dim()}, \"{n}: unexpected rank\");")
            lines.append("    std::vector<int64_t> R = S;")
            if k.spec.exclusive:
                lines.append(f"    R[{k.spec.dim}] += 1;  // (exclusive: the identity, then each prefix)")
            lines.append(f"    const std::vector<int64_t> inner = {{{k.spec.dim}}};")
            lines.append(f"    A.in[0] = S[{k.spec.dim}];")
        lines.append("    std::vector<at::Tensor> views;")
        for i, (_, kind, _) in enumerate(k.inputs):
            view = {"in": f"t{i}.expand(S)", "channel": f"kf::channel_view(t{i}, S)", "out": f"t{i}.expand(R)"}[kind]
            lines.append(f"    views.push_back({view});")
        returned = []
        for j, node in enumerate(k.outputs):
            dtype = "opts.dtype(at::kLong)" if node is k.index else "opts"
            lines.append(f"    at::Tensor y{j} = kf::empty(R, {dtype});")
            lines.append(f"    views.push_back(y{j});")
            returned.append(f"y{j}")
        lines += ["    kf::WGeom g;", "    kf::window_views(views, inner, g, A.v);"]
        rows = ""
        if self.rows:
            w = self.nd - 1
            vectors = ", ".join(f"kf::window_row_vector(A.v[{i}], g, {self.nd})"
                                for i, (_, kind, _) in enumerate(k.inputs) if kind == "in")
            lines += [f"    const int rows = std::min({{{vectors}}});  // strips of {ROW_STRIP} outputs along dim {w}",
                      f"    if (rows) A.grid[{w}] = (A.out[{w}] + {ROW_STRIP - 1}) / {ROW_STRIP};",
                      f"    if (rows) A.dgrid[{w}] = kf::make_div(A.grid[{w}]);"]
            rows = ", rows"
        lines.append("    int64_t total = g.rows;")
        if self.pool:  # threads: one per output, or per strip of outputs
            lines.append("    for (int j = 0; j < " + str(self.nd) + "; ++j) total *= A.grid[j];")
        else:
            lines.append("    total *= A.in[0];")
        if target == "cuda":
            lines += ["    if (total > 0) {",
                      "        const int sms = kf::sm_count(views[0].get_device());",
                      f"        {n}_launch(A, g, total, kf::window_small_index(views, total){rows}, sms, "
                      "c10::cuda::getCurrentCUDAStream());",
                      "        C10_CUDA_KERNEL_LAUNCH_CHECK();",
                      "    }"]
        else:
            extra = f", total, kf::window_small_index(views, total){rows}" if self.pool else ""
            lines.append(f"    if (total > 0) {n}_run(A, g{extra});")
        lines.append(f"    return {{{', '.join(returned)}}};")
        return (f"\n// {n}: {' -> '.join(k.ops)}, one read of the input and one write; "
                f"outputs: {', '.join(o.name for o in k.outputs)}\n"
                f"std::vector<at::Tensor> {n}({params}) {{\n" + "\n".join(lines) + "\n}\n")


def render(kernels: list[WindowKernel], target: str) -> WindowSources:
    if not kernels:
        return WindowSources("", "", "", "", "")
    helpers, decls, device, host = [], [], [], []
    for k in kernels:
        p = _Printer(k)
        helpers.append(p.helpers())
        decls.append(p.decls())
        host.append(p.host(target))
        if target == "cuda":
            device.append(p.pool_cuda() if p.pool else p.scan_cuda())
            host.insert(0, f"void {k.name}_launch(const {k.name}_args& A, const kf::WGeom& g, int64_t total, "
                           f"bool small_index, {'int rows, ' if p.rows else ''}int sms, cudaStream_t stream);\n")
        else:
            device.append(p.pool_cpu() if p.pool else p.scan_cpu())
    code = WINDOW_KERNEL_HELPERS + "\n".join(helpers)
    return WindowSources(code, WINDOW_DECLS + "".join(decls), "".join(device), WINDOW_HOST + "".join(host), code)


def forward_lines(kernel: WindowKernel, names: dict[str, str]) -> list[str]:
    """The lines of `forward` that call the kernel and name its outputs."""
    args = ", ".join(names[name] for name, _, _ in kernel.inputs)
    lines = [f"    std::vector<at::Tensor> {kernel.name}_out = {kernel.name}({args});"]
    for j, node in enumerate(kernel.outputs):
        lines.append(f"    at::Tensor {node.name} = {kernel.name}_out[{j}];")
        names[node.name] = node.name
    return lines
