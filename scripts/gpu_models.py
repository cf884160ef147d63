"""Issue 29's real models through `torch.compile(model, backend="kfuse")`, against eager and Inductor.

Models with random weights (no downloads): torchvision's ResNet-50, MobileNetV3-Large and ViT-B/16 on 224x224
images, and GPT-2 small (transformers, built from its config) returning its LM head's logits for 128 tokens. Each in
eval mode under torch.no_grad(), fp32, per batch size: eager's output and time, then each backend's compile time
(the first call), its largest difference from eager's output, and its time. The numbers that decide "correct" are
both written: within 1e-4 of eager (KernelBench's rule), and no further from eager than Inductor's own output.

Timing: WARMUP calls, then ROUNDS calls each between CUDA events, median; the backends of one model are timed one
after another in the same process. A line per (model, batch) goes to OUT/models.jsonl as soon as it is done, so a
device call that ends early keeps what it finished; a rerun skips the pairs already there.

    python3 scripts/gpu_models.py --out DIR [--models resnet50,gpt2] [--batches 1,32] [--backends inductor,kfuse]

max-autotune-no-cudagraphs compiles for minutes per pair (ResNet-50 at batch 1: 479 s on an H100): give each pair a
device call of its own (--models M --batches B).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # kfuse from this checkout, installed or not

WARMUP, ROUNDS = 3, 20
MODELS = ("resnet50", "mobilenet_v3_large", "vit_b_16", "gpt2")


def make(name: str, batch: int):
    """(model on CUDA in eval mode, its inputs), seeded."""
    torch.manual_seed(0)
    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        class Logits(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lm = GPT2LMHeadModel(GPT2Config())

            def forward(self, ids):
                return self.lm(input_ids=ids, use_cache=False).logits

        model = Logits()
        inputs = (torch.randint(0, model.lm.config.vocab_size, (batch, 128)),)
    else:
        import torchvision

        model = getattr(torchvision.models, name)(weights=None)
        inputs = (torch.randn(batch, 3, 224, 224),)
    return model.eval().cuda(), tuple(t.cuda() for t in inputs)


def timed(fn, inputs) -> float:
    """Median milliseconds of one call."""
    for _ in range(WARMUP):
        fn(*inputs)
    times = []
    for _ in range(ROUNDS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*inputs)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


class FallbackLog(logging.Handler):
    """Counts the graphs kfuse left to another backend, with their reasons."""

    def __init__(self):
        super().__init__()
        self.reasons = []

    def emit(self, record):
        self.reasons.append(record.getMessage())


def run_pair(name: str, batch: int, backends: list[str]) -> dict:
    model, inputs = make(name, batch)
    row = {"model": name, "batch": batch, "device": torch.cuda.get_device_name(), "torch": torch.__version__}
    with torch.no_grad():
        eager = model(*inputs).float()
        row["eager_ms"] = timed(model, inputs)
        for backend in backends:
            torch._dynamo.reset()
            handler = FallbackLog()
            logging.getLogger("kfuse.backend").addHandler(handler)
            entry = {}
            try:
                if backend.startswith("kfuse"):  # the entry point's callable itself (an editable install may lack it)
                    from kfuse.backend import kfuse
                    os.environ["KFUSE_CUDA_GRAPHS"] = "0" if backend == "kfuse-no-graphs" else "1"
                    compiled = torch.compile(model, backend=kfuse)
                else:
                    compiled = torch.compile(model, mode=None if backend == "inductor" else backend)
                begin = time.perf_counter()
                out = compiled(*inputs).float()
                torch.cuda.synchronize()
                entry["compile_s"] = round(time.perf_counter() - begin, 2)
                entry["max_diff"] = (out - eager).abs().max().item()
                entry["allclose_1e-4"] = bool(torch.allclose(out, eager, atol=1e-4, rtol=1e-4))
                entry["ms"] = timed(compiled, inputs)
                entry["vs_eager"] = round(row["eager_ms"] / entry["ms"], 3)
                # fresh inputs after the timed calls: a replayed graph must not return what it computed before
                fresh = tuple(torch.randn_like(t) if t.is_floating_point() else torch.randint_like(t, 0, 50257)
                              for t in inputs)
                entry["fresh_max_diff"] = (compiled(*fresh).float() - model(*fresh).float()).abs().max().item()
            except Exception as err:  # a backend that fails is a result too
                entry["error"] = f"{type(err).__name__}: {str(err).strip().splitlines()[0][:300] if str(err).strip() else ''}"
            finally:
                logging.getLogger("kfuse.backend").removeHandler(handler)
            if backend.startswith("kfuse"):
                entry["fallbacks"] = handler.reasons[:20]
            row[backend] = entry
            print(f"{name} batch {batch} {backend}: {entry}", flush=True)
    for variant in ("kfuse", "kfuse-no-graphs"):
        if variant in row and "inductor" in row and "max_diff" in row[variant] and "max_diff" in row["inductor"]:
            k, i = row[variant], row["inductor"]
            k["no_further_than_inductor"] = k["max_diff"] <= max(i["max_diff"], 1e-4)
            if "ms" in k and "ms" in i:
                k["vs_inductor"] = round(i["ms"] / k["ms"], 3)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--batches", default="1,32")
    parser.add_argument("--backends", default="inductor,kfuse",
                        help="comma-separated: inductor (default mode), max-autotune-no-cudagraphs, "
                             "reduce-overhead, kfuse, kfuse-no-graphs (KFUSE_CUDA_GRAPHS=0)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    args.out.mkdir(parents=True, exist_ok=True)
    lines = args.out / "models.jsonl"
    done = {(r["model"], r["batch"]) for r in map(json.loads, lines.read_text().splitlines())} if lines.exists() else set()
    for name in args.models.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            if (name, batch) in done:
                continue
            row = run_pair(name, batch, args.backends.split(","))
            with lines.open("a") as f:
                f.write(json.dumps(row) + "\n")
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
