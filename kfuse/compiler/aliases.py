"""ATen's alias ops as the ops they name: export keeps `torch.multiply` as aten.multiply, `torch.clip` as aten.clip,
`torch.special.expit` as aten.special_expit, and the planner, which knows aten.mul, aten.clamp and aten.sigmoid,
would leave each an unfused library call that cuts its chain in two (52_Conv2d_Activation_BatchNorm's
`torch.multiply(torch.tanh(softplus(x)), x)`: a pass of its own between two kernels). Each alias is PyTorch's
documented synonym: the same function under another name, so the rewrite changes no value.
"""

from __future__ import annotations

import functools

import torch

# alias -> the op it names (in-place forms follow: multiply_ -> mul_)
ALIASES = {
    "multiply": "mul", "subtract": "sub", "divide": "div", "true_divide": "div", "clip": "clamp",
    "absolute": "abs", "negative": "neg", "fix": "trunc",
    "greater": "gt", "greater_equal": "ge", "less": "lt", "less_equal": "le", "not_equal": "ne",
    "arctan": "atan", "arccos": "acos", "arcsin": "asin", "arctanh": "atanh", "arcsinh": "asinh",
    "arccosh": "acosh", "arctan2": "atan2",
    "special_expit": "sigmoid", "special_erf": "erf", "special_erfc": "erfc", "special_erfinv": "erfinv",
    "special_exp2": "exp2", "special_expm1": "expm1", "special_log1p": "log1p", "special_xlogy": "xlogy",
    "special_round": "round", "special_logit": "logit", "special_sinc": "sinc", "special_i0": "i0",
    "special_psi": "digamma", "special_digamma": "digamma", "special_gammaln": "lgamma",
    "special_logsumexp": "logsumexp", "special_log_softmax": "log_softmax", "special_softmax": "softmax",
    "concat": "cat", "concatenate": "cat", "swapaxes": "transpose", "swapdims": "transpose", "moveaxis": "movedim",
}


def _signature(op) -> tuple:
    """The argument types in order, and the names of those passed by name (swapaxes' axis0 is transpose's dim0)."""
    schema = op._schema
    return (tuple((a.name if a.kwarg_only else None, str(a.type)) for a in schema.arguments),
            tuple(str(r.type) for r in schema.returns))


@functools.lru_cache(maxsize=None)
def canonical(target):
    """The op an alias names, the overload of the same arguments (aten.special_xlogy.other_scalar ->
    aten.xlogy.Scalar_Other); None for an op that is no alias, or whose synonym has no such overload."""
    schema = getattr(target, "_schema", None)
    if schema is None or not schema.name.startswith("aten::"):
        return None
    name = schema.name.split("::", 1)[1]
    in_place = name.endswith("_") and name[:-1] in ALIASES
    named = ALIASES.get(name[:-1] if in_place else name)
    packet = getattr(torch.ops.aten, named + ("_" if in_place else ""), None) if named else None
    if packet is None:
        return None
    wanted = _signature(target)
    for overload in packet.overloads():
        op = getattr(packet, overload)
        if _signature(op) == wanted:
            return op
    return None


def name_aliases_by_their_ops(graph: torch.fx.Graph) -> int:
    """Every alias call in `graph` made a call of the op it names; returns how many."""
    count = 0
    for node in graph.nodes:
        op = canonical(node.target) if node.op == "call_function" else None
        if op is not None and set(node.kwargs) <= {a.name for a in op._schema.arguments}:
            node.target = op
            count += 1
    return count
