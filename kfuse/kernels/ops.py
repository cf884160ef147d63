"""ATen pointwise ops as C expressions with the float32 math PyTorch itself uses.

`POINTWISE` maps an ATen overload name ("aten.leaky_relu.default") to a `PointwiseOp` whose `render` turns the
node's arguments into one C expression of type float. The expressions call plain float functions (expf, log1pf,
...) and the `kf_*` helpers of `PRELUDE`, which compiles both as CUDA (nvcc) and as host C++, so one rendering
serves both targets.

What "the same math" means here: the formula, the order of the float32 operations and the constants are those of
PyTorch's kernels (aten/src/ATen/native/cpu/*, native/cuda/*, c10/util/*). Where PyTorch's CPU and CUDA kernels
are written differently, the helper switches on `__CUDACC__` / `__CUDA_ARCH__`:

- dividing by a scalar: `a / b` on the CPU, `a * (1 / b)` in CUDA (div_true/div_trunc/div_floor with a
  CPU-scalar divisor): `kf_div_scalar`, `kf_div_trunc_scalar`, `kf_div_floor_scalar`;
- hardswish / hardsigmoid: `/ 6` on the CPU, `* (1.0f / 6.0f)` in CUDA;
- rsqrt: `1 / sqrtf(x)` on the CPU, the device's `rsqrtf` (2 ulp) in CUDA.

Measured (tests/test_ops.py; the CUDA side once by hand on an H100 against PyTorch 2.11's CUDA kernels, every test
case, three seeds): in CUDA every op gives PyTorch's bits, transcendental ones included (both call libdevice).
On the CPU the arithmetic, comparisons, clamps, min/max, roundings, selects and identities give PyTorch's bits;
the ops built on libm functions differ by 1-4 ulp, because PyTorch's CPU kernels call MKL VML or SLEEF where the
C++ target calls glibc (PyTorch's CPU sqrt is itself 1 ulp off in about 8% of cases). GELU on the CPU is the
exception: PyTorch's vectorised kernel uses ATen's own erf approximation (up to 2.5e-7 * |x| from the exact
value), which these expressions do not copy; they compute the exact formula with erff/tanhf.

Host C++ should be built without FMA contraction (GCC contracts a * b + c under -march=native unless
-ffp-contract=off); add with alpha != 1 is an explicit fmaf because PyTorch computes it as fma(other, alpha, self).
nvcc's default contraction is what PyTorch's CUDA kernels are built with.

Scalars follow PyTorch's casts: a double (or int) scalar of a float32 op is rounded to float32 once, and derived
constants (ELU's alpha * scale, CELU's 1 / alpha, GELU's kBeta) are computed in the precision PyTorch computes
them in.

Booleans: ops whose ATen result is a bool tensor (comparisons, logical_*, isnan, signbit) render to 1.0f / 0.0f,
and a float used as a condition (where.self, logical_*) is true when nonzero (NaN is true), as in PyTorch; the
names are in `BOOL_RESULT`.

`render` raises ValueError for argument values it has no expression for (to.dtype to float16, an unknown
rounding mode, ...): treat that as "not fusable".
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import numpy as np
import torch

PRELUDE = r"""
#ifdef __CUDACC__
#define KF_INLINE __host__ __device__ __forceinline__
#else
#define KF_INLINE inline
#endif
#include <cmath>
#include <cstdint>

/* kfuse pointwise helpers: float32 math written the way PyTorch's kernels write it (kfuse/kernels/ops.py). */

/* relu = clamp_min(x, 0); -0.0 stays -0.0 and NaN stays NaN, as in PyTorch's vectorised CPU kernel. */
KF_INLINE float kf_relu(float x) { return (x < 0.0f) ? 0.0f : x; }
/* clamp with scalar bounds: max first, then min; a NaN input propagates. */
KF_INLINE float kf_clamp_min(float x, float lo) { return (x < lo) ? lo : x; }
KF_INLINE float kf_clamp_max(float x, float hi) { return (hi < x) ? hi : x; }
KF_INLINE float kf_clamp(float x, float lo, float hi) { return kf_clamp_max(kf_clamp_min(x, lo), hi); }
/* torch.maximum / torch.minimum: NaN in either operand gives NaN (fmaxf / fminf would drop it). */
KF_INLINE float kf_maximum(float a, float b) { return (a != a) ? a : ((b != b) ? b : ((a > b) ? a : b)); }
KF_INLINE float kf_minimum(float a, float b) { return (a != a) ? a : ((b != b) ? b : ((a < b) ? a : b)); }
KF_INLINE float kf_square(float x) { return x * x; }
KF_INLINE float kf_cube(float x) { return x * x * x; }
/* rsqrt: 1 / sqrt(x) on the CPU; PyTorch's CUDA kernel calls the device's rsqrtf (2 ulp), and so do we there. */
KF_INLINE float kf_rsqrt(float x) {
#ifdef __CUDA_ARCH__
  return rsqrtf(x);
#else
  return 1.0f / sqrtf(x);
#endif
}
KF_INLINE float kf_inv_square(float x) { return 1.0f / (x * x); }

KF_INLINE float kf_leaky_relu(float x, float slope) { return (x > 0.0f) ? x : x * slope; }
KF_INLINE float kf_threshold(float x, float threshold, float value) { return (x <= threshold) ? value : x; }
KF_INLINE float kf_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
KF_INLINE float kf_silu(float x) { return x / (1.0f + expf(-x)); }
KF_INLINE float kf_mish(float x) { return x * tanhf(log1pf(expf(x))); }
/* softplus: x itself once x * beta passes the threshold, else log1p(exp(x * beta)) / beta. */
KF_INLINE float kf_softplus(float x, float beta, float threshold) {
  float xb = x * beta;
  return (xb > threshold) ? x : log1pf(expf(xb)) / beta;
}
/* elu / selu / celu: negcoef = alpha * scale, poscoef = scale, negiptcoef = input_scale (all float32). */
KF_INLINE float kf_elu(float x, float negcoef, float poscoef, float negiptcoef) {
  return (x < 0.0f) ? expm1f(x * negiptcoef) * negcoef : x * poscoef;
}
/* gelu, approximate='none': x * 0.5 * (1 + erf(x * M_SQRT1_2)). */
KF_INLINE float kf_gelu_erf(float x) { return x * 0.5f * (1.0f + erff(x * @M_SQRT1_2@)); }
/* gelu, approximate='tanh': kBeta = float(M_SQRT2 * M_2_SQRTPI * 0.5), kKappa = float(0.044715). */
KF_INLINE float kf_gelu_tanh(float x) {
  float x_cube = x * x * x;
  float inner = @GELU_BETA@ * (x + @GELU_KAPPA@ * x_cube);
  return 0.5f * x * (1.0f + tanhf(inner));
}
/* hardswish x * min(max(x + 3, 0), 6) / 6 and hardsigmoid min(max(x + 3, 0), 6) / 6; NaN propagates.
   PyTorch's CPU kernels divide by 6, its CUDA kernels multiply by the float 1/6. */
#ifdef __CUDACC__
KF_INLINE float kf_hardswish(float x) { return x * kf_clamp(x + 3.0f, 0.0f, 6.0f) * (1.0f / 6.0f); }
KF_INLINE float kf_hardsigmoid(float x) { return kf_clamp(x + 3.0f, 0.0f, 6.0f) * (1.0f / 6.0f); }
#else
KF_INLINE float kf_hardswish(float x) { return x * kf_clamp(x + 3.0f, 0.0f, 6.0f) / 6.0f; }
KF_INLINE float kf_hardsigmoid(float x) { return kf_clamp(x + 3.0f, 0.0f, 6.0f) / 6.0f; }
#endif
KF_INLINE float kf_hardshrink(float x, float lambd) { return (x >= -lambd && x <= lambd) ? 0.0f : x; }
/* softshrink: 0 inside [-lambd, lambd]; NaN stays NaN. */
KF_INLINE float kf_softshrink(float x, float lambd) {
  return (x > lambd) ? x - lambd : ((x < -lambd) ? x + lambd : ((x != x) ? x : 0.0f));
}
KF_INLINE float kf_log_sigmoid(float x) { return kf_minimum(x, 0.0f) - log1pf(expf(-fabsf(x))); }

/* sign: (0 < x) - (x < 0); sign(NaN) = 0 as in PyTorch. */
KF_INLINE float kf_sign(float x) { return (float)((0.0f < x) - (x < 0.0f)); }
KF_INLINE bool kf_signbit(float x) { return copysignf(1.0f, x) < 0.0f; }
KF_INLINE float kf_frac(float x) { return x - truncf(x); }
KF_INLINE float kf_remainder(float a, float b) {
  float mod = fmodf(a, b);
  if ((mod != 0.0f) && ((b < 0.0f) != (mod < 0.0f))) mod += b;
  return mod;
}

/* xlogy(x, y) = x * log(y), 0 where x is 0, NaN where y is NaN (PyTorch's order of tests) */
KF_INLINE float kf_xlogy(float x, float y) {
  if (y != y) return NAN;
  if (x == 0.0f) return 0.0f;
  return x * logf(y);
}

/* Division by a scalar: PyTorch's CUDA kernels multiply by the reciprocal, its CPU kernels divide. */
KF_INLINE float kf_div_scalar(float a, float b) {
#ifdef __CUDACC__
  return a * (1.0f / b);
#else
  return a / b;
#endif
}
KF_INLINE float kf_div_trunc(float a, float b) { return truncf(a / b); }
KF_INLINE float kf_div_trunc_scalar(float a, float b) {
#ifdef __CUDACC__
  return truncf(a * (1.0f / b));
#else
  return truncf(a / b);
#endif
}
/* rounding_mode='floor': c10::div_floor_floating (Python's floor division, rounded to the nearest integer). */
KF_INLINE float kf_div_floor(float a, float b) {
  if (b == 0.0f) return a / b;
  float mod = fmodf(a, b);
  float div = (a - mod) / b;
  if ((mod != 0.0f) && ((b < 0.0f) != (mod < 0.0f))) div -= 1.0f;
  float floordiv;
  if (div != 0.0f) {
    floordiv = floorf(div);
    if (div - floordiv > 0.5f) floordiv += 1.0f;
  } else {
    floordiv = copysignf(0.0f, a / b);
  }
  return floordiv;
}
KF_INLINE float kf_div_floor_scalar(float a, float b) {
#ifdef __CUDACC__
  if (b == 0.0f) return a * (1.0f / b);
  float inv_b = 1.0f / b;
  float mod = fmodf(a, b);
  float div = (a - mod) * inv_b;
  if ((mod != 0.0f) && ((b < 0.0f) != (mod < 0.0f))) div -= 1.0f;
  float floordiv;
  if (div != 0.0f) {
    floordiv = floorf(div);
    if (div - floordiv > 0.5f) floordiv += 1.0f;
  } else {
    floordiv = copysignf(0.0f, a * inv_b);
  }
  return floordiv;
#else
  return kf_div_floor(a, b);
#endif
}
"""

# --------------------------------------------------------------------------------------------------------------
# Scalars


def _int_to_f32(value: int) -> float:
    """The float32 nearest to an integer, ties to even, rounded once (as static_cast<float>(int64_t) does; going
    through a double first would round twice)."""
    mag = abs(value)
    if mag < (1 << 24):
        return float(value)
    shift = mag.bit_length() - 24
    kept, rest, half = mag >> shift, mag & ((1 << shift) - 1), 1 << (shift - 1)
    if rest > half or (rest == half and kept & 1):
        kept += 1
    out = math.inf if kept << shift >= (1 << 128) else float(kept << shift)
    return -out if value < 0 else out


def to_f32(value: float | int | bool) -> float:
    """A Python scalar as PyTorch casts it for a float32 op (bools are 1/0, ints rounded once, doubles rounded
    to nearest even; out of range gives +-inf)."""
    if isinstance(value, (bool, np.bool_)):
        return 1.0 if value else 0.0
    if isinstance(value, numbers.Integral):
        return _int_to_f32(int(value))
    with np.errstate(over="ignore"):
        return float(np.float32(float(value)))


def _rounds_to(text: str, v: float) -> bool:
    """Does the decimal `text`, rounded directly to float32 (as a C compiler reads `textf`), give exactly v?"""
    exact, f = Fraction(text), np.float32(v)
    dv = abs(exact - Fraction(v))
    with np.errstate(over="ignore"):
        neighbours = (np.nextafter(f, np.float32(-np.inf)), np.nextafter(f, np.float32(np.inf)))
    for n in neighbours:
        if np.isinf(n):
            continue
        dn = abs(exact - Fraction(float(n)))
        if dn < dv or (dn == dv and int(f.view(np.uint32)) & 1):
            return False
    return True


def scalar_literal(value: float | int | bool) -> str:
    """A C float literal for a Python scalar, after rounding it to float32 the way PyTorch does.

    0.01 -> "0.01f", 2 -> "2.0f", True -> "1.0f", 1e-5 -> "1e-05f", inf -> "INFINITY", nan -> "NAN". The
    decimal is the shortest that a C compiler reads back as exactly the same float32 (checked exactly).
    """
    v = to_f32(value)
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    if v == 0.0:
        return "-0.0f" if math.copysign(1.0, v) < 0 else "0.0f"
    f = np.float32(v)                               # numpy's shortest digits that read back as this float32
    fixed = np.format_float_positional(f, unique=True, trim="0")
    sci = np.format_float_scientific(f, unique=True, trim="-")
    text = fixed if len(fixed) <= len(sci) else sci
    if not _rounds_to(text, v):                     # never expected; a hex float literal is exact
        text = float(v).hex()
    return text + "f"


# --------------------------------------------------------------------------------------------------------------
# The table


@dataclass(frozen=True)
class PointwiseOp:
    name: str                       # the ATen overload, e.g. "aten.leaky_relu.default"
    tensor_args: tuple[int, ...]    # positions (in the node's args) that may be tensors
    render: Callable[[list, dict], str]


POINTWISE: dict[str, PointwiseOp] = {}

# Ops whose ATen result is a bool tensor; here they give 1.0f / 0.0f.
BOOL_RESULT: frozenset[str] = frozenset()

_ATOM = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*|\d+\.\d+f|\([^()]*\)|[A-Za-z_][A-Za-z0-9_]*\([^()]*\))$")


def _operand(x) -> str:
    """An argument as a C operand: an expression string (parenthesised unless atomic) or a scalar literal."""
    if isinstance(x, str):
        x = x.strip()
        return x if _ATOM.match(x) else f"({x})"
    if isinstance(x, numbers.Real):
        text = scalar_literal(x)
        return f"({text})" if text.startswith("-") else text
    raise ValueError(f"expected a C expression or a numeric scalar, got {x!r}")


def _lit(x) -> str:
    """A non-tensor scalar argument (a Scalar in the schema) as a C literal operand."""
    if isinstance(x, str) or x is None:
        raise ValueError(f"expected a numeric scalar, got {x!r}")
    return _operand(x)


def bind_arguments(schema, args: list, kwargs: dict) -> dict:
    """The node's args and kwargs by schema argument name, defaults filled in."""
    params = schema.arguments
    if len(args) > len(params):
        raise ValueError(f"{schema.name}: {len(args)} positional args for {len(params)} parameters")
    bound = {}
    for p, a in zip(params, args):
        bound[p.name] = a
    for k, v in kwargs.items():
        if k not in {p.name for p in params}:
            raise ValueError(f"{schema.name}: unknown keyword {k!r}")
        bound[k] = v
    for p in params:
        if p.name not in bound:
            if not p.has_default_value():
                raise ValueError(f"{schema.name}: missing argument {p.name!r}")
            bound[p.name] = p.default_value
    return bound


def _op_overload(name: str):
    _, op, overload = name.split(".")
    packet = getattr(torch.ops.aten, op, None)
    if packet is None or overload not in packet.overloads():
        return None
    return getattr(packet, overload)


def _add(name: str, fn: Callable[[dict], str], tensor_params: tuple[str, ...] = ("self",), *, bool_result=False):
    """Register `fn(bound_params) -> C expr` for the overload `name`, if this torch has it."""
    overload = _op_overload(name)
    if overload is None:
        return
    schema = overload._schema
    names = [p.name for p in schema.arguments]
    positions = tuple(names.index(p) for p in tensor_params)

    def render(args: list, kwargs: dict, _schema=schema, _fn=fn) -> str:
        return _fn(bind_arguments(_schema, list(args), dict(kwargs or {})))

    POINTWISE[name] = PointwiseOp(name=name, tensor_args=positions, render=render)
    if bool_result:
        global BOOL_RESULT
        BOOL_RESULT = BOOL_RESULT | {name}


def _call(fn: str, *xs) -> str:
    return f"{fn}({', '.join(_operand(x) for x in xs)})"


def _unary(fn: str) -> Callable[[dict], str]:
    return lambda p: _call(fn, p["self"])


def _binary(op: str, a: str = "self", b: str = "other") -> Callable[[dict], str]:
    return lambda p: f"({_operand(p[a])} {op} {_operand(p[b])})"


def _is_one(x) -> bool:
    return not isinstance(x, str) and to_f32(x) == 1.0


def _add_alpha(self_, other, alpha) -> str:
    """self + alpha * other. PyTorch's vectorised kernel computes it as fma(other, alpha, self)."""
    if _is_one(alpha):
        return f"({_operand(self_)} + {_operand(other)})"
    return _call("fmaf", other, _lit(alpha), self_)


def _sub_alpha(self_, other, alpha) -> str:
    """self - alpha * other = add(self, other, -alpha) in PyTorch: fma(other, -alpha, self)."""
    if _is_one(alpha):
        return f"({_operand(self_)} - {_operand(other)})"
    neg = -to_f32(alpha)
    return _call("fmaf", other, neg, self_)


def _div(p: dict, mode=None) -> str:
    a, b = p["self"], p["other"]
    scalar_divisor = not isinstance(b, str)
    if mode is None:
        return _call("kf_div_scalar", a, b) if scalar_divisor else f"({_operand(a)} / {_operand(b)})"
    if mode == "trunc":
        return _call("kf_div_trunc_scalar" if scalar_divisor else "kf_div_trunc", a, b)
    if mode == "floor":
        return _call("kf_div_floor_scalar" if scalar_divisor else "kf_div_floor", a, b)
    raise ValueError(f"unknown rounding_mode {mode!r}")


def _bool(expr: str) -> str:
    return f"(({expr}) ? 1.0f : 0.0f)"


def _truth(x) -> str:
    """A float condition: nonzero (NaN included) is true."""
    return f"({_operand(x)} != 0.0f)"


def _pow_tensor_scalar(base, e) -> str:
    """pow(x, scalar) with PyTorch's special cases: exponent 0 fills 1, 1 copies, and 0.5, 2, 3, -0.5, -1, -2
    become sqrt, x*x, x*x*x, 1/sqrt, 1/x, 1/(x*x); anything else is powf with the exponent cast to float32."""
    if isinstance(e, str) or e is None:
        raise ValueError(f"pow.Tensor_Scalar exponent must be a scalar, got {e!r}")
    if isinstance(e, bool):
        e = int(e)
    special = {0.5: "sqrtf", 2.0: "kf_square", 3.0: "kf_cube", -0.5: "kf_rsqrt", -2.0: "kf_inv_square"}
    ev = float(e)
    if ev == 0.0:
        return "1.0f"
    if ev == 1.0:
        return _operand(base)
    if ev == -1.0:
        return f"(1.0f / {_operand(base)})"
    if ev in special:
        return _call(special[ev], base)
    return _call("powf", base, _lit(e))


def _elu_expr(x, alpha, scale, input_scale) -> str:
    """ELU with PyTorch's float32 coefficients: negcoef = float(alpha) * float(scale) rounded to float32."""
    negcoef = to_f32(to_f32(alpha) * to_f32(scale))
    return _call("kf_elu", x, negcoef, to_f32(scale), to_f32(input_scale))


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _gelu(p: dict) -> str:
    approximate = p["approximate"]
    if approximate == "none":
        return _call("kf_gelu_erf", p["self"])
    if approximate == "tanh":
        return _call("kf_gelu_tanh", p["self"])
    raise ValueError(f"unknown gelu approximate {approximate!r}")


def _clamp_scalar(p: dict) -> str:
    lo, hi = p.get("min"), p.get("max")
    if lo is None and hi is None:
        raise ValueError("clamp needs at least one of min and max")
    if lo is None:
        return _call("kf_clamp_max", p["self"], _lit(hi))
    if hi is None:
        return _call("kf_clamp_min", p["self"], _lit(lo))
    return _call("kf_clamp", p["self"], _lit(lo), _lit(hi))


def _clamp_tensor(p: dict) -> str:
    """clamp with tensor bounds: minimum(maximum(x, min), max), NaN in any of the three propagating."""
    lo, hi = p.get("min"), p.get("max")
    if lo is None and hi is None:
        raise ValueError("clamp needs at least one of min and max")
    expr = p["self"]
    if lo is not None:
        expr = _call("kf_maximum", expr, lo)
    if hi is not None:
        expr = _call("kf_minimum", expr, hi)
    return _operand(expr)


def _round_decimals(p: dict) -> str:
    """round(x, decimals): nearbyint(x * 10^d) / 10^d, or nearbyint(x / 10^-d) * 10^-d for d < 0, with 10^|d|
    computed in double and cast to float32 as PyTorch's kernel does."""
    d = p["decimals"]
    if not isinstance(d, int) or isinstance(d, bool):
        raise ValueError(f"round decimals must be an int, got {d!r}")
    if d == 0:
        return _call("nearbyintf", p["self"])
    ten = scalar_literal(10.0 ** abs(d))
    if d > 0:
        return f"(nearbyintf({_operand(p['self'])} * {ten}) / {ten})"
    return f"(nearbyintf({_operand(p['self'])} / {ten}) * {ten})"


def _to_dtype(p: dict) -> str:
    """Value-preserving conversions only: to float32 (or no dtype change) is the identity on our float values,
    to bool is `x != 0`. Anything else (half, ints) changes values and is refused."""
    dtype = p.get("dtype")
    if dtype is None or dtype == torch.float32:
        return _operand(p["self"])
    if dtype == torch.bool:
        return _bool(_truth(p["self"]))
    raise ValueError(f"conversion to {dtype} is not an identity on float32 values")


def _register_all() -> None:
    # Arithmetic ---------------------------------------------------------------------------------------------
    for ov in ("Tensor", "Scalar"):
        tp = ("self", "other") if ov == "Tensor" else ("self",)
        _add(f"aten.add.{ov}", lambda p: _add_alpha(p["self"], p["other"], p["alpha"]), tp)
        _add(f"aten.sub.{ov}", lambda p: _sub_alpha(p["self"], p["other"], p["alpha"]), tp)
        # rsub(self, other, alpha) = other - alpha * self
        _add(f"aten.rsub.{ov}", lambda p: _sub_alpha(p["other"], p["self"], p["alpha"]), tp)
        _add(f"aten.mul.{ov}", _binary("*"), tp)
        _add(f"aten.div.{ov}", _div, tp)
        _add(f"aten.div.{ov}_mode", lambda p: _div(p, p["rounding_mode"]), tp)
        _add(f"aten.remainder.{ov}", lambda p: _call("kf_remainder", p["self"], p["other"]), tp)
        for cmp, sym in (("gt", ">"), ("lt", "<"), ("ge", ">="), ("le", "<="), ("eq", "=="), ("ne", "!=")):
            _add(f"aten.{cmp}.{ov}", lambda p, s=sym: _bool(f"{_operand(p['self'])} {s} {_operand(p['other'])}"),
                 tp, bool_result=True)
    _add("aten.fmod.Tensor", lambda p: _call("fmodf", p["self"], p["other"]), ("self", "other"))
    _add("aten.fmod.Scalar", lambda p: _call("fmodf", p["self"], p["other"]))
    _add("aten.neg.default", lambda p: f"(-{_operand(p['self'])})")
    _add("aten.reciprocal.default", lambda p: f"(1.0f / {_operand(p['self'])})")
    _add("aten.square.default", _unary("kf_square"))
    _add("aten.abs.default", _unary("fabsf"))
    _add("aten.copysign.Tensor", lambda p: _call("copysignf", p["self"], p["other"]), ("self", "other"))
    _add("aten.copysign.Scalar", lambda p: _call("copysignf", p["self"], p["other"]))

    # Powers, exponentials, logs, trigonometry -------------------------------------------------------------
    _add("aten.pow.Tensor_Scalar", lambda p: _pow_tensor_scalar(p["self"], p["exponent"]))
    _add("aten.pow.Tensor_Tensor", lambda p: _call("powf", p["self"], p["exponent"]), ("self", "exponent"))
    # pow(scalar, tensor): a base of 1 fills 1 (powf(1, y) is 1 for every y, NaN included).
    _add("aten.pow.Scalar", lambda p: _call("powf", p["self"], p["exponent"]), ("exponent",))
    for op, fn in (("exp", "expf"), ("exp2", "exp2f"), ("expm1", "expm1f"), ("log", "logf"), ("log2", "log2f"),
                   ("log10", "log10f"), ("log1p", "log1pf"), ("sqrt", "sqrtf"), ("rsqrt", "kf_rsqrt"),
                   ("erf", "erff"), ("sin", "sinf"), ("cos", "cosf"), ("tan", "tanf"), ("atan", "atanf"),
                   ("tanh", "tanhf"), ("floor", "floorf"), ("ceil", "ceilf"), ("trunc", "truncf"),
                   ("round", "nearbyintf"), ("frac", "kf_frac"), ("sign", "kf_sign"), ("sgn", "kf_sign")):
        _add(f"aten.{op}.default", _unary(fn))
    _add("aten.round.decimals", _round_decimals)
    _add("aten.xlogy.Tensor", lambda p: _call("kf_xlogy", p["self"], p["other"]), ("self", "other"))
    _add("aten.xlogy.Scalar_Other", lambda p: _call("kf_xlogy", p["self"], _lit(p["other"])))
    _add("aten.atan2.default", lambda p: _call("atan2f", p["self"], p["other"]), ("self", "other"))

    # Activations ------------------------------------------------------------------------------------------
    _add("aten.relu.default", _unary("kf_relu"))
    _add("aten.relu6.default", lambda p: _call("kf_clamp", p["self"], 0.0, 6.0))
    _add("aten.leaky_relu.default", lambda p: _call("kf_leaky_relu", p["self"], _lit(p["negative_slope"])))
    _add("aten.hardtanh.default", lambda p: _call("kf_clamp", p["self"], _lit(p["min_val"]), _lit(p["max_val"])))
    _add("aten.threshold.default",
         lambda p: _call("kf_threshold", p["self"], _lit(p["threshold"]), _lit(p["value"])))
    _add("aten.gelu.default", _gelu)
    _add("aten.sigmoid.default", _unary("kf_sigmoid"))
    _add("aten.silu.default", _unary("kf_silu"))
    _add("aten.mish.default", _unary("kf_mish"))
    _add("aten.hardswish.default", _unary("kf_hardswish"))
    _add("aten.hardsigmoid.default", _unary("kf_hardsigmoid"))
    _add("aten.hardshrink.default", lambda p: _call("kf_hardshrink", p["self"], _lit(p["lambd"])))
    _add("aten.softshrink.default", lambda p: _call("kf_softshrink", p["self"], _lit(p["lambd"])))
    _add("aten.log_sigmoid.default", _unary("kf_log_sigmoid"))
    _add("aten.softplus.default",
         lambda p: _call("kf_softplus", p["self"], _lit(p["beta"]), _lit(p["threshold"])))
    _add("aten.elu.default", lambda p: _elu_expr(p["self"], p["alpha"], p["scale"], p["input_scale"]))
    _add("aten.selu.default", lambda p: _elu_expr(p["self"], _SELU_ALPHA, _SELU_SCALE, 1.0))
    # celu(x, alpha) = elu(x, alpha, scale=1, input_scale=1/alpha), 1/alpha taken in double.
    _add("aten.celu.default", lambda p: _elu_expr(p["self"], p["alpha"], 1.0, 1.0 / float(p["alpha"])))

    # Min, max, clamp, select -----------------------------------------------------------------------------
    _add("aten.clamp.default", _clamp_scalar)
    _add("aten.clamp.Tensor", _clamp_tensor, ("self", "min", "max"))
    _add("aten.clamp_min.default", lambda p: _call("kf_clamp_min", p["self"], _lit(p["min"])))
    _add("aten.clamp_max.default", lambda p: _call("kf_clamp_max", p["self"], _lit(p["max"])))
    _add("aten.clamp_min.Tensor", lambda p: _call("kf_maximum", p["self"], p["min"]), ("self", "min"))
    _add("aten.clamp_max.Tensor", lambda p: _call("kf_minimum", p["self"], p["max"]), ("self", "max"))
    _add("aten.maximum.default", lambda p: _call("kf_maximum", p["self"], p["other"]), ("self", "other"))
    _add("aten.minimum.default", lambda p: _call("kf_minimum", p["self"], p["other"]), ("self", "other"))
    # torch.min(x, y) / torch.max(x, y) are minimum / maximum (y may be a number folded at capture)
    _add("aten.min.other", lambda p: _call("kf_minimum", p["self"], p["other"]), ("self", "other"))
    _add("aten.max.other", lambda p: _call("kf_maximum", p["self"], p["other"]), ("self", "other"))
    _add("aten.fmax.default", lambda p: _call("fmaxf", p["self"], p["other"]), ("self", "other"))
    _add("aten.fmin.default", lambda p: _call("fminf", p["self"], p["other"]), ("self", "other"))

    def where(p: dict) -> str:
        return f"({_truth(p['condition'])} ? {_operand(p['self'])} : {_operand(p['other'])})"

    _add("aten.where.self", where, ("condition", "self", "other"))
    _add("aten.where.ScalarSelf", where, ("condition", "other"))
    _add("aten.where.ScalarOther", where, ("condition", "self"))
    _add("aten.where.Scalar", where, ("condition",))
    # masked_fill(x, mask, value): where(mask, value, x), the mask a bool tensor (a comparison fused before it)
    _add("aten.masked_fill.Scalar",
         lambda p: f"({_truth(p['mask'])} ? {_lit(p['value'])} : {_operand(p['self'])})", ("self", "mask"))

    # Logical and tests ------------------------------------------------------------------------------------
    _add("aten.logical_not.default", lambda p: _bool(f"{_operand(p['self'])} == 0.0f"), bool_result=True)
    for op, sym in (("and", "&&"), ("or", "||"), ("xor", "!=")):
        _add(f"aten.logical_{op}.default", lambda p, s=sym: _bool(f"{_truth(p['self'])} {s} {_truth(p['other'])}"),
             ("self", "other"), bool_result=True)
    _add("aten.isnan.default", lambda p: _bool(f"{_operand(p['self'])} != {_operand(p['self'])}"),
         bool_result=True)
    _add("aten.signbit.default", lambda p: _bool(_call("kf_signbit", p["self"])), bool_result=True)

    # Identities -------------------------------------------------------------------------------------------
    for name in ("aten.clone.default", "aten.alias.default", "aten.detach.default"):
        _add(name, lambda p: _operand(p["self"]))
    _add("aten._to_copy.default", _to_dtype)
    _add("aten.to.dtype", _to_dtype)


_register_all()

# The <cmath> constants as C doubles, and PyTorch's GELU constants derived from them in double, cast to float.
_M_SQRT1_2 = 0.70710678118654752440
_M_SQRT2 = 1.41421356237309504880
_M_2_SQRTPI = 1.12837916709551257390
PRELUDE = (PRELUDE.replace("@M_SQRT1_2@", scalar_literal(_M_SQRT1_2))
           .replace("@GELU_BETA@", scalar_literal(_M_SQRT2 * _M_2_SQRTPI * 0.5))
           .replace("@GELU_KAPPA@", scalar_literal(0.044715)))


def lookup(target) -> PointwiseOp | None:
    """The table entry for an ATen OpOverload (or its name, "aten.relu.default"); None when not covered."""
    return POINTWISE.get(str(target))


def render_node(node: torch.fx.Node, names: dict[str, str]) -> str:
    """The C expression of a pointwise graph node, its tensor arguments named by `names` (node name -> C name)."""
    def value(a):
        if isinstance(a, torch.fx.Node):
            return names[a.name]
        if isinstance(a, (list, tuple)):
            return type(a)(value(x) for x in a)
        return a

    return lookup(node.target).render([value(a) for a in node.args], {k: value(v) for k, v in node.kwargs.items()})
