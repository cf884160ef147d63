"""How far kfuse's 3xTF32 tensor-core kernels move a network's output from float64, on the CPU (no GPU needed).

Their rounding emulated in PyTorch: every fp32 operand split into a TF32 big part (top 10 significand bits,
truncated as the kernels do, or rounded to nearest with --split rna) and a TF32 small part, each m16n8k8 MMA's eight
exact products added to its accumulator with one rounding toward zero (as the tensor cores round), three MMAs per
product (small terms first), and a fresh partial sum every --join 8-wide K steps, added to the total in fp32.
--op attention stands in for `torch.nn.functional.scaled_dot_product_attention` (nn.MultiheadAttention's calls too;
kfuse/kernels/attention.py: softmax in base 2, each key block's P V joined with an fp32 FMA); --op linear for
`F.linear` (kfuse/kernels/gemm_cuda.py; the Hopper kernel joins every 8 steps, two 32-wide K tiles). The rest of the
forward is fp32 eager. The table gives, per seed, eager's own max error against the float64 forward, the emulated
one and their ratio; the judge's precision parity allows 10x. On 28_VisionTransformer (KernelBench level 3):
attention 0.8-1.7x, linear 5-15x (the H200's judge saw 14x), linear with --split rna --join 1: 1.0-1.3x.

    python3 scripts/tensor_core_rounding.py PROBLEM.py [...] [--op attention|linear] [--split trunc|rna]
        [--join STEPS] [--seeds 3]
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import math
from pathlib import Path

import torch
import torch.nn.functional as F


SETTINGS = {"split": "trunc", "join": None}  # the command line's --split and --join


def tf32(x: torch.Tensor) -> torch.Tensor:
    bits = x.view(torch.int32)
    if SETTINGS["split"] == "rna":
        bits = bits + 0x1000  # to nearest, ties away from zero (cvt.rna)
    return (bits & -8192).view(torch.float32)  # `& 0xffffe000`


def split(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    big = tf32(x)
    return big, tf32(x - big)  # the MMA reads the small part's top 10 bits


def toward_zero(exact: torch.Tensor) -> torch.Tensor:
    """float64 -> float32 rounded toward zero."""
    nearest = exact.float()
    over = nearest.double().abs() > exact.abs()
    return torch.where(over, torch.nextafter(nearest, torch.zeros_like(nearest)), nearest)


def mma(acc: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return toward_zero(acc.double() + a.double() @ b.double())


def mma3(acc: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a_big, a_small = split(a)
    b_big, b_small = split(b)
    return mma(mma(mma(acc, a_small, b_big), a_big, b_small), a_big, b_big)


def product(a: torch.Tensor, b: torch.Tensor, join: int) -> torch.Tensor:
    """a (..., M, K) @ b (K, N) or (..., K, N) in 8-wide steps, a fresh partial sum every `join` steps."""
    K = a.shape[-1]
    total = torch.zeros(a.shape[:-1] + (b.shape[-1],))
    for k0 in range(0, K, 8 * join):
        part = torch.zeros_like(total)
        for e in range(k0, min(k0 + 8 * join, K), 8):
            part = mma3(part, a[..., e:e + 8], b[..., e:e + 8, :])
        total = total + part
    return total


def linear(x, weight, bias=None):
    K = x.shape[-1]
    padded = (K + 7) // 8 * 8
    out = product(F.pad(x, (0, padded - K)), F.pad(weight, (0, padded - K)).t(), SETTINGS["join"] or 8)
    return out + bias if bias is not None else out


def attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    if attn_mask is not None or is_causal or dropout_p:
        raise NotImplementedError("the emulation covers unmasked attention without dropout")
    E, Ev, S = q.shape[-1], v.shape[-1], k.shape[-2]
    padded = (E + 7) // 8 * 8
    q, k = F.pad(q, (0, padded - E)), F.pad(k, (0, padded - E))
    keys_per_step = 32 if Ev > 64 else 64
    log2_scale = torch.tensor(scale if scale is not None else 1.0 / math.sqrt(E)) * torch.tensor(1.4426950408889634)
    out = torch.zeros(q.shape[:-1] + (Ev,))
    m = torch.full(q.shape[:-1] + (1,), -math.inf)
    l = torch.zeros_like(m)
    for j0 in range(0, S, keys_per_step):
        kb, vb = k[..., j0:j0 + keys_per_step, :], v[..., j0:j0 + keys_per_step, :]
        n = kb.shape[-2]
        tiles = (n + 7) // 8 * 8
        kb, vb = F.pad(kb, (0, 0, 0, tiles - n)), F.pad(vb, (0, 0, 0, tiles - n))
        s = product(q, kb.transpose(-1, -2), SETTINGS["join"] or padded // 8) * log2_scale
        s[..., n:] = -math.inf
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        alpha, p = torch.exp2(m - m_new), torch.exp2(s - m_new)
        l = l * alpha + p.sum(-1, keepdim=True)
        pv = product(p, vb, SETTINGS["join"] or tiles // 8)
        out = (out.double() * alpha.double() + pv.double()).float()
        m = m_new
    return out * (1.0 / l)


def as_double(model: torch.nn.Module) -> torch.nn.Module:
    """The model in float64, plain tensor attributes (state that is neither parameter nor buffer) included."""
    for module in model.modules():
        for key, value in vars(module).items():
            if torch.is_tensor(value) and value.is_floating_point():
                setattr(module, key, value.double())
    return model.double()


def errors(path: Path, seeds: int, op: str) -> list[tuple[float, float]]:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    name, emulation = ("scaled_dot_product_attention", attention) if op == "attention" else ("linear", linear)
    eager_op, rows = getattr(F, name), []
    for seed in range(seeds):
        torch.manual_seed(seed)
        model, inputs = module.Model(*module.get_init_inputs()), module.get_inputs()
        with torch.no_grad():
            # each forward on its own copy: a Model may keep state across calls (an RNN's hidden tensor)
            truth = as_double(copy.deepcopy(model))(*[x.double() if torch.is_tensor(x) and x.is_floating_point()
                                                      else x for x in inputs]).double()
            eager = copy.deepcopy(model)(*inputs)
            setattr(F, name, emulation)
            try:
                emulated = copy.deepcopy(model)(*inputs)
            finally:
                setattr(F, name, eager_op)
        rows.append(((eager.double() - truth).abs().max().item(), (emulated.double() - truth).abs().max().item()))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", nargs="+", type=Path)
    parser.add_argument("--op", choices=("attention", "linear"), default="attention")
    parser.add_argument("--split", choices=("trunc", "rna"), default="trunc")
    parser.add_argument("--join", type=int, default=None, help="8-wide K steps per partial sum (default: the kernel's)")
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    SETTINGS.update(split=args.split, join=args.join)
    print("| problem | seed | eager's error | emulated kernel's | ratio |\n|---|---|---|---|---|")
    for path in args.problems:
        for seed, (eager, emulated) in enumerate(errors(path, args.seeds, args.op)):
            print(f"| {path.stem} | {seed} | {eager:.3g} | {emulated:.3g} | {emulated / eager:.2f} |")


if __name__ == "__main__":
    main()
