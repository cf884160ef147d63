"""Capture a model as an ATen graph (torch.export), with parameters and buffers mapped back to module names.

The graph is specialised to the example inputs' shapes only where an op's arguments name sizes (views); the
kernels kfuse generates read every size at run time.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch

from kfuse.compiler.aliases import name_aliases_by_their_ops
from kfuse.compiler.rewrite import (products_with_softmax_as_attention, summed_products_as_dot_products,
                                    views_after_pointwise, wide_attention_as_products)
from kfuse.kernels import choices


class CaptureError(Exception):
    """The model could not be captured; the message says why, in one sentence."""


@dataclass
class GraphInput:
    name: str                  # placeholder name in the graph (a C++ identifier)
    kind: str                  # "param", "buffer", "attribute" (a plain tensor attribute of the model) or "user"
    target: str | int          # module attribute path ("linear.weight") or the user input's position
    dtype: torch.dtype | None
    rank: int | None


@dataclass
class Captured:
    graph: torch.fx.Graph
    inputs: list[GraphInput]
    outputs: list[str]                         # value names returned to the user, in order
    buffer_updates: dict[str, str] = field(default_factory=dict)   # buffer input name -> new value name
    # what forward returns, the outputs in order as its leaves: "tensor", or ("tuple" | "list", [parts]) or
    # ("dict", [(key, part)]) nested as the model nests them
    structure: object = "tensor"
    dropped: list[str] = field(default_factory=list)   # the ops of results nothing read, dropped (their targets)
    kept_unused: list[str] = field(default_factory=list)  # ... or kept, where dropping them left no kernel (optimize)

    @property
    def returns_tuple(self) -> bool:
        """Whether forward returns a container (of any shape) rather than one tensor."""
        return self.structure != "tensor"


def output_structure(value) -> object:
    """The nesting of a forward's result (see Captured.structure); tensors are its leaves."""
    if isinstance(value, torch.Tensor):
        return "tensor"
    if isinstance(value, tuple):   # named tuples (torch.return_types) included: ModelNew returns a plain tuple
        return ("tuple", [output_structure(v) for v in value])
    if isinstance(value, list):
        return ("list", [output_structure(v) for v in value])
    if isinstance(value, dict):
        return ("dict", [(k, output_structure(v)) for k, v in value.items()])
    raise CaptureError(f"the model returns a {type(value).__name__}, which is not supported yet")


def _meta(node) -> tuple[torch.dtype | None, int | None]:
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return val.dtype, val.dim()
    return None, None


# Composite ops that become pointwise ops and reductions kfuse fuses (their ATen form has no kernel of ours): the
# losses and distances. (cross_entropy, cosine_similarity and triplet_margin_loss have kernels of their own in
# kfuse/kernels/reduce.py: their decompositions read the inputs more than once.) Each decomposes into PyTorch's own formula (Distance.cpp, Loss.cpp, torch._decomp), so the
# math stays the eager op's.
DECOMPOSED = {
    "aten.smooth_l1_loss.default", "aten.huber_loss.default", "aten.kl_div.default",
    "aten.pairwise_distance.default", "aten.norm.ScalarOpt_dim", "aten.mse_loss.default", "aten.l1_loss.default",
    # nn.LSTMCell, nn.GRUCell, nn.RNNCell: two linears and the gates' pointwise formula (their ATen form had no kernel
    # of ours: a file of LSTMCell steps was refused). As for the losses, a training batch norm in the same graph is
    # rewritten by the decomposition pass too, and stays an ATen call there.
    "aten.lstm_cell.default", "aten.gru_cell.default", "aten.rnn_tanh_cell.default", "aten.rnn_relu_cell.default",
}


def _decomposition_table() -> dict:
    from torch._decomp import decomposition_table
    table = {op: fn for op, fn in torch.export.default_decompositions().items() if str(op) in DECOMPOSED}
    table.update({op: fn for op, fn in decomposition_table.items() if str(op) in DECOMPOSED and op not in table})
    return table


def _batchmean_at_run_time(exported) -> None:
    """kl_div(reduction="batchmean") reaches the graph as `kl_div(..., sum) / N` with the captured batch size N
    frozen in: it becomes a sum over each sample then a mean over the batch, so any batch size divides right."""
    graph = exported.graph_module.graph
    changed = False
    for node in list(graph.nodes):
        if node.op != "call_function" or str(node.target) != "aten.div.Tensor" or len(node.args) != 2:
            continue
        loss, divisor = node.args
        if (not isinstance(loss, torch.fx.Node) or str(loss.target) != "aten.kl_div.default" or len(loss.users) != 1
                or isinstance(divisor, bool) or not isinstance(divisor, int)):
            continue
        from kfuse.kernels.ops import bind_arguments
        p = bind_arguments(loss.target._schema, list(loss.args), dict(loss.kwargs))
        shape = p["self"].meta["val"].shape if "val" in p["self"].meta else None
        if p["reduction"] != 2 or shape is None or len(shape) < 2 or shape[0] != divisor:
            continue  # (rank 1: batchmean divides by the one dim, a mean, which decomposes as it is)
        aten = torch.ops.aten
        with graph.inserting_before(node):
            pointwise = graph.call_function(aten.kl_div.default, (p["self"], p["target"], 0),
                                         {"log_target": p["log_target"]})
            per_sample = graph.call_function(aten.sum.dim_IntList, (pointwise, list(range(1, len(shape)))))
            batch = graph.call_function(aten.mean.dim, (per_sample, [0]))
        node.replace_all_uses_with(batch)
        graph.erase_node(node)
        graph.erase_node(loss)
        changed = True
    if changed:
        exported.graph_module.recompile()


def _drop_same_shape_broadcasts(graph: torch.fx.Graph) -> None:
    """`broadcast_tensors` of tensors that already share one shape returns them as they are (the losses call it
    on their two inputs): its items are replaced by the inputs, so kernels read them directly."""
    import operator
    for node in list(graph.nodes):
        if node.op != "call_function" or str(node.target) != "aten.broadcast_tensors.default":
            continue
        inputs = node.args[0]
        shapes = {tuple(i.meta["val"].shape) for i in inputs if isinstance(i, torch.fx.Node) and "val" in i.meta}
        if len(shapes) != 1 or not all(isinstance(i, torch.fx.Node) for i in inputs):
            continue
        if any(u.target is not operator.getitem for u in node.users):
            continue
        for item in list(node.users):
            item.replace_all_uses_with(inputs[int(item.args[1])])
            graph.erase_node(item)
        graph.erase_node(node)


def _drop_no_op_conversions(graph: torch.fx.Graph) -> None:
    """`x.to(...)` to x's own dtype, device and layout returns x itself in eager (PyTorch code writes
    `.to(y.device)` to be safe; GPT-2 does), so its users read x: a kernel chain is not cut there. The metadata
    asserts export puts before such calls go too (they check what capture saw on meta, and return nothing). Only for
    graphs whose devices are fixed (capture's drop_no_op_moves)."""
    from torch.fx.operator_schemas import normalize_function
    for node in list(graph.nodes):
        target = str(node.target)
        if node.op != "call_function":
            continue
        if target == "aten._assert_tensor_metadata.default" and not node.users:
            graph.erase_node(node)
            continue
        if not target.startswith("aten.to.") or not isinstance(node.args[0], torch.fx.Node):
            continue
        source, value = node.args[0].meta.get("val"), node.meta.get("val")
        normalized = normalize_function(node.target, node.args, node.kwargs, normalize_to_only_use_kwargs=True)
        kwargs = normalized.kwargs if normalized is not None else None
        if not isinstance(source, torch.Tensor) or not isinstance(value, torch.Tensor) or kwargs is None:
            continue
        same = (value.dtype == source.dtype and value.device == source.device and value.layout == source.layout
                and value.shape == source.shape and value.stride() == source.stride())
        if same and not kwargs.get("copy") and kwargs.get("memory_format") in (None, torch.preserve_format):
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)


# Dropout's ops, (input, p, train): with p = 0 or outside training each returns its input itself in eager, drawing no
# random numbers (at::dropout's own shortcut).
DROPOUTS = {"aten.dropout.default", "aten.feature_dropout.default", "aten.alpha_dropout.default",
            "aten.feature_alpha_dropout.default"}


def _drop_no_op_dropouts(graph: torch.fx.Graph) -> None:
    """A dropout that returns its input (MinGPT's and AlexNet's p = 0.0, a model in eval mode): its users read the
    input, so a kernel chain is not cut there by a library call. A real one (p > 0 in training) stays eager's call,
    drawing the same random numbers as the Model's."""
    for node in list(graph.nodes):
        if node.op != "call_function" or str(node.target) not in DROPOUTS or len(node.args) < 3:
            continue
        source, p, train = node.args[:3]
        if isinstance(source, torch.fx.Node) and isinstance(p, (int, float)) and (p == 0 or train is False):
            node.replace_all_uses_with(source)
            graph.erase_node(node)


def _out_of_place_on_intermediates(graph: torch.fx.Graph) -> None:
    """An in-place pointwise op on a value the graph computed (nn.ReLU(inplace=True)'s relu_, `out += identity`'s
    add_), where nothing can see the write but the readers after it, as its out-of-place op: those readers read the
    new value instead. Export keeps in-place ops, and one stays a library call (it writes its operand): a relu_ after
    each convolution of 17_SqueezeNetFireModule was a pass of its own over 2 GB. Left as they are: writes into the
    model's inputs, parameters and buffers (the caller sees those), into a view or through one (the write reaches
    the base), and where dtypes differ (the in-place op keeps its operand's)."""
    order = {node: i for i, node in enumerate(graph.nodes)}
    for node in list(graph.nodes):
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        schema = node.target._schema
        name = schema.name.split("::")[-1]
        if not schema.is_mutable or not name.endswith("_") or not node.args:
            continue
        functional = getattr(getattr(torch.ops.aten, name[:-1], None), node.target._overloadname, None)
        written = node.args[0]
        if functional is None or torch.Tag.pointwise not in functional.tags or not _private_value(written, node):
            continue
        dtype = written.meta["val"].dtype
        if any(isinstance(a, torch.fx.Node) and getattr(a.meta.get("val"), "dtype", dtype) != dtype
               for a in node.args[1:]):
            continue
        with graph.inserting_after(node):
            result = graph.call_function(functional, node.args, node.kwargs)
        result.meta = dict(node.meta)
        order[result] = order[node]  # (it takes the write's place: later nodes still come after it)
        for user in [u for u in written.users if u is not node and order[u] > order[node]]:
            user.replace_input_with(written, result)
        node.replace_all_uses_with(result)
        graph.erase_node(node)


def _private_value(value, writer: torch.fx.Node) -> bool:
    """Whether `value` is an op's own fresh result (not an input, a view, or the result of another write) that no
    view reads: a write into it is seen only by the ops that read it after `writer`."""
    if not isinstance(value, torch.fx.Node) or value.op != "call_function" \
            or not isinstance(value.target, torch._ops.OpOverload) or not isinstance(value.meta.get("val"), torch.Tensor):
        return False
    if value.target.is_view or value.target._schema.is_mutable:
        return False
    return not any(u is not writer and isinstance(u.target, torch._ops.OpOverload) and u.target.is_view
                   for u in value.users)


def _drop_unused_results(graph: torch.fx.Graph) -> list[str]:
    """Pure ops whose results nothing reads are dropped, chains of them from the end back (nn.MultiheadAttention
    averages its attention weights over the heads, 8.6 GB read at VisionAttention's shapes, for a caller who
    discards them). Kept: ops that write their operands, ops that draw random numbers (eager's generator advances
    for them, and the ops after them see that), and export's assertions. Returns the dropped ops' targets."""
    import operator
    dropped = []
    for node in reversed(list(graph.nodes)):
        if node.op != "call_function" or node.users:
            continue
        if node.target is operator.getitem:
            graph.erase_node(node)
            continue
        if not isinstance(node.target, torch._ops.OpOverload) or str(node.target).startswith("aten._assert"):
            continue
        if node.target._schema.is_mutable or torch.Tag.nondeterministic_seeded in node.target.tags:
            continue
        dropped.append(str(node.target))
        graph.erase_node(node)
    return dropped[::-1]


# Recurrent layers on the meta device: their ATen ops are composites that run a step at a time, so a 512-step,
# 6-layer GRU made ~34k ops for every forward on meta (11 s for the probe, 32 s for export on 2 cores). Their
# results' shapes are known from the operands: registered for meta tensors alone (the AutogradMeta key: the
# composite would run there first), these make capture take about a second. Only in processes that capture.
_RECURRENT_OPS = ("gru.input", "rnn_tanh.input", "rnn_relu.input", "lstm.input")
_recurrent_shapes: list = []  # the library holding the registrations, once per process


def _recurrent_result(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """(output, h_n[, c_n]) as empty tensors of the right shapes (hx: a tensor, or LSTM's [h0, c0])."""
    states = list(hx) if isinstance(hx, (list, tuple)) else [hx]
    directions = 2 if bidirectional else 1
    output = input.new_empty(list(input.shape[:-1]) + [directions * states[0].shape[-1]])
    return (output, *(s.new_empty(s.shape) for s in states))


def _register_recurrent_shapes() -> None:
    if not _recurrent_shapes:
        library = torch.library.Library("aten", "IMPL")
        for op in _RECURRENT_OPS:
            library.impl(op, _recurrent_result, "AutogradMeta")
        _recurrent_shapes.append(library)


class _Moves(torch.overrides.TorchFunctionMode):
    """Records which tensor each device move (`.to`, `.cuda`, `.cpu`) was made from, by object id."""

    def __init__(self):
        super().__init__()
        self.source: dict[int, int] = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in (torch.Tensor.to, torch.Tensor.cuda, torch.Tensor.cpu) and isinstance(out, torch.Tensor) \
                and out is not args[0]:  # (already there: the same tensor back, made earlier)
            self.source[id(out)] = id(args[0])
        return out


def _tensor_attributes(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Every plain tensor attribute of the model's modules (not a parameter or buffer), by its dotted path."""
    found = {}
    for prefix, module in model.named_modules():
        for name, value in vars(module).items():
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                found[f"{prefix}.{name}" if prefix else name] = value
    return found


def _attributes_on_meta(model: torch.nn.Module, example_inputs: list) -> None:
    """A capture on meta inputs gets the plain tensor attributes on meta too: Module.to leaves them where __init__
    made them (the CPU), and a forward that writes an input into one (`self.hidden.copy_(initial_hidden)`,
    KernelBench's 33_VanillaRNN) cannot copy a meta tensor into a real one. Their values are never read here."""
    tensors = [x for x in example_inputs if isinstance(x, torch.Tensor)]
    if not tensors or not all(x.is_meta for x in tensors):
        return
    for path, value in _tensor_attributes(model).items():
        if not value.is_meta:
            owner, _, name = path.rpartition(".")
            setattr(model.get_submodule(owner) if owner else model, name, value.to("meta"))


def _as_buffer(model: torch.nn.Module, path: str, value: torch.Tensor) -> None:
    owner, _, name = path.rpartition(".")
    module = model.get_submodule(owner) if owner else model
    delattr(module, name)
    module.register_buffer(name, value, persistent=False)


def _is_tensor_attribute(model: torch.nn.Module, target: str) -> bool:
    return target in _tensor_attributes(model)


def _fold_scalar_constant(node: torch.fx.Node, value) -> bool:
    """A 0-dim tensor made in forward (`torch.tensor(0.5)`) becomes the number it holds in the ops that read it:
    a 0-dim operand never sets the result's dtype against a dimensioned one, so the results are the same."""
    if not isinstance(value, torch.Tensor) or value.dim() != 0 or value.is_complex() or value.dtype == torch.bool:
        return False
    _replace_with_number(node, value.item())
    return True


def _fold_number_ops(graph: torch.fx.Graph) -> None:
    """An op whose tensor operands all became numbers (`torch.log(torch.tensor(100.0))`) is computed here, on 0-dim
    tensors as eager computes it, and its users read the resulting number: no kernel for a value known now."""
    folded = True
    while folded:
        folded = False
        for node in list(graph.nodes):
            if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
                continue
            schema = node.target._schema
            if schema.is_mutable or len(schema.returns) != 1 or str(schema.returns[0].type) != "Tensor":
                continue
            values = list(node.args) + [node.kwargs[a.name] for a in schema.arguments[len(node.args):]
                                        if a.name in node.kwargs]
            if any(isinstance(v, torch.fx.Node) or (isinstance(v, (list, tuple)) and
                                                    any(isinstance(x, torch.fx.Node) for x in v)) for v in values):
                continue
            numbers = [isinstance(v, (int, float)) and not isinstance(v, bool) and str(a.type).startswith("Tensor")
                       for a, v in zip(schema.arguments, node.args)]
            if not any(numbers):  # a factory (randn, full): not a value of folded numbers
                continue
            args = [torch.tensor(v) if n else v for v, n in zip(node.args, numbers)]
            try:
                value = node.target(*args, **node.kwargs)
            except Exception:  # not computable here: left for the planner, as it was
                continue
            if value.dim() == 0 and value.device.type == "cpu" and not value.is_complex() and value.dtype != torch.bool:
                _replace_with_number(node, value.item())
                folded = True


# The copies export wraps around a tensor made in forward: the number goes through them.
_CONSTANT_COPIES = {"aten.lift_fresh_copy.default", "aten.detach.default", "aten.detach_.default",
                    "aten.clone.default", "aten.alias.default"}


def _replace_with_number(node: torch.fx.Node, number) -> None:
    def swap(arg):
        if arg is node:
            return number
        if isinstance(arg, (list, tuple)):
            return type(arg)(swap(a) for a in arg)
        return arg
    for user in list(node.users):
        if str(user.target) in _CONSTANT_COPIES:
            _replace_with_number(user, number)
        else:
            user.args = swap(user.args)
            user.kwargs = {k: swap(v) for k, v in user.kwargs.items()}
    node.graph.erase_node(node)


@contextlib.contextmanager
def numbers_keep_their_value():
    """`torch.tensor(0.0, device=x.device)` in forward, with x on the meta device (where kfuse captures), would
    be a meta tensor: its value lost before it could be folded. While capturing, a tensor made from a Python
    number is made on the CPU instead (a 0-dim CPU tensor may meet tensors of any device), so export keeps it as
    a constant with its value, which _fold_scalar_constant turns back into the number."""
    make = torch.tensor

    def tensor(data, *args, **kwargs):
        device = kwargs.get("device")
        if isinstance(data, (bool, int, float)) and device is not None and torch.device(device).type == "meta":
            kwargs["device"] = "cpu"
        return make(data, *args, **kwargs)

    torch.tensor = tensor
    try:
        yield
    finally:
        torch.tensor = make


def capture(model: torch.nn.Module, example_inputs: list, drop_no_op_moves: bool = False,
            drop_unused: bool = True) -> Captured:
    """The model's forward as an ATen graph (torch.export on the example inputs, meta tensors as a rule).
    drop_no_op_moves: `.to(...)` calls that change nothing on the capture's tensors are dropped
    (_drop_no_op_conversions); only where the graph's devices are fixed (Dynamo guards them): on meta every device
    looks the same, and a problem's `h0.to(x.device)` moves a CPU h0 at run time.
    drop_unused: pure ops whose results nothing reads are dropped (_drop_unused_results)."""
    from torch.export.graph_signature import InputKind, OutputKind

    _register_recurrent_shapes()
    _attributes_on_meta(model, example_inputs)
    try:
        with numbers_keep_their_value():
            before = _tensor_attributes(model)
            with torch.no_grad(), _Moves() as moves:
                probe = model(*example_inputs)
            # A plain tensor attribute may be moved to the input's device, or set to another attribute moved so
            # (KernelBench's LSTMs: `self.c0 = self.h0.to(x.device)`): every call then does the same. One given a
            # value computed in forward is state carried from call to call (an Elman cell's hidden state): made a
            # buffer holding its first value again, so that export records the write (a copy_ into it), which the
            # emitted forward then makes into ModelNew's own attribute.
            held = {id(v) for v in before.values()}
            state = sorted(k for k, v in _tensor_attributes(model).items()
                           if id(v) not in held and moves.source.get(id(v)) not in held)
            for path in state:
                _as_buffer(model, path, before[path])
            exported = torch.export.export(model, tuple(example_inputs))
        _batchmean_at_run_time(exported)
        if any(str(n.target) in DECOMPOSED for n in exported.graph.nodes if n.op == "call_function"):
            # only then: run_decompositions also rewrites ops kfuse fuses as they are (training batch norm)
            exported = exported.run_decompositions(_decomposition_table())
    except CaptureError:
        raise
    except Exception as err:  # export's own errors are long; the first line says what failed
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CaptureError(f"torch.export could not capture the model: {first}") from None

    signature = exported.graph_signature
    name_aliases_by_their_ops(exported.graph)  # (torch.multiply is aten.mul to the planner)
    _drop_no_op_dropouts(exported.graph)
    _out_of_place_on_intermediates(exported.graph)
    _drop_same_shape_broadcasts(exported.graph)
    if drop_no_op_moves:
        _drop_no_op_conversions(exported.graph)
    # Algebra before planning (kfuse/compiler/rewrite.py), but not under eager's own rounding (the precision
    # fallback): a rewritten sum or attention rounds otherwise than eager's calls, which the fallback is there to keep
    # (a GEMM summed over its outputs came out closer to float64 than eager, and so not within 1e-4 of it on rows
    # near zero: 14_Gemm_Divide_Sum_Scaling).
    algebra = choices.current().eager_bits != "all"
    if algebra:
        summed_products_as_dot_products(exported.graph_module)
    placeholders = [n for n in exported.graph.nodes if n.op == "placeholder"]
    inputs = []
    user_position = 0
    for spec, node in zip(signature.input_specs, placeholders):
        dtype, rank = _meta(node)
        if spec.kind == InputKind.PARAMETER:
            inputs.append(GraphInput(node.name, "param", spec.target, dtype, rank))
        elif spec.kind == InputKind.BUFFER and spec.target in state:  # (a plain attribute in ModelNew)
            inputs.append(GraphInput(node.name, "attribute", spec.target, dtype, rank))
        elif spec.kind == InputKind.BUFFER:
            inputs.append(GraphInput(node.name, "buffer", spec.target, dtype, rank))
        elif spec.kind == InputKind.USER_INPUT:
            inputs.append(GraphInput(node.name, "user", user_position, dtype, rank))
            user_position += 1
        elif spec.kind == InputKind.CONSTANT_TENSOR and _fold_scalar_constant(node, exported.constants.get(spec.target)):
            continue
        elif spec.kind == InputKind.CONSTANT_TENSOR and _is_tensor_attribute(model, spec.target):
            # (`self.h0 = torch.randn(...)` in __init__: ModelNew's copy of __init__ makes the same tensor)
            inputs.append(GraphInput(node.name, "attribute", spec.target, dtype, rank))
        else:
            raise CaptureError(f"unsupported graph input {node.name} of kind {spec.kind.name} "
                               f"(tensor constants created in forward are not supported yet)")

    _fold_number_ops(exported.graph)
    dropped = _drop_unused_results(exported.graph) if drop_unused else []
    # (after the drop: nn.MultiheadAttention's averaged weights, unread, no longer read the probabilities)
    if algebra:
        products_with_softmax_as_attention(exported.graph_module)
        wide_attention_as_products(exported.graph_module)
    views_after_pointwise(exported.graph_module)  # (the same ops in the same order: eager's bits kept)
    output_node = next(n for n in exported.graph.nodes if n.op == "output")
    returned = list(output_node.args[0])
    outputs, updates = [], {}
    for spec, value in zip(signature.output_specs, returned):
        name = value.name if isinstance(value, torch.fx.Node) else None
        if name is None:
            raise CaptureError("the model returns a non-tensor value, which is not supported yet")
        if spec.kind == OutputKind.USER_OUTPUT:
            outputs.append(name)
        elif spec.kind == OutputKind.BUFFER_MUTATION:
            buffer_input = next(i.name for i in inputs if i.kind in ("buffer", "attribute")
                                and i.target == spec.target)
            updates[buffer_input] = name
        else:
            raise CaptureError(f"unsupported graph output of kind {spec.kind.name}")
    return Captured(exported.graph, inputs, outputs, updates, structure=output_structure(probe), dropped=dropped)


