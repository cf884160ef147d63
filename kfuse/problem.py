"""What both sides of the judge do the same way with a problem: import it, build inputs and weights from a seed.

The trusted worker and the candidate's process each call these with the same seeds, so they hold bitwise equal
inputs and weights without sending them (torch's generators are deterministic for a seed on CPU and CUDA).
"""

from __future__ import annotations

import copy
import importlib
import os
import sys
import types
from pathlib import Path
from types import ModuleType

import torch

from kfuse.loader import import_from_source


class ProblemError(Exception):
    """The problem file misbehaves (the user's input, not the candidate's fault)."""


def describe_exception(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    first = next((line for line in text if line.strip()), "")
    return f"{type(err).__name__}: {first[:400]}" if first else type(err).__name__


def load_problem(path: str) -> tuple[ModuleType, list]:
    try:
        module = import_from_source(Path(path).read_text(encoding="utf-8-sig"), path, "kfuse_problem")
        init_inputs = module.get_init_inputs()
    except Exception as err:
        raise ProblemError(f"problem {path} failed to import: {describe_exception(err)}") from None
    if not isinstance(init_inputs, (list, tuple)):
        raise ProblemError(f"get_init_inputs() returned {type(init_inputs).__name__}, not a list")
    return module, list(init_inputs)


def make_inputs(problem: ModuleType, seed: int, device: torch.device) -> list:
    torch.manual_seed(seed)
    try:
        # Made directly on the target device: fresh random values either way, and no 6 GB host round trip.
        with torch.device(device):
            inputs = problem.get_inputs()
    except Exception as err:
        raise ProblemError(f"get_inputs() failed: {describe_exception(err)}") from None
    if not isinstance(inputs, (list, tuple)):
        raise ProblemError(f"get_inputs() returned {type(inputs).__name__}, not a list of tensors")
    bad = [type(v).__name__ for v in inputs if not isinstance(v, (torch.Tensor, int, float, bool))]
    if bad or not any(isinstance(v, torch.Tensor) for v in inputs):
        what = f"values of type {', '.join(sorted(set(bad)))}" if bad else "no tensor"
        raise ProblemError(f"get_inputs() must return a list of tensors (numbers allowed beside them); "
                           f"it returned {what}")
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in inputs]


def strided(inputs: list) -> list:
    """The same values in a non-contiguous layout: transposed storage for 2-D and up, every other element for 1-D."""
    out = []
    for v in inputs:
        if isinstance(v, torch.Tensor) and v.dim() >= 2:
            out.append(v.transpose(-1, -2).contiguous().transpose(-1, -2))
        elif isinstance(v, torch.Tensor) and v.dim() == 1 and v.numel() > 1:
            spread = torch.empty(2 * v.numel(), dtype=v.dtype, device=v.device)[::2]
            out.append(spread.copy_(v))
        else:
            out.append(v)
    return out


# Twice the batch only for inputs this small: twice a large problem's inputs, beside the judge's other copies and
# the float64 truth, would not fit where the problem's own sizes do.
DOUBLED_BATCH_MAX_BYTES = 256 << 20


def _shared_batch(inputs: list) -> int | None:
    """The first dim every tensor input shares (2 or more), or None."""
    tensors = [v for v in inputs if isinstance(v, torch.Tensor)]
    if not tensors or any(t.dim() == 0 for t in tensors) or len({t.shape[0] for t in tensors}) != 1:
        return None
    return tensors[0].shape[0] if tensors[0].shape[0] >= 2 else None


def resized_batch(inputs: list) -> list | None:
    """The inputs cut to another batch: every tensor input's first dim (which they must share, at 2 or more) to
    b // 2 + 1 rows (odd where b is a multiple of 4), or b - 1 below 4. None where the inputs share no such dim (a
    matmul's (M, K) and (K, N)): then no batch is known to change."""
    batch = _shared_batch(inputs)
    if batch is None:
        return None
    rows = batch // 2 + 1 if batch >= 4 else batch - 1
    return [v[:rows].clone() if isinstance(v, torch.Tensor) else v for v in inputs]


def doubled_batch(inputs: list, another_draw) -> list | None:
    """Twice the batch: each tensor input followed by its counterpart in `another_draw()` (the same inputs drawn
    again; called only when it will be used) along the first dim they share. None where they share none, or the
    result would pass DOUBLED_BATCH_MAX_BYTES."""
    if _shared_batch(inputs) is None:
        return None
    if 2 * sum(v.numel() * v.element_size() for v in inputs if isinstance(v, torch.Tensor)) > DOUBLED_BATCH_MAX_BYTES:
        return None
    return [torch.cat([v, w]) if isinstance(v, torch.Tensor) else v for v, w in zip(inputs, another_draw())]


def length_cuts(inputs: list) -> list[str]:
    """The judge's "length" layouts for these inputs, in the order to try them: each dim of 4 or more of the first
    tensor input past the batch (from the first where the inputs share none), last dim first, cut alone
    ("length<d>"); then, for a length that several of its dims share (a square image), all of them together
    ("length<d>all")."""
    tensors = [v for v in inputs if isinstance(v, torch.Tensor)]
    if not tensors:
        return []
    first = tensors[0]
    start = 1 if _shared_batch(inputs) is not None else 0
    dims = [d for d in range(first.dim() - 1, start - 1, -1) if first.shape[d] >= 4]
    together, seen = [], set()
    for d in dims:  # (one per length that several dims share: its last dim names it)
        if first.shape[d] not in seen and sum(first.shape[e] == first.shape[d] for e in dims) > 1:
            together.append(d)
        seen.add(first.shape[d])
    return [f"length{d}" for d in dims] + [f"length{d}all" for d in together]


def cut_length(inputs: list, layout: str) -> list | None:
    """The inputs laid out as `layout` (one of length_cuts) says: the first tensor input's dim d, of length l, cut to
    l // 2 + 1 (odd where l is a multiple of 4); alone, or with its other dims of that length ("all"); and every
    other input's dims of that length past the batch with it (a sequence length two inputs share moves together).
    None where the layout is not one of length_cuts."""
    if layout not in length_cuts(inputs):
        return None
    together = layout.endswith("all")
    dim = int(layout[len("length"):len(layout) - 3 if together else None])
    start = 1 if _shared_batch(inputs) is not None else 0
    length, out, first = None, [], True
    for v in inputs:
        if isinstance(v, torch.Tensor):
            length = v.shape[dim] if length is None else length
            dims = [dim] if first and not together else [d for d in range(start, v.dim()) if v.shape[d] == length]
            for d in dims:
                v = v.narrow(d, 0, length // 2 + 1)
            v = v.contiguous()
            first = False
        out.append(v)
    return out


def judge_inputs(problem: ModuleType, seed: int, device: torch.device, layout: str = "contiguous") -> list | None:
    """The judge's inputs for a call, made alike in the judge's process and the candidate's: as get_inputs() makes
    them ("contiguous"), "strided", "resized", "doubled" or one of length_cuts (cut_length; None: no batch or length
    to change)."""
    made = make_inputs(problem, seed, device)
    if layout == "strided":
        return strided(made)
    if layout == "resized":
        return resized_batch(made)
    if layout == "doubled":
        return doubled_batch(made, lambda: make_inputs(problem, seed + 1, device))
    if layout.startswith("length"):
        return cut_length(made, layout)
    return made


def refill(inputs: list, problem: ModuleType, seed: int, device: torch.device) -> None:
    """New values into the same tensor objects (a cache keyed on pointers or versions must miss). An expanded input
    (stride 0 along a dim: many elements, one memory location) is written through its first index along such dims."""
    for old, new in zip(inputs, make_inputs(problem, seed, device)):
        if isinstance(old, torch.Tensor):
            one = tuple(slice(0, 1) if step == 0 and size > 1 else slice(None)
                        for step, size in zip(old.stride(), old.shape))
            old[one].copy_(new[one])


def build_reference(problem: ModuleType, init_inputs: list, seed: int, device: torch.device) -> torch.nn.Module:
    torch.manual_seed(seed)
    try:
        return problem.Model(*init_inputs).to(device)
    except Exception as err:
        raise ProblemError(f"the problem's Model could not be built: {describe_exception(err)}") from None


def copy_model(model: torch.nn.Module) -> torch.nn.Module:
    """A deep copy whose functions kept on its modules call the copy's layers, not the original's. copy.deepcopy
    copies a function by reference, closure and all: KernelBench's MinGPT block keeps `self.mlpf = lambda x:
    m.c_proj(m.act(m.c_fc(x)))` over its own ModuleDict m, so a copy's forward ran the original's layers (the float64
    truth met float32 weights and failed, which left the block's precision parity unchecked; a probe's call would
    have moved the original's running statistics)."""
    memo: dict[int, object] = {}
    copied = copy.deepcopy(model, memo)
    for module in copied.modules():
        for name, value in list(vars(module).items()):
            if isinstance(value, types.FunctionType) and value.__closure__:
                setattr(module, name, _closure_rebound(value, memo))
    return copied


def _closure_rebound(function: types.FunctionType, memo: dict[int, object]) -> types.FunctionType:
    """`function` with each object its closure holds replaced by that object's copy in `memo`, where it has one."""
    cells = []
    for cell in function.__closure__:
        try:
            held = cell.cell_contents
        except ValueError:  # (an empty cell: a name bound after the function was made)
            cells.append(cell)
            continue
        cells.append(types.CellType(memo.get(id(held), held)))
    rebound = types.FunctionType(function.__code__, function.__globals__, function.__name__, function.__defaults__,
                                 tuple(cells))
    rebound.__kwdefaults__ = function.__kwdefaults__
    return rebound


def weight_scales(model: torch.nn.Module) -> dict[str, tuple[float, bool]]:
    """Each floating parameter's and buffer's scale (max |value|) and sign (non-negative or not), read right after
    construction: both sides of the judge re-randomise from these, whatever the buffers went through since."""
    scales = {}
    with torch.no_grad():
        for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
            if tensor.is_floating_point() and tensor.numel():
                scales[name] = (float(tensor.abs().max()) or 1.0, float(tensor.min()) >= 0)
    return scales


def rerandomise(model: torch.nn.Module, seed: int, scales: dict[str, tuple[float, bool]]) -> None:
    """New values for every floating parameter and buffer, uniform at their scale from construction.

    Re-seeding would give the same values back; this catches anything derived from the weights at init.
    Non-negative tensors (running variances) stay non-negative. Drawn in place on the tensor's own device, from a
    generator of that device seeded alike on both sides: a 4 GiB weight drawn on the host in float64 took tens of
    seconds per trial and 8 GiB of host memory."""
    generators: dict[torch.device, torch.Generator] = {}
    named = dict(list(model.named_parameters()) + list(model.named_buffers()))
    with torch.no_grad():
        for name, (scale, non_negative) in sorted(scales.items()):
            tensor = named[name]
            if tensor.device not in generators:
                generators[tensor.device] = torch.Generator(device=tensor.device).manual_seed(seed)
            tensor.uniform_(0.0 if non_negative else -scale, scale, generator=generators[tensor.device])


def apply_precision(precision: str) -> None:
    """The math PyTorch may use for this run. fp32: PyTorch's defaults (TF32 off for matmuls; cuDNN may pick TF32
    convolutions). tf32: TF32 allowed for matmuls and convolutions alike, for the reference and the candidate."""
    if precision == "tf32":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def release_cached_memory(device: torch.device) -> None:
    """Hand cached blocks back to the driver: the judge's two processes share one GPU, and a 6 GB problem needs
    what the other process cached."""
    if device.type == "cuda":
        torch.cuda.empty_cache()


# After the flush the GPU idles this many cycles (~0.1 ms) before the timed call's start event, so the host has
# queued the call by then and the events time the GPU's work, not how fast the process got to the launch: without
# it a + b (a 1.4 us kernel) was timed at 20-50 us, differently in each process, eager and candidate alike (the
# flush alone, ~33 us on an H100, was shorter than the host's path to the launch). Host work of each contender up
# to the head start overlaps it uncounted; work that waits on the GPU cannot (it waits for the head start too).
HEAD_START_CYCLES = 200_000


class L2Flush:
    """Writes a buffer twice the L2's size before a timed CUDA call, so nothing the last call left survives, then
    holds the GPU for a head start (HEAD_START_CYCLES).

    It also holds the pair of CUDA events that time_one_call records, made once: torch creates an event on its
    first record, and a cudaEventCreate inside the timed region was timed with the call (launch-bound calls)."""

    def __init__(self, device: torch.device):
        self.buffer = None
        self.events = None
        if device.type == "cuda":
            l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 64 << 20
            self.buffer = torch.empty(2 * l2 // 4, dtype=torch.float32, device=device)
            self.events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))

    def __call__(self) -> None:
        if self.buffer is not None:
            self.buffer.fill_(1.0)
            torch.cuda._sleep(HEAD_START_CYCLES)


def time_one_call(fn, device: torch.device, flush: L2Flush):
    """(milliseconds, result) of one call: CUDA events on the current stream, then a device-wide sync."""
    import time

    flush()
    if device.type == "cuda":
        start, end = flush.events
        start.record()
        result = fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end), result
    began = time.perf_counter()
    result = fn()
    return (time.perf_counter() - began) * 1e3, result


# `kfuse optimize --model MODULE:FACTORY`: the problem file written for a model of the user's own package.
FACTORY_PROBLEM = '''"""{spec} as a KernelBench-style problem, written by `kfuse optimize --model`: Model holds the model
{factory}() makes, and get_inputs() calls {factory}() for its example inputs (fresh ones under the caller's seed)."""
import torch
from {module} import {factory}


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.model = {factory}()[0]

    def forward(self, {args}):
        return self.model({args})


def get_inputs():
    return list({factory}()[1])


def get_init_inputs():
    return []
'''


def write_factory_problem(spec: str, path: Path) -> Path:
    """A problem file for MODULE:FACTORY, a function of the user's own package returning (model, example_inputs).
    The module is imported from the current folder or the installed packages, here and in the judge's processes.
    ProblemError with one line for a bad spec or a factory that fails or returns something else."""
    module_name, _, factory_name = spec.partition(":")
    if not module_name or not factory_name.isidentifier():
        raise ProblemError(f"--model must be MODULE:FACTORY (a function returning (model, example_inputs)), "
                           f"got {spec!r}")
    if os.getcwd() not in sys.path:  # as `python -m` would have it: the user's package beside them
        sys.path.insert(0, os.getcwd())
    try:
        factory = getattr(importlib.import_module(module_name), factory_name)
        made = factory()
    except Exception as err:
        raise ProblemError(f"--model {spec}: {describe_exception(err)}") from None
    if not (isinstance(made, (tuple, list)) and len(made) == 2 and isinstance(made[0], torch.nn.Module)
            and isinstance(made[1], (tuple, list))):
        raise ProblemError(f"--model {spec}: the factory must return (model, example_inputs), a torch.nn.Module "
                           f"and a list of its forward's arguments")
    args = ", ".join(f"x{i}" for i in range(len(made[1])))
    path.write_text(FACTORY_PROBLEM.format(spec=spec, module=module_name, factory=factory_name, args=args))
    return path
