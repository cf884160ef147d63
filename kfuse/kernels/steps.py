"""The plan's steps and the graph helpers every kernel family uses: library calls, tuple items, fused pointwise
kernels (the families' own kernel steps live in their modules), each node's tensor metadata and arguments.

The planner (kfuse.compiler.plan) makes these steps and hands them to the families (kfuse.kernels.*), which replace
some with their own kernels; nothing here imports either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

FUSABLE_DTYPES = {torch.float32}


# Convolutions whose third argument is a per-output-channel bias, with their number of spatial dims (None: any).
BIASED_CONVS = {"aten.conv1d.default": 1, "aten.conv2d.default": 2, "aten.conv3d.default": 3,
                "aten.convolution.default": None, "aten.conv_transpose1d.default": 1,
                "aten.conv_transpose2d.input": 2, "aten.conv_transpose3d.input": 3}


@dataclass
class LibraryCall:
    node: torch.fx.Node
    anchor: bool
    channels_last: bool = False     # run on channels-last copies of input and weight (a convolution)
    bias_moved: bool = False        # called without its bias: the kernel after it adds the bias
    eager_bits: bool = False        # its value must be eager's to the bit (a TF32 call reads it; or Choices.eager_bits)

    @property
    def op(self) -> str:
        return str(self.node.target)


@dataclass
class TupleItem:
    node: torch.fx.Node
    source: str
    index: int


@dataclass
class FusedKernel:
    name: str
    nodes: list[torch.fx.Node]
    inputs: list[str] = field(default_factory=list)     # external tensor values read, in parameter order
    write_into: str | None = None                        # an anchor's output reused as this kernel's output
    channels_last_input: str | None = None               # an input that arrives channels-last (read transposed)
    bias: tuple[str, str] | None = None                  # (convolution output, its bias): added to it first
    bias_rank: int = 0                                   # the convolution output's rank (the bias is viewed so)

    @property
    def result(self) -> torch.fx.Node:
        return self.nodes[-1]

    @property
    def ops(self) -> list[str]:
        moved = [f"kfuse.bias_of_{self.bias[0]}"] if self.bias else []
        return moved + [str(n.target) for n in self.nodes]


Step = LibraryCall | TupleItem | FusedKernel


def tensor_meta(node) -> torch.Tensor | None:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return val if isinstance(val, torch.Tensor) else None


def mutates(node: torch.fx.Node) -> bool:
    schema = getattr(node.target, "_schema", None)
    return bool(schema is not None and schema.is_mutable)


def replace_library_calls(steps: list, op: str, make: Callable, unsupported: type[Exception]) -> list:
    """Each library call of `op` replaced by make(node)'s kernel step, unless make raises `unsupported`: that call
    stays a library call (codegen lists the family's reason)."""
    out = []
    for step in steps:
        if isinstance(step, LibraryCall) and step.op == op and not step.eager_bits:
            try:
                out.append(make(step.node))
                continue
            except unsupported:
                pass
        out.append(step)
    return out


def short_name(target) -> str:
    return str(target).split(".")[1]


def movable_bias(node: torch.fx.Node) -> torch.fx.Node | None:
    """A batched convolution's per-channel bias, of its output's dtype, or None."""
    if str(node.target) not in BIASED_CONVS or len(node.args) < 3:
        return None
    bias, out = node.args[2], tensor_meta(node)
    spatial = BIASED_CONVS[str(node.target)]
    if not isinstance(bias, torch.fx.Node) or out is None or (spatial is not None and out.dim() != spatial + 2):
        return None  # no bias, or an unbatched input (its channels are dim 0)
    if tensor_meta(bias) is None or tensor_meta(bias).dim() != 1 or tensor_meta(bias).dtype != out.dtype:
        return None
    return bias


def bias_add_is_eager_s(node: torch.fx.Node) -> bool:
    """Does moving this convolution's bias into the kernel after it keep eager's bits? Eager's cuDNN convolution adds
    its bias in a pass of its own (at::_convolution: output.add_(bias)), one fp32 add that the kernel's `x + bias`
    repeats exactly; a grouped or depthwise convolution may take another backend, which adds it inside its sum."""
    if movable_bias(node) is None:
        return False
    groups = dict(zip((a.name for a in node.target._schema.arguments), boxed_arguments(node))).get("groups", 1)
    return groups == 1


# Windows whose value is exact (a max of the values read: no rounding), so a kfuse kernel gives eager's bits
EXACT_WINDOWS = {"aten.max_pool1d.default", "aten.max_pool2d.default", "aten.max_pool3d.default"}


def unique(name: str, seen: dict[str, int]) -> str:
    seen[name] = seen.get(name, 0) + 1
    return name if seen[name] == 1 else f"{name}_{seen[name]}"


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
