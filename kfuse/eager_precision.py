"""What precision eager's own library call runs at, asked of the GPU at plan time.

PyTorch lets cuDNN use TF32 for fp32 convolutions by default, but whether a given call does is cuDNN's choice of
algorithm for that shape: on an H100 a 1x1 convolution over 64 channels ran TF32 (5e-4 from fp32 accuracy), a 3D
convolution of the same file family ran fp32-accurate. A kfuse kernel replacing the call must land within 1e-4 of
eager's output, which an fp32-accurate kernel does only where eager is fp32-accurate too; where eager runs TF32 no
other kernel matches cuDNN's own rounding to 1e-4, so eager's call stays (with its epilogue fused after it).

The same holds for a layout change: cuDNN runs channels-last operands with another algorithm, and where either
algorithm is TF32 the two outputs differ by about 4e-4, so the fp32 policy runs a convolution channels-last only
where the GPU shows the same output.

A probe runs the call twice on seeded random operands of the node's shapes (the batch cut so the operands stay
under PROBE_BYTES): as eager runs it, and the variant (cuDNN's TF32 off, or channels-last operands). Outputs
further apart than fp32 summation order explains differ. Without a visible CUDA device the answer is None.
"""

from __future__ import annotations

import functools

import torch

PROBE_BYTES = 1 << 30
# fp32-accurate algorithms differ by summation order (relative ~1e-6); one TF32 product by ~1e-3
TF32_RELATIVE_GAP = 2e-5


def convolution_runs_tf32(node: torch.fx.Node) -> bool | None:
    """Does eager's cuDNN call for this convolution node run TF32 on this GPU? None without a CUDA device."""
    return _ask(node, "no_tf32")


def channels_last_keeps_result(node: torch.fx.Node) -> bool | None:
    """Does this convolution give eager's output, to fp32 summation order, with channels-last operands? cuDNN picks
    another algorithm for the other layout: where either runs TF32 the two differ by about 4e-4. None without a
    CUDA device."""
    differs = _ask(node, "channels_last")
    return None if differs is None else not differs


def _ask(node: torch.fx.Node, variant: str) -> bool | None:
    if not torch.cuda.is_available():
        return None
    from kfuse.codegen import boxed_arguments
    values = boxed_arguments(node)
    x, w, b, out = (_shape(v) for v in values[:3] + [node])
    if x is None or w is None or out is None:
        return None
    rest = tuple(tuple(v) if isinstance(v, list) else v for v in values[3:])
    return _differs(str(node.target), x, w, b is not None, out, rest, variant)


@functools.lru_cache(maxsize=None)
def _differs(target: str, x_shape: tuple, w_shape: tuple, has_bias: bool, out_shape: tuple, rest: tuple,
             variant: str) -> bool:
    """Is eager's output further from `variant`'s (TF32 off, or channels-last operands) than fp32 rounding?"""
    per_image = 4 * (_numel(x_shape[1:]) + 2 * _numel(out_shape[1:]))
    batch = max(1, min(x_shape[0], (PROBE_BYTES - 4 * _numel(w_shape)) // max(per_image, 1)))
    generator = torch.Generator(device="cuda").manual_seed(0)
    x = torch.rand((batch,) + x_shape[1:], device="cuda", generator=generator)
    w = torch.rand(w_shape, device="cuda", generator=generator) - 0.5
    b = torch.rand(w_shape[1] if "transpose" in target else w_shape[0], device="cuda", generator=generator) \
        if has_bias else None
    op = _op(target)
    with torch.no_grad():
        eager = op(x, w, b, *rest)
        if variant == "no_tf32":
            with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
                other = op(x, w, b, *rest)
        else:
            layout = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
            other = op(x.contiguous(memory_format=layout), w.contiguous(memory_format=layout), b, *rest)
    scale = eager.abs().max().item()
    gap = (eager - other).abs().max().item()
    del x, w, b, eager, other
    torch.cuda.empty_cache()
    return gap > TF32_RELATIVE_GAP * max(scale, 1e-30)


def _op(target: str):
    namespace, name, overload = target.split(".")
    return getattr(getattr(getattr(torch.ops, namespace), name), overload)


def _shape(value) -> tuple | None:
    val = value.meta.get("val") if isinstance(value, torch.fx.Node) else None
    return tuple(val.shape) if isinstance(val, torch.Tensor) else None


def _numel(shape: tuple) -> int:
    n = 1
    for s in shape:
        n *= s
    return n
