"""Copies of KernelBench-style problems with small sizes, for judging kfuse's plans on the CPU (C++ target) in seconds
rather than minutes: module-level size constants are cut (batch to 2, spatial sides to 12, GEMM sizes and feature
widths to 256; sequence lengths kept: blocked scans need them whole); every other line is copied as written. A heuristic on the constants' names
(KernelBench's own), so a problem whose sizes must agree in a way the names do not show (LayerNorm over a width
equal to the channels) can fail in the copy alone: check such a failure on the original sizes.

    python3 scripts/shrink_sizes.py SOURCE_DIR DEST_DIR [--batch-only | --odd-sides]

`--odd-sides` cuts nothing: it makes every even spatial side one shorter (512 -> 511), so that the problem's
tensors have odd pixel counts at its own sizes, for timing and checking the kernels' misaligned paths on the GPU (a
norm over channels of 511 x 511 pixels has no run of the inner dim a multiple of 4 long).
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

BATCH = {"batch_size"}
SIDES = {"height", "width", "depth", "D", "H", "W", "length", "L", "dim1", "dim2", "dim3", "width_in", "height_in"}
WIDTHS = {"in_features", "out_features", "input_size", "hidden_size", "output_size", "M", "N", "K", "dim"}
ASSIGNMENT = re.compile(r"^((?:[A-Za-z_]\w*\s*,\s*)*[A-Za-z_]\w*)((?:\s*=\s*[A-Za-z_]\w*)*)\s*=\s*([^#\n]+?)\s*(#.*)?$")


def _odd(names: list[str], value: int) -> int:
    """A spatial side made odd (one shorter where it is even); other sizes as written."""
    return value - 1 if SIDES & set(names) and value % 2 == 0 and value > 2 else value


def _cap(names: list[str], batch_only: bool) -> int | None:
    """The largest value these names may keep (None: keep as written)."""
    if BATCH & set(names):
        return 2
    if batch_only:
        return None
    if SIDES & set(names):
        return 12
    if WIDTHS & set(names):
        return 256
    return None


def _number(expression: str) -> int | None:
    """An integer literal or integer arithmetic on literals (`2048 * 2`), else None."""
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError:
        return None
    if not all(isinstance(n, (ast.Expression, ast.BinOp, ast.Constant, ast.operator)) for n in ast.walk(tree)):
        return None
    value = eval(compile(tree, "<size>", "eval"))  # (literals and operators only: checked above)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def shrink(text: str, batch_only: bool = False, odd_sides: bool = False) -> str:
    lines = []
    for line in text.splitlines(keepends=True):
        match = ASSIGNMENT.match(line.rstrip("\n")) if not line[:1].isspace() else None
        if match:
            targets = [n.strip() for n in match.group(1).split(",")]
            chained = [n.strip() for n in match.group(2).split("=") if n.strip()]
            values = [_number(v.strip()) for v in match.group(3).split(",")]
            if len(values) == len(targets) and all(v is not None for v in values):
                if odd_sides:
                    new = [_odd([t] + chained, v) for t, v in zip(targets, values)]
                else:
                    caps = [_cap([t] + chained, batch_only) for t in targets]
                    new = [v if c is None else min(v, c) for v, c in zip(values, caps)]
                if new != values:
                    names = " = ".join([", ".join(targets)] + chained)
                    line = f"{names} = {', '.join(str(v) for v in new)}\n"
        lines.append(line)
    return "".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("source", type=Path)
    parser.add_argument("dest", type=Path)
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--batch-only", action="store_true", help="cut only the batch (networks)")
    how.add_argument("--odd-sides", action="store_true", help="cut nothing; even spatial sides one shorter")
    args = parser.parse_args()
    args.dest.mkdir(parents=True, exist_ok=True)
    for problem in sorted(args.source.glob("*.py")):
        (args.dest / problem.name).write_text(shrink(problem.read_text(), args.batch_only, args.odd_sides))


if __name__ == "__main__":
    main()
