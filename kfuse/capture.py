"""Capture a model as an ATen graph (torch.export), with parameters and buffers mapped back to module names.

The graph is specialised to the example inputs' shapes only where an op's arguments name sizes (views); the
kernels kfuse generates read every size at run time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


class CaptureError(Exception):
    """The model could not be captured; the message says why, in one sentence."""


@dataclass
class GraphInput:
    name: str                  # placeholder name in the graph (a C++ identifier)
    kind: str                  # "param", "buffer" or "user"
    target: str | int          # module attribute path ("linear.weight") or the user input's position
    dtype: torch.dtype | None
    rank: int | None


@dataclass
class Captured:
    graph: torch.fx.Graph
    inputs: list[GraphInput]
    outputs: list[str]                         # value names returned to the user, in order
    buffer_updates: dict[str, str] = field(default_factory=dict)   # buffer input name -> new value name
    returns_tuple: bool = False


def _meta(node) -> tuple[torch.dtype | None, int | None]:
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return val.dtype, val.dim()
    return None, None


def capture(model: torch.nn.Module, example_inputs: list) -> Captured:
    from torch.export.graph_signature import InputKind, OutputKind

    try:
        with torch.no_grad():
            probe = model(*example_inputs)
        exported = torch.export.export(model, tuple(example_inputs))
    except Exception as err:  # export's own errors are long; the first line says what failed
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CaptureError(f"torch.export could not capture the model: {first}") from None

    signature = exported.graph_signature
    placeholders = [n for n in exported.graph.nodes if n.op == "placeholder"]
    inputs = []
    user_position = 0
    for spec, node in zip(signature.input_specs, placeholders):
        dtype, rank = _meta(node)
        if spec.kind == InputKind.PARAMETER:
            inputs.append(GraphInput(node.name, "param", spec.target, dtype, rank))
        elif spec.kind == InputKind.BUFFER:
            inputs.append(GraphInput(node.name, "buffer", spec.target, dtype, rank))
        elif spec.kind == InputKind.USER_INPUT:
            inputs.append(GraphInput(node.name, "user", user_position, dtype, rank))
            user_position += 1
        else:
            raise CaptureError(f"unsupported graph input {node.name} of kind {spec.kind.name} "
                               f"(tensor constants created in forward are not supported yet)")

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
            buffer_input = next(i.name for i in inputs if i.kind == "buffer" and i.target == spec.target)
            updates[buffer_input] = name
        else:
            raise CaptureError(f"unsupported graph output of kind {spec.kind.name}")
    return Captured(exported.graph, inputs, outputs, updates, returns_tuple=isinstance(probe, (tuple, list)))
