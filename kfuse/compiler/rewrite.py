"""Algebra on the captured graph before planning: a matrix product summed over its output features is a dot product.

`sum(x @ W^T, dim=-1)` (nn.Linear, matmul or mm with a transposed or plain weight, addmm), scaled by numbers on the
way, equals `x . colsum(W)`: summing a row's N outputs sums its dot products with W's N rows, which is one dot
product with the sum of those rows. So the product becomes a column sum of the weight (one read of it) and a
reduction over x's rows: K instead of N * K multiply-adds per row, and no sum of N rounded GEMM outputs, whose
errors add up (suite/level2/25: x (1024, 8192) @ W^T (8192, 8192) summed over 8192 outputs missed atol 1e-4 on one
row near zero). A bias adds its own sum. Multiplying or dividing by a finite number commutes with the sum: those
ops move after it, in their order, one rounding each as before (an infinite factor would turn zeros into NaNs
before the sum, not after it: left as it is).

Only where nothing else reads the product or the scaled values (they are not computed any more), the sum covers
the last dim alone, and every value is fp32 (the dtype kfuse's reduction kernels take).

Attention written out as products: `softmax(scale * Q @ K^T, -1) @ V` (nn.MultiheadAttention computes it so when
it returns its weights, and hand-written attention does) is scaled_dot_product_attention(Q, K, V, scale=scale), which
kfuse runs as one kernel that never stores the (L, S) scores (kfuse/kernels/attention.py). Eager writes the scores,
reads them for the softmax, writes the probabilities and reads them again: for 31_VisionAttention's 16384 tokens, 8
heads, four passes over 8.6 GB. A factor on Q before the product or on the scores after it moves into `scale` (one
rounding of the score where eager had one of Q: far inside 1e-4, the products being fp32 either way). Only where the
scores, the scaled Q and the probabilities have no other reader (attention weights returned keep eager's products),
K^T is K transposed in its last two dims, the softmax is over the last dim without a dtype, every value is fp32, and
Q, K and V have one rank of at least 3 with the same batch dims. A `masked_fill(condition, -inf)` of the scaled
scores (a causal GPT's `tril == 0`) becomes the boolean attn_mask `logical_not(condition)` (`tril != 0`): the same
scores drop out.

Attention with a head dim past kfuse's attention kernel (128: its Q rows and key tiles live in shared memory) goes
the other way: scaled_dot_product_attention(Q, K, V) becomes softmax(scale * Q @ K^T, -1) @ V, two kfuse GEMMs
(3xTF32 tensor cores, fp32-faithful) around a row softmax that applies the scale (the default 1/sqrt(E) with E read
from Q at run time, as SDPA reads it). Eager's own call runs fp32 on CUDA cores there (97_ScaledDotProductAttention,
head dim 1024, 32 x 32 x 512 queries and keys: 24.7 ms in eager and torch.compile alike, H200 run q; its 1.1 TFLOP of
products at kfuse's GEMM rate is about 9 ms, the scores and probabilities 4 GB of memory traffic about 1 ms more).
Only without a mask, dropout, causal flag or GQA, on fp32 Q, K and V of one rank (at least 3) with equal batch dims.

A view between two computations moves after the pointwise ops that read it: `softmax(x.view(b, c, -1), 2).view(b,
c, d, h, w) * scale` (scale (1, c, 1, 1, 1)) becomes `(softmax(..., 2) * scale.view(1, c, 1)).view(b, c, d, h, w)`,
so the product joins the softmax's kernel (38_ConvTranspose3d_AvgPool_Clamp_Softmax_Multiply's separate pass over 1
GB: 0.50 of its 2.86 ms; 2.89 -> 2.39 ms for the file, H200). Views copy nothing and the ops are the same, in the
same order: the same bits. Only where the view's source is a pointwise
op or a reduction kfuse fuses, its one reader a pointwise op of the view's shape, and each other tensor that reads
is small (at most VIEWED_OPERAND_ELEMENTS) and lines up with the view (views_after_pointwise).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import torch

from kfuse.kernels import ops, reduce
from kfuse.kernels.steps import mutates

TRANSPOSES = {"aten.numpy_T.default", "aten.t.default", "aten.permute.default", "aten.transpose.int"}
SCALINGS = {"aten.mul.Tensor", "aten.mul.Scalar", "aten.div.Tensor", "aten.div.Scalar"}
BATCHED_PRODUCTS = {"aten.bmm.default", "aten.matmul.default"}
SOFTMAXES = {"aten.softmax.int", "aten._softmax.default"}
SDPA = "aten.scaled_dot_product_attention.default"
# The largest head dim kfuse's attention kernel takes (kfuse/kernels/attention.py: ATT_MAX_D).
ATTENTION_MAX_HEAD_DIM = 128


@dataclass
class _Product:
    node: torch.fx.Node
    x: torch.fx.Node                 # (..., K)
    weight: torch.fx.Node            # 2-D, K along dim 1 - features_dim
    features_dim: int                # the weight's N dim: the column sum runs over it
    bias: torch.fx.Node | None       # (N,)
    transpose: torch.fx.Node | None  # the view that made the weight (K, N), dead once the product is


def _val(node) -> torch.Tensor | None:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return val if isinstance(val, torch.Tensor) else None


def _is_fp32(*nodes) -> bool:
    return all(_val(n) is not None and _val(n).dtype == torch.float32 for n in nodes)


def _swaps_2d(view: torch.fx.Node) -> bool:
    """A transpose of a 2-D tensor (each of TRANSPOSES leaves a 1-D tensor or an equal pair of dims as it is)."""
    source = view.args[0] if view.args else None
    if not isinstance(source, torch.fx.Node) or _val(source) is None or _val(source).dim() != 2:
        return False
    target = str(view.target)
    if target == "aten.permute.default":
        return [d % 2 for d in view.args[1]] == [1, 0]
    if target == "aten.transpose.int":
        return {view.args[1] % 2, view.args[2] % 2} == {0, 1}
    return len(view.args) == 1


def _product(node: torch.fx.Node) -> _Product | None:
    """The operands of a product x @ (K, N) [+ bias (N,)] with a 2-D weight, or None."""
    target = str(node.target)
    args = list(node.args)
    if target == "aten.linear.default":
        x, weight = args[0], args[1]
        bias = args[2] if len(args) > 2 else node.kwargs.get("bias")
        if not isinstance(weight, torch.fx.Node) or _val(weight) is None or _val(weight).dim() != 2:
            return None
        found = _Product(node, x, weight, 0, bias, None)
    elif target in ("aten.matmul.default", "aten.mm.default", "aten.addmm.default"):
        if target == "aten.addmm.default":
            if len(args) != 3 or node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1:
                return None
            bias, x, right = args
        else:
            (x, right), bias = args, None
        if not isinstance(right, torch.fx.Node) or _val(right) is None or _val(right).dim() != 2:
            return None
        if str(right.target) in TRANSPOSES and _swaps_2d(right):
            found = _Product(node, x, right.args[0], 0, bias, right)  # W^T with W (N, K): W read as it is
        else:
            found = _Product(node, x, right, 1, bias, None)
    else:
        return None
    out, x, w = _val(node), _val(found.x), _val(found.weight)
    if out is None or x is None or x.dim() < 1 or x.shape[-1] != w.shape[1 - found.features_dim]:
        return None
    if out.shape[-1] != w.shape[found.features_dim]:
        return None
    if found.bias is not None:
        bias = _val(found.bias)
        if bias is None or tuple(bias.shape) != (out.shape[-1],) or not _is_fp32(found.bias):
            return None  # (a bias broadcast over N or per row would need a sum of its own shape)
    return found if _is_fp32(node, found.x, found.weight) else None


def _scaling(node: torch.fx.Node, source: torch.fx.Node) -> bool:
    """`source * number`, `number * source` or `source / number`, the number finite (and a divisor nonzero)."""
    if node.op != "call_function" or str(node.target) not in SCALINGS or node.kwargs or len(node.args) != 2:
        return False
    number = lambda a: isinstance(a, numbers.Real) and not isinstance(a, bool) and math.isfinite(a)  # noqa: E731
    a, b = node.args
    if str(node.target).startswith("aten.div"):
        return a is source and number(b) and b != 0
    return (a is source and number(b)) or (b is source and number(a))


def _last_dim_sum(node: torch.fx.Node, source: torch.fx.Node) -> bool:
    if node.op != "call_function" or str(node.target) != "aten.sum.dim_IntList" or node.args[0] is not source:
        return False
    if node.kwargs.get("dtype") is not None or not _is_fp32(node):
        return False
    rank = _val(source).dim()
    dims = node.args[1] if len(node.args) > 1 else None
    return isinstance(dims, (list, tuple)) and len(dims) == 1 and dims[0] % rank == rank - 1


def _chain(product: torch.fx.Node) -> tuple[list[torch.fx.Node], torch.fx.Node] | None:
    """The scalings between the product and its last-dim sum, and the sum; each value with one user."""
    scalings, value = [], product
    while len(value.users) == 1:
        user = next(iter(value.users))
        if _last_dim_sum(user, value):
            return scalings, user
        if not _scaling(user, value) or not _is_fp32(user):
            return None
        scalings.append(user)
        value = user
    return None


def _call(graph: torch.fx.Graph, target, args: tuple, name: str | None = None) -> torch.fx.Node:
    """A new node with its `val` (the FakeTensor the planner reads shapes and dtypes from); the name, where given,
    is the generated code's variable."""
    node = graph.create_node("call_function", target, args, name=name)
    with torch.no_grad():
        node.meta["val"] = target(*torch.fx.node.map_arg(args, lambda n: n.meta["val"]))
    return node


def summed_products_as_dot_products(graph_module: torch.fx.GraphModule) -> int:
    """Rewrite every `sum(scalings(x @ W^T [+ b]), -1)` as `scalings(sum(x * colsum(W), -1) [+ sum(b)])`;
    returns how many were rewritten."""
    aten = torch.ops.aten
    graph = graph_module.graph
    done = 0
    # In graph order, each rewritten as found: a product reading an earlier rewritten sum sees its new value. The
    # nodes erased on the way are sums, scalings and views, never a product still to visit.
    for node in list(graph.nodes):
        product = _product(node) if node.op == "call_function" else None
        chain = _chain(node) if product is not None else None
        if chain is None:
            continue
        scalings, total = chain
        keepdim = total.args[2] if len(total.args) > 2 else total.kwargs.get("keepdim", False)
        with graph.inserting_before(total):
            colsum = _call(graph, aten.sum.dim_IntList, (product.weight, [product.features_dim]), "colsum")
            terms = _call(graph, aten.mul.Tensor, (product.x, colsum), "x_colsum")
            value = _call(graph, aten.sum.dim_IntList, (terms, [-1], keepdim), "dot")
            if product.bias is not None:
                bias_sum = _call(graph, aten.sum.default, (product.bias,), "bias_sum")
                value = _call(graph, aten.add.Tensor, (value, bias_sum), "dot_bias")
            for scaling in scalings:  # (its one tensor operand is the value before it)
                args = tuple(value if isinstance(a, torch.fx.Node) else a for a in scaling.args)
                value = _call(graph, scaling.target, args)
        total.replace_all_uses_with(value)
        for dead in [total, *reversed(scalings), product.node]:
            graph.erase_node(dead)
        if product.transpose is not None and not product.transpose.users:
            graph.erase_node(product.transpose)  # (a W^T read by another product too stays)
        done += 1
    if done:
        graph.lint()
        graph_module.recompile()
    return done


def _factor(node: torch.fx.Node, source: torch.fx.Node) -> float:
    """The number a `_scaling` node multiplies its source by."""
    number = node.args[1] if node.args[0] is source else node.args[0]
    return 1.0 / number if str(node.target).startswith("aten.div") else float(number)


def _only_reader(node: torch.fx.Node, reader: torch.fx.Node) -> bool:
    return len(node.users) == 1 and next(iter(node.users)) is reader


@dataclass
class _Attention:
    out: torch.fx.Node               # probabilities @ V
    q: torch.fx.Node
    k: torch.fx.Node
    v: torch.fx.Node
    scale: float
    dead: list[torch.fx.Node]        # what `out` was computed through, erased with it (in this order)
    dropped: torch.fx.Node | None    # a masked_fill's condition: where the scores are -inf


def _attention(out: torch.fx.Node) -> _Attention | None:
    """The operands of `softmax(scale * Q @ K^T, -1) @ V` ending at `out`, or None."""
    if out.op != "call_function" or str(out.target) not in BATCHED_PRODUCTS or out.kwargs:
        return None
    probabilities, v = out.args
    if not isinstance(probabilities, torch.fx.Node) or str(probabilities.target) not in SOFTMAXES:
        return None
    if not _only_reader(probabilities, out) or len(probabilities.args) < 2 or probabilities.kwargs.get("dtype"):
        return None
    if str(probabilities.target) == "aten._softmax.default" and probabilities.args[2]:  # half_to_float
        return None
    if str(probabilities.target) == "aten.softmax.int" and len(probabilities.args) > 2 and probabilities.args[2]:
        return None  # (a dtype)
    scores, scale, dead, dropped = probabilities.args[0], 1.0, [out, probabilities], None
    if not isinstance(scores, torch.fx.Node) or _val(scores) is None:
        return None
    if str(scores.target) == "aten.masked_fill.Scalar" and _only_reader(scores, probabilities) \
            and scores.args[2] == -math.inf and isinstance(scores.args[1], torch.fx.Node) \
            and _val(scores.args[1]) is not None and _val(scores.args[1]).dtype == torch.bool:
        dropped = scores.args[1]
        dead.append(scores)
        scores = scores.args[0]
    rank = _val(scores).dim()
    if probabilities.args[1] % rank != rank - 1:
        return None
    if str(scores.target) in SCALINGS and _only_reader(scores, dead[-1]) \
            and _scaling(scores, scores.args[0] if isinstance(scores.args[0], torch.fx.Node) else scores.args[1]):
        source = scores.args[0] if isinstance(scores.args[0], torch.fx.Node) else scores.args[1]
        scale *= _factor(scores, source)
        dead.append(scores)
        scores = source
    if str(scores.target) not in BATCHED_PRODUCTS or scores.kwargs or not _only_reader(scores, dead[-1]):
        return None
    q, k_t = scores.args
    dead.append(scores)
    if isinstance(q, torch.fx.Node) and str(q.target) in SCALINGS and _only_reader(q, scores):
        source = q.args[0] if isinstance(q.args[0], torch.fx.Node) else q.args[1]
        if _scaling(q, source):
            scale *= _factor(q, source)
            dead.append(q)
            q = source
    if not isinstance(k_t, torch.fx.Node) or str(k_t.target) != "aten.transpose.int" or _val(k_t) is None:
        return None
    if {k_t.args[1] % rank, k_t.args[2] % rank} != {rank - 2, rank - 1}:
        return None
    k = k_t.args[0]
    if k_t.users.keys() == {scores}:
        dead.append(k_t)  # (a K^T read elsewhere too stays)
    if not all(isinstance(t, torch.fx.Node) for t in (q, k, v)) or not _is_fp32(q, k, v, out):
        return None
    shapes = [_val(t).shape for t in (q, k, v)]
    if rank < 3 or any(len(shape) != rank for shape in shapes) or not shapes[0][:-2] == shapes[1][:-2] == shapes[2][:-2]:
        return None
    if max(shapes[0][-1], shapes[2][-1]) > ATTENTION_MAX_HEAD_DIM:
        return None  # (products are faster than ATen's attention there: wide_attention_as_products)
    if dropped is not None and _val(dropped).dim() > rank:
        return None
    return _Attention(out, q, k, v, scale, dead, dropped)


def _keys_kept(graph: torch.fx.Graph, dropped: torch.fx.Node) -> torch.fx.Node:
    """The attn_mask of a masked_fill's condition: `x != c` for `x == c` read by the fill alone (one op on the mask,
    not two), else `logical_not(condition)`."""
    if str(dropped.target) == "aten.eq.Scalar" and len(dropped.users) == 1 and not dropped.kwargs:
        return _call(graph, torch.ops.aten.ne.Scalar, tuple(dropped.args), "keys_kept")
    return _call(graph, torch.ops.aten.logical_not.default, (dropped,), "keys_kept")


def products_with_softmax_as_attention(graph_module: torch.fx.GraphModule) -> int:
    """Rewrite every `softmax(scale * Q @ K^T, -1) @ V` as scaled_dot_product_attention(Q, K, V, scale=scale);
    returns how many were rewritten."""
    graph = graph_module.graph
    done = 0
    for node in list(graph.nodes):
        if node.graph is not graph:  # (erased by an earlier rewrite)
            continue
        found = _attention(node)
        if found is None:
            continue
        with graph.inserting_before(found.out):
            kwargs = {"scale": found.scale}
            if found.dropped is not None:
                kwargs["attn_mask"] = _keys_kept(graph, found.dropped)
            attention = graph.create_node("call_function", torch.ops.aten.scaled_dot_product_attention.default,
                                          (found.q, found.k, found.v), kwargs, name="attention")
        attention.meta["val"] = found.out.meta["val"]  # (the same shape: L x Ev per batch entry)
        found.out.replace_all_uses_with(attention)
        for dead in found.dead:
            graph.erase_node(dead)
        if found.dropped is not None and not found.dropped.users:
            graph.erase_node(found.dropped)  # (an `==` now read as `!=`)
        done += 1
    if done:
        graph.lint()
        graph_module.recompile()
    return done


def wide_attention_as_products(graph_module: torch.fx.GraphModule) -> int:
    """Rewrite every scaled_dot_product_attention whose head dim kfuse's kernel does not take as
    `softmax(scale * Q @ K^T, -1) @ V`; returns how many were rewritten."""
    aten = torch.ops.aten
    graph = graph_module.graph
    done = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or str(node.target) != SDPA:
            continue
        names = [a.name for a in node.target._schema.arguments]
        bound = {a.name: a.default_value for a in node.target._schema.arguments if a.has_default_value()}
        bound.update(zip(names, node.args))
        bound.update(node.kwargs)
        q, k, v = bound["query"], bound["key"], bound["value"]
        if not all(isinstance(t, torch.fx.Node) for t in (q, k, v)) or not _is_fp32(q, k, v, node):
            continue
        if bound.get("attn_mask") is not None or bound.get("dropout_p") or bound.get("is_causal") \
                or bound.get("enable_gqa"):
            continue
        shapes = [_val(t).shape for t in (q, k, v)]
        rank = len(shapes[0])
        if rank < 3 or any(len(shape) != rank for shape in shapes) or not shapes[0][:-2] == shapes[1][:-2] == shapes[2][:-2]:
            continue
        if max(shapes[0][-1], shapes[2][-1]) <= ATTENTION_MAX_HEAD_DIM:
            continue
        scale = bound.get("scale")
        with graph.inserting_before(node):
            if scale is None:
                # the default 1/sqrt(E), E read from Q at run time as SDPA does (a file run with another head dim
                # stays right): rsqrt of the sum of ones over a row of Q
                row = q
                for _ in range(rank - 1):
                    row = _call(graph, aten.select.int, (row, 0, 0))
                width = _call(graph, aten.sum.default, (_call(graph, aten.ones_like.default, (row,)),))
                scale = _call(graph, aten.rsqrt.default, (width,), name=f"{node.name}_scale")
            keys = _call(graph, aten.transpose.int, (k, -2, -1), name=f"{node.name}_keys_t")
            scores = _call(graph, aten.matmul.default, (q, keys), name=f"{node.name}_scores")
            scaled = _call(graph, aten.mul.Tensor, (scores, scale), name=f"{node.name}_scaled")
            weights = _call(graph, aten._softmax.default, (scaled, -1, False), name=f"{node.name}_weights")
            out = _call(graph, aten.matmul.default, (weights, v), name=f"{node.name}_out")
        node.replace_all_uses_with(out)
        graph.erase_node(node)
        done += 1
    if done:
        graph.lint()
        graph_module.recompile()
    return done


VIEWS = {"aten.view.default", "aten.reshape.default", "aten._unsafe_view.default"}
# The largest other operand of a pointwise op a view moves past (it is re-viewed: a per-channel scale, a mask).
VIEWED_OPERAND_ELEMENTS = 1 << 16


def _shape_of(node) -> tuple | None:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return tuple(val.shape) if isinstance(val, torch.Tensor) else None


def _reviewed_shape(operand: tuple, viewed: tuple, source: tuple) -> tuple | None:
    """The shape `o2` that an operand of shape `operand` (broadcast to `viewed`, the same rank) takes on the view's
    source shape, so that broadcast_to(o.reshape(o2), source) == broadcast_to(o, viewed).reshape(source) at every
    size the model may run at; None where there is none. The view may only reshape dims past the operand's last dim
    longer than 1, where the operand is broadcast; the dims up to it are the source's own, none of them 1 (a dim of
    1 may be a merged batch of 1: Swin's windows viewed as (B, nW, ...) at batch 1 lined up with a (nW, ...) mask by
    chance)."""
    if math.prod(operand) > VIEWED_OPERAND_ELEMENTS:
        return None
    kept = max((d + 1 for d, size in enumerate(operand) if size != 1), default=0)
    if kept > len(source) or tuple(viewed[:kept]) != tuple(source[:kept]) or 1 in viewed[:kept]:
        return None
    return tuple(operand[:kept]) + (1,) * (len(source) - kept)


def views_after_pointwise(graph_module: torch.fx.GraphModule) -> int:
    """Moves each view past the pointwise ops that read it (the module's docstring says when); returns how many
    moves were made."""
    graph = graph_module.graph
    moved = 0
    changed = True
    while changed:
        changed = False
        for view in list(graph.nodes):
            if (view.op != "call_function" or str(view.target) not in VIEWS or len(view.users) != 1
                    or view.meta.get("operand_view")):  # (an operand's view moved back would undo the move)
                continue
            reader = next(iter(view.users))
            source, viewed = view.args[0], _shape_of(view)
            if (reader.op != "call_function" or ops.lookup(reader.target) is None or mutates(reader)
                    or not _joins(source) or _shape_of(source) is None
                    or _shape_of(reader) != viewed
                    or any(isinstance(v, torch.fx.Node) for v in reader.kwargs.values())):
                continue
            reviewed = {}
            for a in reader.args:
                if isinstance(a, torch.fx.Node) and a is not view:
                    shape = _shape_of(a)
                    if shape is None or len(shape) > len(viewed):
                        break
                    target = _reviewed_shape((1,) * (len(viewed) - len(shape)) + shape, viewed, _shape_of(source))
                    if target is None:
                        break
                    reviewed[a] = target
                elif isinstance(a, (list, tuple)) and any(isinstance(x, torch.fx.Node) for x in a):
                    break
            else:
                _move_view(graph, view, reader, source, reviewed)
                moved += 1
                changed = True
                break  # (the graph changed: walk it again)
    if moved:
        graph.lint()
        graph_module.recompile()
    return moved


def _joins(source) -> bool:
    """Whether a pointwise op moved next to `source` can join its kernel: a pointwise op's or a reduction's. (A view
    of any other value moved after a pointwise op only keeps that op from a reduction after the view, which would
    have taken it in as its prologue: tests/optimize/batch_views.py.)"""
    return (isinstance(source, torch.fx.Node) and source.op == "call_function"
            and (ops.lookup(source.target) is not None or reduce.is_fusable_reduction(source)))


def _move_view(graph: torch.fx.Graph, view: torch.fx.Node, reader: torch.fx.Node, source: torch.fx.Node,
               reviewed: dict) -> None:
    aten = torch.ops.aten
    with graph.inserting_before(reader):
        operands = {a: _call(graph, aten.view.default, (a, list(shape)), f"{a.name}_view")
                    for a, shape in reviewed.items()}
        for operand in operands.values():
            operand.meta["operand_view"] = True
        args = tuple(source if a is view else operands.get(a, a) if isinstance(a, torch.fx.Node) else a
                     for a in reader.args)
        node = graph.create_node("call_function", reader.target, args, dict(reader.kwargs))
        with torch.no_grad():
            node.meta["val"] = reader.target(*torch.fx.node.map_arg(args, lambda n: n.meta["val"]),
                                             **torch.fx.node.map_arg(dict(reader.kwargs), lambda n: n.meta["val"]))
        after = _call(graph, view.target, (node, *view.args[1:]))
    reader.replace_all_uses_with(after)
    graph.erase_node(reader)
    graph.erase_node(view)
