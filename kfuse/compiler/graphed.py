"""A forward launched as one CUDA graph: the class an emitted file carries (emit.py copies its source in) when its
forward makes many launches, and the rule that decides when.

A network at a small batch is bound by its launches: each kernel or library call costs the host a few
microseconds, more than the GPU spends on many of them (15_DenseNet121: 373 launches per forward). A CUDA graph
replays them all from one launch. The class below is plain PyTorch (torch.cuda.graph), so the emitted file stays
standalone; tests/test_graphed.py drives it on the CPU with a stand-in for the graph API.
"""

from __future__ import annotations

import collections

import torch


class GraphedForward:
    """`forward(*args)` replayed as one CUDA graph, captured the second time it is called with the same key.

    A graph reads and writes fixed addresses, so the caller's inputs (the positions in `copied`) are copied into the
    graph's own before each replay and its outputs are copied out after it (a result never changes under its holder
    at the next call). The other arguments, parameters and buffers, are read and updated in place; their addresses
    belong to the key, with each input's shape, strides, dtype and device: a module moved, or reloaded into new
    storage, or called at another batch size is captured again. The first call at a key runs as it is (cuBLAS and
    cuDNN choose and allocate outside the graph). The replay runs on the caller's current stream. A tensor off the
    GPU (its value would be read once, at capture), or a call inside another capture, runs the forward as it is.
    The planner leaves out forwards that draw random numbers or wait on the host; where capture still fails, the
    error is torch's (kfuse optimize then plans the file again without a graph)."""

    HELD = 2  # graphs kept at once: each holds the memory of its forward's intermediates
    DEVICE = "cuda"  # where every tensor argument must be for a capture

    def __init__(self, forward, copied):
        self.forward = forward
        self.copied = tuple(copied)
        self.in_place = None  # the other positions (known at the first call)
        self.graphs = collections.OrderedDict()  # key -> (graph, static inputs, static outputs), or None: run as is
        self.warmed = collections.OrderedDict()  # keys called once

    def __call__(self, *args):
        if torch.cuda.is_current_stream_capturing():
            return self.forward(*args)
        key = self.key(args)
        if key not in self.graphs:
            if key not in self.warmed:
                self.remember(self.warmed, key, True)
                return self.forward(*args)
            self.remember(self.graphs, key, self.capture(args))
        entry = self.graphs[key]
        if entry is None:
            return self.forward(*args)
        graph, inputs, outputs = entry
        for position, static in zip(self.copied, inputs):
            static.copy_(args[position])
        graph.replay()
        return outputs.clone() if isinstance(outputs, torch.Tensor) else [out.clone() for out in outputs]

    def key(self, args) -> tuple:
        if self.in_place is None:
            self.in_place = [i for i in range(len(args)) if i not in self.copied]
        inputs = tuple((args[i].shape, args[i].stride(), args[i].dtype, args[i].device) for i in self.copied)
        return inputs + tuple([args[i].data_ptr() for i in self.in_place])

    def capture(self, args):
        """(graph, static inputs, static outputs) for these arguments, or None: a tensor is off the GPU."""
        if any(a.device.type != self.DEVICE for a in args):
            return None
        inputs = [args[i].clone() for i in self.copied]
        static = list(args)
        for position, tensor in zip(self.copied, inputs):
            static[position] = tensor
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outputs = self.forward(*static)
        return graph, inputs, outputs

    def remember(self, table, key, value) -> None:
        table[key] = value
        while len(table) > self.HELD:
            table.popitem(last=False)


# A graph pays for itself where the host's launches set the time. H100 A/B of the development set's networks
# (results/cuda-graph-H100-2026-11-27/): each of the 8 with 86-1,026 launches per forward gained (6-10 us saved per
# launch: DenseNet-121 9.3 -> 6.0 ms, EfficientNet-B1 2.2 -> 1.45); each with 15-40 lost 1-12% or stayed even (the
# GPU was the bound; the copies in and out cost). Below MIN_LAUNCHES, and where copying the inputs and outputs
# would cost more than a quarter of the launches saved, the forward stays as it is.
MIN_LAUNCHES = 64
SAVED_PER_LAUNCH_S = 5e-6
COPY_BYTES_PER_S = 1e12  # (read and written once each: 2 TB/s of traffic)
CHOICES = ("auto", "on", "off")


def launches_per_forward(sources) -> int:
    """Kernels and library calls the forward launches (views launch nothing)."""
    calls = 0
    for call in sources.unfused:
        namespace, name, overload = call["op"].split(".")
        op = getattr(getattr(getattr(torch.ops, namespace), name), overload)
        calls += not op.is_view
    return len(sources.kernels) + calls


def draws_random_numbers(graph: torch.fx.Graph) -> bool:
    """Whether an op draws from the generator (a replay would draw as capture did, not as eager does)."""
    for node in graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        if torch.Tag.nondeterministic_seeded not in node.target.tags:
            continue
        dropout = node.target._schema.name in ("aten::dropout", "aten::native_dropout")
        if dropout and (node.args[1] == 0 or node.args[2:3] == (False,)):
            continue  # (p = 0, or eval mode: no draw)
        return True
    return False


# Ops whose result's size or value the host must read before going on: a graph cannot hold them.
HOST_READS = {"aten::nonzero", "aten::_local_scalar_dense", "aten::item", "aten::masked_select", "aten::_unique",
              "aten::_unique2", "aten::unique_dim", "aten::unique_consecutive", "aten::repeat_interleave",
              "aten::bincount", "aten::equal", "aten::is_nonzero", "aten::allclose"}


def waits_on_host(graph: torch.fx.Graph) -> bool:
    """Whether an op reads a result on the host mid-forward (a count of nonzeros, a copy to the CPU)."""
    for node in graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        name = node.target._schema.name
        if name in HOST_READS or str(node.kwargs.get("device", "")).startswith("cpu"):
            return True
        if name in ("aten::index", "aten::index_put", "aten::index_put_"):  # a boolean mask is a nonzero
            masks = [i for i in node.args[1] if isinstance(i, torch.fx.Node)]
            if any(getattr(i.meta.get("val"), "dtype", None) == torch.bool for i in masks):
                return True
    return False


def use_graph(choice: str, target: str, graph: torch.fx.Graph, launches: int, copied_bytes: int) -> bool:
    """Whether the forward is emitted as a graph. launches: launches_per_forward; copied_bytes: the caller's inputs
    and the outputs."""
    if choice not in CHOICES:
        raise ValueError(f"cuda graph choice must be one of {', '.join(CHOICES)} (got {choice!r})")
    if target != "cuda" or choice == "off" or draws_random_numbers(graph) or waits_on_host(graph):
        return False
    saved_s = launches * SAVED_PER_LAUNCH_S
    return choice == "on" or (launches >= MIN_LAUNCHES and copied_bytes / COPY_BYTES_PER_S <= saved_s / 4)
