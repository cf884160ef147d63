"""`kfuse tune`: per problem, the planner's frozen rules checked against their alternatives on the device.

For each entry of kfuse.kernels.choices.ALTERNATIVES the problem is optimized into a file of its own; files with the
same kernels (the same extension: its name carries a hash of the sources) are one variant, so a problem is judged once
per plan that differs (a GEMM problem: kfuse's template, its mma.sync-only form and cuBLAS with the epilogue
after it; a convolution problem: cuDNN NCHW or channels-last, kfuse's kernels). Every variant is judged with the
`kfuse check` protocol (correctness, then timing); the fastest correct one is written to the output, with the
table of what was measured in its docstring. The choice is frozen there: nothing is tuned at import, and the file
runs correctly, if not fastest, on another GPU.

A variant other than the defaults wins only when it is faster by more than `margin` (2%: the spread of one
problem's median between judge runs on the H100): within the noise the frozen rule stands.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from kfuse.kernels import choices
from kfuse.errors import UsageError
from kfuse.judge import zygote
from kfuse.judge.verdict import CheckOptions, check
from kfuse.loader import check_problem_source
from kfuse.compiler.optimize import optimize

MARGIN = 0.02


@dataclass
class Variant:
    choices: list[choices.Choices]          # every alternative that gave this file (the first names it)
    path: Path
    kernels: list[dict]
    status: str | None = None
    ms: float | None = None                 # the candidate's median time in the judge
    reasons: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        same = len(self.choices) - 1
        return self.choices[0].label() + (f" (= {same} other choice{'s' if same > 1 else ''}: same file)" if same else "")

    def to_dict(self) -> dict:
        return {"choices": [c.label() for c in self.choices], "file": str(self.path), "status": self.status,
                "ms": self.ms, "reasons": self.reasons, "kernels": [k["name"] for k in self.kernels]}


@dataclass
class Tuned:
    output: Path
    variants: list[Variant]
    chosen: Variant | None

    def to_dict(self) -> dict:
        return {"output": str(self.output), "chosen": self.chosen.label if self.chosen else None,
                "variants": [v.to_dict() for v in self.variants]}


def _extension(path: Path) -> str:
    """The extension's name: the same name, the same kernel sources."""
    found = re.search(r'load_inline\(\n    name="(kfuse_\w+)"', path.read_text())
    return found.group(1) if found else str(path)


def emit_variants(problem: Path, workdir: Path, device: str, precision: str) -> list[Variant]:
    """One file per distinct plan among the alternatives (those kfuse cannot emit at all are skipped)."""
    workdir.mkdir(parents=True, exist_ok=True)
    variants: dict[str, Variant] = {}
    for index, alternative in enumerate(choices.ALTERNATIVES):
        path = workdir / f"{problem.stem}_variant{index}.py"
        try:
            with choices.using(alternative):
                result = optimize(problem, path, device, precision)
        except UsageError:
            continue  # e.g. nothing left to fuse once the library keeps the GEMM
        key = _extension(path)
        if key in variants:
            variants[key].choices.append(alternative)
            path.unlink()
        else:
            variants[key] = Variant([alternative], path, result.kernels)
    return list(variants.values())


def pick(variants: list[Variant], margin: float = MARGIN) -> Variant | None:
    """The fastest correct variant; the defaults' variant unless another beats it by more than `margin`."""
    correct = [v for v in variants if v.status == "correct" and v.ms is not None]
    if not correct:
        return None
    default = next((v for v in correct if choices.Choices() in v.choices), None)
    best = min(correct, key=lambda v: v.ms)
    if default is not None and best.ms >= default.ms * (1 - margin):
        return default
    return best


def _annotate(text: str, variants: list[Variant], chosen: Variant, device_name: str) -> str:
    """The tuning table, appended to the file's docstring (the first triple-quoted string)."""
    rows = []
    for v in variants:
        time = f"{v.ms:.4g} ms" if v.ms is not None else (v.status or "not judged")
        mark = "  <- chosen" if v is chosen else ""
        rows.append(f"  {time:>12}  {v.label}{mark}")
    note = (f"Tuned by kfuse tune on {device_name}: the plans below judged, the fastest correct one kept (frozen "
            f"here: another device runs it correctly too, if not fastest):\n" + "\n".join(rows) + "\n")
    end = text.index('"""', 3)
    return text[:end] + note + text[end:]


def tune(problem: Path, output: Path, options: CheckOptions, precision: str = "fp32",
         margin: float = MARGIN, on_variant=lambda variant: None) -> Tuned:
    """Emit the variants beside `output` (folder <output stem>_variants), judge each, write the chosen one."""
    check_problem_source(problem)  # a missing or broken problem file is its own error, not "no variant"
    workdir = output.parent / f"{output.stem}_variants"
    device_name = "the CPU"
    with zygote.serving():  # each variant's judge forks its worker from one imported torch (starting meanwhile)
        variants = emit_variants(problem, workdir, options.device, precision)
        if not variants:
            raise UsageError(f"kfuse has no kernel for anything in {problem.name} under any of its choices")
        for variant in variants:
            verdict = check(problem, variant.path, options)
            variant.status, variant.reasons = verdict["status"], list(verdict.get("reasons", []))
            stats = (verdict.get("timing") or {}).get("stats") or {}
            variant.ms = stats.get("candidate", {}).get("median_ms")
            device_name = (verdict.get("environment") or {}).get("name") or device_name
            on_variant(variant)
    chosen = pick(variants, margin)
    if chosen is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(_annotate(chosen.path.read_text(), variants, chosen, device_name))
    return Tuned(output, variants, chosen)


def remove_variants(output: Path) -> None:
    shutil.rmtree(output.parent / f"{output.stem}_variants", ignore_errors=True)
