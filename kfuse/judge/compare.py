"""Comparing a candidate's outputs with the reference's and with a float64 ground truth (DESIGN.md §4, items 4-5).

Errors are computed in float64, in chunks, so a 6 GB output does not need three more 12 GB copies at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

# KernelBench's current tolerance, atol = rtol, by output dtype.
TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-4, torch.float16: 1e-2, torch.bfloat16: 1e-2}
PARITY_FACTOR = 10.0       # the candidate may be this many times less accurate than the reference...
PARITY_FLOOR = 1e-6        # ...or off by this fraction of max|truth|, whichever is larger
CHUNK = 1 << 25            # elements per float64 chunk


def leaves(out, path: str = "output") -> list[tuple[str, object]]:
    """The tensors and plain values of an output, each with a readable path ('output[1]')."""
    if isinstance(out, (tuple, list)):
        found = []
        for i, item in enumerate(out):
            found.extend(leaves(item, f"{path}[{i}]"))
        return found
    if isinstance(out, dict):
        found = []
        for key in sorted(out, key=str):
            found.extend(leaves(out[key], f"{path}[{key!r}]"))
        return found
    return [(path, out)]


def structure(out) -> object:
    """What must match exactly: containers, and for tensors their shape, dtype and device type."""
    if isinstance(out, (tuple, list)):
        return (type(out).__name__, [structure(o) for o in out])
    if isinstance(out, dict):
        return ("dict", {k: structure(v) for k, v in sorted(out.items(), key=lambda kv: str(kv[0]))})
    if isinstance(out, torch.Tensor):
        return ("tensor", tuple(out.shape), str(out.dtype), out.device.type)
    return (type(out).__name__,)


def describe_structure(s) -> str:
    if s[0] == "tensor":
        return f"tensor{list(s[1])} {s[2].replace('torch.', '')} on {s[3]}"
    if s[0] in ("tuple", "list"):
        return f"{s[0]} of {len(s[1])}"
    return s[0]


def float64_chunks(*tensors: torch.Tensor):
    """The tensors flattened, a float64 chunk at a time (a 6.4 GB output in float64 at once would not fit)."""
    flats = [t.reshape(-1) for t in tensors]
    n = flats[0].numel()
    for start in range(0, n, CHUNK):
        yield start, [f[start:start + CHUNK].double() for f in flats]


@dataclass
class TensorReport:
    """How one output tensor of the candidate compares."""

    path: str
    numel: int
    tolerance: float
    mismatched: int = 0               # elements outside KernelBench's allclose
    max_abs_diff: float = 0.0         # candidate vs reference
    worst_index: list[int] | None = None
    new_nonfinite: int = 0            # NaN/Inf in the candidate where the reference is finite
    e_ref: float | None = None        # max |reference - truth|
    e_cand: float | None = None       # max |candidate - truth|
    max_truth: float | None = None
    ref_accurate: bool = True         # the reference itself meets the tolerance against truth

    @property
    def kernelbench_pass(self) -> bool:
        return self.mismatched == 0

    @property
    def parity_bound(self) -> float | None:
        if self.e_ref is None:
            return None
        return max(PARITY_FACTOR * self.e_ref, PARITY_FLOOR * self.max_truth)

    @property
    def parity_pass(self) -> bool:
        return self.e_cand is None or self.e_cand <= self.parity_bound

    @property
    def close_enough(self) -> bool:
        # allclose decides unless the reference itself misses it against float64 (TF32 convolutions):
        # then precision parity alone decides
        return self.kernelbench_pass or not self.ref_accurate

    @property
    def passed(self) -> bool:
        return self.new_nonfinite == 0 and self.close_enough and self.parity_pass  # parity must hold in every case

    @property
    def precision_only(self) -> bool:
        """Failed on precision parity alone: finite where the reference is and as close to it as KernelBench asks,
        but further from float64 than the bound (a GEMM in 3xTF32 where eager's ran in fp32)."""
        return not self.passed and self.new_nonfinite == 0 and self.close_enough

    def to_dict(self) -> dict:
        return {
            "path": self.path, "numel": self.numel, "tolerance": self.tolerance,
            "kernelbench_pass": self.kernelbench_pass, "mismatched": self.mismatched,
            "max_abs_diff": self.max_abs_diff, "worst_index": self.worst_index,
            "new_nonfinite": self.new_nonfinite, "e_ref": self.e_ref, "e_cand": self.e_cand,
            "parity_bound": self.parity_bound, "parity_pass": self.parity_pass,
            "ref_accurate": self.ref_accurate, "passed": self.passed, "precision_only": self.precision_only,
        }

    def problems(self) -> list[str]:
        """Sentences saying what is wrong with this output (empty when it passes)."""
        said = []
        if self.new_nonfinite:
            said.append(f"{self.path}: {self.new_nonfinite:,} NaN/Inf values where the reference is finite "
                        f"(unwritten or poisoned memory?)")
        if not self.kernelbench_pass and self.ref_accurate:
            said.append(f"{self.path}: mismatch, {self.mismatched:,} of {self.numel:,} elements outside "
                        f"atol=rtol={self.tolerance:g} (max abs diff {self.max_abs_diff:.3g} at index "
                        f"{self.worst_index})")
        if not self.parity_pass and self.close_enough:  # else said above
            said.append(f"{self.path}: precision below the reference's: error against float64 "
                        f"{self.e_cand:.3g} > bound {self.parity_bound:.3g} (reference's own error "
                        f"{self.e_ref:.3g}; a lower-precision computation?)")
        return said


def compare_tensor(path: str, cand: torch.Tensor, ref: torch.Tensor, truth: torch.Tensor | None) -> TensorReport:
    tol = TOLERANCE.get(ref.dtype, 0.0)
    report = TensorReport(path, ref.numel(), tol)
    if ref.numel() == 0:
        return report
    if not ref.is_floating_point():
        diff = (cand != ref).reshape(-1)
        report.mismatched = int(diff.sum())
        if report.mismatched:
            first = int(diff.nonzero()[0])
            report.worst_index = list(torch.unravel_index(torch.tensor(first), ref.shape)) if ref.dim() else []
            report.worst_index = [int(i) for i in report.worst_index]
            report.max_abs_diff = float((cand.double() - ref.double()).abs().max())
        return report

    worst_flat, e_ref, e_cand, max_truth, ref_misses = -1, 0.0, 0.0, 0.0, 0
    tensors = (cand, ref) if truth is None else (cand, ref, truth)
    for start, chunk in float64_chunks(*tensors):
        c, r = chunk[0], chunk[1]
        finite_r = torch.isfinite(r)
        report.new_nonfinite += int((finite_r & ~torch.isfinite(c)).sum())
        close = torch.isclose(c, r, rtol=tol, atol=tol, equal_nan=True)
        report.mismatched += int((~close).sum())
        diff = torch.where(finite_r, (c - r).abs(), torch.zeros_like(r)).nan_to_num(nan=float("inf"))
        m, idx = diff.max(dim=0)
        if float(m) > report.max_abs_diff or worst_flat < 0:
            report.max_abs_diff, worst_flat = float(m), start + int(idx)
        if truth is not None:
            t = chunk[2]
            # Where the reference itself is not finite (fp32 overflow) there is no error to measure; the
            # candidate is held to the reference there by the allclose above.
            both = torch.isfinite(t) & finite_r
            zero = torch.zeros_like(t)
            e_ref = max(e_ref, float(torch.where(both, (r - t).abs(), zero).max()))
            e_cand = max(e_cand, float(torch.where(both, (c - t).abs(), zero).nan_to_num(nan=float("inf")).max()))
            max_truth = max(max_truth, float(torch.where(both, t.abs(), zero).max()))
            ref_misses += int((~torch.isclose(r, t, rtol=tol, atol=tol, equal_nan=True)).sum())
    if worst_flat >= 0 and ref.dim():
        report.worst_index = [int(i) for i in torch.unravel_index(torch.tensor(worst_flat), ref.shape)]
    if truth is not None:
        report.e_ref, report.e_cand, report.max_truth = e_ref, e_cand, max_truth
        report.ref_accurate = ref_misses == 0
    return report


@dataclass
class Comparison:
    """The candidate's outputs against the reference's for one call."""

    structure_ok: bool
    structure_problem: str = ""
    tensors: list[TensorReport] = field(default_factory=list)
    other_mismatches: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.structure_ok and not self.other_mismatches and all(t.passed for t in self.tensors)

    @property
    def kernelbench_pass(self) -> bool:
        return self.structure_ok and not self.other_mismatches and all(t.kernelbench_pass for t in self.tensors)

    @property
    def precision_only(self) -> bool:
        """Failed, and every failing output on precision parity alone (TensorReport.precision_only)."""
        return (not self.passed and self.structure_ok and not self.other_mismatches
                and all(t.passed or t.precision_only for t in self.tensors))

    def problems(self) -> list[str]:
        if not self.structure_ok:
            return [self.structure_problem]
        said = list(self.other_mismatches)
        for t in self.tensors:
            said.extend(t.problems())
        return said

    def to_dict(self) -> dict:
        return {"passed": self.passed, "kernelbench_pass": self.kernelbench_pass,
                "precision_only": self.precision_only, "structure_ok": self.structure_ok, "problems": self.problems(),
                "tensors": [t.to_dict() for t in self.tensors]}


def compare_outputs(cand, ref, truth=None) -> Comparison:
    """Structure first; then every tensor with KernelBench's allclose and float64 precision parity."""
    s_cand, s_ref = structure(cand), structure(ref)
    if s_cand != s_ref:
        where = _first_structure_difference(cand, ref)
        return Comparison(False, f"output structure differs: {where}")
    truth_leaves = dict(leaves(truth)) if truth is not None else {}
    result = Comparison(True)
    for (path, c), (_, r) in zip(leaves(cand), leaves(ref)):
        if isinstance(r, torch.Tensor):
            t = truth_leaves.get(path)
            t = t if isinstance(t, torch.Tensor) and t.shape == r.shape else None
            result.tensors.append(compare_tensor(path, c, r, t))
        elif c != r:
            result.other_mismatches.append(f"{path}: {c!r} where the reference returns {r!r}")
    return result


def _first_structure_difference(cand, ref) -> str:
    for (path, c), (_, r) in zip(leaves(cand), leaves(ref)):
        if structure(c) != structure(r):
            return f"{path} is {describe_structure(structure(c))}, reference has {describe_structure(structure(r))}"
    def shape(value) -> str:
        count = len(leaves(value))
        return f"{describe_structure(structure(value))} ({count} value{'' if count == 1 else 's'} in all)"
    return f"candidate returns {shape(cand)}, reference {shape(ref)}"


def same_bits(a, b) -> bool:
    """Bitwise equality of two values (NaN equals NaN with the same payload); used for inputs and determinism."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.is_floating_point() or a.is_complex():
            width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
            if a.is_complex():
                return same_bits(torch.view_as_real(a), torch.view_as_real(b))
            return torch.equal(a.contiguous().view(width), b.contiguous().view(width))
        return torch.equal(a, b)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same_bits(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True  # NaN arguments are unchanged arguments
    return type(a) is type(b) and a == b
