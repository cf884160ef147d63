"""kfuse as a torch.compile backend: `torch.compile(model, backend="kfuse")`, registered through PyTorch's
`torch_dynamo_backends` entry point (pyproject.toml), so installing kfuse is enough.

Dynamo hands the backend each graph it captured: a GraphModule whose inputs are the call's tensors and, since
PyTorch 2.5, the module's parameters and buffers. kfuse compiles it the way `kfuse optimize` compiles a problem's
Model: torch.export (on the meta device), the same plan, the same kernels and precision rules, built with
load_inline under a name that carries a hash of the sources (torch's extension cache then serves a second
process without a build). Inference only. Guards and recompiles stay Dynamo's.

A graph kfuse cannot compile, has no kernel for, or fails on (a bug: said so), runs with the default backend
(Inductor) instead, and the reason is logged in one line (logger `kfuse.backend`; `KFUSE_BACKEND_FALLBACK=eager` runs such graphs as Dynamo
gave them). A call that would need gradients is refused with a clear error: kfuse's kernels have no backward.
"""

from __future__ import annotations

import hashlib
import logging
import operator
import os
from typing import Callable

import torch

from kfuse.compiler.capture import CaptureError, capture
from kfuse.compiler.codegen import REGISTRATION, Sources, generate
from kfuse.compiler.emit import CPU_CFLAGS, CPU_LDFLAGS, CUDA_DEVICE_CFLAGS, CUDA_HOST_CFLAGS, SM90A_FLAGS
from kfuse.compiler.plan import add_convolution_epilogues, plan

log = logging.getLogger("kfuse.backend")


class NotCompiled(Exception):
    """Why kfuse leaves a graph to the default backend (one sentence)."""


class GradientsRefused(RuntimeError):
    """A call that would need gradients: kfuse's kernels have none, and a silent wrong gradient is worse than this."""


def kfuse(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """The backend: kfuse's compiled forward for the graph, or the default backend's where kfuse has none."""
    try:
        return compile_graph(gm, example_inputs)
    except GradientsRefused:
        raise
    except Exception as err:  # NotCompiled, or a gap in kfuse itself (a build that fails...): the model still runs
        why = err if isinstance(err, NotCompiled) else \
            f"kfuse failed ({type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}); " \
            f"please report it"
        fallback = os.environ.get("KFUSE_BACKEND_FALLBACK", "inductor")
        log.warning("kfuse: graph of %d nodes left to %s: %s", len(gm.graph.nodes), fallback, why)
        if fallback == "eager":
            return gm.forward
        from torch._inductor.compile_fx import compile_fx

        return compile_fx(gm, example_inputs)


def compile_graph(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """kfuse's forward for the graph. NotCompiled where kfuse cannot compile it or has no kernel for it."""
    if not all(isinstance(t, torch.Tensor) for t in example_inputs):
        raise NotCompiled("the graph takes numbers or symbolic sizes (dynamic shapes); kfuse compiles static shapes")
    refuse_gradients(example_inputs)
    devices = {t.device.type for t in example_inputs} - {"meta"}
    if len(devices) > 1 or not devices <= {"cpu", "cuda"}:
        raise NotCompiled(f"the graph's tensors are on {', '.join(sorted(devices))}; kfuse compiles for one of "
                          f"cpu or cuda")
    target = devices.pop() if devices else "cpu"
    # Captured on meta, as `kfuse optimize` does: the graph is the same on every device and sizes are read again at
    # run time. (Its own constants, if any, go to meta with it.)
    meta_gm = gm_on_meta(gm)
    meta_inputs = [t.to("meta") for t in example_inputs]
    try:
        captured = capture(meta_gm, meta_inputs, drop_no_op_moves=True)  # (Dynamo guards the devices)
    except CaptureError as err:
        raise NotCompiled(str(err)) from None
    if captured.buffer_updates:
        raise NotCompiled("the graph updates buffers in place (training mode); kfuse's backend compiles inference")
    structure = captured.structure
    flat = structure == "tensor" or (structure[0] in ("tuple", "list")
                                     and all(part == "tensor" for part in structure[1]))
    if not flat:
        raise NotCompiled("the graph returns a nested structure")
    add_convolution_epilogues(captured, target, "fp32")
    steps = plan(captured.graph, target, "fp32")
    if not steps.has_kernels:
        raise NotCompiled(f"kfuse has no kernel for it yet (ops: "
                          f"{', '.join(sorted({c.op for c in steps.library_calls})) or 'none'})")
    try:
        sources = generate(captured, steps, target)
    except NotImplementedError as err:
        raise NotCompiled(str(err)) from None
    module = build(sources)
    # The extension's arguments: the graph's tensors in the order capture found them, constants by their path.
    take = [operator.itemgetter(i.target) if i.kind == "user" else constant(gm, i.target)
            for i in captured.inputs if i.dtype is not None]
    single = structure == "tensor"
    log.info("kfuse: graph of %d nodes compiled into %d kernels (%s)", len(gm.graph.nodes), len(sources.kernels),
             ", ".join(k["name"] for k in sources.kernels))

    def forward(*args):
        refuse_gradients(args)
        tensors = [get(args) for get in take]
        out = module.forward(tensors) if sources.packed else module.forward(*tensors)
        return (out,) if single else tuple(out)

    forward.kfuse_kernels = [k["name"] for k in sources.kernels]  # (what it became: tests and curious users)
    if target == "cuda" and os.environ.get("KFUSE_CUDA_GRAPHS", "1") != "0":
        replay = GraphReplay(forward)
        replay.kfuse_kernels = forward.kfuse_kernels
        return replay
    return forward


class GraphReplay:
    """A compiled CUDA forward captured once as a CUDA graph and replayed: one launch for the whole graph instead
    of one per kernel and library call. Real models at small batch sizes are bound by launches (ResNet-50 took
    the same 6 ms eagerly at batch 1 and 32 on an H100), which Dynamo's guards make safe to remove: the graph's
    shapes are static.

    The first two calls run the forward as it is (warm-up: extension setup, cuBLAS and cuDNN choices) and show which
    arguments are read in place: those with the same storage both times (parameters and buffers), which the graph
    then reads where they are. The others (the caller's inputs) get buffers of their own, copied into before each
    replay. Outputs are copied out of the graph's memory, so a result never changes under its holder at the next
    call. The replay runs on the caller's current stream. An argument read in place that comes in other storage
    later (an input the warm-up happened to pass twice) gets a buffer of its own and the graph is captured again;
    after RECAPTURES of those, or where capture fails (an op that synchronizes, say: logged), the forward runs
    without a graph. KFUSE_CUDA_GRAPHS=0 switches it off."""

    WARMUP_CALLS = 2
    RECAPTURES = 3

    def __init__(self, forward: Callable):
        self.forward = forward
        self.calls = 0
        self.recaptures = 0
        self.pointers: list[int] | None = None
        self.in_place: list[bool] = []
        self.graph = None
        self.static_args: list = []
        self.static_out: tuple = ()

    def __call__(self, *args):
        refuse_gradients(args)
        if self.graph is None and self.calls < self.WARMUP_CALLS:
            self.calls += 1
            pointers = [a.data_ptr() if isinstance(a, torch.Tensor) else None for a in args]
            self.in_place = [p is not None and p == q for p, q in zip(pointers, self.pointers or pointers)]
            self.pointers = pointers
            return self.forward(*args)
        moved = [in_place and arg.data_ptr() != pointer
                 for arg, in_place, pointer in zip(args, self.in_place, self.pointers)]
        if any(moved):
            self.in_place = [in_place and not m for in_place, m in zip(self.in_place, moved)]
            if self.graph:
                self.graph = None if self.recaptures < self.RECAPTURES else False
                self.recaptures += 1
        if self.graph is None:
            self.pointers = [a.data_ptr() if isinstance(a, torch.Tensor) else None for a in args]
            self.graph = self.capture(args) or False
        if self.graph is False:
            return self.forward(*args)
        for static, arg, in_place in zip(self.static_args, args, self.in_place):
            if isinstance(arg, torch.Tensor) and not in_place:
                static.copy_(arg)
        self.graph.replay()
        return tuple(out.clone() for out in self.static_out)

    def capture(self, args):
        self.static_args = [a if in_place or not isinstance(a, torch.Tensor) else a.clone()
                            for a, in_place in zip(args, self.in_place)]
        try:
            return self.record()
        except Exception as err:  # the forward still runs, one launch per kernel
            log.warning("kfuse: graph not captured as a CUDA graph (%s: %s); it runs kernel by kernel",
                        type(err).__name__, str(err).strip().splitlines()[0] if str(err).strip() else "")
            self.static_args, self.static_out = [], ()
            return None

    def record(self) -> "torch.cuda.CUDAGraph":
        """The forward on the static arguments as a CUDA graph (its outputs: static_out)."""
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            self.forward(*self.static_args)  # (capture wants one run on a side stream first)
        torch.cuda.current_stream().wait_stream(stream)
        with torch.cuda.graph(graph):
            self.static_out = self.forward(*self.static_args)
        return graph


def refuse_gradients(tensors) -> None:
    if torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors):
        raise GradientsRefused("kfuse's torch.compile backend compiles inference only: its kernels have no backward. "
                           "Call the model under torch.no_grad() (or torch.inference_mode()), or compile it with "
                           "the default backend to train it")


def gm_on_meta(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A copy of the graph module on the meta device: its own tensors (constants Dynamo lifted into it), and the
    devices its calls name. Dynamo records `x.to(y.device)` with y's device as a constant (GPT-2's position
    embeddings: `.to(device(type='cuda'))`), which on meta tensors would ask to copy data meta does not have."""
    graph = torch.fx.Graph()
    graph.output(graph.graph_copy(gm.graph, {}))
    on_meta = lambda value: torch.device("meta") if isinstance(value, torch.device) else value  # noqa: E731
    for node in graph.nodes:
        node.args = torch.fx.node.map_aggregate(node.args, on_meta)
        node.kwargs = torch.fx.node.map_aggregate(node.kwargs, on_meta)
    return torch.fx.GraphModule(gm, graph).to("meta")


def constant(gm: torch.fx.GraphModule, path: str) -> Callable:
    value = operator.attrgetter(path)(gm)
    return lambda args: value


def build(sources: Sources):
    """The sources as an extension module, with the flags an emitted file builds them with (kfuse.compiler.emit)."""
    from torch.utils.cpp_extension import load_inline

    digest = hashlib.sha256((sources.cpp + (sources.cuda or "")).encode()).hexdigest()[:16]
    options = {"name": f"kfuse_graph_{digest}", "cpp_sources": sources.cpp + REGISTRATION,
               "is_python_module": True, "verbose": False}
    if "no_implicit_headers" in load_inline.__code__.co_varnames:
        options["no_implicit_headers"] = True
    if sources.cuda is not None:
        arch = []
        if sources.sm90a and torch.cuda.device_count() > 0 and all(
                torch.cuda.get_device_capability(i) == (9, 0) for i in range(torch.cuda.device_count())):
            arch = SM90A_FLAGS
        options.update(cuda_sources=sources.cuda, extra_cflags=CUDA_HOST_CFLAGS,
                       extra_cuda_cflags=CUDA_DEVICE_CFLAGS + arch)
    else:
        options.update(extra_cflags=CPU_CFLAGS, extra_ldflags=CPU_LDFLAGS)
    return load_inline(**options)
