"""kfuse.kernels.ops: every rendered expression, compiled once into a C++ extension, against the ATen op itself.

Each case renders one op's expression over `v0 = a[i]`, `v1 = b[i]`, `v2 = c[i]`, runs it on float32 inputs that
mix ordinary values, zeros, integers and half-integers, magnitudes up to 30 and beyond (exp overflow), subnormals,
infinities and NaN, and compares with `target(*args, **kwargs)` on the same tensors: NaN at the same positions and,
elsewhere, at most the case's tolerance in ulp (+0 and -0 count as equal; PyTorch's own vector and scalar paths
disagree on the sign of some zeros). Tolerance 0 means the same float32 bits up to the sign of zero.
For the libm-based ops, a value that misses PyTorch's float32 result may instead match the exactly rounded one
(computed in float64): PyTorch's CPU kernels differ from machine to machine, and some are coarse.

Tolerances: 0 ulp for everything but the ops built on libm functions (ULP below, 1-4 ulp: PyTorch's CPU kernels
call MKL VML / SLEEF, the extension glibc) and GELU (PyTorch's CPU kernel approximates erf; see GELU_*_SLACK).
Results below the smallest normal float are compared to within FLT_MIN. One PyTorch CPU quirk is left out of the
comparison: fmod/remainder where the quotient overflows (see quotient_overflows).

The inputs are drawn from a fixed seed per case (KFUSE_OPS_SEED changes it), so a failure is reproducible.
"""

from __future__ import annotations

import math
import os
import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest
import torch

from kfuse.kernels import ops

aten = torch.ops.aten
N = 4099            # not a multiple of any vector width: PyTorch's scalar tail loop runs too
SEED = int(os.environ.get("KFUSE_OPS_SEED", "20240611"))


class _Tensor:
    """Placeholder for input tensor a, b or c in a case's args."""

    def __init__(self, index: int, as_bool: bool = False):
        self.index, self.as_bool = index, as_bool

    def __repr__(self) -> str:
        return "abc"[self.index] + ("!=0" if self.as_bool else "")


A, B, C = _Tensor(0), _Tensor(1), _Tensor(2)
C_BOOL = _Tensor(2, as_bool=True)   # where's condition: PyTorch takes a bool tensor, the expression a float


# Tolerances in ulp, measured with several seeds, for the ops whose value comes from a libm function: PyTorch's CPU
# kernels call MKL's VML or SLEEF's 1-ulp functions, the extension calls glibc's. sqrt is among them: PyTorch's CPU
# sqrt (VML) is not correctly rounded, about 8% of results are 1 ulp off (sqrtf is exact; so is PyTorch on CUDA).
# Every op not listed must give the same bits (up to the sign of zero).
ULP = {
    "exp": 1, "exp2": 1, "expm1": 1, "log": 1, "log2": 1, "log10": 2, "log1p": 1, "sqrt": 1, "erf": 1, "sin": 1,
    "cos": 1, "tan": 1, "atan": 1, "atan2": 1, "pow": 1, "tanh": 2, "sigmoid": 2, "silu": 2, "log_sigmoid": 2,
    "softplus": 2, "elu": 2, "selu": 2, "celu": 2, "gelu": 2, "mish": 4, "xlogy": 1,
}
# PyTorch's CPU GELU does not call erf/tanh's accurate versions: its vectorised kernel uses ATen's own erf
# approximation (up to 2.5e-7 * |x| off the exact GELU), and the tanh form cancels in 1 + tanh(inner) for x < -5,
# so 1 ulp of tanh there is up to 1.1e-7 * |x|. These slacks (times |x|) are on top of the ulp tolerance.
GELU_ERF_SLACK = 2.6e-7
GELU_TANH_SLACK = 1.5e-7


def quotient_overflows(a, b, c):
    """PyTorch's vectorised CPU fmod/remainder (SLEEF) return NaN when |a / b| overflows float32: fmod(1, 1e-40) is
    NaN in the vectorised body and the exact 8.4e-42 in the scalar tail. fmodf is exact there."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.abs(a.astype(np.float64) / b.astype(np.float64)) > np.finfo(np.float32).max


def gelu_overflows(a, b, c):
    """PyTorch's AVX-512 CPU GELU (erf form) scales x before it multiplies: it gives inf for |x| above ~1.7e38 and
    NaN at +-inf, where its AVX2 kernel, its CUDA kernel and kfuse give x and +-inf. Which kernel runs depends on
    the machine's CPU, so those inputs are left out."""
    return np.abs(a.astype(np.float64)) > 1.7e38


def case(target, args, kwargs=None, *, ulp=None, slack=0.0, ignore=None, id=None):
    """One op call. `ulp`: tolerance in ulp (default from ULP, else 0). `slack`: a further absolute tolerance of
    slack * |a|, for ops whose PyTorch CPU kernel is less accurate than its formula. `ignore(a, b, c)`: a mask of
    elements left out, for documented PyTorch CPU quirks."""
    op = str(target).split(".")[1]
    tol = Tol(ULP.get(op, 0) if ulp is None else ulp, slack, ignore)
    return pytest.param(target, tuple(args), dict(kwargs or {}), tol, id=id)


@dataclass(frozen=True)
class Tol:
    ulp: int
    slack: float = 0.0
    ignore: Callable | None = None


CASES = [
    # arithmetic, with alpha and with scalars where tensors may go
    case(aten.add.Tensor, (A, B)),
    case(aten.add.Tensor, (A, B), dict(alpha=2.5)),
    case(aten.add.Tensor, (A, 2.0)),
    case(aten.add.Tensor, (0.1, B)),
    case(aten.add.Tensor, (A, 0.1), dict(alpha=3)),
    case(aten.add.Scalar, (A, 0.3)),
    case(aten.add.Scalar, (A, 0.1), dict(alpha=-2)),
    case(aten.sub.Tensor, (A, B)),
    case(aten.sub.Tensor, (A, B), dict(alpha=0.7)),
    case(aten.sub.Tensor, (A, 1)),
    case(aten.sub.Scalar, (A, 1.5)),
    case(aten.sub.Scalar, (A, 1.5), dict(alpha=0.1)),
    case(aten.rsub.Scalar, (A, 2)),
    case(aten.rsub.Scalar, (A, 2, 0.3)),
    case(aten.rsub.Tensor, (A, B)),
    case(aten.rsub.Tensor, (A, B), dict(alpha=1.5)),
    case(aten.mul.Tensor, (A, B)),
    case(aten.mul.Tensor, (A, 0.5)),
    case(aten.mul.Tensor, (0.1, B)),
    case(aten.mul.Scalar, (A, 3)),
    case(aten.div.Tensor, (A, B)),
    case(aten.div.Tensor, (A, 3)),
    case(aten.div.Tensor, (A, 0.1)),
    case(aten.div.Tensor, (A, 0.0)),
    case(aten.div.Tensor, (1.0, B)),
    case(aten.div.Scalar, (A, 7.0)),
    case(aten.div.Tensor_mode, (A, B), dict(rounding_mode=None)),
    case(aten.div.Tensor_mode, (A, B), dict(rounding_mode="trunc")),
    case(aten.div.Tensor_mode, (A, B), dict(rounding_mode="floor")),
    case(aten.div.Tensor_mode, (A, 2.5), dict(rounding_mode="floor")),
    case(aten.div.Tensor_mode, (A, -3), dict(rounding_mode="floor")),
    case(aten.div.Tensor_mode, (A, 0.0), dict(rounding_mode="floor")),
    case(aten.div.Tensor_mode, (A, 0.1), dict(rounding_mode="trunc")),
    case(aten.div.Scalar_mode, (A, 2.0), dict(rounding_mode="floor")),
    case(aten.div.Scalar_mode, (A, -0.3), dict(rounding_mode="trunc")),
    case(aten.remainder.Tensor, (A, B), ignore=quotient_overflows),
    case(aten.remainder.Scalar, (A, 2.0)),
    case(aten.remainder.Scalar, (A, -1.5)),
    case(aten.fmod.Tensor, (A, B), ignore=quotient_overflows),
    case(aten.fmod.Scalar, (A, 2.5)),
    case(aten.neg.default, (A,)),
    case(aten.abs.default, (A,)),
    case(aten.reciprocal.default, (A,)),
    case(aten.square.default, (A,)),
    case(aten.copysign.Tensor, (A, B)),
    case(aten.copysign.Scalar, (A, -1.0)),
    # activations
    case(aten.relu.default, (A,)),
    case(aten.relu6.default, (A,)),
    case(aten.leaky_relu.default, (A,)),
    case(aten.leaky_relu.default, (A, 0.2)),
    case(aten.leaky_relu.default, (A,), dict(negative_slope=-0.5)),
    case(aten.hardtanh.default, (A,)),
    case(aten.hardtanh.default, (A, -2.0, 3.5)),
    case(aten.hardtanh.default, (A,), dict(min_val=0.0, max_val=6.0)),
    case(aten.threshold.default, (A, 0.1, 20.0)),
    case(aten.threshold.default, (A, -1, -2)),
    case(aten.gelu.default, (A,), slack=GELU_ERF_SLACK, ignore=gelu_overflows),
    case(aten.gelu.default, (A,), dict(approximate="none"), slack=GELU_ERF_SLACK, ignore=gelu_overflows),
    case(aten.gelu.default, (A,), dict(approximate="tanh"), slack=GELU_TANH_SLACK),
    case(aten.sigmoid.default, (A,)),
    case(aten.tanh.default, (A,)),
    case(aten.silu.default, (A,)),
    case(aten.mish.default, (A,)),
    case(aten.hardswish.default, (A,)),
    case(aten.hardsigmoid.default, (A,)),
    case(aten.hardshrink.default, (A,)),
    case(aten.hardshrink.default, (A, 1.0)),
    case(aten.softshrink.default, (A,)),
    case(aten.softshrink.default, (A, 2.0)),
    case(aten.log_sigmoid.default, (A,)),
    case(aten.softplus.default, (A,)),
    case(aten.softplus.default, (A, 2.0)),
    case(aten.softplus.default, (A, 0.5, 5.0)),
    case(aten.softplus.default, (A,), dict(beta=1.0, threshold=1.0)),
    case(aten.elu.default, (A,)),
    case(aten.elu.default, (A, 0.5)),
    case(aten.elu.default, (A, 1.2, 0.8, 1.5)),
    case(aten.elu.default, (A,), dict(alpha=1.0, scale=1.0, input_scale=1.0)),
    case(aten.selu.default, (A,)),
    case(aten.celu.default, (A,)),
    case(aten.celu.default, (A, 0.7)),
    case(aten.celu.default, (A,), dict(alpha=2.0)),
    # clamps, min/max, select
    case(aten.clamp.default, (A, 0, 1)),
    case(aten.clamp.default, (A, None, 0.5)),
    case(aten.clamp.default, (A, -0.5)),
    case(aten.clamp.default, (A,), dict(min=2.0, max=-1.0)),
    case(aten.clamp.Tensor, (A, B, C)),
    case(aten.clamp.Tensor, (A, B)),
    case(aten.clamp.Tensor, (A,), dict(max=C)),
    case(aten.clamp_min.default, (A, 0.1)),
    case(aten.clamp_max.default, (A, -0.1)),
    case(aten.clamp_min.Tensor, (A, B)),
    case(aten.clamp_max.Tensor, (A, B)),
    case(aten.minimum.default, (A, B)),
    case(aten.maximum.default, (A, B)),
    case(aten.min.other, (A, B)),
    case(aten.max.other, (A, B)),
    case(aten.fmin.default, (A, B)),
    case(aten.fmax.default, (A, B)),
    case(aten.where.self, (C_BOOL, A, B)),
    case(aten.where.ScalarSelf, (C_BOOL, 1.5, B)),
    case(aten.where.ScalarOther, (C_BOOL, A, -2)),
    case(aten.where.Scalar, (C_BOOL, 1.0, 0.0)),
    case(aten.masked_fill.Scalar, (A, C_BOOL, float("-inf"))),
    # exponentials, logs, powers, roots, trigonometry
    case(aten.exp.default, (A,)),
    case(aten.exp2.default, (A,)),
    case(aten.expm1.default, (A,)),
    case(aten.log.default, (A,)),
    case(aten.log2.default, (A,)),
    case(aten.log10.default, (A,)),
    case(aten.log1p.default, (A,)),
    case(aten.sqrt.default, (A,)),
    case(aten.rsqrt.default, (A,)),
    case(aten.erf.default, (A,)),
    case(aten.sin.default, (A,)),
    case(aten.cos.default, (A,)),
    case(aten.tan.default, (A,)),
    case(aten.atan.default, (A,)),
    case(aten.atan2.default, (A, B)),
    case(aten.xlogy.Tensor, (A, B)),
    case(aten.xlogy.Scalar_Other, (A, 2.5)),
    *[case(aten.pow.Tensor_Scalar, (A, e), id=f"pow.Tensor_Scalar-{e}")
      for e in (2, 3, 0.5, -0.5, -1, -2, 0, 1, 2.0, 2.5, -1.5, 4, True)],
    case(aten.pow.Tensor_Tensor, (A, B)),
    case(aten.pow.Scalar, (2.0, B)),
    case(aten.pow.Scalar, (0.5, B)),
    case(aten.pow.Scalar, (1, B)),
    case(aten.pow.Scalar, (-3.0, B)),
    # rounding and sign
    case(aten.floor.default, (A,)),
    case(aten.ceil.default, (A,)),
    case(aten.round.default, (A,)),
    case(aten.round.decimals, (A,), dict(decimals=2)),
    case(aten.round.decimals, (A,), dict(decimals=-1)),
    case(aten.round.decimals, (A,), dict(decimals=0)),
    case(aten.trunc.default, (A,)),
    case(aten.frac.default, (A,)),
    case(aten.sign.default, (A,)),
    case(aten.sgn.default, (A,)),
    case(aten.signbit.default, (A,)),
    # comparisons, logical ops, tests (bool results, compared as 1.0 / 0.0)
    *[case(getattr(aten, cmp).Tensor, (A, B)) for cmp in ("gt", "lt", "ge", "le", "eq", "ne")],
    *[case(getattr(aten, cmp).Scalar, (A, s), id=f"{cmp}.Scalar-{s}")
      for cmp in ("gt", "lt", "ge", "le", "eq", "ne") for s in (0, 0.5)],
    case(aten.logical_not.default, (C,)),
    case(aten.logical_and.default, (C, B)),
    case(aten.logical_or.default, (C, B)),
    case(aten.logical_xor.default, (C, B)),
    case(aten.isnan.default, (A,)),
    # identities and conversions
    case(aten.clone.default, (A,)),
    case(aten.alias.default, (A,)),
    case(aten.detach.default, (A,)),
    case(aten._to_copy.default, (A,), dict(dtype=torch.float32)),
    case(aten.to.dtype, (A, torch.float32)),
    case(aten.to.dtype, (A, torch.bool)),
]


# ---------------------------------------------------------------------------------------------------------------
# Inputs

SPECIAL = np.array([
    0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.0, -3.0, 6.0, -6.0, 2.0, -2.0, 0.1, -0.1,
    20.0, -20.0, 30.0, -30.0, 88.0, 89.0, -88.0, -104.0, 100.0, -100.0, 1e10, -1e10, 3e38, -3e38,
    1e-7, -1e-7, 1e-30, 1e-40, -1e-40, 1e-45, np.inf, -np.inf, np.nan, -np.nan,
], dtype=np.float32)


def make_inputs(seed: int, index: int) -> torch.Tensor:
    """One float32 input: the special values (in one order for a and c, another for b, so pairs meet), then a
    mix of normal values, |x| up to 30, tiny magnitudes, integers and half-integers, and some exact zeros."""
    rng = np.random.default_rng([seed, index])
    special = SPECIAL if index != 1 else np.roll(SPECIAL, 7)
    paired = np.concatenate([SPECIAL, special])      # first block: a, b, c identical; second: b shifted
    n = N - len(paired)
    parts = [
        rng.normal(0.0, 3.0, n // 4),
        rng.uniform(-30.0, 30.0, n // 4),
        np.sign(rng.uniform(-1, 1, n // 8)) * 10.0 ** rng.uniform(-8, 0, n // 8),
        np.round(rng.uniform(-12, 12, n // 8) * 2) / 2,
    ]
    rest = n - sum(len(p) for p in parts)
    parts.append(rng.uniform(-1.0, 1.0, rest))
    x = np.concatenate(parts).astype(np.float32)
    zeros = rng.uniform(size=n) < (0.4 if index == 2 else 0.05)
    x[zeros] = 0.0
    rng.shuffle(x)
    return torch.from_numpy(np.concatenate([paired, x]).astype(np.float32))


def inputs_for(case_id: str) -> list[torch.Tensor]:
    seed = SEED ^ zlib.crc32(case_id.encode())
    return [make_inputs(seed, i) for i in range(3)]


# ---------------------------------------------------------------------------------------------------------------
# The extension

def _ids() -> list[str]:
    """Stable, unique ids: pytest's own for each case, numbered where a target repeats."""
    seen: dict[str, int] = {}
    out = []
    for p in CASES:
        target = p.values[0]
        base = p.id or str(target).removeprefix("aten.")
        seen[base] = seen.get(base, 0) + 1
        out.append(base if seen[base] == 1 else f"{base}-{seen[base]}")
    return out


IDS = _ids()


def _c_args(args, kwargs):
    """The case's args for render: placeholders become v0 / v1 / v2."""
    conv = lambda x: f"v{x.index}" if isinstance(x, _Tensor) else x  # noqa: E731
    return [conv(a) for a in args], {k: conv(v) for k, v in kwargs.items()}


def _torch_args(args, kwargs, tensors):
    def conv(x):
        if isinstance(x, _Tensor):
            t = tensors[x.index]
            return t != 0 if x.as_bool else t
        return x
    return [conv(a) for a in args], {k: conv(v) for k, v in kwargs.items()}


# Values whose C literals the extension compiles, to check that the compiler reads scalar_literal back exactly.
def literal_values() -> list:
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2**32, 300, dtype=np.uint64).astype(np.uint32).view(np.float32)
    vals = [float(v) for v in bits if np.isfinite(v)]
    vals += [float(v) for v in rng.normal(0, 1, 50)] + [float(v) for v in 10.0 ** rng.uniform(-44, 38, 50)]
    vals += [0.01, 0.1, 1 / 3, 0.044715, 1e-5, 1e-45, 1.4e-45, 3.4028235e38, 3.4028236e38, 1e39, -1e300,
             1.1754942e-38, 2.0**-149, 2.0**-150, 0.0, -0.0, math.inf, -math.inf, math.nan,
             16777217, 2**60 + 2**36 + 1, -(2**40) - 1, 123456789, 0, 1, -1, True, False]
    return vals


def _kernel(i: int, expr: str) -> str:
    return f"""
at::Tensor op_{i}(at::Tensor a, at::Tensor b, at::Tensor c) {{
  auto out = at::empty_like(a);
  const float* pa = a.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  const float* pc = c.data_ptr<float>();
  float* po = out.data_ptr<float>();
  const int64_t n = a.numel();
  for (int64_t i = 0; i < n; ++i) {{
    const float v0 = pa[i], v1 = pb[i], v2 = pc[i];
    (void)v0; (void)v1; (void)v2;
    po[i] = {expr};
  }}
  return out;
}}
"""


def build_extension():
    """Build the one extension holding every case's kernel and the literal table (about 40 s on 2 cores)."""
    from torch.utils.cpp_extension import load_inline

    bodies, names = [], []
    for i, p in enumerate(CASES):
        target, args, kwargs, _ = p.values
        op = ops.lookup(target)
        assert op is not None, f"{target} missing from ops.POINTWISE"
        cargs, ckwargs = _c_args(args, kwargs)
        bodies.append(_kernel(i, op.render(cargs, ckwargs)))
        names.append(f"op_{i}")
    lits = ", ".join(ops.scalar_literal(v) for v in literal_values())
    bodies.append(f"""
at::Tensor literals() {{
  static const float vals[] = {{{lits}}};
  return at::from_blob((void*)vals, {{(int64_t)(sizeof(vals) / sizeof(float))}}, at::kFloat).clone();
}}
""")
    names.append("literals")
    # the emitted files' headers and flags (tests/pch_cxx.py then reads them precompiled, as it does theirs)
    module = "".join(f'    m.def("{n}", &{n});\n' for n in names)
    source = ("#include <ATen/core/Tensor.h>\n#include <ATen/ops/empty_like.h>\n#include <ATen/ops/from_blob.h>\n"
              "#include <torch/csrc/utils/pybind.h>\n" + ops.PRELUDE + "".join(bodies)
              + f"PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{\n{module}}}\n")
    light = {"no_implicit_headers": True} if "no_implicit_headers" in load_inline.__code__.co_varnames else {}
    return load_inline(name="kfuse_test_ops", cpp_sources=[source], extra_cflags=["-O3", "-fopenmp"], verbose=False,
                       **light)


@pytest.fixture(scope="module")
def ext():
    return build_extension()


# ---------------------------------------------------------------------------------------------------------------
# Comparison

def _ordered(x: np.ndarray) -> np.ndarray:
    """float32 bits as integers in value order, +0 and -0 both 0: adjacent floats differ by 1."""
    i = x.view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF), i)


def ulp_diff(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    return np.abs(_ordered(got) - _ordered(want))


FLT_MIN = float(np.finfo(np.float32).tiny)


def mismatches(got: torch.Tensor, want: torch.Tensor, tol: Tol, inputs) -> tuple[np.ndarray, np.ndarray]:
    """(indices where NaN-ness differs, indices over tolerance) and the ulp distances."""
    got_np = got.numpy()
    want_np = want.to(torch.float32).numpy()
    a, b, c = (t.numpy() for t in inputs)
    keep = np.ones(got_np.shape, dtype=bool) if tol.ignore is None else ~tol.ignore(a, b, c)
    nan_got, nan_want = np.isnan(got_np), np.isnan(want_np)
    bad_nan = np.flatnonzero((nan_got != nan_want) & keep)
    both = ~(nan_got | nan_want) & keep
    diff = np.zeros(got_np.shape, dtype=np.int64)
    diff[both] = ulp_diff(got_np[both], want_np[both])
    with np.errstate(invalid="ignore", over="ignore"):
        absdiff = np.abs(got_np.astype(np.float64) - want_np.astype(np.float64))
        # Below the smallest normal float the ulp is absolute (2**-149): results there are compared to FLT_MIN.
        tiny = (np.abs(want_np) < FLT_MIN) & (np.abs(got_np) < FLT_MIN)
        slack_ok = absdiff <= tol.slack * np.abs(a.astype(np.float64))
    over = both & (diff > tol.ulp) & ~tiny & ~slack_ok
    return bad_nan, np.flatnonzero(over), diff


def compare(got: torch.Tensor, want: torch.Tensor, tol: Tol, inputs) -> None:
    bad_nan, bad, diff = mismatches(got, want, tol, inputs)
    if len(bad_nan) or len(bad):
        got_np, want_np = got.numpy(), want.to(torch.float32).numpy()
        where = np.concatenate([bad_nan, bad])[:8]
        rows = [f"  a={inputs[0][k].item()!r} b={inputs[1][k].item()!r} c={inputs[2][k].item()!r}: "
                f"got {got_np[k]!r} want {want_np[k]!r} ({diff[k]} ulp)" for k in where]
        pytest.fail(f"{len(bad_nan)} NaN mismatches, {len(bad)} values over {tol.ulp} ulp "
                    f"(max {diff.max()} ulp), seed {SEED}:\n" + "\n".join(rows))


@pytest.mark.parametrize("index", range(len(CASES)), ids=IDS)
def test_op_matches_torch(ext, index):
    target, args, kwargs, tol = CASES[index].values
    tensors = inputs_for(IDS[index])
    targs, tkwargs = _torch_args(args, kwargs, tensors)
    want = target(*targs, **tkwargs)
    got = getattr(ext, f"op_{index}")(*tensors)
    if tol.ulp and len(mismatches(got, want, tol, tensors)[1]):
        want = _nearer_reference(got, want, target, args, kwargs, tensors, tol)
    compare(got, want, tol, tensors)


def _nearer_reference(got, want, target, args, kwargs, tensors, tol):
    """For the libm-based ops: where PyTorch's float32 result is out of tolerance, the float64 result rounded to
    float32 (the exact value, to within an ulp) is the reference instead. Which CPU kernel PyTorch runs depends on
    the machine, and some are coarse approximations: one CI machine's float32 tanh(1) is 0.7616326, 645 ulp from
    the exact 0.7615942 that the extension gives."""
    dargs, dkwargs = _torch_args(args, kwargs, [t.double() for t in tensors])
    exact = target(*dargs, **dkwargs).to(torch.float32)
    torch_off = np.zeros(got.shape, dtype=bool)
    torch_off[mismatches(got, want, tol, tensors)[1]] = True
    return torch.where(torch.from_numpy(torch_off), exact, want)


def test_literals_compile_to_the_float32_pytorch_uses(ext):
    vals = literal_values()
    got = ext.literals().numpy()
    # What PyTorch makes of each scalar in a float32 op: 1 * v keeps -0, NaN and infinities.
    want = np.array([torch.mul(torch.ones(1), v).item() for v in vals], dtype=np.float32)
    assert got.shape == want.shape
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    bad = [(vals[k], ops.scalar_literal(vals[k]), got[k], want[k]) for k in np.flatnonzero(~same)]
    assert not bad, bad[:10]


# ---------------------------------------------------------------------------------------------------------------
# Tests that need no extension

@pytest.mark.parametrize("value, text", [
    (0.01, "0.01f"), (2, "2.0f"), (0.5, "0.5f"), (-1.5, "-1.5f"), (True, "1.0f"), (False, "0.0f"),
    (math.inf, "INFINITY"), (-math.inf, "-INFINITY"), (math.nan, "NAN"), (1e39, "INFINITY"), (-0.0, "-0.0f"),
    (16777217, "16777216.0f"), (0.044715, "0.044715f"),
])
def test_scalar_literal_text(value, text):
    assert ops.scalar_literal(value) == text


def test_scalar_literal_rounds_to_float32_once():
    rng = np.random.default_rng(11)
    doubles = list(rng.normal(0, 1e3, 2000)) + list(10.0 ** rng.uniform(-45, 38.5, 2000))
    for d in doubles:
        text = ops.scalar_literal(float(d))
        if text in ("INFINITY", "-INFINITY"):
            assert abs(d) > 3.4028235e38
            continue
        # The decimal must lie nearer to float32(d) than to either neighbour (exactly, not through a double).
        assert ops._rounds_to(text[:-1], float(np.float32(d))), (d, text)
        assert float(np.float32(float(text[:-1]))) == float(np.float32(d)), (d, text)
    # Integers are rounded once, like static_cast<float>(int64_t): 2**60 + 2**36 + 1 goes up, not to the even 2**60.
    assert ops.to_f32(2**60 + 2**36 + 1) == 2.0**60 + 2.0**37
    assert ops.to_f32(2**60 + 2**36) == 2.0**60


def test_lookup_real_overloads():
    op = ops.lookup(aten.leaky_relu.default)
    assert op is not None and op.name == "aten.leaky_relu.default" and op.tensor_args == (0,)
    assert ops.lookup(aten.add.Tensor).tensor_args == (0, 1)
    assert ops.lookup(aten.add.Scalar).tensor_args == (0,)
    assert ops.lookup(aten.where.self).tensor_args == (0, 1, 2)
    assert ops.lookup(aten.where.ScalarSelf).tensor_args == (0, 2)
    assert ops.lookup(aten.pow.Scalar).tensor_args == (1,)
    assert ops.lookup(aten.clamp.Tensor).tensor_args == (0, 1, 2)
    for not_pointwise in (aten.mm.default, aten.sum.dim_IntList, aten.view.default, aten.softmax.int,
                          aten.add.out, aten.relu_.default):
        assert ops.lookup(not_pointwise) is None
    for name, entry in ops.POINTWISE.items():
        _, packet, overload = name.split(".")
        assert str(getattr(getattr(aten, packet), overload)) == name == entry.name
        assert ops.lookup(getattr(getattr(aten, packet), overload)) is entry


def test_every_entry_is_tested():
    tested = {str(p.values[0]) for p in CASES}
    assert set(ops.POINTWISE) - tested == set()
    assert ops.BOOL_RESULT <= set(ops.POINTWISE)


def test_export_emits_names_the_table_knows():
    import torch.nn.functional as F

    class M(torch.nn.Module):
        def forward(self, x, y):
            return (x + y, x + 2.0, torch.add(x, y, alpha=2), x - 1, 2 - x, x * 0.5, x / 3,
                    torch.div(x, y, rounding_mode="floor"), -x, F.relu(x), F.relu6(x), F.leaky_relu(x, 0.1), F.gelu(x, approximate="tanh"), torch.sigmoid(x),
                    F.silu(x), F.mish(x), F.hardswish(x), F.hardsigmoid(x), F.hardtanh(x, -2, 2), F.elu(x),
                    F.selu(x), F.celu(x), F.softplus(x, beta=2), x.clamp(0, 1), x.clamp(max=1),
                    torch.clamp(x, y, y), torch.minimum(x, y), torch.where(x > 0, x, y), torch.where(x > 0, x, 0.0),
                    x.exp(), x.rsqrt(), x ** 2, x ** y, 2 ** x, x.square(), x.erf(), x.sign(), x.round(),
                    (x >= y).float(), F.threshold(x, 0.1, 2.0), x.clone(), x.frac(), F.logsigmoid(x))

    ep = torch.export.export(M(), (torch.randn(4), torch.randn(4)))
    skip = {"aten._assert_tensor_metadata.default"}
    missing = [str(n.target) for n in ep.graph.nodes
               if n.op == "call_function" and str(n.target) not in skip and ops.lookup(n.target) is None]
    assert missing == []


@pytest.mark.parametrize("target, args, kwargs", [
    (aten.to.dtype, ["v0", torch.float16], {}),
    (aten._to_copy.default, ["v0"], {"dtype": torch.int64}),
    (aten.div.Tensor_mode, ["v0", "v1"], {"rounding_mode": "ceil"}),
    (aten.gelu.default, ["v0"], {"approximate": "sigmoid"}),
    (aten.clamp.default, ["v0"], {}),
    (aten.leaky_relu.default, ["v0", "v1"], {}),
])
def test_render_refuses_what_it_cannot_express(target, args, kwargs):
    with pytest.raises(ValueError):
        ops.lookup(target).render(args, kwargs)


def test_render_examples():
    r = lambda t, *a, **k: ops.lookup(t).render(list(a), k)  # noqa: E731
    assert r(aten.leaky_relu.default, "v0") == "kf_leaky_relu(v0, 0.01f)"
    assert r(aten.add.Tensor, "v0", 2.0) == "(v0 + 2.0f)"
    assert r(aten.mul.Tensor, "v0 + v1", -0.5) == "((v0 + v1) * (-0.5f))"
    assert r(aten.add.Tensor, "v0", "v1", alpha=2) == "fmaf(v1, 2.0f, v0)"
    assert r(aten.clamp.default, "v0", None, 1) == "kf_clamp_max(v0, 1.0f)"
    assert r(aten.pow.Tensor_Scalar, "v0", 2) == "kf_square(v0)"
    assert r(aten.where.self, "v2", "v0", "v1") == "((v2 != 0.0f) ? v0 : v1)"
    assert r(aten.gt.Scalar, "v0", 0) == "((v0 > 0.0f) ? 1.0f : 0.0f)"
