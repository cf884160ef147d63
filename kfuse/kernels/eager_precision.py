"""What precision eager's own library call runs at, asked of the GPU at plan time.

PyTorch lets cuDNN use TF32 for fp32 convolutions by default, but whether a given call does is cuDNN's choice of
algorithm for that shape: on an H100 a 1x1 convolution over 64 channels ran TF32 (5e-4 from fp32 accuracy), a 3D
convolution of the same file family ran fp32-accurate. A kfuse kernel replacing the call must land within 1e-4 of
eager's output, which an fp32-accurate kernel does only where eager is fp32-accurate too. Where eager runs TF32, a
TF32 kernel lands there only with cuDNN's own operand rounding, which differs between its algorithms: a second
probe (tf32_rounding) finds which, if either, of the two roundings reproduces eager's output; otherwise eager's call
stays (with its epilogue fused after it).

The same holds for a layout change: cuDNN runs channels-last operands with another algorithm, and where either
algorithm is TF32 the two outputs may differ by up to about 4e-4 (a ResNet block, 2026-11-25), so the fp32 policy
runs a convolution channels-last only where the GPU shows eager's output.

A probe runs the call twice on seeded random operands of the node's shapes, made as a problem makes them (nn.Conv's
default initialisation, inputs in [0, 1); the batch cut so the operands stay under PROBE_BYTES): as eager runs it,
and the variant (cuDNN's TF32 off, or channels-last operands). The variant gives eager's output where it stays
within half of KernelBench's tolerance of it: a difference of the size KernelBench would see on the problem's own
weights, not the bare fact of TF32 (which the first version of this probe tested, and which moved
level1/55_conv_standard_2D from cuDNN channels-last, correct at 0.94x eager, to kfuse's kernel at 0.17x).
Without a visible CUDA device the answer is None. A probe that raises (a shape it did not foresee) gives the answer
that keeps eager's own call, with a one-line warning: it costs speed, never the problem.

Where both layouts give eager's output, which is faster is asked of the GPU too (channels_last_slower): cuDNN ran
the suite's convolutions 1.2-2.1x faster channels-last (results/probes-NVIDIA-H100-80GB-HBM3-2026-11-22-s3.md), but
the development set's ConvTranspose3d of 16 to 64 channels made its file 0.74x eager channels-last (run i, H100).

A TF32 call also decides what may run before it. TF32 rounds each operand to 10 mantissa bits, so an input one
fp32 ulp away from eager's crosses a rounding boundary now and then and moves that product by a TF32 ulp: a
DenseNet transition layer (a kfuse training-mode BatchNorm and ReLU before eager's own TF32 1x1 convolution) missed
1e-4 in 2-5 of 134M outputs, by 1.3e-4 (H200, 2026-11-26). So every value a TF32 call reads, directly or through
earlier ops, must be eager's to the bit (eager_bits_needed): those ops keep eager's calls, except the pointwise ops
whose one rounding (or none) no kernel can do otherwise (plan.computes_eager_bits).
"""

from __future__ import annotations

import contextlib
import functools
import math
import sys

import torch

from kfuse import gpulock
from kfuse.kernels.steps import boxed_arguments

PROBE_BYTES = 1 << 30
# The share of KernelBench's tolerance (allclose, atol = rtol = 1e-4) one layer may use: the rest is left for what
# the layers after it make of the difference.
TOLERANCE_SHARE = 0.5
# A kfuse TF32 kernel stands in for eager's TF32 convolution only where operands rounded its way give eager's output
# to this share of the tolerance: the matching rounding measured 1e-6 to 4e-6 off, the other 5e-5 and more.
ROUNDING_MATCH_SHARE = 0.1
TF32_ROUNDINGS = ("rna", "rne")


def _gpu_section(exclusive: bool = False):
    """A probe's GPU work under `kfuse bench --per-gpu N` (kfuse/gpulock.py): shared with the other judges' untimed
    work and never inside their timed rounds (a probe's kernels there would be timed with theirs), or exclusive where
    the probe times something itself."""
    def wrap(probe):
        @functools.wraps(probe)
        def run(*args):
            lock = gpulock.from_environment()
            with contextlib.closing(lock), (lock.exclusive() if exclusive else lock.shared()):
                return probe(*args)
        run.gpu_section = "exclusive" if exclusive else "shared"
        return run
    return wrap


CONVOLUTIONS = {"aten.conv1d.default", "aten.conv2d.default", "aten.conv3d.default", "aten.convolution.default",
                "aten._convolution.default", "aten.conv_transpose1d.default", "aten.conv_transpose2d.input",
                "aten.conv_transpose3d.input"}
# cuDNN's recurrent layers: TF32 under the same flag (39_GRU: 1.4e-4 from its own TF32-off output, H100).
RECURRENT = {"aten.gru.input", "aten.lstm.input", "aten.rnn_tanh.input", "aten.rnn_relu.input"}


def runs_tf32(node: torch.fx.Node) -> bool:
    """Does eager's call for this node land outside half of KernelBench's tolerance of fp32 accuracy (a TF32
    convolution or recurrent layer)? False without a CUDA device, and for every other op (cuBLAS runs fp32 unless
    a problem allows it TF32)."""
    target = str(node.target)
    if target in CONVOLUTIONS:
        return bool(convolution_runs_tf32(node))
    if target in RECURRENT:
        return bool(_recurrent_differs(node))
    return False


def eager_bits_needed(nodes: list[torch.fx.Node]) -> set[torch.fx.Node]:
    """The nodes whose values a TF32 call reads, directly or through earlier ops, and the recurrent TF32 calls
    themselves (no kfuse recurrence lands within 1e-4 of cuDNN's TF32 one): their eager calls stay. (A TF32
    convolution's own call is kept by kfuse.kernels.conv, which may still move its bias or layout where nothing TF32
    reads its output.)"""
    tf32 = [n for n in nodes if n.op == "call_function" and runs_tf32(n)]
    needed = {n for n in tf32 if str(n.target) in RECURRENT}
    stack = [a for n in tf32 for a in n.all_input_nodes]
    while stack:
        node = stack.pop()
        if node in needed or node.op != "call_function":
            continue
        needed.add(node)
        stack.extend(node.all_input_nodes)
    return needed


def convolution_runs_tf32(node: torch.fx.Node) -> bool | None:
    """Does eager's cuDNN call for this convolution node land outside half of KernelBench's tolerance of an
    fp32-accurate result on this GPU (TF32, at a size that shows)? None without a CUDA device."""
    return _ask(node, "no_tf32")


def channels_last_keeps_result(node: torch.fx.Node) -> bool | None:
    """Does this convolution give eager's output, within half of KernelBench's tolerance, with channels-last
    operands? None without a CUDA device."""
    differs = _ask(node, "channels_last")
    return None if differs is None else not differs


def _ask(node: torch.fx.Node, variant: str) -> bool | None:
    key = _probe_key(node)
    return None if key is None else _guarded(_differs, (*key, variant), True, node)


def _guarded(probe, args: tuple, failed, node: torch.fx.Node):
    """probe(*args), or `failed` where the probe raises: the answer that keeps eager's own call (TF32 as eager,
    NCHW), so a probe that cannot run costs speed, never the problem. Running out of GPU memory beside other jobs
    still raises: kfuse bench optimizes the problem again once memory is free."""
    try:
        return probe(*args)
    except torch.cuda.OutOfMemoryError:
        raise
    except Exception as err:  # noqa: BLE001 - one line on stderr, and the conservative answer
        first = str(err).splitlines()[0] if str(err) else ""
        print(f"kfuse: warning: the GPU probe {probe.__name__} failed on {node.name} ({type(err).__name__}: "
              f"{first[:200]}); keeping eager's own call for it", file=sys.stderr)
        return failed


def _probe_key(node: torch.fx.Node) -> tuple | None:
    """(target, input shape, weight shape, has a bias, output shape, the other arguments) of a convolution node: what
    a probe's result depends on (its cache key). None without a CUDA device or where a shape is unknown."""
    if not torch.cuda.is_available():
        return None
    values = boxed_arguments(node)
    x, w, b, out = (_shape(v) for v in values[:3] + [node])
    if x is None or w is None or out is None:
        return None
    rest = tuple(tuple(v) if isinstance(v, list) else v for v in values[3:])
    return str(node.target), x, w, b is not None, out, rest


def probe_operands(x_shape: tuple, w_shape: tuple, has_bias: bool, out_shape: tuple, budget: int = PROBE_BYTES,
                   device: str = "cuda"):
    """A convolution's operands made as a problem makes them (PyTorch's default initialisation, inputs in [0, 1)),
    seeded, the batch cut so they (and two outputs) stay under `budget` bytes. An unbatched input (one dim fewer
    than the weight: channels first) is taken whole."""
    batched = len(x_shape) == len(w_shape)
    if batched:
        per_image = 4 * (math.prod(x_shape[1:]) + 2 * math.prod(out_shape[1:]))
        batch = max(1, min(x_shape[0], (budget - 4 * math.prod(w_shape)) // max(per_image, 1)))
        x_shape = (batch,) + tuple(x_shape[1:])
    generator = torch.Generator(device=device).manual_seed(0)
    bound = math.prod(w_shape[1:]) ** -0.5  # nn.Conv*'s kaiming_uniform_(a=sqrt(5)) and its bias: 1 / sqrt(fan_in)
    x = torch.rand(x_shape, device=device, generator=generator)
    w = (torch.rand(w_shape, device=device, generator=generator) * 2 - 1) * bound
    # one bias per output channel: the weight's dim 0 for a convolution, dim 1 times the groups for a transposed one
    channels = out_shape[1] if batched else out_shape[0]
    b = (torch.rand(channels, device=device, generator=generator) * 2 - 1) * bound if has_bias else None
    return x, w, b


@functools.lru_cache(maxsize=None)
@_gpu_section()
def _differs(target: str, x_shape: tuple, w_shape: tuple, has_bias: bool, out_shape: tuple, rest: tuple,
             variant: str) -> bool:
    """Is `variant`'s output (TF32 off, or channels-last operands) outside half of KernelBench's tolerance of
    eager's, on operands made as a problem makes them?"""
    x, w, b = probe_operands(x_shape, w_shape, has_bias, out_shape)
    op = _op(target)
    with torch.no_grad():
        eager = op(x, w, b, *rest)
        if variant == "no_tf32":
            with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
                other = op(x, w, b, *rest)
        else:
            layout = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
            other = op(x.contiguous(memory_format=layout), w.contiguous(memory_format=layout), b, *rest)
    same = torch.allclose(other, eager, rtol=TOLERANCE_SHARE * 1e-4, atol=TOLERANCE_SHARE * 1e-4)
    del x, w, b, eager, other
    torch.cuda.empty_cache()
    return not same


# channels_last_slower: interleaved timed calls of each layout, and the margin by which channels-last (its input's
# conversion included) must lose before NCHW is chosen: well past the spread of one call's time beside other jobs.
LAYOUT_ROUNDS = 5
LAYOUT_MARGIN = 1.15
# Timed at the problem's own batch where its operands fit this (and a quarter of the GPU's free memory): cuDNN picks
# its algorithm per shape, and at a cut batch the answer can be another. The development set's ConvTranspose3d (16 to
# 64 channels, batch 16, cut to 3 by PROBE_BYTES) was judged both ways by two runs of the same commit, and its file ran
# 14.3 ms channels-last against 8.1 NCHW (H100, 2026-11-27).
LAYOUT_PROBE_BYTES = 4 << 30


def channels_last_slower(node: torch.fx.Node) -> bool | None:
    """Is this convolution, with its input converted to channels-last first, clearly slower (LAYOUT_MARGIN) than
    eager's NCHW call on this GPU? Timed on operands of the node's shapes (the batch cut only past
    LAYOUT_PROBE_BYTES). None without a CUDA device."""
    key = _probe_key(node)
    return None if key is None else _guarded(_layout_slower, key, True, node)


@functools.lru_cache(maxsize=None)
def _layout_slower(target: str, x_shape: tuple, w_shape: tuple, has_bias: bool, out_shape: tuple,
                   rest: tuple) -> bool:
    median = _layout_medians(target, x_shape, w_shape, has_bias, out_shape, rest)
    torch.cuda.empty_cache()  # (the operands are gone with _layout_medians' frame)
    return median["channels_last"] > LAYOUT_MARGIN * median["nchw"]


@_gpu_section(exclusive=True)
def _layout_medians(target: str, x_shape: tuple, w_shape: tuple, has_bias: bool, out_shape: tuple,
                    rest: tuple) -> dict[str, float]:
    """Median ms of the convolution NCHW and channels-last (its input converted in the call), interleaved."""
    budget = min(LAYOUT_PROBE_BYTES, torch.cuda.mem_get_info()[0] // 4)
    x, w, b = probe_operands(x_shape, w_shape, has_bias, out_shape, budget)
    op = _op(target)
    layout = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
    w_last = w.contiguous(memory_format=layout)
    calls = {"nchw": lambda: op(x, w, b, *rest),
             "channels_last": lambda: op(x.contiguous(memory_format=layout), w_last, b, *rest)}
    times = {name: [] for name in calls}
    # (exclusive, _gpu_section: timed beside other judges' work, the two layouts' medians swapped order from run to
    # run: 2_ConvTranspose2d_BiasAdd got NCHW in a bench at 5.35 ms, channels-last in an A/B on the same H200 at
    # 3.15, 2026-11-27)
    with torch.no_grad():
        for call in calls.values():  # (cuDNN picks its algorithm on the first call)
            call()
        for _ in range(LAYOUT_ROUNDS):
            for name, call in calls.items():
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                call()
                end.record()
                end.synchronize()
                times[name].append(start.elapsed_time(end))
    return {name: sorted(t)[len(t) // 2] for name, t in times.items()}


def tf32_rounding(node: torch.fx.Node) -> str | None:
    """The TF32 operand rounding that reproduces eager's TF32 convolution on this GPU: "rna" (to nearest, ties away
    from zero: cvt.rna) or "rne" (to nearest, ties to even), whichever lands within ROUNDING_MATCH_SHARE of
    KernelBench's tolerance of eager's output; None where neither does, or without a CUDA device.

    cuDNN rounds per algorithm (H200, results/devset-H100-2026-11-26/tf32-rounding-H200.jsonl: its 1x1 and
    transposed 1D convolutions matched ties-to-even within 1.3e-6, its 3x3 and k=3 1D ones ties-away within 4e-6;
    the other rounding missed by 5e-5 to 2.3e-4, truncation by 1e-3). Operands rounded the same way multiply exactly
    in fp32, so a kernel that rounds as the probe says and accumulates in fp32 differs from eager's only by the
    order of its sums."""
    key = _probe_key(node)
    return None if key is None else _guarded(_matching_rounding, key, None, node)


@functools.lru_cache(maxsize=None)
@_gpu_section()
def _matching_rounding(target: str, x_shape: tuple, w_shape: tuple, has_bias: bool, out_shape: tuple,
                       rest: tuple) -> str | None:
    x, w, b = probe_operands(x_shape, w_shape, has_bias, out_shape)
    op = _op(target)
    bound = ROUNDING_MATCH_SHARE * 1e-4
    found, best = None, math.inf
    with torch.no_grad():
        eager = op(x, w, b, *rest)
        for rounding in TF32_ROUNDINGS:
            with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
                emulated = op(round_to_tf32(x, rounding), round_to_tf32(w, rounding), b, *rest)
            # allclose's test as a margin: max(|emulated - eager| - rtol |eager|) against atol
            excess = emulated.sub_(eager).abs_().sub_(eager.abs().mul_(bound)).max().item()
            if excess <= bound and excess < best:
                found, best = rounding, excess
            del emulated
    del x, w, b, eager
    torch.cuda.empty_cache()
    return found


def round_to_tf32(t: torch.Tensor, rounding: str) -> torch.Tensor:
    """fp32 values rounded to TF32's 10 mantissa bits (the low 13 bits cleared), ties away from zero ("rna") or to
    even ("rne"), with integer arithmetic on the bits as kf::to_tf32 does (finite values)."""
    bits = t.contiguous().view(torch.int32)
    half = 0x1000 if rounding == "rna" else 0xFFF + ((bits >> 13) & 1)
    return ((bits + half) & -0x2000).view(torch.float32)


def _recurrent_differs(node: torch.fx.Node) -> bool | None:
    """A recurrent layer run with cuDNN's TF32 on and off on operands made as a problem makes them (inputs and
    states from randn, weights uniform in +-1/sqrt(hidden) as nn.RNNBase initialises them): outside half of
    KernelBench's tolerance of each other?"""
    if not torch.cuda.is_available():
        return None
    values = boxed_arguments(node)
    shapes = [_shape(v) if not isinstance(v, (list, tuple)) else tuple(_shape(x) for x in v) for v in values[:3]]
    rest = tuple(values[3:])
    if shapes[0] is None or any(isinstance(v, torch.fx.Node) for v in rest):
        return None
    return _guarded(_recurrent_probe, (str(node.target), tuple(shapes), rest), True, node)


@functools.lru_cache(maxsize=None)
@_gpu_section()
def _recurrent_probe(target: str, shapes: tuple, rest: tuple) -> bool:
    generator = torch.Generator(device="cuda").manual_seed(0)
    x_shape, hx_shapes, param_shapes = shapes
    hx_list = isinstance(hx_shapes, tuple) and bool(hx_shapes) and isinstance(hx_shapes[0], tuple)
    hx_shapes = hx_shapes if hx_list else (hx_shapes,)
    bound = hx_shapes[0][-1] ** -0.5
    x = torch.randn(x_shape, device="cuda", generator=generator)
    hx = [torch.randn(s, device="cuda", generator=generator) for s in hx_shapes]
    params = [(torch.rand(s, device="cuda", generator=generator) * 2 - 1) * bound for s in param_shapes]
    op = _op(target)
    args = (x, hx if hx_list else hx[0], params) + rest
    with torch.no_grad():
        eager = op(*args)
        with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
            other = op(*args)
    same = all(torch.allclose(o, e, rtol=TOLERANCE_SHARE * 1e-4, atol=TOLERANCE_SHARE * 1e-4)
               for o, e in zip(other, eager))
    torch.cuda.empty_cache()
    return not same


def _op(target: str):
    namespace, name, overload = target.split(".")
    return getattr(getattr(getattr(torch.ops, namespace), name), overload)


def _shape(value) -> tuple | None:
    val = value.meta.get("val") if isinstance(value, torch.fx.Node) else None
    return tuple(val.shape) if isinstance(val, torch.Tensor) else None
