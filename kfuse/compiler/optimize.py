"""`kfuse optimize`: problem file in, ModelNew file out, then the judge's verdict on it.

load (import the problem) -> capture (torch.export) -> plan (group into kernels) -> codegen (CUDA C++ or C++)
-> emit (the ModelNew file) -> check (the same protocol as `kfuse check`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from kfuse.compiler.capture import CaptureError, capture
from kfuse.compiler.codegen import generate
from kfuse.compiler.sizes import follow_the_sizes
from kfuse.compiler.emit import EmitError, copied_bytes, emit
from kfuse.compiler.graphed import launches_per_forward, use_graph
from kfuse.kernels import choices
from kfuse.kernels.eager_precision import runs_tf32
from kfuse.errors import UsageError
from kfuse.loader import check_problem_source
from kfuse import PRECISIONS
from kfuse.compiler.plan import add_convolution_epilogues, plan
from kfuse.problem import ProblemError, build_reference, load_problem, make_inputs


@dataclass
class Optimized:
    path: Path
    target: str
    kernels: list[dict]
    library_calls: list[str]
    unfused: list[dict]
    stages_s: dict[str, float] = field(default_factory=dict)  # load, capture, plan, codegen (seconds)
    launches: int = 0          # kernels and library calls per forward
    cuda_graph: bool = False   # ... launched as one CUDA graph

    def to_dict(self) -> dict:
        return {"output": str(self.path), "target": self.target, "kernels": self.kernels,
                "library_calls": self.library_calls, "unfused": self.unfused, "stages_s": self.stages_s,
                "launches": self.launches, "cuda_graph": self.cuda_graph}


class Stopwatch:
    """Seconds per named stage, each stage ending where the next begins."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self._stage, self._began = None, time.perf_counter()

    def stage(self, name: str | None) -> None:
        now = time.perf_counter()
        if self._stage is not None:
            self.seconds[self._stage] = round(self.seconds.get(self._stage, 0.0) + now - self._began, 3)
        self._stage, self._began = name, now


def optimize(problem_path: Path, output: Path, device: str, precision: str = "fp32") -> Optimized:
    """Write the ModelNew file for `problem_path` to `output`. UsageError for anything kfuse cannot do.

    precision: fp32 keeps PyTorch's default math; tf32 also lets convolutions run channels-last in TF32 (judge
    such a file with the same precision: the reference then runs with TF32 allowed too)."""
    if precision not in PRECISIONS:
        raise UsageError(f"--precision must be one of {', '.join(PRECISIONS)} (got {precision!r})")
    check_problem_source(problem_path)
    clock = Stopwatch()
    clock.stage("load")
    try:
        problem, init_inputs = load_problem(str(problem_path))
        # Captured on the meta device: the graph is the same on every device, a 6 GB input costs nothing, and
        # every size is read again at run time by the generated code.
        meta = torch.device("meta")
        model = build_reference(problem, init_inputs, seed=0, device=meta)
        example = make_inputs(problem, seed=0, device=meta)
    except ProblemError as err:
        raise UsageError(str(err)) from None
    clock.stage("capture")
    try:
        captured = capture(model, example)
    except CaptureError as err:
        raise UsageError(str(err)) from None
    follow_the_sizes(captured, problem, init_inputs, example)
    clock.stage("plan")
    add_convolution_epilogues(captured, device, precision)
    steps = plan(captured.graph, device, precision)
    if not steps.has_kernels and captured.dropped:
        # Dropping the unused results left eager's calls alone (36_LSTMHn: the Linear on its last step is never
        # returned, and eager's cuDNN LSTM runs TF32): the file computes them as the model does instead, and its
        # docstring says so.
        unused = captured.dropped
        model = build_reference(problem, init_inputs, seed=0, device=meta)  # (capture turns carried state into buffers)
        captured = capture(model, example, drop_unused=False)
        captured.kept_unused = unused
        follow_the_sizes(captured, problem, init_inputs, example, drop_unused=False)
        add_convolution_epilogues(captured, device, precision)
        steps = plan(captured.graph, device, precision)
    if not steps.has_kernels:
        tf32 = sorted({c.op for c in steps.library_calls if c.eager_bits or runs_tf32(c.node)})
        if tf32:
            raise UsageError(f"kfuse has no kernel for anything in {problem_path.name} that may leave eager's calls: "
                             f"eager runs {', '.join(tf32)} in TF32 on this GPU, and no kfuse kernel lands within "
                             f"KernelBench's 1e-4 of that; a file of eager's library calls alone would not be a "
                             f"custom kernel")
        ops = ", ".join(sorted({c.op for c in steps.library_calls})) or "none"
        others = sorted({str(i.dtype).replace("torch.", "") for i in captured.inputs
                         if i.dtype is not None and i.dtype.is_floating_point and i.dtype != torch.float32})
        why = f" (kfuse's kernels compute in float32; this model's tensors are {', '.join(others)})" if others else ""
        raise UsageError(f"kfuse has no kernel for anything in {problem_path.name} yet (ops: {ops}){why}; a file of "
                         f"library calls alone would not be a custom kernel")
    clock.stage("codegen")
    try:
        sources = generate(captured, steps, device)
        launches = launches_per_forward(sources)
        graphed = use_graph(choices.current().cuda_graph, device, captured.graph, launches,
                            copied_bytes(captured, example))
        text = emit(problem_path, captured, sources, device, example, precision, launches if graphed else None,
                    init_inputs)
    except (EmitError, NotImplementedError) as err:
        raise UsageError(f"cannot emit a ModelNew for {problem_path.name}: {err}") from None
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text)
    clock.stage(None)
    return Optimized(output, device, sources.kernels, sources.library_calls, sources.unfused, clock.seconds,
                     launches, graphed)


