"""Convolutions as kfuse kernels: conv1d/2d/3d (stride, padding, dilation, groups) with the pointwise epilogue
after them computed in registers, the output written once.

Planning: a convolution library call, and the fused pointwise kernel the planner wrote in place into its output
(with the convolution's bias moved into it), become one ConvKernel step. A convolution with nothing after it
becomes one too (its bias is its epilogue). What the templates do not cover stays a library call.

Printing, CUDA: an implicit GEMM on FFMA (exact fp32; on the suite's problems bitwise equal to cuDNN's output).
  GEMM view: M = output channels of a group, N = output pixels (batch x spatial, flattened), K = input
  channels of a group x kernel taps. A block computes BM = 8*TM channels x 256 pixels; each of its 256 threads
  TM channels x 8 pixels (two runs of 4 adjacent pixels, so every output row is a float4 store). K advances
  8 at a time through double-buffered shared memory: the weights as they are, the input gathered (im2col on the
  fly, zero outside the padding) by one pixel column per thread, loads of the next step in flight during the
  FFMAs of this one. Groups with few output channels take a direct kernel: one thread per output (depthwise 2D
  has its own, below).
  A 3xTF32 tensor-core variant (mma.sync, operands split into TF32 pairs) is kept behind CONV_TENSOR_CORES: it
  measured 7% faster on the seed and 7% slower on a large-K problem, so FFMA is the default for exact fp32.
  Under the tf32 policy (`--precision tf32`), where PyTorch lets cuDNN use TF32 for convolutions, the same
  tensor-core kernel runs one TF32 product instead of three: the flag is read per call (kf::conv_allows_tf32).
  It also stands in for a bare convolution that eager's cuDNN runs in TF32, its operands rounded as eager's call
  rounds them (fuse_convolutions).
  Under the fp32 policy the kernels stay fp32-accurate whatever the flag (fuse_convolutions says why). Measured
  on the suite's bare convolutions (H100): 1.15-1.4x faster than FFMA, except transposed 3D with 32 output
  channels (0.84x); the gather, not the multiply-adds, bounds both
  (results/probes-NVIDIA-H100-80GB-HBM3-2026-11-22-s3.md).
  On an H100 cuDNN's fp32 kernels are faster than both (results/conv-kernels-*.md): on CUDA the planner uses these
  kernels only for files of bare convolutions, which would otherwise get no candidate (_kernels_on_cuda).
  Small filters (2D, groups 1, C_in*kh*kw <= 160, >= 16 output channels: small_filter_tile) take a direct kernel
  in any file, the filter's sizes template constants (the general kernel stays the fallback for another geometry):
  kf::conv2d_small_filter_tc, an implicit GEMM on 3xTF32 mma.sync with the filter chunk (pre-split) and the input
  patch in shared memory, persistent blocks, the next patch copied during the MMAs (the seed: 0.43 ms against
  0.87 for the FFMA kernel, results/conv-tc-*/README.md); where its tile does not fit 112 KB, kf::conv2d_small_filter
  on FFMA (4 pixels x 16 channels per thread; results/conv-direct-*.md). Depthwise 2D convolutions (one input channel per group:
  is_depthwise_2d) take kf::conv2d_depthwise in any file: memory-bound, one read of the input through shared
  memory, against PyTorch's own depthwise kernel.
Printing, CPU: for each (image, output channel) plane, the taps accumulate into a row buffer in the same
  (input channel, tap) order, then the epilogue runs over the plane.
The epilogue is the pointwise kernel's own op function (printing.op_function): one expression table for all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from kfuse.kernels import choices, printing
from kfuse.kernels.eager_precision import runs_tf32, tf32_rounding
from kfuse.kernels.gemm_cuda import ASYNC_COPY
from kfuse.kernels.steps import (FUSABLE_DTYPES, FusedKernel, LibraryCall, TupleItem, boxed_arguments, mutates,
                                 tensor_meta)

# aten op -> (spatial dims, None for any; argument positions of stride, padding, dilation, groups)
CONVOLUTIONS = {
    "aten.conv1d.default": 1,
    "aten.conv2d.default": 2,
    "aten.conv3d.default": 3,
    "aten.convolution.default": None,
    "aten.conv_transpose1d.default": 1,  # (no .input overload, unlike 2d and 3d)
    "aten.conv_transpose2d.input": 2,
    "aten.conv_transpose3d.input": 3,
}


@dataclass(frozen=True)
class SmallFilter:
    """Template arguments of kf::conv2d_small_filter: the filter's sizes and the output-channel chunk per block."""
    in_channels: int
    kernel: tuple[int, int]
    stride: tuple[int, int]
    dilation: tuple[int, int]
    chunk: int            # CB: 16, 32 or 64 output channels per block
    tensor_cores: bool    # kf::conv2d_small_filter_tc (3xTF32) rather than the FFMA kernel

    @property
    def template_arguments(self) -> str:
        values = (self.in_channels, *self.kernel, *self.stride, *self.dilation, self.chunk)
        return ", ".join(str(v) for v in values) + (", true" if self.tensor_cores else ", false")


@dataclass
class ConvKernel:
    name: str
    conv: torch.fx.Node                       # the aten convolution
    epilogue: FusedKernel | None              # the pointwise kernel that wrote in place into its output
    spatial: int                              # 1, 2 or 3
    stride: list[int]
    padding: list[int]
    dilation: list[int]
    groups: int
    transposed: bool = False
    output_padding: list[int] = field(default_factory=list)
    operands: list[str] = field(default_factory=list)   # epilogue inputs; the convolution's own name is the sum
    small_filter: SmallFilter | None = None   # CUDA: the direct small-filter kernel's instantiation, if it runs
    bias_moved: bool = False                  # a reduction or pooling kernel after it adds the bias
    # Where PyTorch allows cuDNN TF32: one TF32 product, operands rounded "rna" (ties away: the tf32 policy's) or
    # "rne" (ties to even) as eager's call rounds them (eager_precision.tf32_rounding). None: fp32 accuracy.
    tf32: str | None = None

    @property
    def input(self) -> str:
        return self.conv.args[0].name

    @property
    def weight(self) -> str:
        return self.conv.args[1].name

    @property
    def bias(self) -> str | None:
        """The bias the kernel adds itself (not moved into a pointwise, reduction or pooling kernel)."""
        if self.epilogue is not None or self.bias_moved:
            return None
        bias = self.conv.args[2] if len(self.conv.args) > 2 else self.conv.kwargs.get("bias")
        return bias.name if isinstance(bias, torch.fx.Node) else None

    @property
    def result(self) -> torch.fx.Node:
        return self.epilogue.result if self.epilogue is not None else self.conv

    @property
    def nodes(self) -> list[torch.fx.Node]:
        return [self.conv] + (self.epilogue.nodes if self.epilogue is not None else [])

    @property
    def ops(self) -> list[str]:
        moved = self.epilogue.ops if self.epilogue is not None else (["kfuse.bias"] if self.bias else [])
        return [str(self.conv.target)] + moved


# ---------------------------------------------------------------------------------------------------------------
# Planning

# On CUDA, a file whose only work is convolutions gets these kernels rather than no candidate (see _kernels_on_cuda).
BARE_CONVOLUTIONS_ON_CUDA = True


def _ints(value, count: int) -> list[int] | None:
    value = list(value) if isinstance(value, (list, tuple)) else [value]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return None
    if len(value) == 1:
        value = value * count
    return value if len(value) == count else None


def conv_spec(node: torch.fx.Node) -> dict | None:
    """stride/padding/dilation/groups of a convolution the templates cover, or None (it stays a library call)."""
    target = str(node.target)
    if node.op != "call_function" or target not in CONVOLUTIONS:
        return None
    values = boxed_arguments(node)
    transposed, output_padding = False, 0
    if target == "aten.convolution.default":
        x, w, b, stride, padding, dilation, transposed, output_padding, groups = values
    elif "transpose" in target:
        x, w, b, stride, padding, output_padding, groups, dilation = values
        transposed = True
    else:
        x, w, b, stride, padding, dilation, groups = values
    out, xm, wm = tensor_meta(node), tensor_meta(x), tensor_meta(w)
    if out is None or xm is None or wm is None or out.dim() < 3 or out.dim() > 5:
        return None  # (an unbatched input has rank spatial + 1: left to the library)
    spatial = out.dim() - 2
    if CONVOLUTIONS[target] not in (None, spatial) or xm.dim() != out.dim() or wm.dim() != out.dim():
        return None
    if {out.dtype, xm.dtype, wm.dtype} - FUSABLE_DTYPES:
        return None
    if b is not None and (tensor_meta(b) is None or tensor_meta(b).dtype not in FUSABLE_DTYPES):
        return None
    spec = {"spatial": spatial, "stride": _ints(stride, spatial), "padding": _ints(padding, spatial),
            "dilation": _ints(dilation, spatial), "groups": groups, "transposed": bool(transposed),
            "output_padding": _ints(output_padding, spatial)}
    if any(v is None for v in spec.values()) or not isinstance(groups, int) or not isinstance(transposed, bool):
        return None
    return spec


def fuse_convolutions(steps: list, names: dict[str, int], unique, target: str, precision: str = "fp32") -> list:
    """Replace each covered convolution library call (with the pointwise kernel written in place into its output)
    by a ConvKernel step, placed where that kernel was (every epilogue operand exists by then).

    Under the fp32 policy the kernels keep fp32 accuracy (FFMA or 3xTF32) even where PyTorch allows cuDNN TF32:
    whether eager's call then runs TF32 is cuDNN's choice of algorithm, not the flag (with the flag on, the
    development set's 3D convolution ran at fp32 accuracy, its 1x1 one in TF32). Accurate, the kernel matches eager
    wherever eager is accurate. Where eager's call runs TF32 (asked of the GPU: kfuse.kernels.eager_precision), an
    accurate kernel is 2-6e-4 from it, past KernelBench's 1e-4: cuDNN keeps that convolution in a file with other
    kernels (it is faster there, _kernels_on_cuda), and in a file of bare convolutions the TF32 tensor-core kernel
    takes it with the operand rounding the GPU shows eager's call uses (tf32_rounding: then the two differ only in
    the order of their fp32 sums). Where neither rounding reproduces eager's, cuDNN keeps the call, and a file left
    with no kernel of its own is refused: being closer to the float64 truth than eager is not KernelBench's check.
    Without a GPU to ask, the kernels replace the calls as the rules say."""
    choice = choices.current().conv_kernels  # "rule" unless kfuse tune measures another
    if choice == "library":
        return steps
    bare = target == "cuda" and _kernels_on_cuda(steps)
    all_convolutions = target != "cuda" or choice == "all" or bare
    out = list(steps)
    for call in [s for s in steps if isinstance(s, LibraryCall) and s.anchor and not s.channels_last
                 and not s.eager_bits]:
        spec = conv_spec(call.node)
        if spec is None:
            continue
        small = small_filter_tile(call.node, spec) if target == "cuda" else None
        depthwise = target == "cuda" and is_depthwise_2d(call.node, spec)
        if small is None and not depthwise and not all_convolutions:
            continue  # cuDNN keeps it (see _kernels_on_cuda)
        tf32 = "rna" if precision == "tf32" else None
        if target == "cuda" and precision == "fp32" and runs_tf32(call.node):
            # eager's cuDNN call runs TF32 here: in a file of bare convolutions the TF32 tensor-core kernel with
            # eager's operand rounding stands in for it; elsewhere cuDNN keeps it (as for fp32: _kernels_on_cuda)
            tf32 = tf32_rounding(call.node) if bare and _tf32_kernel_runs(call.node, spec) else None
            if tf32 is None:
                continue
            small = None  # the general kernel: the one with a TF32 product
        epilogue = next((s for s in out if isinstance(s, FusedKernel) and s.write_into == call.node.name
                         and s.channels_last_input is None), None)
        at = _index(out, call)
        if epilogue is not None and _writes_between(out, at, _index(out, epilogue)):
            epilogue = None  # an in-place op between them: the convolution must read its input before it
        kernel = ConvKernel("", call.node, epilogue, **spec, small_filter=small,
                            bias_moved=epilogue is None and call.bias_moved, tf32=tf32)
        kernel.operands = list(epilogue.inputs) if epilogue is not None else \
            [call.node.name] + ([kernel.bias] if kernel.bias else [])
        kernel.name = unique(_kernel_name(kernel), names)
        out[at] = None
        if epilogue is not None:
            out[_index(out, epilogue)] = kernel
        else:
            out[at] = kernel
        out = [s for s in out if s is not None]
    return out


# The small-filter kernel's limits (kf::SmallFilterTile): its (input channel, tap) loop is unrolled and its whole
# filter chunk lives in shared memory, so the filter must be small; two blocks must fit one SM's shared memory.
SMALL_FILTER_MAX_TAPS = 160            # C_in * kh * kw (the seed: 8 * 3 * 3 = 72)
SMALL_FILTER_MIN_OUT_CHANNELS = 16     # fewer: most lanes of a 16-channel warp would compute nothing
SMALL_FILTER_MAX_SMEM = 100 * 1024
SMALL_FILTER_TC_MAX_SMEM = 112 * 1024  # per block of two in an H100 SM's 228 KB (printed as kf::SMALL_FILTER_TC_MAX_SMEM)
# The tensor-core kernel's epilogue stage per warp: 8 channels x 32 columns, rows of 40 floats (+8: its float2 writes
# are conflict-free); printed as kf::SMALL_FILTER_TC_STAGE_PITCH
SMALL_FILTER_TC_STAGE_PITCH = 40


def small_filter_tile(node: torch.fx.Node, spec: dict) -> SmallFilter | None:
    """The CUDA target's rule for the direct small-filter kernels (kf::conv2d_small_filter_tc, kf::conv2d_small_filter).

    Where it runs: 2D, groups 1, not transposed, fp32, C_in * kh * kw <= SMALL_FILTER_MAX_TAPS, at least
    SMALL_FILTER_MIN_OUT_CHANNELS output channels. Which kernel: the 3xTF32 tensor-core one when its filter
    fragments, epilogue stages and one input patch fit SMALL_FILTER_TC_MAX_SMEM, else the FFMA one when its filter
    chunk + input patch fit SMALL_FILTER_MAX_SMEM, else none.
    Why there: with a short reduction (K = C_in * kh * kw) cuDNN's fp32 implicit GEMMs and kfuse's own spend most
    of their time outside the multiply-adds (results/conv-kernels-*.md: the seed, K = 72, ran 1.10 ms in cuDNN);
    a direct kernel with the filter in shared memory does ~1 shared load per 10 FFMAs and no index math in its
    loop. With a long K the filter does not fit and cuDNN's GEMMs are efficient: they keep those (frozen rule)."""
    if spec["spatial"] != 2 or spec["transposed"] or spec["groups"] != 1:
        return None
    xm, wm, out = tensor_meta(node.args[0]), tensor_meta(node.args[1]), tensor_meta(node)
    if {xm.dtype, wm.dtype, out.dtype} != {torch.float32}:
        return None
    c_out, c_in, kh, kw = (int(v) for v in wm.shape)
    if c_in * kh * kw > SMALL_FILTER_MAX_TAPS or c_out < SMALL_FILTER_MIN_OUT_CHANNELS:
        return None
    chunk = 16 if c_out <= 16 else 32 if c_out <= 32 else 64
    (sh, sw), (dh, dw) = spec["stride"], spec["dilation"]
    taps, cols = c_in * kh * kw, 127 * sw + (kw - 1) * dw + 1
    rows = 8 // (chunk // 16)  # as kf::SmallFilterTile
    ffma_smem = (taps * (chunk + 4) + c_in * ((rows - 1) * sh + (kh - 1) * dh + 1) * cols) * 4
    steps, planes = -(-taps // 8), c_in + (taps % 8 != 0)  # kf::SmallFilterTcTile's, at most (2 rows, zero plane)
    stage = 8 * 8 * SMALL_FILTER_TC_STAGE_PITCH  # the 8 warps' epilogue stages
    tc_smem = (steps * (chunk // 16) * 256 + stage + steps * 8 + planes * (sh + (kh - 1) * dh + 1) * cols) * 4  # 1 buffer
    # the tensor-core kernel where it fits unless kfuse tune measures the FFMA one (Choices.small_filter_tensor_cores)
    if choices.current().small_filter_tensor_cores and tc_smem <= SMALL_FILTER_TC_MAX_SMEM:
        return SmallFilter(c_in, (kh, kw), (sh, sw), (dh, dw), chunk, tensor_cores=True)
    if ffma_smem <= SMALL_FILTER_MAX_SMEM:
        return SmallFilter(c_in, (kh, kw), (sh, sw), (dh, dw), chunk, tensor_cores=False)
    return None


def is_depthwise_2d(node: torch.fx.Node, spec: dict) -> bool:
    """The CUDA target's rule for kf::conv2d_depthwise: 2D, not transposed, fp32, one input channel per group.
    Why there: such a convolution is memory-bound (9 FFMAs per output for 3x3), and PyTorch runs it on its own
    depthwise kernel at ~1.1 TB/s on an H100 (suite problem 55: 2.56 ms for 2.1 GB of input and output), so cuDNN
    or ATen has nothing to add there; the kernel reads a patch once through shared memory."""
    if spec["spatial"] != 2 or spec["transposed"]:
        return False
    xm, wm, out = tensor_meta(node.args[0]), tensor_meta(node.args[1]), tensor_meta(node)
    return {xm.dtype, wm.dtype, out.dtype} == {torch.float32} and int(wm.shape[1]) == 1


def _tf32_kernel_runs(node: torch.fx.Node, spec: dict) -> bool:
    """Does kf::conv_forward take the TF32 tensor-core kernel for this convolution (not the depthwise or direct
    kernels, whose FFMA sums are fp32-accurate): fp32, more than 16 output channels per group, the grid's y
    dimension within 65535?"""
    xm, wm, out = tensor_meta(node.args[0]), tensor_meta(node.args[1]), tensor_meta(node)
    if {xm.dtype, wm.dtype, out.dtype} != {torch.float32} or (not spec["transposed"] and is_depthwise_2d(node, spec)):
        return False
    per_group = int(wm.shape[1]) if spec["transposed"] else int(wm.shape[0]) // spec["groups"]
    return per_group > 16 and spec["groups"] * -(-per_group // 64) <= 65535


def _kernels_on_cuda(steps: list) -> bool:
    """The frozen rule for the CUDA target, measured with scripts/bench/conv_kernels.py on an H100
    (results/conv-kernels-NVIDIA-H100-80GB-HBM3-2026-11-22.md): cuDNN's fp32 convolutions ran faster than these
    kernels on every problem timed (the seed with its epilogue 1.14 ms as cuDNN + the fused epilogue in place vs
    1.50 ms; bare convolutions 0.58-0.64x cuDNN's speed). So cuDNN keeps every convolution of a file that has a kfuse
    kernel anyway; a file of bare convolutions (which would be a file of library calls, no candidate at all) gets
    these kernels: correct, slower than cuDNN, where the alternative is no answer. A convolution with a small
    filter takes the direct small-filter kernel in any file (small_filter_tile, the rule that overrides this one)."""
    return BARE_CONVOLUTIONS_ON_CUDA and all(isinstance(s, (LibraryCall, TupleItem)) for s in steps)


def _index(steps: list, step) -> int:
    return next(i for i, s in enumerate(steps) if s is step)


def _writes_between(steps: list, begin: int, end: int) -> bool:
    return any(isinstance(s, LibraryCall) and mutates(s.node) for s in steps[begin + 1:end])


def _kernel_name(kernel: ConvKernel) -> str:
    kind = "conv_transpose" if kernel.transposed else "conv"
    name = f"fused_{kind}{kernel.spatial}d"  # (a bare "conv2d" would be the graph value's name too)
    if kernel.epilogue is not None:
        name += kernel.epilogue.name.removeprefix("fused")
    elif kernel.bias:
        name += "_bias"
    return name if len(name) <= 60 else name[:60].rstrip("_")


# ---------------------------------------------------------------------------------------------------------------
# Printing: shared structs, the CUDA templates, the CPU loop, the host wrapper

CONV_COMMON = r"""
namespace kf {
// A convolution's sizes, spatial dims padded to 3 at the front (conv1d: 1 x 1 x W).
struct ConvGeom {
    int64_t batch, in_channels, out_channels, groups, in_per_group, out_per_group;
    int in_size[3], out_size[3], kernel[3], stride[3], padding[3], dilation[3];
    int64_t in_plane, out_plane;   // spatial elements of one input / output channel
    int64_t taps, k_per_group;     // kernel taps, and in_per_group * taps (the GEMM's K)
    int64_t pixels;                // batch * out_plane (the GEMM's N)
};
// One epilogue operand at output element (n, c, s), s the spatial index in its plane.
struct ConvOperand {
    const float* data;
    int mode;                      // 0: one value; 1: laid out like the output; 2: one value per channel; 3: strided
    int64_t stride_n, stride_c, stride_s[3];
};
// Floats of kf::conv_pack_weights' output for tiles of `rows` output channels and 16 K steps (kf::conv_igemm_tc's).
KF_HD int64_t conv_packed_floats(const ConvGeom& g, int64_t rows) {
    return g.groups * ((g.k_per_group + 15) / 16 * 16) * ((g.out_per_group + rows - 1) / rows * rows);
}
}  // namespace kf
"""

# What the kernels and their epilogue functors call (the CUDA target's host code never does: CONV_COMMON alone
# goes there).
CONV_KERNEL_HELPERS = r"""
namespace kf {
KF_HD float conv_operand(const ConvOperand& o, int64_t n, int64_t c, int64_t s, const ConvGeom& g) {
    if (o.mode == 0) return o.data[0];
    if (o.mode == 1) return o.data[(n * g.out_channels + c) * g.out_plane + s];
    if (o.mode == 2) return o.data[c * o.stride_c];
    const int64_t x = s % g.out_size[2], y = s / g.out_size[2] % g.out_size[1], z = s / g.out_size[2] / g.out_size[1];
    return o.data[n * o.stride_n + c * o.stride_c + z * o.stride_s[0] + y * o.stride_s[1] + x * o.stride_s[2]];
}
// The input index that output index o reads through tap t along dim d; -1 when none (padding, or a transposed
// convolution's tap that falls between input positions).
KF_HD int conv_source(int o, int t, int d, const ConvGeom& g, bool transposed) {
    if (!transposed) return o * g.stride[d] - g.padding[d] + t * g.dilation[d];
    const int at = o + g.padding[d] - t * g.dilation[d];
    return (at >= 0 && at % g.stride[d] == 0) ? at / g.stride[d] : -1;
}
}  // namespace kf
"""

CONV_HOST_RUNTIME = r"""
namespace kf {
// Checks a convolution's operands and returns its geometry (sizes as PyTorch computes them).
// Transposed: weight (C_in, C_out/groups, taps...), output (in - 1)*stride - 2*pad + dil*(k - 1) + out_pad + 1.
inline ConvGeom conv_geometry(const at::Tensor& x, const at::Tensor& w, int spatial, const int* stride,
                              const int* padding, const int* dilation, int64_t groups, bool transposed,
                              const int* output_padding) {
    TORCH_CHECK(x.dim() == spatial + 2 && w.dim() == spatial + 2, "kfuse convolution: expected a batched input");
    TORCH_CHECK(x.scalar_type() == at::kFloat && w.scalar_type() == at::kFloat, "kfuse convolution: float32 only");
    TORCH_CHECK(x.device() == w.device(), "kfuse convolution: operands on different devices");
    ConvGeom g;
    g.batch = x.size(0); g.in_channels = x.size(1); g.groups = groups; g.in_per_group = x.size(1) / groups;
    if (transposed) {
        TORCH_CHECK(x.size(1) == w.size(0) && w.size(0) % groups == 0, "kfuse convolution: channels do not match");
        g.out_per_group = w.size(1); g.out_channels = w.size(1) * groups;
    } else {
        TORCH_CHECK(x.size(1) == w.size(1) * groups && w.size(0) % groups == 0, "kfuse convolution: channels do not match");
        g.out_per_group = w.size(0) / groups; g.out_channels = w.size(0);
    }
    g.in_plane = g.out_plane = g.taps = 1;
    for (int d = 0; d < 3; ++d) {
        const int at_d = d - (3 - spatial);  // leading dims of conv1d/conv2d: size 1
        const bool real = at_d >= 0;
        g.in_size[d] = real ? (int)x.size(2 + at_d) : 1;
        g.kernel[d] = real ? (int)w.size(2 + at_d) : 1;
        g.stride[d] = real ? stride[at_d] : 1;
        g.padding[d] = real ? padding[at_d] : 0;
        g.dilation[d] = real ? dilation[at_d] : 1;
        const int64_t span = (int64_t)g.dilation[d] * (g.kernel[d] - 1) + 1;
        const int64_t out = transposed
            ? ((int64_t)g.in_size[d] - 1) * g.stride[d] - 2 * g.padding[d] + span + (real ? output_padding[at_d] : 0)
            : ((int64_t)g.in_size[d] + 2 * g.padding[d] - span) / g.stride[d] + 1;
        TORCH_CHECK(out > 0, "kfuse convolution: the kernel is larger than the padded input");
        g.out_size[d] = (int)out;
        g.in_plane *= g.in_size[d]; g.out_plane *= out; g.taps *= g.kernel[d];
    }
    TORCH_CHECK(g.in_plane < INT32_MAX && g.out_plane < INT32_MAX, "kfuse convolution: a channel plane over 2^31 elements");
    g.k_per_group = g.in_per_group * g.taps;
    // (the loaders' 32-bit weight offsets, a block's rows past the last channel included)
    TORCH_CHECK((g.out_channels + 128) * g.k_per_group < INT32_MAX, "kfuse convolution: a weight over 2^31 elements");
    g.pixels = g.batch * g.out_plane;
    return g;
}
// The epilogue operands, broadcast to the output's shape (kf::prepare), in the form the kernels read.
inline void conv_operands(const Operand* o, const Shape& shape, int count, int spatial, ConvOperand* out) {
    for (int k = 0; k < count; ++k) {
        out[k].data = o[k].data;
        out[k].stride_n = o[k].strides[0];
        out[k].stride_c = o[k].strides[1];
        bool per_channel = o[k].strides[0] == 0;
        for (int d = 0; d < 3; ++d) {
            const int at_d = 2 + d - (3 - spatial);
            out[k].stride_s[d] = at_d >= 2 ? o[k].strides[at_d] : 0;
            per_channel = per_channel && out[k].stride_s[d] == 0;
        }
        out[k].mode = o[k].step == 0 ? 0 : o[k].step == 1 ? 1 : per_channel ? 2 : 3;
    }
}
// What the epilogue's direct reads assume (kfuse.kernels.conv.operand_kinds): one value per output channel (or one value
// in all), and one value in all. (Strides of size-1 dims are 0.)
inline bool conv_per_channel(const ConvOperand& o) {
    return o.stride_n == 0 && o.stride_s[0] == 0 && o.stride_s[1] == 0 && o.stride_s[2] == 0;
}
inline bool conv_single(const ConvOperand& o) { return conv_per_channel(o) && o.stride_c == 0; }
}  // namespace kf
"""

# Whether PyTorch lets convolutions use TF32 now, asked the way its cuDNN convolutions ask (per op since torch 2.9,
# one cuDNN flag before; the flag-less question is deprecated there and fails when conv and RNN settings differ).
CONV_CUDA_HOST_RUNTIME = r"""
#include <ATen/Context.h>
#if __has_include(<torch/headeronly/version.h>)
#include <torch/headeronly/version.h>
#endif
namespace kf {
inline bool conv_allows_tf32() {
#if defined(TORCH_VERSION_MAJOR) && (TORCH_VERSION_MAJOR > 2 || TORCH_VERSION_MINOR >= 9)
    return at::globalContext().allowTF32CuDNN(at::Float32Op::CONV);
#else
    return at::globalContext().allowTF32CuDNN();
#endif
}
}  // namespace kf
"""

# The CUDA kernels, templated on the epilogue functor: `epi(sum, n, c, s, g)` gives the value written.
CONV_CUDA_TEMPLATES = r"""
namespace kf {
constexpr int CONV_THREADS = 256, CONV_BN = 256, CONV_BK = 8, CONV_PAD = 8;
// A TF32 kernel's operand rounding (ConvKernel.tf32): none (fp32 accuracy), to nearest with ties away or to even.
constexpr int TF32_OFF = 0, TF32_TIES_AWAY = 1, TF32_TIES_EVEN = 2;
// 3xTF32 on tensor cores for groups of more than 32 output channels; false: FFMA everywhere. Off: on an H100 the
// FFMA kernel ran suite problem 50 (K = 576) in 12.6 ms and this one in 13.6 ms (the seed, K = 72: 1.60 vs 1.50 ms);
// FFMA is also exact fp32.
constexpr bool CONV_TENSOR_CORES = false;

// t / s where t >= 0 (the gather tests t >= 0 before it uses the quotient), without a divide instruction for strides
// 1 and 2: three divisions per gathered element were most of a strided transposed 3D convolution's instructions.
__device__ __forceinline__ int conv_div_stride(int t, int s) { return s == 1 ? t : s == 2 ? t >> 1 : t / s; }

// x rounded to TF32 (what one TF32 tensor-core product reads: 10 mantissa bits), to nearest with ties away from
// zero (cvt.rna) or to even (integer math on the bits; inf and NaN pass unchanged). cuDNN's TF32 kernels differ in
// which: the planner asks the GPU which one eager's call uses (kfuse.kernels.eager_precision.tf32_rounding).
template <int ROUNDING>
__device__ __forceinline__ uint32_t to_tf32(float x) {
    if constexpr (ROUNDING == TF32_TIES_EVEN) {
        const uint32_t b = __float_as_uint(x);
        return (b & 0x7f800000u) == 0x7f800000u ? b : (b + 0xfffu + ((b >> 13) & 1u)) & 0xffffe000u;
    } else {
        uint32_t r;
        asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
        return r;
    }
}

// x with its TF32-rounded bits (ROUNDING other than TF32_OFF), for tiles rounded once as they are stored.
template <int ROUNDING>
__device__ __forceinline__ float rounded(float x) {
    if constexpr (ROUNDING == TF32_OFF) return x;
    else return __uint_as_float(to_tf32<ROUNDING>(x));
}

// One block's share of the implicit GEMM's operands for K steps of BK: BM weights rows x BK, and BK x BN input
// values gathered from the pixels' receptive fields (zero in the padding). Loaded into registers (`gather`, called
// once per K step in order, in flight while the block computes on the previous step), then stored to shared memory
// (`stage`, rounded there to TF32 when the kernel multiplies so: once per element, not once per warp that reads it).
// K runs tap-major, k = tap * in_per_group + input channel: a thread's run of rows stays in one tap (where the group
// has a multiple of 8 input channels), so the receptive-field arithmetic and its bounds test happen once per tap and
// each element is one load at a channel stride (the channel-major order walked the taps per element: 55
// instructions each, most of the kernel's).
// TRANSPOSED: the adjoint, gathered: output pixel o reads input i through tap t where i*stride = o + pad - t*dil.
// PACKED: A tiles copied 16 bytes at a time from kf::conv_pack_weights' output (`packed`), already in the tile's
// order, padded and rounded, instead of gathered element by element from the weight.
template <int BM, int BN, int BK, bool TRANSPOSED, bool PACKED = false>
struct ConvTileLoader {
    static constexpr int A_LOADS = PACKED ? BM * BK / 4 / CONV_THREADS : (BM * BK + CONV_THREADS - 1) / CONV_THREADS;
    static_assert(!PACKED || (BM * BK) % (4 * CONV_THREADS) == 0, "a packed A tile is whole 16-byte chunks per thread");
    static constexpr int A_CHUNK_ROWS = CONV_THREADS / (BM / 4);  // k rows between a thread's packed chunks
    static constexpr int B_LOADS = BN * BK / CONV_THREADS;  // k rows of this thread's pixel column
    static_assert(CONV_THREADS % BK == 0, "a thread's weight elements share one k");
    const float* xg;      // the pixel's image, this group's first input channel
    const float* w;
    int wa;               // the weight offset of this thread's first A row (co) at k = 0 of tap 0 (a weight's
                          // offsets fit 32 bits, checked on the host)
    int co0, iz0, iy0, ix0;
    bool p_ok;
    int cb, bz, by, bx;  // B rows: input channel cb of tap (bz, by, bx)
    const float* bsrc;   // its input value for this thread's pixel; nullptr: padding, or past the last tap
    int ca, ta;              // A elements (one k for all of this thread's): input channel ca of tap ta
    const float* wp;         // packed: this thread's first chunk of the next A tile
    int64_t wp_row;          // packed: floats per k row (the group's output channels, padded to BM)
    float a[PACKED ? 1 : A_LOADS], b[B_LOADS];
    float4 a4[PACKED ? A_LOADS : 1];

    __device__ __forceinline__ ConvTileLoader(const float* x, const float* w_, const ConvGeom& g, int64_t group,
                                              int64_t m0, int64_t p0, const float* packed = nullptr) : w(w_) {
        const int64_t p = p0 + threadIdx.x % BN;
        p_ok = p < g.pixels;
        const int64_t n = p_ok ? p / g.out_plane : 0;
        const int s = p_ok ? (int)(p % g.out_plane) : 0;
        const int ox = s % g.out_size[2], oy = s / g.out_size[2] % g.out_size[1], oz = s / g.out_size[2] / g.out_size[1];
        iz0 = TRANSPOSED ? oz + g.padding[0] : oz * g.stride[0] - g.padding[0];
        iy0 = TRANSPOSED ? oy + g.padding[1] : oy * g.stride[1] - g.padding[1];
        ix0 = TRANSPOSED ? ox + g.padding[2] : ox * g.stride[2] - g.padding[2];
        xg = x + (n * g.in_channels + group * g.in_per_group) * g.in_plane;
        const int cin = (int)g.in_per_group;
        const int k1 = (int)(threadIdx.x / BN) * B_LOADS;
        cb = k1 % cin;
        const int tap = k1 / cin;
        bx = tap % g.kernel[2], by = tap / g.kernel[2] % g.kernel[1], bz = tap / g.kernel[2] / g.kernel[1];
        locate(g);
        co0 = (int)m0 + (int)threadIdx.x / BK;
        ca = (int)threadIdx.x % BK % cin;
        ta = (int)threadIdx.x % BK / cin;
        // weights (C_out, C_in/groups, taps), or (C_in, C_out/groups, taps) when transposed
        wa = (int)(TRANSPOSED ? (group * g.in_per_group * g.out_per_group + co0) * g.taps
                              : (group * g.out_per_group + co0) * g.k_per_group);
        if constexpr (PACKED) {
            wp_row = (g.out_per_group + BM - 1) / BM * BM;
            const int64_t kp = (g.k_per_group + BK - 1) / BK * BK;
            wp = packed + (group * kp + threadIdx.x / (BM / 4)) * wp_row + m0 + threadIdx.x % (BM / 4) * 4;
        }
    }

    // bsrc for the tap: the input position this thread's pixel reads through it (channel cb), if any
    __device__ __forceinline__ void locate(const ConvGeom& g) {
        int iz, iy, ix;
        bool inside = p_ok && bz < g.kernel[0];
        if constexpr (TRANSPOSED) {
            const int tz = iz0 - bz * g.dilation[0], ty = iy0 - by * g.dilation[1], tx = ix0 - bx * g.dilation[2];
            iz = conv_div_stride(tz, g.stride[0]); iy = conv_div_stride(ty, g.stride[1]);
            ix = conv_div_stride(tx, g.stride[2]);
            inside = inside && tz >= 0 && ty >= 0 && tx >= 0 && iz * g.stride[0] == tz && iy * g.stride[1] == ty
                     && ix * g.stride[2] == tx;
        } else {
            iz = iz0 + bz * g.dilation[0]; iy = iy0 + by * g.dilation[1]; ix = ix0 + bx * g.dilation[2];
        }
        inside = inside && (unsigned)iz < (unsigned)g.in_size[0] && (unsigned)iy < (unsigned)g.in_size[1]
                 && (unsigned)ix < (unsigned)g.in_size[2];
        // in-plane offsets fit 32 bits (checked on the host)
        bsrc = inside ? xg + cb * g.in_plane + (iz * g.in_size[1] + iy) * g.in_size[2] + ix : nullptr;
    }

    // The B row `rows` on: `rows` input channels on, into the following taps past the group's last channel.
    __device__ __forceinline__ void advance_b(const ConvGeom& g, int rows) {
        cb += rows;
        if (cb < (int)g.in_per_group) {
            if (bsrc) bsrc += rows * g.in_plane;
            return;
        }
        do {
            cb -= (int)g.in_per_group;
            if (++bx == g.kernel[2]) { bx = 0; if (++by == g.kernel[1]) { by = 0; ++bz; } }
        } while (cb >= (int)g.in_per_group);
        locate(g);
    }

    __device__ __forceinline__ void gather(const ConvGeom& g) {
        if constexpr (PACKED) {
            #pragma unroll
            for (int j = 0; j < A_LOADS; ++j)
                a4[j] = __ldg(reinterpret_cast<const float4*>(wp + j * A_CHUNK_ROWS * wp_row));
            wp += BK * wp_row;
        } else {
            #pragma unroll
            for (int j = 0; j < A_LOADS; ++j) {
                const int e = threadIdx.x + j * CONV_THREADS;
                const int co = co0 + j * (CONV_THREADS / BK);
                const bool inside = e < BM * BK && co < (int)g.out_per_group && ta < (int)g.taps;
                const int at = ca * (int)(TRANSPOSED ? g.out_per_group * g.taps : g.taps) + ta;
                const int row_step = (CONV_THREADS / BK) * (int)(TRANSPOSED ? g.taps : g.k_per_group);
                a[j] = inside ? __ldg(w + (wa + j * row_step + at)) : 0.0f;
            }
            for (ca += BK; ca >= (int)g.in_per_group; ca -= (int)g.in_per_group) ++ta;
        }
        if (cb + B_LOADS <= (int)g.in_per_group) {  // this thread's rows in one tap
            #pragma unroll
            for (int kk = 0; kk < B_LOADS; ++kk) b[kk] = bsrc ? __ldg(bsrc + kk * g.in_plane) : 0.0f;
            advance_b(g, BK);
        } else {
            #pragma unroll
            for (int kk = 0; kk < B_LOADS; ++kk) {
                b[kk] = bsrc ? __ldg(bsrc) : 0.0f;
                advance_b(g, 1);
            }
            advance_b(g, BK - B_LOADS);  // past the other threads' rows of this step
        }
    }

    // k-major tiles, rows padded by CONV_PAD floats (conflict-free tensor-core fragment reads)
    template <int ROUNDING>
    __device__ __forceinline__ void stage(float (*As)[BM + CONV_PAD], float (*Bs)[BN + CONV_PAD]) const {
        #pragma unroll
        for (int j = 0; j < A_LOADS; ++j) {
            if constexpr (PACKED) {  // (rounded when packed)
                const int c = threadIdx.x + j * CONV_THREADS;
                *reinterpret_cast<float4*>(&As[c / (BM / 4)][c % (BM / 4) * 4]) = a4[j];
            } else {
                const int e = threadIdx.x + j * CONV_THREADS;
                if (e < BM * BK) As[e % BK][e / BK] = rounded<ROUNDING>(a[j]);
            }
        }
        const int col = threadIdx.x % BN, row0 = (threadIdx.x / BN) * B_LOADS;
        #pragma unroll
        for (int kk = 0; kk < B_LOADS; ++kk) Bs[row0 + kk][col] = rounded<ROUNDING>(b[kk]);
    }
};

// A run of adjacent output pixels from flat index q (over batch and plane): its image n and its offset s in the
// plane, found once per run. A tile's rows (output channels) all store the same runs, and the 64-bit division
// that finds (n, s) cost more instructions per row than the row's share of the MMAs (kf::pointwise_store says how
// it was measured).
struct PixelRun {
    int64_t q, n, s;
    __device__ __forceinline__ PixelRun(int64_t q_, const ConvGeom& g) : q(q_), n(q_ / g.out_plane), s(q_ - n * g.out_plane) {}
};

// Stores one output value per pixel of a run of `count` (one vector store when the run lies in one image and the
// address is aligned), each through the epilogue, for output channel c.
template <int COUNT, class Epilogue>
__device__ __forceinline__ void conv_store(float* __restrict__ out, const ConvGeom& g, const Epilogue& epi,
                                           const float* v, const PixelRun& run, int64_t c) {
    if (run.q >= g.pixels) return;
    const int64_t qn = run.n, qs = run.s;
    float* dst = out + (qn * g.out_channels + c) * g.out_plane + qs;
    if (qs + COUNT - 1 < g.out_plane && (reinterpret_cast<uintptr_t>(dst) % (4 * COUNT)) == 0) {
        if constexpr (COUNT == 4) {
            *reinterpret_cast<float4*>(dst) = make_float4(epi(v[0], qn, c, qs, g), epi(v[1], qn, c, qs + 1, g),
                                                          epi(v[2], qn, c, qs + 2, g), epi(v[3], qn, c, qs + 3, g));
        } else {
            *reinterpret_cast<float2*>(dst) = make_float2(epi(v[0], qn, c, qs, g), epi(v[1], qn, c, qs + 1, g));
        }
        return;
    }
    for (int j = 0; j < COUNT && run.q + j < g.pixels; ++j) {  // (a run across images, or unaligned: rare)
        const int64_t pn = (run.q + j) / g.out_plane, ps = (run.q + j) % g.out_plane;
        out[(pn * g.out_channels + c) * g.out_plane + ps] = epi(v[j], pn, c, ps, g);
    }
}

// Implicit GEMM on FFMA: a block computes 8*TM output channels of one group x 256 output pixels. A warp covers
// 4 channel rows x 8 pixel columns of threads, so each shared-memory read serves 8 (weights) or 4 (inputs)
// threads at once; a thread holds TM channels x 8 pixels (two runs of 4: float4 stores).
template <int TM, bool TRANSPOSED, class Epilogue>
__global__ void __launch_bounds__(CONV_THREADS, 2)
conv_igemm(const float* __restrict__ x, const float* __restrict__ w, const ConvGeom g, const Epilogue epi,
           float* __restrict__ out) {
    constexpr int BM = 8 * TM, BN = CONV_BN, BK = CONV_BK;
    __shared__ __align__(16) float As[2][BK][BM + CONV_PAD];
    __shared__ __align__(16) float Bs[2][BK][BN + CONV_PAD];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int tm = (warp & 1) * 4 + (lane >> 3);   // channel row of threads, 0..7
    const int tn = (warp >> 1) * 8 + (lane & 7);   // pixel column of threads, 0..31
    const int64_t m_tiles = (g.out_per_group + BM - 1) / BM;
    const int64_t group = blockIdx.y / m_tiles, m0 = (blockIdx.y % m_tiles) * BM;
    const int64_t p0 = (int64_t)blockIdx.x * BN, K = g.k_per_group;
    ConvTileLoader<BM, BN, BK, TRANSPOSED> tile(x, w, g, group, m0, p0);

    float acc[TM][8];
    #pragma unroll
    for (int i = 0; i < TM; ++i)
        #pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

    tile.gather(g);
    tile.template stage<TF32_OFF>(As[0], Bs[0]);
    __syncthreads();
    int buf = 0;
    for (int64_t k0 = 0; k0 < K; k0 += BK) {
        const bool more = k0 + BK < K;
        if (more) tile.gather(g);  // in flight during the FFMAs below
        #pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float a[TM], b[8];
            #pragma unroll
            for (int i = 0; i < TM; i += 2) {
                const float2 v = *reinterpret_cast<const float2*>(&As[buf][kk][tm * TM + i]);
                a[i] = v.x; a[i + 1] = v.y;
            }
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[buf][kk][tn * 4]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[buf][kk][BN / 2 + tn * 4]);
            b[0] = b0.x; b[1] = b0.y; b[2] = b0.z; b[3] = b0.w; b[4] = b1.x; b[5] = b1.y; b[6] = b1.z; b[7] = b1.w;
            #pragma unroll
            for (int i = 0; i < TM; ++i)
                #pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        if (more) tile.template stage<TF32_OFF>(As[buf ^ 1], Bs[buf ^ 1]);
        __syncthreads();
        buf ^= 1;
    }
    const PixelRun left(p0 + tn * 4, g), right(p0 + BN / 2 + tn * 4, g);
    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int64_t co = m0 + tm * TM + i;
        if (co >= g.out_per_group) continue;
        const int64_t c = group * g.out_per_group + co;
        conv_store<4>(out, g, epi, &acc[i][0], left, c);
        conv_store<4>(out, g, epi, &acc[i][4], right, c);
    }
}

// x = big + small, both TF32 (10-bit mantissas): big*big + big*small + small*big carries x*y to about fp32's
// precision (the small*small term, 2^-22 relative, is dropped).
__device__ __forceinline__ void split_tf32(float x, uint32_t& big, uint32_t& small) {
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(big) : "f"(x));
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(small) : "f"(x - __uint_as_float(big)));
}
// split_tf32 in 7 instructions instead of 9 on sm_90 (cvt.rna.tf32 is emulated there, with a guard for inf/NaN):
// small is rounded with integer math, (bits + 0x1000) & ~0x1fff (round to nearest, ties away, like cvt.rna), which
// is exact for finite values. It turns NaN (only when x is inf or NaN) into a zero, but big carries that then.
__device__ __forceinline__ void split_tf32_fast(float x, uint32_t& big, uint32_t& small) {
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(big) : "f"(x));
    small = (__float_as_uint(x - __uint_as_float(big)) + 0x1000u) & 0xffffe000u;
}
__device__ __forceinline__ void mma_tf32(float* c, const uint32_t* a, const uint32_t* b) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Implicit GEMM on tensor cores: a block computes BM (64 or 128) output channels x 128 pixels; each of its 8 warps
// BM/2 x 32 as BM/32 x 4 m16n8k8 tiles. ROUNDING TF32_OFF: 3xTF32 (fp32 accuracy), operands split into TF32 pairs as
// they leave shared memory; TF32_TIES_AWAY or TF32_TIES_EVEN: plain TF32 (PyTorch's default precision for
// convolutions), one product per tile, operands rounded so. BM 128 (groups of more than 96 output channels) gathers
// each input column once for 128 channels instead of twice, and reads each B fragment for 4 products, not 2.
template <int BM, int ROUNDING, bool TRANSPOSED, class Epilogue, bool PACKED = false>
__global__ void __launch_bounds__(CONV_THREADS, 2)
conv_igemm_tc(const float* __restrict__ x, const float* __restrict__ w, const ConvGeom g, const Epilogue epi,
              float* __restrict__ out, const float* __restrict__ packed = nullptr) {
    constexpr int BN = 128, BK = 16, MI = BM / 32;
    __shared__ __align__(16) float As[2][BK][BM + CONV_PAD];
    __shared__ __align__(16) float Bs[2][BK][BN + CONV_PAD];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int gr = lane >> 2, tq = lane & 3;                 // the mma fragments' row group and quad index
    const int wm = (warp & 1) * (BM / 2), wn = (warp >> 1) * 32;  // the warp's corner in the block tile
    const int64_t m_tiles = (g.out_per_group + BM - 1) / BM;
    const int64_t group = blockIdx.y / m_tiles, m0 = (blockIdx.y % m_tiles) * BM;
    const int64_t p0 = (int64_t)blockIdx.x * BN, K = g.k_per_group;
    ConvTileLoader<BM, BN, BK, TRANSPOSED, PACKED> tile(x, w, g, group, m0, p0, packed);

    float acc[MI][4][4];
    #pragma unroll
    for (int i = 0; i < MI; ++i)
        #pragma unroll
        for (int j = 0; j < 4; ++j)
            #pragma unroll
            for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;

    tile.gather(g);
    tile.template stage<ROUNDING>(As[0], Bs[0]);
    __syncthreads();
    int buf = 0;
    for (int64_t k0 = 0; k0 < K; k0 += BK) {
        const bool more = k0 + BK < K;
        if (more) tile.gather(g);  // in flight during the MMAs below
        #pragma unroll
        for (int ks = 0; ks < BK; ks += 8) {
            uint32_t b_big[4][2], b_small[4][2];
            // A (row-major 16x8): (gr, tq), (gr+8, tq), (gr, tq+4), (gr+8, tq+4); B (column-major 8x8): (tq, gr),
            // (tq+4, gr). The B fragments first, then one A fragment at a time (fewer registers live).
            #pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int n = wn + j * 8 + gr;
                const float b[2] = {Bs[buf][ks + tq][n], Bs[buf][ks + tq + 4][n]};
                #pragma unroll
                for (int r = 0; r < 2; ++r) {
                    if constexpr (ROUNDING == TF32_OFF) split_tf32(b[r], b_big[j][r], b_small[j][r]);
                    else b_big[j][r] = __float_as_uint(b[r]);  // (rounded when staged)
                }
            }
            #pragma unroll
            for (int i = 0; i < MI; ++i) {
                const int m = wm + i * 16 + gr;
                const float a[4] = {As[buf][ks + tq][m], As[buf][ks + tq][m + 8], As[buf][ks + tq + 4][m],
                                    As[buf][ks + tq + 4][m + 8]};
                uint32_t a_big[4], a_small[4];
                #pragma unroll
                for (int r = 0; r < 4; ++r) {
                    if constexpr (ROUNDING == TF32_OFF) split_tf32(a[r], a_big[r], a_small[r]);
                    else a_big[r] = __float_as_uint(a[r]);
                }
                #pragma unroll
                for (int j = 0; j < 4; ++j) {
                    if constexpr (ROUNDING == TF32_OFF) {
                        mma_tf32(acc[i][j], a_small, b_big[j]);
                        mma_tf32(acc[i][j], a_big, b_small[j]);
                    }
                    mma_tf32(acc[i][j], a_big, b_big[j]);
                }
            }
        }
        if (more) tile.template stage<ROUNDING>(As[buf ^ 1], Bs[buf ^ 1]);
        __syncthreads();
        buf ^= 1;
    }
    // C fragment: (gr, 2tq), (gr, 2tq+1), (gr+8, 2tq), (gr+8, 2tq+1): runs of 2 adjacent pixels, the same 4 runs
    // for every row
    const PixelRun runs[4] = {PixelRun(p0 + wn + 2 * tq, g), PixelRun(p0 + wn + 8 + 2 * tq, g),
                              PixelRun(p0 + wn + 16 + 2 * tq, g), PixelRun(p0 + wn + 24 + 2 * tq, g)};
    #pragma unroll
    for (int i = 0; i < MI; ++i)
        #pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int64_t co = m0 + wm + i * 16 + gr + half * 8;
            if (co >= g.out_per_group) continue;
            const int64_t c = group * g.out_per_group + co;
            #pragma unroll
            for (int j = 0; j < 4; ++j) conv_store<2>(out, g, epi, &acc[i][j][half * 2], runs[j], c);
        }
}

// The weights as conv_igemm_tc's A tiles read them (its PACKED loader): [group][k][output channel], k in the
// gather's tap-major order (k = tap * in_per_group + ci), channels padded to ROWS and K to a multiple of 16 with
// zeros, values rounded to TF32 once here rather than at every tile of every block. A few microseconds per call
// (the weights are small beside what the convolution reads); the rows of one k are contiguous, so a tile's rows
// are 16-byte copies with no index arithmetic (they were 8 scalar loads with their own offsets and bounds each).
template <int ROWS, int ROUNDING, bool TRANSPOSED>
__global__ void conv_pack_weights(const float* __restrict__ w, const ConvGeom g, float* __restrict__ packed) {
    const int64_t rows = (g.out_per_group + ROWS - 1) / ROWS * ROWS, kp = (g.k_per_group + 15) / 16 * 16;
    const int64_t total = g.groups * kp * rows;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t co = i % rows, k = i / rows % kp, group = i / rows / kp;
        const int64_t ci = k % g.in_per_group, tap = k / g.in_per_group;
        const float v = co < g.out_per_group && k < g.k_per_group
            ? w[TRANSPOSED ? ((group * g.in_per_group + ci) * g.out_per_group + co) * g.taps + tap
                           : (group * g.out_per_group + co) * g.k_per_group + ci * g.taps + tap]
            : 0.0f;
        packed[i] = rounded<ROUNDING>(v);
    }
}

#if defined(KF_CONV_POINTWISE_TC)  // (its copies: kf_gemm::copy_async, gemm_cuda.ASYNC_COPY)
// Stores a pointwise tile's C fragments, (gr, 2tq), (gr, 2tq+1), (gr+8, 2tq), (gr+8, 2tq+1) of each m16n8 tile: runs of
// 2 adjacent pixels of image n. conv_pointwise_ok's planes hold a multiple of 4 pixels, so a run starting at an even
// pixel stays in its row and lands 8-byte aligned: a float2 store at an address read off (n, c, s) directly, where
// conv_store's 64-bit division by the plane cost more instructions than the tile's MMAs (ncu, 2026-11-27).
template <int MI, class Epilogue>
__device__ __forceinline__ void pointwise_store(float* __restrict__ out, const ConvGeom& g, const Epilogue& epi,
                                                const float (&acc)[MI][4][4], int64_t n, int64_t s0, int64_t group,
                                                int64_t m0, int wm, int wn, int gr, int tq) {
    #pragma unroll
    for (int i = 0; i < MI; ++i)
        #pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int64_t co = m0 + wm + i * 16 + gr + half * 8;
            if (co >= g.out_per_group) continue;
            const int64_t c = group * g.out_per_group + co;
            float* const row = out + (n * g.out_channels + c) * g.out_plane;
            #pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int64_t s = s0 + wn + j * 8 + 2 * tq;
                if (s < g.out_plane)
                    *reinterpret_cast<float2*>(row + s) = make_float2(epi(acc[i][j][half * 2], n, c, s, g),
                                                                      epi(acc[i][j][half * 2 + 1], n, c, s + 1, g));
            }
        }
}

// A 1x1 convolution (stride 1, no padding or dilation) is a GEMM per image: out[n, co, s] = sum_ci w[co, ci] x[n, ci, s].
// conv_igemm_tc's TF32 product, operands rounded alike and summed in the same order (the same bits), without its
// im2col gather: both tiles are copied to shared memory 16 bytes at a time (cp.async), the next K tile in flight
// while this one is multiplied. A block covers BM output channels x 128 pixels of one image; each of its 8 warps
// BM/2 x 32 as m16n8k8 tiles. Asks rows of 16-byte multiples (conv_pointwise_ok).
template <int BM, int ROUNDING, class Epilogue>
__global__ void __launch_bounds__(CONV_THREADS, 2)
conv_pointwise_tc(const float* __restrict__ x, const float* __restrict__ w, const ConvGeom g, const Epilogue epi,
                  float* __restrict__ out) {
    constexpr int BN = 128, BK = 16, MI = BM / 32;
    __shared__ __align__(16) float As[2][BM][BK + 4];           // m-major: conflict-free fragment reads at pitch 20
    __shared__ __align__(16) float Bs[2][BK][BN + CONV_PAD];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int gr = lane >> 2, tq = lane & 3;
    const int wm = (warp & 1) * (BM / 2), wn = (warp >> 1) * 32;
    const int64_t plane_tiles = (g.out_plane + BN - 1) / BN;
    const int64_t n = blockIdx.x / plane_tiles, s0 = blockIdx.x % plane_tiles * BN;
    const int64_t m_tiles = (g.out_per_group + BM - 1) / BM;
    const int64_t group = blockIdx.y / m_tiles, m0 = blockIdx.y % m_tiles * BM;
    const int64_t K = g.in_per_group;
    const float* wg = w + (group * g.out_per_group + m0) * K;
    const float* xg = x + (n * g.in_channels + group * g.in_per_group) * g.in_plane + s0;

    auto load = [&](int buf, int64_t k0) {
        #pragma unroll
        for (int j = 0; j < BM * BK / 4 / CONV_THREADS; ++j) {
            const int c = threadIdx.x + j * CONV_THREADS, m = c / (BK / 4), kc = c % (BK / 4) * 4;
            const bool ok = m0 + m < g.out_per_group && k0 + kc < K;
            kf_gemm::copy_async<16>(&As[buf][m][kc], ok ? wg + m * K + k0 + kc : w, ok);
        }
        #pragma unroll
        for (int j = 0; j < BK * BN / 4 / CONV_THREADS; ++j) {
            const int c = threadIdx.x + j * CONV_THREADS, k = c / (BN / 4), sc = c % (BN / 4) * 4;
            const bool ok = k0 + k < K && s0 + sc < g.in_plane;
            kf_gemm::copy_async<16>(&Bs[buf][k][sc], ok ? xg + (k0 + k) * g.in_plane + sc : x, ok);
        }
        kf_gemm::copy_commit();
    };

    float acc[MI][4][4];
    #pragma unroll
    for (int i = 0; i < MI; ++i)
        #pragma unroll
        for (int j = 0; j < 4; ++j)
            #pragma unroll
            for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;

    const int64_t tiles = (K + BK - 1) / BK;
    load(0, 0);
    for (int64_t t = 0; t < tiles; ++t) {
        const int buf = (int)(t & 1);
        if (t + 1 < tiles) {
            load(buf ^ 1, (t + 1) * BK);  // (its buffer was last read before the previous iteration's barrier)
            kf_gemm::copy_wait<1>();
        } else {
            kf_gemm::copy_wait<0>();
        }
        __syncthreads();
        #pragma unroll
        for (int ks = 0; ks < BK; ks += 8) {
            uint32_t a[MI][4], b[4][2];
            // A (row-major 16x8): (gr, tq), (gr+8, tq), (gr, tq+4), (gr+8, tq+4); B (column-major 8x8): (tq, gr),
            // (tq+4, gr)
            #pragma unroll
            for (int i = 0; i < MI; ++i) {
                const int m = wm + i * 16 + gr;
                a[i][0] = to_tf32<ROUNDING>(As[buf][m][ks + tq]);
                a[i][1] = to_tf32<ROUNDING>(As[buf][m + 8][ks + tq]);
                a[i][2] = to_tf32<ROUNDING>(As[buf][m][ks + tq + 4]);
                a[i][3] = to_tf32<ROUNDING>(As[buf][m + 8][ks + tq + 4]);
            }
            #pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int col = wn + j * 8 + gr;
                b[j][0] = to_tf32<ROUNDING>(Bs[buf][ks + tq][col]);
                b[j][1] = to_tf32<ROUNDING>(Bs[buf][ks + tq + 4][col]);
            }
            #pragma unroll
            for (int i = 0; i < MI; ++i)
                #pragma unroll
                for (int j = 0; j < 4; ++j) mma_tf32(acc[i][j], a[i], b[j]);
        }
        __syncthreads();
    }
    pointwise_store(out, g, epi, acc, n, s0, group, m0, wm, wn, gr, tq);
}

// The same product where the group's weights are short (K = input channels per group, up to 64 at 128 output
// channels): memory-bound, each image's pixels read once and the output written once, so what matters is keeping
// bytes in flight. conv_pointwise_tc waits on a copy at each of its few K steps and copies the weights again for
// every 128 pixels (level1/87_conv_pointwise_2D, 64 -> 128 channels: 8.2 ms where 12.9 GB at the H200's 4.8 TB/s
// take 2.7). Here a block copies its BM x K weights to shared memory once, rounds them once, and walks pixel tiles
// (blockIdx.x, then every gridDim.x-th), the next tile's copy in flight while this one is multiplied and stored:
// 4.1 ms (results/ab-H200-2026-11-27-g). Operands rounded and summed in conv_pointwise_tc's order: the same bits.
template <int BM, int ROUNDING, class Epilogue>
__global__ void __launch_bounds__(CONV_THREADS, 2)
conv_pointwise_resident(const float* __restrict__ x, const float* __restrict__ w, const ConvGeom g,
                        const Epilogue epi, float* __restrict__ out, int kp) {
    constexpr int BN = 128, XP = BN + CONV_PAD, MI = BM / 32;
    extern __shared__ __align__(16) float smem[];
    const int wp = kp + 4;                          // pitch = 4 mod 8: conflict-free A fragment reads
    float* const Ws = smem;                         // [BM][kp + 4], k past K zero
    float* const Xs = smem + BM * wp;               // [2][kp][BN + CONV_PAD]
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int gr = lane >> 2, tq = lane & 3;
    const int wm = (warp & 1) * (BM / 2), wn = (warp >> 1) * 32;
    const int64_t plane_tiles = (g.out_plane + BN - 1) / BN, tiles = g.batch * plane_tiles;
    const int64_t m_tiles = (g.out_per_group + BM - 1) / BM;
    const int64_t group = blockIdx.y / m_tiles, m0 = blockIdx.y % m_tiles * BM;
    const int64_t K = g.in_per_group;
    const float* wg = w + (group * g.out_per_group + m0) * K;

    for (int c = threadIdx.x; c < BM * (kp / 4); c += CONV_THREADS) {
        const int m = c / (kp / 4), kc = c % (kp / 4) * 4;
        const bool ok = m0 + m < g.out_per_group && kc < K;
        kf_gemm::copy_async<16>(Ws + m * wp + kc, ok ? wg + m * K + kc : w, ok);
    }
    auto load = [&](int buf, int64_t tile) {
        if (tile >= tiles) return;
        const int64_t n = tile / plane_tiles, s0 = tile % plane_tiles * BN;
        const float* xg = x + (n * g.in_channels + group * g.in_per_group) * g.in_plane + s0;
        float* const dst = Xs + buf * kp * XP;
        for (int c = threadIdx.x; c < kp * (BN / 4); c += CONV_THREADS) {
            const int k = c / (BN / 4), sc = c % (BN / 4) * 4;
            const bool ok = k < K && s0 + sc < g.in_plane;
            kf_gemm::copy_async<16>(dst + k * XP + sc, ok ? xg + k * g.in_plane + sc : x, ok);
        }
    };
    // a commit group per tile, empty past the last: wait_group 1 then always means "this tile's copy has landed"
    load(0, blockIdx.x);
    kf_gemm::copy_commit();
    load(1, blockIdx.x + gridDim.x);
    kf_gemm::copy_commit();
    // the weights rounded once, here, not at each of the block's hundreds of tiles
    kf_gemm::copy_wait<1>();
    __syncthreads();
    for (int e = threadIdx.x; e < BM * wp; e += CONV_THREADS) Ws[e] = rounded<ROUNDING>(Ws[e]);
    int buf = 0;
    for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x, buf ^= 1) {
        kf_gemm::copy_wait<1>();
        __syncthreads();
        const float* const xs = Xs + buf * kp * XP;
        float acc[MI][4][4];
        #pragma unroll
        for (int i = 0; i < MI; ++i)
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                #pragma unroll
                for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;
        for (int ks = 0; ks < kp; ks += 8) {
            uint32_t a[MI][4], b[4][2];
            #pragma unroll
            for (int i = 0; i < MI; ++i) {
                const float* const row = Ws + (wm + i * 16 + gr) * wp + ks + tq;  // (rounded above)
                a[i][0] = __float_as_uint(row[0]);
                a[i][1] = __float_as_uint(row[8 * wp]);
                a[i][2] = __float_as_uint(row[4]);
                a[i][3] = __float_as_uint(row[8 * wp + 4]);
            }
            #pragma unroll
            for (int j = 0; j < 4; ++j) {
                const float* const col = xs + (ks + tq) * XP + wn + j * 8 + gr;
                b[j][0] = to_tf32<ROUNDING>(col[0]);
                b[j][1] = to_tf32<ROUNDING>(col[4 * XP]);
            }
            #pragma unroll
            for (int i = 0; i < MI; ++i)
                #pragma unroll
                for (int j = 0; j < 4; ++j) mma_tf32(acc[i][j], a[i], b[j]);
        }
        __syncthreads();  // every warp is done with this buffer: refill it, then store while the copy runs
        load(buf, tile + 2 * (int64_t)gridDim.x);
        kf_gemm::copy_commit();
        pointwise_store(out, g, epi, acc, tile / plane_tiles, tile % plane_tiles * BN, group, m0, wm, wn, gr, tq);
    }
    kf_gemm::copy_wait<0>();  // (no copy outlives the block)
}

// conv_pointwise_resident's shared memory for BM rows and K padded to kp (a multiple of 8); it takes a convolution
// where this stays within POINTWISE_RESIDENT_MAX_SMEM (two blocks per SM on an H100).
constexpr int POINTWISE_RESIDENT_MAX_SMEM = 110 * 1024;
inline int pointwise_resident_smem(int bm, int64_t kp) {
    return (int)(4 * (bm * (kp + 4) + 2 * kp * (128 + CONV_PAD)));
}

// Launches conv_pointwise_resident where its weights and two input tiles fit (false: they do not, or the
// shared-memory opt-in failed). Two blocks per SM in all, split over the channel tiles.
template <int BM, int ROUNDING, class Epilogue>
static bool conv_pointwise_resident_launch(const float* x, const float* w, const ConvGeom& g, const Epilogue& epi,
                                           float* out, int sms, cudaStream_t stream) {
    const int64_t kp = (g.in_per_group + 7) / 8 * 8;
    const int smem = pointwise_resident_smem(BM, kp);
    if (smem > POINTWISE_RESIDENT_MAX_SMEM) return false;
    const auto kernel = conv_pointwise_resident<BM, ROUNDING, Epilogue>;
    static bool configured[256] = {};  // per device, per extension (conv2d_small_filter_forward says why)
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess || device >= 256) return false;
    if (!configured[device]) {
        if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, POINTWISE_RESIDENT_MAX_SMEM)
            != cudaSuccess)
            return false;
        configured[device] = true;
    }
    const int64_t channel_tiles = g.groups * ((g.out_per_group + BM - 1) / BM);
    const int64_t tiles = g.batch * ((g.out_plane + 127) / 128);
    const int64_t per_channel_tile = (2 * (int64_t)sms + channel_tiles - 1) / channel_tiles;
    const int64_t columns = std::max<int64_t>(1, std::min<int64_t>(tiles, per_channel_tile));
    const dim3 grid((unsigned)columns, (unsigned)channel_tiles);
    kernel<<<grid, CONV_THREADS, smem, stream>>>(x, w, g, epi, out, (int)kp);
    return true;
}

// Whether conv_pointwise_tc takes this convolution: 1x1 taps, stride 1, no padding or dilation, not transposed,
// every row it copies a 16-byte multiple at a 16-byte aligned address, and the output 8-byte aligned (its stores).
inline bool conv_pointwise_ok(const float* x, const float* w, const float* out, const ConvGeom& g) {
    bool one = g.taps == 1;
    for (int d = 0; d < 3; ++d) one = one && g.stride[d] == 1 && g.padding[d] == 0;
    return one && g.in_plane == g.out_plane && g.in_plane % 4 == 0 && g.in_per_group % 4 == 0
           && reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0
           && reinterpret_cast<uintptr_t>(out) % 8 == 0;
}
#endif  // KF_CONV_POINTWISE_TC

// Direct: one thread per output element (groups with few output channels: depthwise).
template <bool TRANSPOSED, class Epilogue>
__global__ void conv_direct(const float* __restrict__ x, const float* __restrict__ w, const ConvGeom g,
                            const Epilogue epi, float* __restrict__ out) {
    const int64_t total = g.pixels * g.out_channels;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)blockDim.x * gridDim.x) {
        const int64_t s = i % g.out_plane, c = i / g.out_plane % g.out_channels, n = i / g.out_plane / g.out_channels;
        const int ox = (int)(s % g.out_size[2]), oy = (int)(s / g.out_size[2] % g.out_size[1]);
        const int oz = (int)(s / g.out_size[2] / g.out_size[1]);
        const int64_t group = c / g.out_per_group, co = c % g.out_per_group;
        const float* xc = x + (n * g.in_channels + group * g.in_per_group) * g.in_plane;
        float sum = 0.0f;
        for (int64_t ci = 0; ci < g.in_per_group; ++ci, xc += g.in_plane) {
            const float* wc = TRANSPOSED ? w + ((group * g.in_per_group + ci) * g.out_per_group + co) * g.taps
                                         : w + c * g.k_per_group + ci * g.taps;
            for (int kz = 0; kz < g.kernel[0]; ++kz) {
                int iz = conv_source(oz, kz, 0, g, TRANSPOSED);
                for (int ky = 0; ky < g.kernel[1]; ++ky) {
                    int iy = conv_source(oy, ky, 1, g, TRANSPOSED);
                    for (int kx = 0; kx < g.kernel[2]; ++kx, ++wc) {
                        int ix = conv_source(ox, kx, 2, g, TRANSPOSED);
                        if ((unsigned)iz < (unsigned)g.in_size[0] && (unsigned)iy < (unsigned)g.in_size[1]
                            && (unsigned)ix < (unsigned)g.in_size[2])
                            sum = fmaf(__ldg(wc), __ldg(xc + ((int64_t)iz * g.in_size[1] + iy) * g.in_size[2] + ix), sum);
                    }
                }
            }
        }
        out[i] = epi(sum, n, c, s, g);
    }
}

// Small-filter direct convolution (2D, groups 1, not transposed; kfuse.kernels.conv.small_filter_tile says when): the
// whole filter of a chunk of CB output channels and the input patch a block reads sit in shared memory. A block
// owns ROWS output rows x 128 output columns x CB channels of one image; each warp one row and 16 channels, each
// lane 4 columns (lane, lane + 32, lane + 64, lane + 96: conflict-free patch reads, coalesced stores) x 16
// channels, the filter read as warp-uniform float4 broadcasts. Sizes of the filter and stride/dilation are template
// constants (the loop over (input channel, ky, kx) is unrolled, in the order of a plain fp32 sum); the image
// sizes are not. Index math is 32-bit inside an image plane (< 2^31, checked by conv_geometry).
template <int CIN, int KH, int KW, int SH, int SW, int DH, int DW, int CB>
struct SmallFilterTile {
    static constexpr int THREADS = 256, TW = 128, PX = TW / 32;  // output columns per block, per lane
    static constexpr int CG = CB / 16;                           // warps across the channel chunk
    static constexpr int ROWS = 8 / CG;                          // output rows per block, one per warp
    static constexpr int IN_ROWS = (ROWS - 1) * SH + (KH - 1) * DH + 1;
    static constexpr int IN_COLS = (TW - 1) * SW + (KW - 1) * DW + 1;
    static constexpr int TAPS = CIN * KH * KW;
    static constexpr int W_PITCH = CB + 4;                       // floats per tap row: fewer conflicts when staging
    static constexpr int PATCH = CIN * IN_ROWS * IN_COLS;
    static constexpr int SMEM_BYTES = (TAPS * W_PITCH + PATCH) * 4;
};

template <int CIN, int KH, int KW, int SH, int SW, int DH, int DW, int CB, class Epilogue>
__global__ void __launch_bounds__(256, 2)
conv2d_small_filter(const float* __restrict__ x, const float* __restrict__ w, const ConvGeom g, const Epilogue epi,
                    float* __restrict__ out, int col_tiles, int row_tiles, int chunks) {
    using T = SmallFilterTile<CIN, KH, KW, SH, SW, DH, DW, CB>;
    extern __shared__ __align__(16) float smem[];
    float* ws = smem;                          // [tap][W_PITCH], tap = (ci, ky, kx); zero past the last channel
    float* xs = smem + T::TAPS * T::W_PITCH;   // [ci][IN_ROWS][IN_COLS]; zero outside the input (the padding)
    unsigned b = blockIdx.x;                   // -> (image, channel chunk, row tile, column tile)
    const int ct = (int)(b % (unsigned)col_tiles); b /= (unsigned)col_tiles;
    const int rt = (int)(b % (unsigned)row_tiles); b /= (unsigned)row_tiles;
    const int chunk = (int)(b % (unsigned)chunks);
    const int64_t n = b / (unsigned)chunks;
    const int c0 = chunk * CB, cout = (int)g.out_channels;
    const int h_in = g.in_size[1], w_in = g.in_size[2], h_out = g.out_size[1], w_out = g.out_size[2];

    // the chunk's filter: coalesced reads of (channel, tap) rows, stored tap-major
    const float* wc = w + (int64_t)c0 * T::TAPS;
    #pragma unroll 4
    for (int e = threadIdx.x; e < CB * T::TAPS; e += T::THREADS) {
        const int c = e / T::TAPS, tap = e - c * T::TAPS;
        ws[tap * T::W_PITCH + c] = c0 + c < cout ? __ldg(wc + e) : 0.0f;
    }
    // the input patch: all channels, the block's rows with their halo, zero-filled outside the image
    const int iy0 = rt * T::ROWS * SH - g.padding[1], ix0 = ct * T::TW * SW - g.padding[2];
    const float* xn = x + n * CIN * g.in_plane;
    constexpr int LOADS = (T::PATCH + T::THREADS - 1) / T::THREADS, BATCH = LOADS <= 24 ? LOADS : 16;
    #pragma unroll
    for (int k0 = 0; k0 < LOADS; k0 += BATCH) {  // a batch of loads in flight before its first store
        float v[BATCH];
        #pragma unroll
        for (int k = k0; k < k0 + BATCH && k < LOADS; ++k) {
            const int e = threadIdx.x + k * T::THREADS;
            const int ci = e / (T::IN_ROWS * T::IN_COLS), rc = e - ci * (T::IN_ROWS * T::IN_COLS);
            const int r = rc / T::IN_COLS, col = rc - r * T::IN_COLS;
            const int iy = iy0 + r, ix = ix0 + col;
            v[k - k0] = (e < T::PATCH && (unsigned)iy < (unsigned)h_in && (unsigned)ix < (unsigned)w_in)
                      ? __ldg(xn + ci * g.in_plane + iy * w_in + ix) : 0.0f;
        }
        #pragma unroll
        for (int k = k0; k < k0 + BATCH && k < LOADS; ++k) {
            const int e = threadIdx.x + k * T::THREADS;
            if (k + 1 < LOADS || e < T::PATCH) xs[e] = v[k - k0];
        }
    }
    __syncthreads();

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int cg = warp % T::CG, row = warp / T::CG;
    float acc[T::PX][16];
    #pragma unroll
    for (int j = 0; j < T::PX; ++j)
        #pragma unroll
        for (int c = 0; c < 16; ++c) acc[j][c] = 0.0f;
    const float* xrow = xs + row * SH * T::IN_COLS + lane * SW;
    const float* wg = ws + cg * 16;
    #pragma unroll
    for (int ci = 0; ci < CIN; ++ci)
        #pragma unroll
        for (int ky = 0; ky < KH; ++ky)
            #pragma unroll
            for (int kx = 0; kx < KW; ++kx) {
                const float* xr = xrow + (ci * T::IN_ROWS + ky * DH) * T::IN_COLS + kx * DW;
                float xv[T::PX];
                #pragma unroll
                for (int j = 0; j < T::PX; ++j) xv[j] = xr[32 * j * SW];
                const float4* wv = reinterpret_cast<const float4*>(wg + ((ci * KH + ky) * KW + kx) * T::W_PITCH);
                #pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const float4 f = wv[q];
                    #pragma unroll
                    for (int j = 0; j < T::PX; ++j) {
                        acc[j][4 * q] = fmaf(f.x, xv[j], acc[j][4 * q]);
                        acc[j][4 * q + 1] = fmaf(f.y, xv[j], acc[j][4 * q + 1]);
                        acc[j][4 * q + 2] = fmaf(f.z, xv[j], acc[j][4 * q + 2]);
                        acc[j][4 * q + 3] = fmaf(f.w, xv[j], acc[j][4 * q + 3]);
                    }
                }
            }

    const int oy = rt * T::ROWS + row;
    if (oy >= h_out) return;
    const int s_row = oy * w_out;
    #pragma unroll
    for (int c = 0; c < 16; ++c) {
        const int co = c0 + cg * 16 + c;
        if (co >= cout) break;
        float* dst = out + (n * cout + co) * g.out_plane + s_row;
        // the channel's values first, then its stores: with no store between them the compiler reads a
        // per-channel operand once (a column past the row reads its last element's operands, then is not stored)
        float value[T::PX];
        #pragma unroll
        for (int j = 0; j < T::PX; ++j)
            value[j] = epi(acc[j][c], n, co, s_row + min(ct * T::TW + lane + 32 * j, w_out - 1), g);
        #pragma unroll
        for (int j = 0; j < T::PX; ++j) {
            const int ox = ct * T::TW + lane + 32 * j;
            if (ox < w_out) dst[ox] = value[j];
        }
    }
}

// The small-filter convolution on tensor cores, 3xTF32 (fp32-faithful: see split_tf32): the same block tile as
// conv2d_small_filter (the filter chunk and the input patch in shared memory) as an implicit GEMM with M = the
// CB channels, N = ROWS x 128 output pixels, K = (input channel, ky, kx) padded to a multiple of 8. Each of the 8
// warps computes CB channels x 32 columns of one row as (CB / 16) x 4 m16n8k8 tiles. The filter is staged once per
// block already split into TF32 pairs and laid out in fragment order (one conflict-free LDS.128 per fragment); the
// input value of each fragment slot (SmallFilterK: where it reads) is split as it leaves shared memory.
// Blocks are persistent (two per SM), so the filter is staged once per block, and the next tile's patch is copied
// (cp.async) into a second buffer while this tile's MMAs run, when two patches fit (BUFFERS). K slots past the
// filter read a zero plane of the patch (their weights are zero too; the zero keeps inf inputs from giving NaN).

// The K order of conv2d_small_filter_tc: K slot k -> (input channel, tap). Channel-major ((ky, kx, ci), ci fastest)
// when C_in is a multiple of 8: then a step of 8 slots is one tap and 8 channels, so a lane's slot (its quad index
// tq: channel tq and tq + 4) is a fixed plane offset and each step's tap a compile-time offset, no table. Otherwise
// (ci, ky, kx), the order of the filter's memory, padded to a multiple of 8 with slots that read the zero plane.
template <int CIN, int KH, int KW, int DH, int DW>
struct SmallFilterK {
    static constexpr int TAPS = CIN * KH * KW;
    static constexpr bool CHANNEL_MAJOR = CIN % 8 == 0;
    __host__ __device__ static constexpr int channel(int k) { return CHANNEL_MAJOR ? k % CIN : k / (KH * KW); }
    __host__ __device__ static constexpr int tap(int k) { return CHANNEL_MAJOR ? k / CIN : k % (KH * KW); }
    // the filter element of slot k (a row of the (C_out, C_in, kh, kw) weight)
    __host__ __device__ static constexpr int weight(int k) { return channel(k) * KH * KW + tap(k); }
    // where slot k reads in a patch with these pitches (floats), from the lane's output column
    __host__ __device__ static constexpr int offset(int k, int row_pitch, int plane_pitch) {
        return k < TAPS ? channel(k) * plane_pitch + tap(k) / KW * DH * row_pitch + tap(k) % KW * DW
                        : CIN * plane_pitch;  // the zero plane
    }
    // Whether a patch with these pitches serves every B-fragment read without a bank conflict: the read of slots
    // k0..k0+3 (lane quad index) at 8 columns (lane / 4) hits each bank with one word at most (lanes reading the
    // same word share it).
    template <int SW>
    __host__ __device__ static constexpr bool conflict_free(int row_pitch, int plane_pitch) {
        for (int k0 = 0; k0 < TAPS; k0 += 4) {
            int word[32] = {};
            bool used[32] = {};
            for (int k = k0; k < k0 + 4; ++k)
                for (int column = 0; column < 8; ++column) {
                    const int address = offset(k, row_pitch, plane_pitch) + column * SW, bank = address % 32;
                    if (used[bank] && word[bank] != address) return false;
                    used[bank] = true;
                    word[bank] = address;
                }
        }
        return true;
    }
};

template <int CIN, int KH, int KW, int SH, int SW, int DH, int DW, int CB>
struct SmallFilterTcTile {
    static constexpr int THREADS = 256, ROWS = 2, TW = 128;   // block tile: ROWS x TW outputs x CB channels
    static constexpr int MT = CB / 16, NT = 4;                 // per warp: MT channel tiles x NT column tiles of 8
    using K = SmallFilterK<CIN, KH, KW, DH, DW>;
    static constexpr int TAPS = K::TAPS, STEPS = (TAPS + 7) / 8;
    static constexpr int IN_ROWS = (ROWS - 1) * SH + (KH - 1) * DH + 1;
    static constexpr int IN_COLS = (TW - 1) * SW + (KW - 1) * DW + 1;
    static constexpr int PLANES = CIN + (TAPS % 8 != 0);      // + the zero plane the K padding reads
    static constexpr int FILTER = STEPS * MT * 2 * 32 * 4;     // [step][mt][big, small][lane][a0..a3] TF32 words
    static constexpr int TABLE = K::CHANNEL_MAJOR ? 0 : STEPS * 8;  // slot -> patch offset (ints)
    static constexpr int STAGE_PITCH = SMALL_FILTER_TC_STAGE_PITCH;  // the epilogue's stage per warp (kfuse.kernels.conv)
    static constexpr int STAGE = 8 * 8 * STAGE_PITCH;
    static constexpr int BYTES(int buffers, int plane_pitch) {
        return (FILTER + STAGE + TABLE + buffers * PLANES * plane_pitch) * 4;
    }
    // two patches when they fit unpadded (the next tile's copy overlaps this tile's MMAs); kfuse.kernels.conv checks one fits
    static constexpr int BUFFERS = BYTES(2, IN_ROWS * IN_COLS) <= SMALL_FILTER_TC_MAX_SMEM ? 2 : 1;
    // the smallest conflict-free pitches that fit (searched at compile time), else the unpadded ones
    static constexpr int PITCHES = [] {  // row pitch * 65536 + plane pitch
        for (int row = IN_COLS; row < IN_COLS + 32; ++row)
            for (int plane = IN_ROWS * row; plane < IN_ROWS * row + 32; ++plane)
                if (BYTES(BUFFERS, plane) <= SMALL_FILTER_TC_MAX_SMEM
                    && K::template conflict_free<SW>(row, plane))
                    return row * 65536 + plane;
        return IN_COLS * 65536 + IN_ROWS * IN_COLS;
    }();
    static constexpr int ROW_PITCH = PITCHES / 65536, PLANE_PITCH = PITCHES % 65536;
    static constexpr int PATCH = PLANES * PLANE_PITCH;
    static constexpr int SMEM_BYTES = BYTES(BUFFERS, PLANE_PITCH);
};

// 4 bytes global -> shared, asynchronously; zero-filled when !inside (src is then not read)
__device__ __forceinline__ void conv_copy_async(float* dst, const float* src, bool inside) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                 :: "r"((uint32_t)__cvta_generic_to_shared(dst)), "l"(src), "r"(inside ? 4 : 0));
}

// A tile of the small-filter kernels' grid: (image, channel chunk, row tile, column tile).
struct SmallFilterTileIndex {
    int64_t n;
    int chunk, rt, ct;
    __device__ __forceinline__ SmallFilterTileIndex(unsigned b, int col_tiles, int row_tiles, int chunks) {
        ct = (int)(b % (unsigned)col_tiles); b /= (unsigned)col_tiles;
        rt = (int)(b % (unsigned)row_tiles); b /= (unsigned)row_tiles;
        chunk = (int)(b % (unsigned)chunks);
        n = b / (unsigned)chunks;
    }
};

template <int CIN, int KH, int KW, int SH, int SW, int DH, int DW, int CB, class Epilogue>
__global__ void __launch_bounds__(256, 2)
conv2d_small_filter_tc(const float* __restrict__ x, const float* __restrict__ w, const ConvGeom g, const Epilogue epi,
                       float* __restrict__ out, int col_tiles, int row_tiles, int chunks) {
    using T = SmallFilterTcTile<CIN, KH, KW, SH, SW, DH, DW, CB>;
    extern __shared__ __align__(16) float smem[];
    uint32_t* filter = reinterpret_cast<uint32_t*>(smem);
    float* stage = smem + T::FILTER + (threadIdx.x >> 5) * 8 * T::STAGE_PITCH;  // this warp's
    int* k_offset = reinterpret_cast<int*>(smem + T::FILTER + T::STAGE);       // (not channel-major) K slot -> offset
    float* patches = smem + T::FILTER + T::STAGE + T::TABLE;   // BUFFERS x [plane][IN_ROWS][IN_COLS], pitched
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, tq = lane & 3;
    const int row = warp / 4, col0 = (warp % 4) * 32;              // the warp's output row and first column
    const int cout = (int)g.out_channels, h_out = g.out_size[1], w_out = g.out_size[2];

    // A tile's input patch (all channels, its rows with their halo; zero outside the image and in the zero plane),
    // copied asynchronously. A warp copies whole rows (coalesced), one row offset per row a thread copies.
    const auto copy_patch = [&](float* xs, unsigned tile) {
        const SmallFilterTileIndex t(tile, col_tiles, row_tiles, chunks);
        const int iy0 = t.rt * T::ROWS * SH - g.padding[1], ix0 = t.ct * T::TW * SW - g.padding[2];
        const float* xn = x + t.n * CIN * g.in_plane;
        constexpr int LINES = T::PLANES * T::IN_ROWS;
        #pragma unroll
        for (int line = warp; line < LINES; line += 8) {
            const int ci = line / T::IN_ROWS, r = line % T::IN_ROWS, iy = iy0 + r;
            const bool row_inside = ci < CIN && (unsigned)iy < (unsigned)g.in_size[1];
            const float* src = xn + (row_inside ? ci * g.in_plane + iy * g.in_size[2] : 0);
            #pragma unroll
            for (int col = lane; col < T::IN_COLS; col += 32) {
                const int ix = ix0 + col;
                const bool inside = row_inside && (unsigned)ix < (unsigned)g.in_size[2];
                conv_copy_async(xs + ci * T::PLANE_PITCH + r * T::ROW_PITCH + col, inside ? src + ix : x, inside);
            }
        }
        asm volatile("cp.async.commit_group;\n" ::);
    };

    const unsigned tiles = (unsigned)col_tiles * (unsigned)row_tiles * (unsigned)chunks * (unsigned)g.batch;
    if (blockIdx.x < tiles) copy_patch(patches, blockIdx.x);
    for (int k = threadIdx.x; k < T::TABLE; k += T::THREADS) k_offset[k] = T::K::offset(k, T::ROW_PITCH, T::PLANE_PITCH);
    int staged = -1;                                               // the channel chunk whose filter is in `filter`
    int buffer = 0;
    for (unsigned tile = blockIdx.x; tile < tiles; tile += gridDim.x, buffer ^= T::BUFFERS - 1) {
        const SmallFilterTileIndex t(tile, col_tiles, row_tiles, chunks);
        const int c0 = t.chunk * CB;
        if (t.chunk != staged) {                                   // fragment slot e -> (step, mt, lane, register)
            __syncthreads();                                       // (the previous tile's MMAs read the filter)
            const float* wc = w + (int64_t)c0 * T::TAPS;
            for (int e = threadIdx.x; e < T::STEPS * T::MT * 32 * 4; e += T::THREADS) {
                const int r = e & 3, l = (e >> 2) & 31, tile_k = e >> 7;  // tile_k = step * MT + mt
                const int c = (tile_k % T::MT) * 16 + (l >> 2) + (r & 1) * 8;
                const int k = (tile_k / T::MT) * 8 + (l & 3) + (r >> 1) * 4;
                const float v = k < T::TAPS && c0 + c < cout ? __ldg(wc + c * T::TAPS + T::K::weight(k)) : 0.0f;
                uint32_t big, small;
                split_tf32(v, big, small);
                filter[((tile_k * 2) * 32 + l) * 4 + r] = big;
                filter[((tile_k * 2 + 1) * 32 + l) * 4 + r] = small;
            }
            staged = t.chunk;
        }
        asm volatile("cp.async.wait_all;\n" ::);
        __syncthreads();                                           // this tile's patch (and the filter) landed
        const unsigned next = tile + gridDim.x;
        if (T::BUFFERS == 2 && next < tiles) copy_patch(patches + (buffer ^ 1) * T::PATCH, next);

        float acc[T::MT][T::NT][4];
        #pragma unroll
        for (int i = 0; i < T::MT; ++i)
            #pragma unroll
            for (int j = 0; j < T::NT; ++j)
                #pragma unroll
                for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;
        const float* xw = patches + buffer * T::PATCH + row * SH * T::ROW_PITCH + (col0 + gq) * SW  // this lane's column
                          + (T::K::CHANNEL_MAJOR ? tq * T::PLANE_PITCH : 0);                     // (and channel)
        const uint4* fw = reinterpret_cast<const uint4*>(filter) + lane;
        #pragma unroll
        for (int step = 0; step < T::STEPS; ++step) {
            const int at = T::K::offset(step * 8, T::ROW_PITCH, T::PLANE_PITCH);  // (a constant: the loop is unrolled)
            const int o0 = T::K::CHANNEL_MAJOR ? at : k_offset[step * 8 + tq];
            const int o1 = T::K::CHANNEL_MAJOR ? at + 4 * T::PLANE_PITCH : k_offset[step * 8 + tq + 4];
            uint32_t b_big[T::NT][2], b_small[T::NT][2];
            #pragma unroll
            for (int j = 0; j < T::NT; ++j) {
                split_tf32_fast(xw[o0 + j * 8 * SW], b_big[j][0], b_small[j][0]);
                split_tf32_fast(xw[o1 + j * 8 * SW], b_big[j][1], b_small[j][1]);
            }
            #pragma unroll
            for (int i = 0; i < T::MT; ++i) {
                const uint4 big = fw[((step * T::MT + i) * 2) * 32], small = fw[((step * T::MT + i) * 2 + 1) * 32];
                const uint32_t a_big[4] = {big.x, big.y, big.z, big.w}, a_small[4] = {small.x, small.y, small.z, small.w};
                #pragma unroll
                for (int j = 0; j < T::NT; ++j) {  // the small products first: they are the ones rounding can lose
                    mma_tf32(acc[i][j], a_small, b_big[j]);
                    mma_tf32(acc[i][j], a_big, b_small[j]);
                    mma_tf32(acc[i][j], a_big, b_big[j]);
                }
            }
        }
        if (T::BUFFERS == 1 && next < tiles) {                     // one buffer: refilled once every warp is done
            __syncthreads();
            copy_patch(patches, next);
        }

        // The epilogue. Fragment (i, j) holds channels c0 + 16i + gq (+8 for h = 1) x columns 8j + 2tq (+1): a
        // channel's 8 values go through the epilogue together (a per-channel operand is loaded once), then 8
        // channels at a time pass through the warp's stage, so that each store is one channel's 32 consecutive
        // columns (a 128-byte run; stored from the fragments, a row of 126 floats put 8-float runs across
        // 32-byte sectors: 14 sectors written per 8 of data). Columns past the output read in-range operands.
        const int oy = t.rt * T::ROWS + row;
        if (oy >= h_out) continue;
        const int s_row = oy * w_out, ox0 = t.ct * T::TW + col0 + 2 * tq, ox = t.ct * T::TW + col0 + lane;
        float* dst = out + (t.n * cout + c0) * g.out_plane + s_row + ox;  // channel c0, this lane's column
        #pragma unroll
        for (int i = 0; i < T::MT; ++i)
            #pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int co = min(c0 + i * 16 + gq + h * 8, cout - 1);
                __syncwarp();                                      // (the previous channels' reads of the stage)
                #pragma unroll
                for (int j = 0; j < T::NT; ++j) {
                    const float v0 = epi.direct(acc[i][j][2 * h], t.n, co, s_row + min(ox0 + 8 * j, w_out - 1), g);
                    const float v1 = epi.direct(acc[i][j][2 * h + 1], t.n, co, s_row + min(ox0 + 8 * j + 1, w_out - 1), g);
                    *reinterpret_cast<float2*>(stage + gq * T::STAGE_PITCH + 8 * j + 2 * tq) = make_float2(v0, v1);
                }
                __syncwarp();
                const int c1 = c0 + i * 16 + h * 8;                // the stage's first channel
                if (ox < w_out) {
                    #pragma unroll
                    for (int c = 0; c < 8; ++c)
                        if (c1 + c < cout) dst[(int64_t)(c1 - c0 + c) * g.out_plane] = stage[c * T::STAGE_PITCH + lane];
                }
            }
    }
}

// Runs the small-filter kernel (TENSOR_CORES: the 3xTF32 one) when the geometry is the one it was instantiated for
// (the model's filter); false otherwise (the caller runs the general kernel).
template <int CIN, int KH, int KW, int SH, int SW, int DH, int DW, int CB, bool TENSOR_CORES, class Epilogue>
static bool conv2d_small_filter_forward(const float* x, const float* w, const ConvGeom& g, const Epilogue& epi, float* out,
                                 int sms, cudaStream_t stream) {
    using T = std::conditional_t<TENSOR_CORES, SmallFilterTcTile<CIN, KH, KW, SH, SW, DH, DW, CB>,
                                 SmallFilterTile<CIN, KH, KW, SH, SW, DH, DW, CB>>;
    if (g.groups != 1 || g.in_channels != CIN || g.in_size[0] != 1 || g.kernel[0] != 1 || g.kernel[1] != KH
        || g.kernel[2] != KW || g.stride[1] != SH || g.stride[2] != SW || g.dilation[1] != DH || g.dilation[2] != DW)
        return false;
    const int64_t col_tiles = (g.out_size[2] + T::TW - 1) / T::TW, row_tiles = (g.out_size[1] + T::ROWS - 1) / T::ROWS;
    const int64_t chunks = (g.out_channels + CB - 1) / CB, tiles = g.batch * chunks * row_tiles * col_tiles;
    if (tiles > INT32_MAX) return false;
    // the tensor-core kernel's blocks are persistent: two per SM (its occupancy), each staging the filter once
    const int64_t blocks = TENSOR_CORES ? std::min<int64_t>(tiles, 2 * (int64_t)sms) : tiles;
    const auto kernel = [] {  // (if constexpr: only the chosen kernel is compiled)
        if constexpr (TENSOR_CORES) return conv2d_small_filter_tc<CIN, KH, KW, SH, SW, DH, DW, CB, Epilogue>;
        else return conv2d_small_filter<CIN, KH, KW, SH, SW, DH, DW, CB, Epilogue>;
    }();
    // the shared-memory opt-in is per device; per extension only because this function is static (a local static of
    // a template with external linkage is one object for every kfuse extension in the process)
    static bool configured[256] = {};
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess || device >= 256) return false;
    if (!configured[device]) {
        if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, T::SMEM_BYTES) != cudaSuccess)
            return false;
        configured[device] = true;
    }
    kernel<<<(unsigned)blocks, T::THREADS, T::SMEM_BYTES, stream>>>(x, w, g, epi, out, (int)col_tiles,
                                                                    (int)row_tiles, (int)chunks);
    return true;
}

#define KF_CONV_DEPTHWISE  // (kf::conv_forward tries it first)
// Depthwise 2D (one input channel per output channel's group, not transposed): memory-bound, so a block reads the
// input patch of a 32 x 64 output tile with its halo once into shared memory (coalesced rows, zero outside the
// image), and each thread sums 8 consecutive outputs of one column from there, taps in the order ky, kx like
// ATen's depthwise kernel. Sizes are run-time values: the patch is dynamic shared memory, and
// conv2d_depthwise_forward declines a geometry whose patch would pass DW_MAX_SMEM. Index math is 32-bit inside a
// plane (conv_geometry checks < 2^31).
constexpr int DW_TW = 64, DW_TH = 32, DW_THREADS = 256, DW_LOADS = 8, DW_MAX_SMEM = 48 * 1024;

template <class Epilogue>
__global__ void __launch_bounds__(DW_THREADS)
conv2d_depthwise(const float* __restrict__ x, const float* __restrict__ w, const ConvGeom g, const Epilogue epi,
                 float* __restrict__ out, int in_rows, int in_cols) {
    extern __shared__ float dw_smem[];
    const int kh = g.kernel[1], kw = g.kernel[2], taps = kh * kw;
    float* ws = dw_smem;          // [ky][kx]
    float* xs = dw_smem + taps;   // [in_rows][in_cols]
    const int h_in = g.in_size[1], w_in = g.in_size[2], h_out = g.out_size[1], w_out = g.out_size[2];
    const int sh = g.stride[1], sw = g.stride[2], dh = g.dilation[1], dw = g.dilation[2];
    const int oy0 = blockIdx.y * DW_TH, ox0 = blockIdx.x * DW_TW;
    const int iy0 = oy0 * sh - g.padding[1], ix0 = ox0 * sw - g.padding[2];
    const int tx = threadIdx.x % DW_TW, ty = threadIdx.x / DW_TW;
    constexpr int ROW_STEP = DW_THREADS / DW_TW;
    // 32-bit plane and channel arithmetic (the launcher checks the range): a 64-bit division is a call, and its
    // saved registers spilled
    const unsigned planes = (unsigned)(g.batch * g.out_channels), channels = (unsigned)g.out_channels;
    const unsigned multiplier = (unsigned)g.out_per_group;
    for (unsigned plane = blockIdx.z; plane < planes; plane += gridDim.z) {
        const unsigned n = plane / channels, c = plane - n * channels;
        const float* xc = x + ((int64_t)n * g.in_channels + c / multiplier) * g.in_plane;
        for (int t = threadIdx.x; t < taps; t += DW_THREADS) ws[t] = __ldg(w + (int64_t)c * taps + t);
        // DW_LOADS rows per thread in flight before the first store: one load at a time left the kernel
        // latency-bound at a fifth of the bandwidth (3.25 ms on suite problem 55)
        for (int r0 = ty; r0 < in_rows; r0 += ROW_STEP * DW_LOADS)
            for (int col = tx; col < in_cols; col += DW_TW) {
                const int ix = ix0 + col;
                const bool col_in = (unsigned)ix < (unsigned)w_in;
                float v[DW_LOADS];
                #pragma unroll
                for (int k = 0; k < DW_LOADS; ++k) {
                    const int r = r0 + k * ROW_STEP, iy = iy0 + r;
                    v[k] = r < in_rows && col_in && (unsigned)iy < (unsigned)h_in ? __ldg(xc + iy * w_in + ix) : 0.0f;
                }
                #pragma unroll
                for (int k = 0; k < DW_LOADS; ++k)
                    if (r0 + k * ROW_STEP < in_rows) xs[(r0 + k * ROW_STEP) * in_cols + col] = v[k];
            }
        __syncthreads();
        // the thread's ROWS consecutive output rows of one column: each tap's weight is read once for all of them
        // (the tap loops have run-time bounds, the rows are unrolled), each output's sum still in tap order
        constexpr int ROWS = DW_TH / ROW_STEP;
        const int ox = ox0 + tx, oy_first = oy0 + ty * ROWS;
        const float* xr = xs + ty * ROWS * sh * in_cols + tx * sw;
        float acc[ROWS];
        #pragma unroll
        for (int j = 0; j < ROWS; ++j) acc[j] = 0.0f;
        for (int ky = 0; ky < kh; ++ky)
            for (int kx = 0; kx < kw; ++kx) {
                const float wv = ws[ky * kw + kx];
                const float* xt = xr + ky * dh * in_cols + kx * dw;
                #pragma unroll
                for (int j = 0; j < ROWS; ++j) acc[j] = fmaf(wv, xt[j * sh * in_cols], acc[j]);
            }
        float* dst = out + (int64_t)plane * g.out_plane;
        if (ox < w_out) {
            #pragma unroll
            for (int j = 0; j < ROWS; ++j) {
                const int oy = oy_first + j;
                if (oy < h_out) dst[oy * w_out + ox] = epi(acc[j], n, c, oy * w_out + ox, g);
            }
        }
        __syncthreads();
    }
}

// Runs the depthwise kernel where it applies (2D or 1D geometry, one input channel per group, not transposed);
// false otherwise.
template <class Epilogue>
bool conv2d_depthwise_forward(const float* x, const float* w, const ConvGeom& g, const Epilogue& epi, float* out,
                              cudaStream_t stream) {
    if (g.in_per_group != 1 || g.kernel[0] != 1 || g.in_size[0] != 1 || g.out_size[0] != 1) return false;
    const int64_t in_rows = (int64_t)(DW_TH - 1) * g.stride[1] + (int64_t)(g.kernel[1] - 1) * g.dilation[1] + 1;
    const int64_t in_cols = (int64_t)(DW_TW - 1) * g.stride[2] + (int64_t)(g.kernel[2] - 1) * g.dilation[2] + 1;
    const int64_t smem = (in_rows * in_cols + (int64_t)g.kernel[1] * g.kernel[2]) * 4;
    const int64_t row_tiles = (g.out_size[1] + DW_TH - 1) / DW_TH, col_tiles = (g.out_size[2] + DW_TW - 1) / DW_TW;
    if (smem > DW_MAX_SMEM || row_tiles > 65535 || col_tiles > INT32_MAX || g.batch * g.out_channels > INT32_MAX)
        return false;
    const dim3 grid((unsigned)col_tiles, (unsigned)row_tiles,
                    (unsigned)std::min<int64_t>(g.batch * g.out_channels, 65535));
    conv2d_depthwise<Epilogue><<<grid, DW_THREADS, smem, stream>>>(x, w, g, epi, out, (int)in_rows, (int)in_cols);
    return true;
}

// Picks the kernel: the depthwise kernel where it applies, else the GEMM tile that wastes fewest channel rows, or
// the direct kernel for tiny groups (and for more channel tiles than a grid's y dimension holds). ROUNDING other
// than TF32_OFF, with tf32 (PyTorch allows TF32 convolutions now): groups of more than 16 output channels take the
// TF32 tensor-core kernel, operands rounded so (with 17-32 channels half its 64 rows idle, still fewer instructions
// than the FFMA kernel's), TC_ROWS output channels per block (conv_tc_rows: the group's channels, fixed by the weight,
// choose it when the file is planned).
template <bool TRANSPOSED, int ROUNDING, int TC_ROWS, class Epilogue>
void conv_forward(const float* x, const float* w, const ConvGeom& g, const Epilogue& epi, float* out, bool tf32,
                  float* packed, int sms, cudaStream_t stream) {
#if defined(KF_CONV_DEPTHWISE)
    if constexpr (!TRANSPOSED) {
        if (conv2d_depthwise_forward(x, w, g, epi, out, stream)) return;
    }
#endif
    const int bm = g.out_per_group > 32 ? 64 : g.out_per_group > 16 ? 32 : 16;
    if (g.out_per_group < CONV_DIRECT_BELOW || g.groups * ((g.out_per_group + bm - 1) / bm) > 65535) {
        const int64_t total = g.pixels * g.out_channels;
        const unsigned blocks = (unsigned)std::max<int64_t>(1, std::min<int64_t>((total + 255) / 256, (int64_t)sms * 32));
        conv_direct<TRANSPOSED, Epilogue><<<blocks, 256, 0, stream>>>(x, w, g, epi, out);
        return;
    }
    const dim3 tc_grid((unsigned)((g.pixels + 127) / 128),
                       (unsigned)(g.groups * ((g.out_per_group + TC_ROWS - 1) / TC_ROWS)));
    if constexpr (ROUNDING != TF32_OFF) {
#if defined(KF_CONV_POINTWISE_TC)
        if constexpr (!TRANSPOSED) {
            const int64_t rows = g.out_per_group > 64 ? 128 : 64;
            const dim3 grid((unsigned)(g.batch * ((g.out_plane + 127) / 128)),
                            (unsigned)(g.groups * ((g.out_per_group + rows - 1) / rows)));
            if (tf32 && g.out_per_group > 16 && grid.y <= 65535 && conv_pointwise_ok(x, w, out, g)) {
                if (rows == 128 ? conv_pointwise_resident_launch<128, ROUNDING>(x, w, g, epi, out, sms, stream)
                                : conv_pointwise_resident_launch<64, ROUNDING>(x, w, g, epi, out, sms, stream))
                    return;
                if (rows == 128) conv_pointwise_tc<128, ROUNDING, Epilogue><<<grid, CONV_THREADS, 0, stream>>>(x, w, g, epi, out);
                else conv_pointwise_tc<64, ROUNDING, Epilogue><<<grid, CONV_THREADS, 0, stream>>>(x, w, g, epi, out);
                return;
            }
        }
#endif
        if (tf32 && g.out_per_group > 16 && tc_grid.y <= 65535 && packed) {
            const int64_t floats = conv_packed_floats(g, TC_ROWS);
            const unsigned pack_blocks = (unsigned)std::max<int64_t>(1, std::min<int64_t>((floats + 255) / 256, (int64_t)sms * 8));
            conv_pack_weights<TC_ROWS, ROUNDING, TRANSPOSED><<<pack_blocks, 256, 0, stream>>>(w, g, packed);
            conv_igemm_tc<TC_ROWS, ROUNDING, TRANSPOSED, Epilogue, true>
                <<<tc_grid, CONV_THREADS, 0, stream>>>(x, w, g, epi, out, packed);
            return;
        }
    }
    if constexpr (CONV_TENSOR_CORES) {
        if (g.out_per_group > 32) {
            conv_igemm_tc<TC_ROWS, TF32_OFF, TRANSPOSED, Epilogue><<<tc_grid, CONV_THREADS, 0, stream>>>(x, w, g, epi, out);
            return;
        }
    }
    const dim3 grid((unsigned)((g.pixels + CONV_BN - 1) / CONV_BN),
                    (unsigned)(g.groups * ((g.out_per_group + bm - 1) / bm)));
    if (bm == 64) conv_igemm<8, TRANSPOSED, Epilogue><<<grid, CONV_THREADS, 0, stream>>>(x, w, g, epi, out);
    else if (bm == 32) conv_igemm<4, TRANSPOSED, Epilogue><<<grid, CONV_THREADS, 0, stream>>>(x, w, g, epi, out);
    else conv_igemm<2, TRANSPOSED, Epilogue><<<grid, CONV_THREADS, 0, stream>>>(x, w, g, epi, out);
}
}  // namespace kf
"""

def _part(start: str, end: str) -> str:
    """CONV_CUDA_TEMPLATES from the line starting `start` up to the line starting `end`."""
    return CONV_CUDA_TEMPLATES[CONV_CUDA_TEMPLATES.index(start):CONV_CUDA_TEMPLATES.index(end)]


_POINTWISE = _part("#if defined(KF_CONV_POINTWISE_TC)  // (its copies", "// Direct: one thread per output element")
_SMALL_FILTER = _part("// Small-filter direct convolution", "#define KF_CONV_DEPTHWISE")
_DEPTHWISE = _part("#define KF_CONV_DEPTHWISE", "// Picks the kernel:")


def conv_cuda_templates(pointwise: bool, small_filter: bool, depthwise: bool) -> str:
    """CONV_CUDA_TEMPLATES with the families a file needs: the implicit GEMMs, the direct kernel and kf::conv_forward
    always (any geometry falls back to them); the pointwise TF32 kernel, the small-filter kernels and the depthwise
    kernel where asked. Each optional part keeps its place in the text (what follows may use it)."""
    text = CONV_CUDA_TEMPLATES
    for wanted, part in ((pointwise, _POINTWISE), (small_filter, _SMALL_FILTER), (depthwise, _DEPTHWISE)):
        if not wanted:
            text = text.replace(part, "")
    return text


# ConvKernel.tf32 -> kf::conv_forward's ROUNDING
TF32_ROUNDING = {None: "kf::TF32_OFF", "rna": "kf::TF32_TIES_AWAY", "rne": "kf::TF32_TIES_EVEN"}

def conv_tc_rows(kernel: ConvKernel) -> int:
    """Output channels per block of kf::conv_igemm_tc: 128 for groups of more than 96 (each input column gathered
    once for all of them), else 64. The weight fixes the group's channels, so the plan picks one instantiation."""
    weight = kernel.conv.args[1].meta["val"].shape
    per_group = weight[1] if kernel.transposed else weight[0] // kernel.groups
    return 128 if per_group > 96 else 64


# Below this many output channels per group the direct kernel runs (a GEMM tile of 16 would idle its rows).
CONV_DIRECT_BELOW = 8

# The CPU loop: per (image, output channel) plane, every (input channel, tap) adds a shifted input row, into double
# sums (as the CPU reductions): a float running sum over K = 576 terms came out 4x further from float64 than eager's
# own convolution, past 1e-4 after a training BatchNorm over two values per channel.
CONV_CPU_TEMPLATE = r"""
namespace kf {
template <bool TRANSPOSED, class Epilogue>
void conv_forward_cpu(const float* x, const float* w, const ConvGeom& g, const Epilogue& epi, float* out) {
    at::parallel_for(0, g.batch * g.out_channels, 1, [&](int64_t begin, int64_t end) {
        std::vector<double> sums(g.out_plane);
        for (int64_t plane = begin; plane < end; ++plane) {
            const int64_t n = plane / g.out_channels, c = plane % g.out_channels, group = c / g.out_per_group;
            double* o = sums.data();
            std::fill(o, o + g.out_plane, 0.0);
            const int64_t co = c % g.out_per_group;
            for (int64_t ci = 0; ci < g.in_per_group; ++ci) {
                const float* xc = x + (n * g.in_channels + group * g.in_per_group + ci) * g.in_plane;
                const float* wc = TRANSPOSED ? w + ((group * g.in_per_group + ci) * g.out_per_group + co) * g.taps
                                             : w + c * g.k_per_group + ci * g.taps;
                for (int kz = 0; kz < g.kernel[0]; ++kz)
                for (int ky = 0; ky < g.kernel[1]; ++ky)
                for (int kx = 0; kx < g.kernel[2]; ++kx) {
                    const float weight = *wc++;
                    for (int oz = 0; oz < g.out_size[0]; ++oz) {
                        const int iz = conv_source(oz, kz, 0, g, TRANSPOSED);
                        if (iz < 0 || iz >= g.in_size[0]) continue;
                        for (int oy = 0; oy < g.out_size[1]; ++oy) {
                            const int iy = conv_source(oy, ky, 1, g, TRANSPOSED);
                            if (iy < 0 || iy >= g.in_size[1]) continue;
                            const float* row = xc + ((int64_t)iz * g.in_size[1] + iy) * g.in_size[2];
                            double* orow = o + ((int64_t)oz * g.out_size[1] + oy) * g.out_size[2];
                            for (int ox = 0; ox < g.out_size[2]; ++ox) {
                                const int ix = conv_source(ox, kx, 2, g, TRANSPOSED);
                                if (ix >= 0 && ix < g.in_size[2]) orow[ox] += (double)weight * row[ix];
                            }
                        }
                    }
                }
            }
            float* result = out + plane * g.out_plane;
            for (int64_t s = 0; s < g.out_plane; ++s) result[s] = epi((float)o[s], n, c, s, g);
        }
    });
}
}  // namespace kf
"""


@dataclass
class ConvSources:
    common: str        # structs for both sides of the CUDA target (or the one CPU file)
    functions: str     # op functions of the epilogues (need the ops prelude before them)
    device: str        # CUDA kernels + launchers, or the CPU loops
    host: str          # ATen-side wrappers
    declarations: str  # launcher declarations for the CUDA host file


def _op_function(kernel: ConvKernel) -> str:
    """The epilogue's expression: the pointwise kernel's own op function, or the bias add of a bare convolution."""
    if kernel.epilogue is not None:
        return printing.op_function(kernel.epilogue)
    if kernel.bias:
        return f"KF_INLINE float {kernel.name}_op(float a0, float a1) {{\n    return a0 + a1;  // the bias\n}}\n"
    return f"KF_INLINE float {kernel.name}_op(float a0) {{\n    return a0;\n}}\n"


def _op_name(kernel: ConvKernel) -> str:
    return f"{kernel.epilogue.name}_op" if kernel.epilogue is not None else f"{kernel.name}_op"


def operand_kinds(kernel: ConvKernel) -> list[str]:
    """How each epilogue operand broadcasts to the output, from the captured shapes: "sum" (the convolution's own
    output), "scalar" (one value), "channel" (one value per output channel: the bias, a (C, 1, 1) parameter) or
    "general" (read per element through its strides). The first two are read without the per-element mode dispatch
    of kf::conv_operand (the compiler then loads a channel's value once, not once per output), and the host wrapper
    checks that the run's operands still broadcast that way."""
    nodes = {n.name: n for node in (kernel.epilogue.nodes if kernel.epilogue else []) for n in node.all_input_nodes}
    out = tensor_meta(kernel.conv)
    rank, channels = kernel.spatial + 2, (int(out.shape[1]) if out is not None else -1)
    kinds = []
    for name in kernel.operands:
        meta = tensor_meta(nodes.get(name))
        if name == kernel.conv.name:
            kinds.append("sum")
        elif kernel.epilogue is None or (kernel.epilogue.bias and name == kernel.epilogue.bias[1]):
            kinds.append("channel")  # the convolution's bias, viewed (C, 1, ...)
        elif meta is None or meta.dim() > rank:
            kinds.append("general")
        else:
            shape = [1] * (rank - meta.dim()) + [int(v) for v in meta.shape]
            if all(v == 1 for v in shape):
                kinds.append("scalar")
            elif shape[0] == 1 and shape[1] == channels and all(v == 1 for v in shape[2:]):
                kinds.append("channel")
            else:
                kinds.append("general")
    return kinds


_OPERAND_READS = {"scalar": "o[{k}].data[0]", "channel": "o[{k}].data[c * o[{k}].stride_c]",
                  "general": "kf::conv_operand(o[{k}], n, c, s, g)", "sum": "sum"}
_OPERAND_CHECKS = {"scalar": ("kf::conv_single", "one value"), "channel": ("kf::conv_per_channel", "one value per channel")}


def _epilogue_functor(kernel: ConvKernel) -> str:
    count = len(kernel.operands)
    kinds = operand_kinds(kernel)
    args = ", ".join("sum" if kind == "sum" else f"kf::conv_operand(o[{k}], n, c, s, g)" for k, kind in enumerate(kinds))
    direct = ", ".join(_OPERAND_READS[kind].format(k=k) for k, kind in enumerate(kinds))
    return f"""
// {kernel.name}: what runs on each sum before it is stored ({' -> '.join(kernel.ops[1:]) or 'nothing'}).
// direct: the same with one-value and per-channel operands read without kf::conv_operand's mode dispatch (for a
// kernel that evaluates a channel's values together: the compiler then loads such an operand once per channel).
struct {kernel.name}_epilogue {{
    kf::ConvOperand o[{count}];
    KF_HD float operator()(float sum, int64_t n, int64_t c, int64_t s, const kf::ConvGeom& g) const {{
        return {_op_name(kernel)}({args});
    }}
    KF_HD float direct(float sum, int64_t n, int64_t c, int64_t s, const kf::ConvGeom& g) const {{
        return {_op_name(kernel)}({direct});
    }}
}};
"""


def _launcher(kernel: ConvKernel, target: str) -> str:
    count = len(kernel.operands)
    transposed = "true" if kernel.transposed else "false"
    if target == "cuda":
        signature = (f"void {kernel.name}_launch(const float* x, const float* w, const kf::ConvGeom& g, "
                     f"const kf::ConvOperand* o, float* out, bool tf32, float* packed, int sms, cudaStream_t stream)")
        call = (f"    kf::conv_forward<{transposed}, {TF32_ROUNDING[kernel.tf32]}, {conv_tc_rows(kernel)}>"
                f"(x, w, g, epi, out, tf32, packed, sms, stream);\n")
        if kernel.small_filter is not None:  # the model's filter: the direct kernel; another: the general one
            call = (f"    if (kf::conv2d_small_filter_forward<{kernel.small_filter.template_arguments}>"
                    f"(x, w, g, epi, out, sms, stream)) return;\n" + call)
    else:
        signature = (f"void {kernel.name}_launch(const float* x, const float* w, const kf::ConvGeom& g, "
                     f"const kf::ConvOperand* o, float* out)")
        call = f"    kf::conv_forward_cpu<{transposed}>(x, w, g, epi, out);\n"
    return (f"{signature} {{\n    {kernel.name}_epilogue epi;\n"
            f"    for (int k = 0; k < {count}; ++k) epi.o[k] = o[k];\n{call}}}\n")


def _host_wrapper(kernel: ConvKernel, target: str) -> str:
    count = len(kernel.operands)
    others = [k for k, name in enumerate(kernel.operands) if name != kernel.conv.name]
    params = "".join(f", const at::Tensor& a{k}" for k in others)
    inputs = ", ".join("&out" if name == kernel.conv.name else f"&a{k}" for k, name in enumerate(kernel.operands))
    ints = lambda v: "{" + ", ".join(str(x) for x in v) + "}"  # noqa: E731
    if target == "cuda":
        # a TF32 convolution's weights, packed for the tensor-core kernel's tiles on each call (kf::conv_pack_weights)
        packed = (f"    const at::Tensor packed = kf::empty({{kf::conv_packed_floats(g, {conv_tc_rows(kernel)})}}, w.options());\n"
                  if kernel.tf32 else "")
        launch = (f"{packed}    {kernel.name}_launch(x.data_ptr<float>(), w.data_ptr<float>(), g, conv_ops, "
                  f"out.data_ptr<float>(),\n        {'kf::conv_allows_tf32()' if kernel.tf32 else 'false'}, "
                  f"{'packed.data_ptr<float>()' if kernel.tf32 else 'nullptr'}, kf::sm_count(out.get_device()), "
                  f"c10::cuda::getCurrentCUDAStream());\n    C10_CUDA_KERNEL_LAUNCH_CHECK();\n")
    else:
        launch = (f"    {kernel.name}_launch(x.data_ptr<float>(), w.data_ptr<float>(), g, conv_ops, "
                  f"out.data_ptr<float>());\n")
    checks = "".join(f'    TORCH_CHECK({_OPERAND_CHECKS[kind][0]}(conv_ops[{k}]), "kfuse convolution: epilogue operand {k} '
                     f'does not broadcast as {_OPERAND_CHECKS[kind][1]} (as when captured)");\n'
                     for k, kind in enumerate(operand_kinds(kernel)) if kind in _OPERAND_CHECKS)
    return f"""
// {kernel.name}: {' -> '.join(kernel.ops)}, the output written once
at::Tensor {kernel.name}(const at::Tensor& input, const at::Tensor& weight{params}) {{
    const int stride[{kernel.spatial}] = {ints(kernel.stride)}, padding[{kernel.spatial}] = {ints(kernel.padding)};
    const int dilation[{kernel.spatial}] = {ints(kernel.dilation)}, output_padding[{kernel.spatial}] = {ints(kernel.output_padding)};
    const at::Tensor x = input.contiguous(), w = weight.contiguous();
    const kf::ConvGeom g = kf::conv_geometry(x, w, {kernel.spatial}, stride, padding, dilation, {kernel.groups},
                                             {"true" if kernel.transposed else "false"}, output_padding);
    std::vector<int64_t> sizes = {{g.batch, g.out_channels}};
    for (int d = 3 - {kernel.spatial}; d < 3; ++d) sizes.push_back(g.out_size[d]);
    at::Tensor out = kf::empty(sizes, x.options().memory_format(at::MemoryFormat::Contiguous));
    if (out.numel() == 0) return out;
    kf::Operand operands[{count}];
    kf::Shape shape;
    const at::Tensor* inputs[{count}] = {{{inputs}}};
    const at::Tensor same = kf::prepare(inputs, {count}, &out, operands, shape);
    TORCH_CHECK(same.is_same(out), "kfuse convolution: an epilogue operand broadcasts beyond the output");
    kf::ConvOperand conv_ops[{count}];
    kf::conv_operands(operands, shape, {count}, {kernel.spatial}, conv_ops);
{checks}{launch}    return out;
}}
"""


def render(kernels: list[ConvKernel], target: str) -> ConvSources:
    if not kernels:
        return ConvSources("", "", "", "", "")
    functions = "".join(_op_function(k) for k in kernels)
    functors = "".join(_epilogue_functor(k) for k in kernels)
    launchers = "".join(_launcher(k, target) for k in kernels)
    pointwise = target == "cuda" and choices.current().conv_pointwise_tc and any(
        k.tf32 and not k.transposed and all(size == 1 for size in k.conv.args[1].meta["val"].shape[2:])
        for k in kernels)
    # Only the kernel families this file's convolutions can take, whatever sizes it is called with: the depthwise
    # kernel where a convolution has one input channel per group (its weight says so), the small-filter kernels
    # where one was instantiated, the pointwise TF32 kernel where the choice and a 1x1 filter ask for it.
    small = any(k.small_filter is not None for k in kernels)
    depthwise = target == "cuda" and any(
        not k.transposed and k.spatial <= 2 and k.conv.args[1].meta["val"].shape[1] == 1 for k in kernels)
    templates = ("#define KF_CONV_POINTWISE_TC\n" + ASYNC_COPY if pointwise else "") + \
                (f"namespace kf {{ constexpr int64_t CONV_DIRECT_BELOW = {CONV_DIRECT_BELOW}; "
                 + (f"constexpr int SMALL_FILTER_TC_MAX_SMEM = {SMALL_FILTER_TC_MAX_SMEM}; "
                    f"constexpr int SMALL_FILTER_TC_STAGE_PITCH = {SMALL_FILTER_TC_STAGE_PITCH}; " if small else "")
                 + "}\n" + conv_cuda_templates(pointwise, small, depthwise) if target == "cuda"
                 else CONV_CPU_TEMPLATE)
    declarations = ""
    if target == "cuda":
        declarations = "".join(f"void {k.name}_launch(const float* x, const float* w, const kf::ConvGeom& g, "
                               f"const kf::ConvOperand* o, float* out, bool tf32, float* packed, int sms, "
                               f"cudaStream_t stream);\n"
                               for k in kernels)
    runtime = CONV_HOST_RUNTIME + (CONV_CUDA_HOST_RUNTIME if any(k.tf32 for k in kernels) else "")
    host = runtime + declarations + "".join(_host_wrapper(k, target) for k in kernels)
    device = CONV_KERNEL_HELPERS + templates + functors + launchers
    return ConvSources(CONV_COMMON, functions, device, host, declarations)


def forward_lines(kernel: ConvKernel, names: dict[str, str]) -> list[str]:
    """The line of `forward` that runs the convolution with its epilogue."""
    args = [names[kernel.input], names[kernel.weight]]
    for name in kernel.operands:
        if name == kernel.conv.name:
            continue
        if kernel.epilogue is not None:
            args.append(printing.kernel_argument(kernel.epilogue, name, names))
        else:  # the bias, (C,) viewed as (C, 1, ...): one value per channel
            args.append(f"{names[name]}.view({{{', '.join(['-1'] + ['1'] * kernel.spatial)}}})")
    names[kernel.result.name] = kernel.result.name
    return [f"    at::Tensor {kernel.result.name} = {kernel.name}({', '.join(args)});"]
