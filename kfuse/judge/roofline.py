"""The roofline floor: the least time a problem can take on this device (DESIGN.md §4 and §6).

bytes: each input, parameter and output moved once; FLOPs: counted by torch's FlopCounterMode on the reference
(matmuls and convolutions; pointwise work is bandwidth-bound anyway). The device's ceilings (copy bandwidth and
matmul rates) are measured once per device and torch version and cached in ~/.cache/kfuse/ceilings.json.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from kfuse.judge.compare import leaves
from kfuse.problem import L2Flush, time_one_call
from kfuse.judge.timing import TimingPlan, time_interleaved

CEILINGS_VERSION = "ceilings/2"  # bump when the measurement changes, so cached values are measured again
CACHE = Path(os.environ.get("KFUSE_CACHE", Path.home() / ".cache" / "kfuse")) / "ceilings.json"


def count_bytes(model: torch.nn.Module, inputs: list, outputs) -> int:
    tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
    tensors += list(model.parameters()) + list(model.buffers())
    tensors += [t for _, t in leaves(outputs) if isinstance(t, torch.Tensor)]
    return sum(t.numel() * t.element_size() for t in tensors)


def count_flops(model: torch.nn.Module, inputs: list) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(*inputs)
    return int(counter.get_total_flops())


def count_call(problem, init_inputs: list, seed: int, model: torch.nn.Module, inputs: list) -> dict:
    """Bytes a call must move and FLOPs it must do, with its output's dtype: counted on the meta device (shapes
    alone), or on `model` and `inputs` themselves where the Model does not run on meta (data-dependent ops)."""
    try:
        with torch.device("meta"):
            torch.manual_seed(seed)
            counted = problem.Model(*init_inputs)
        args = [t.to("meta") if isinstance(t, torch.Tensor) else t for t in inputs]
        with torch.no_grad():
            out = counted(*args)
        flops = count_flops(counted, args)
    except Exception:  # noqa: BLE001 - any failure on meta: count on the real model instead
        counted, args = model, inputs
        with torch.no_grad():
            out = model(*inputs)
        flops = count_flops(model, inputs)
    dtype = next((t.dtype for _, t in leaves(out) if isinstance(t, torch.Tensor)), torch.float32)
    return {"bytes": count_bytes(counted, args, out), "flops": flops, "dtype": str(dtype).removeprefix("torch.")}


def device_key(device: torch.device) -> str:
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu-{os.cpu_count()}cores"
    return f"{name} | torch {torch.__version__} | {CEILINGS_VERSION}"


def measure_ceilings(device: torch.device) -> dict:
    """Copy bandwidth (bytes read + written per second) and matmul rates (FLOP/s) on this device."""
    cuda = device.type == "cuda"
    n = (1 << 29) if cuda else (1 << 24)  # 2 GiB of fp32 on the GPU, 64 MiB on the CPU
    src = torch.rand(n, device=device)
    dst = torch.empty_like(src)
    size = 8192 if cuda else 1024
    a = torch.rand(size, size, device=device)
    b = torch.rand(size, size, device=device)
    plan = TimingPlan(min_trials=10, min_seconds=0.2, max_wall_seconds=10)
    flush = L2Flush(device)

    def timed(fn):
        fn()  # warm-up
        return lambda _round: time_one_call(fn, device, flush)[0]

    def matmul_with_tf32(allow: bool):
        def run():
            old = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = allow
            torch.mm(a, b)
            torch.backends.cuda.matmul.allow_tf32 = old
        return run

    contenders = {"copy": timed(lambda: dst.copy_(src)), "fp32": timed(matmul_with_tf32(False))}
    if cuda:
        ah, bh = a.bfloat16(), b.bfloat16()
        contenders["tf32"] = timed(matmul_with_tf32(True))
        contenders["bf16"] = timed(lambda: torch.mm(ah, bh))
    times = time_interleaved(contenders, plan)
    flops = 2 * size ** 3
    # Ceilings from the fastest trial: the floor must stay below what a good kernel reaches.
    ceilings = {"copy_bytes_per_s": 2 * n * 4 / (times["copy"]["min_ms"] / 1e3)}
    for unit in ("fp32", "tf32", "bf16"):
        if unit in times:
            ceilings[f"{unit}_flop_per_s"] = flops / (times[unit]["min_ms"] / 1e3)
    return ceilings


def device_ceilings(device: torch.device) -> dict:
    key = device_key(device)
    try:
        cached = json.loads(CACHE.read_text()) if CACHE.exists() else {}
    except json.JSONDecodeError:
        cached = {}
    if key not in cached:
        cached[key] = measure_ceilings(device)
        CACHE.parent.mkdir(parents=True, exist_ok=True)
        partial = CACHE.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(cached, indent=2))
        os.replace(partial, CACHE)  # two checks at once never leave a half-written file
    return {"device": key, **cached[key]}


def floor(bytes_moved: int, flops: int, ceilings: dict, dtype: str) -> dict:
    """The floor in ms, with the fastest unit the precision policy allows doing the arithmetic.

    fp32 problems may legally run matmuls as 3xTF32 and convolutions in TF32, so the TF32 rate bounds them; it
    is a floor, so the generous ceiling is the right one.
    """
    unit = "bf16" if dtype in ("float16", "bfloat16") else "tf32"
    rate = ceilings.get(f"{unit}_flop_per_s") or ceilings.get("fp32_flop_per_s")
    bytes_ms = bytes_moved / ceilings["copy_bytes_per_s"] * 1e3
    flops_ms = flops / rate * 1e3 if rate else 0.0
    return {"bytes": bytes_moved, "flops": flops, "bytes_ms": bytes_ms, "flops_ms": flops_ms,
            "floor_ms": max(bytes_ms, flops_ms), "bound": "memory" if bytes_ms >= flops_ms else "compute"}
