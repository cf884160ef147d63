"""The judge's worker: builds and runs one candidate in its own process, reporting as it goes.

Run as `python -m kfuse.worker SPEC.json EVENTS.jsonl`. Every step appends one JSON line to EVENTS (flushed), so
the parent knows where a worker was when it died; the last line is the outcome. The parent owns the timeout and
the verdict's wording; this file owns the protocol of DESIGN.md §4: fresh and re-randomised weights, fresh seeds
and inputs, an in-place refill, NaN-poisoned memory, input-mutation, precision-parity and determinism checks, then
interleaved timing against eager and torch.compile.
"""

from __future__ import annotations

import copy
import inspect
import json
import sys
import time
import traceback
from pathlib import Path

import torch

from kfuse import roofline
from kfuse.compare import compare_outputs, leaves, same_bits
from kfuse.loader import import_from_source
from kfuse.timing import TimingPlan, time_interleaved


FLOOR_MARGIN = 0.9


class Outcome(Exception):
    """Ends the run with a status (or a usage error) and reasons."""

    def __init__(self, status: str, *reasons: str, **details):
        super().__init__(reasons[0] if reasons else status)
        self.status, self.reasons, self.details = status, list(reasons), details


class Events:
    def __init__(self, path: str):
        self.file = open(path, "a", buffering=1)

    def emit(self, event: str, **fields) -> None:
        self.file.write(json.dumps({"event": event, "t": time.time(), **fields}, default=str) + "\n")
        self.file.flush()

    def stage(self, name: str) -> None:
        self.emit("stage", stage=name)


TRIAL_KINDS = {
    "determinism": "fresh inputs, run twice",
    "reweighted": "weights re-randomised after construction",
    "refill": "same input tensors refilled in place",
    "fresh": "fresh inputs",
}


def trial_plan(n: int) -> list[str]:
    """What each trial checks besides fresh inputs: bitwise determinism, weights re-randomised after
    construction (twice), and the same input tensors refilled in place."""
    base = ["determinism", "reweighted", "refill", "reweighted"]
    return (base + ["fresh"] * n)[:max(n, len(base))]


def describe_exception(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    first = next((line for line in text if line.strip()), "")
    return f"{type(err).__name__}: {first[:400]}" if first else type(err).__name__


def classify_runtime_error(err: BaseException, who: str) -> Outcome:
    message = describe_exception(err)
    if isinstance(err, torch.cuda.OutOfMemoryError) or isinstance(err, MemoryError):
        return Outcome("crashed", f"{who} ran out of memory ({message})")
    if "CUDA error" in message or "illegal" in message.lower() or type(err).__name__ == "AcceleratorError":
        return Outcome("crashed", f"{who} hit a CUDA error: {message}")
    return Outcome("crashed", f"{who} raised {message}")


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def clone_value(v):
    return v.clone() if isinstance(v, torch.Tensor) else copy.deepcopy(v)


def upcast(v):
    if isinstance(v, torch.Tensor) and v.is_floating_point():
        return v.detach().to(torch.float64)
    return clone_value(v)


class Judgement:
    def __init__(self, spec: dict, events: Events):
        self.spec = spec
        self.events = events
        self.device = torch.device(spec["device"])
        self.report: dict = {"trials": []}
        self.poison_sizes: set[int] = set()

    # -- setup ---------------------------------------------------------------------------------------------
    def load_problem(self):
        self.events.stage("loading the problem")
        try:
            self.problem = import_from_source(Path(self.spec["problem"]).read_text(encoding="utf-8-sig"),
                                              self.spec["problem"], "kfuse_problem")
            init_inputs = self.problem.get_init_inputs()
        except Exception as err:  # the problem file is the user's input, not the candidate's fault
            raise Outcome("usage", f"problem {self.spec['problem']} failed to import: {describe_exception(err)}")
        if not isinstance(init_inputs, (list, tuple)):
            raise Outcome("usage", f"get_init_inputs() returned {type(init_inputs).__name__}, not a list")
        self.init_inputs = list(init_inputs)
        self.make_inputs(self.spec["seed"])  # validates get_inputs() once, before any build

    def make_inputs(self, seed: int) -> list:
        torch.manual_seed(seed)
        try:
            # Made directly on the target device: fresh random values either way, and no 6 GB host round trip.
            with torch.device(self.device):
                inputs = self.problem.get_inputs()
        except Exception as err:
            raise Outcome("usage", f"get_inputs() failed: {describe_exception(err)}")
        if not isinstance(inputs, (list, tuple)):
            raise Outcome("usage", f"get_inputs() returned {type(inputs).__name__}, not a list of tensors")
        bad = [type(v).__name__ for v in inputs if not isinstance(v, (torch.Tensor, int, float, bool))]
        if bad or not any(isinstance(v, torch.Tensor) for v in inputs):
            what = f"values of type {', '.join(sorted(set(bad)))}" if bad else "no tensor"
            raise Outcome("usage", f"get_inputs() must return a list of tensors (numbers allowed beside them); "
                                   f"it returned {what}")
        return [v.to(self.device) if isinstance(v, torch.Tensor) else v for v in inputs]

    def build_candidate(self):
        self.events.stage("building the candidate")
        began = time.perf_counter()
        try:
            module = import_from_source(self.spec["candidate_code"], self.spec["candidate"], "kfuse_candidate")
        except Exception as err:
            raise Outcome("compile_error", f"the candidate failed to build or import: {describe_exception(err)}")
        self.report["build_s"] = time.perf_counter() - began
        self.events.emit("built", seconds=self.report["build_s"])
        if not inspect.isclass(getattr(module, "ModelNew", None)):
            raise Outcome("rejected", "the candidate does not define class ModelNew")
        self.candidate_module = module

    def check_interface(self):
        want = inspect.signature(self.problem.Model.__init__)
        got = inspect.signature(self.candidate_module.ModelNew.__init__)
        if str(want) != str(got):
            raise Outcome("rejected", f"ModelNew.__init__{got} differs from Model.__init__{want}: the signature "
                                      f"must be the same")

    def construct(self):
        self.events.stage("constructing the models")
        seed = self.spec["seed"]
        torch.manual_seed(seed)
        self.reference = self.problem.Model(*self.init_inputs).to(self.device)
        torch.manual_seed(seed)
        try:
            self.candidate = self.candidate_module.ModelNew(*self.init_inputs).to(self.device)
        except Exception as err:
            raise classify_runtime_error(err, "ModelNew's constructor")
        if not isinstance(self.candidate, torch.nn.Module):
            raise Outcome("rejected", "ModelNew is not a torch.nn.Module")
        self.load_reference_state()

    def load_reference_state(self):
        try:
            self.candidate.load_state_dict(self.reference.state_dict(), strict=True)
        except RuntimeError as err:
            detail = " ".join(str(err).split())[:500]
            raise Outcome("rejected", f"ModelNew's parameters and buffers differ from Model's: {detail}")

    def rerandomise_weights(self, seed: int) -> None:
        """New values for every floating parameter, at the scale of the old ones, then loaded into the candidate.

        Re-seeding would give the same values back; this catches anything derived from the weights at init."""
        gen = torch.Generator(device="cpu").manual_seed(seed)
        with torch.no_grad():
            for p in self.reference.parameters():
                if p.is_floating_point() and p.numel():
                    scale = float(p.abs().max()) or 1.0
                    fresh = (torch.rand(p.shape, generator=gen, dtype=torch.float64) * 2 - 1) * scale
                    p.copy_(fresh.to(p.dtype))
        self.load_reference_state()

    # -- one call, both models ---------------------------------------------------------------------------
    def poison(self) -> None:
        """Fill freed memory with NaN so a candidate that leaves its output unwritten returns NaN, not zeros.

        Blocks sized like the inputs and outputs, allocated, filled and freed: the allocator hands them out again."""
        for nbytes in sorted(self.poison_sizes, reverse=True):
            # The CUDA caching allocator hands a freed block of the same size straight back; glibc is less
            # predictable, so the CPU target poisons a few blocks of each size.
            copies = 1 if self.device.type == "cuda" else 3
            blocks = [torch.empty(max(nbytes // 4, 1), dtype=torch.float32, device=self.device)
                      for _ in range(copies)]
            for block in blocks:
                block.fill_(float("nan"))
            synchronize(self.device)
            del blocks, block

    def call_candidate(self, inputs: list, seed: int, stage: str):
        self.events.stage(stage)
        self.poison()
        torch.manual_seed(seed)
        try:
            with torch.no_grad():
                out = self.candidate(*inputs)
            synchronize(self.device)  # a CUDA error surfaces here, still charged to the candidate
        except Exception as err:
            raise classify_runtime_error(err, "the candidate")
        return out

    def call_reference(self, model, inputs: list, seed: int):
        torch.manual_seed(seed)
        try:
            with torch.no_grad():
                out = model(*inputs)
            synchronize(self.device)
        except Exception as err:
            raise Outcome("usage", f"the problem's Model failed: {describe_exception(err)}")
        return out

    def check_call(self, trial: dict, inputs: list, seed: int, stage: str):
        """Candidate on `inputs` (poisoned memory first), then the reference and the float64 truth on copies.

        Copies are made just before they are needed and freed right after: with 6 GB inputs the peak matters."""
        pristine = [clone_value(v) for v in inputs]
        self.poison_sizes.update(v.numel() * v.element_size() for v in inputs if isinstance(v, torch.Tensor))
        out_cand = self.call_candidate(inputs, seed, stage)

        ref_inputs = [clone_value(v) for v in pristine]
        reference_before = copy.deepcopy(self.reference)
        out_ref = self.call_reference(self.reference, ref_inputs, seed)
        # The candidate must leave its inputs as the reference leaves its own (unchanged, unless Model mutates).
        mutated = [i for i, (a, b) in enumerate(zip(inputs, ref_inputs)) if not same_bits(a, b)]
        if mutated:
            trial["problems"].append(f"the candidate modified its input {', '.join(map(str, mutated))} "
                                     f"(the reference does not)")
        del ref_inputs
        for _, t in leaves(out_ref):
            if isinstance(t, torch.Tensor):
                self.poison_sizes.add(t.numel() * t.element_size())

        out_truth = self.float64_truth(trial, reference_before, pristine, seed)
        comparison = compare_outputs(out_cand, out_ref, out_truth)
        trial["comparisons"].append(comparison.to_dict())
        trial["problems"].extend(comparison.problems())
        trial["kernelbench_pass"] = trial.get("kernelbench_pass", True) and comparison.kernelbench_pass
        return pristine, out_cand

    def float64_truth(self, trial: dict, reference: torch.nn.Module, inputs: list, seed: int):
        """The reference run in float64 on upcast copies (same device): the ground truth for precision parity.

        `reference` is a copy from before the call, so BatchNorm's running statistics match."""
        truth_model = reference.to(torch.float64)
        try:
            return self.call_reference(truth_model, [upcast(v) for v in inputs], seed)
        except Exception as err:  # some ops have no float64 kernel: parity is then skipped, and said so
            trial.setdefault("notes", []).append(f"no float64 ground truth ({describe_exception(err)}); "
                                                 f"precision parity not checked")
            return None

    def run_trial(self, index: int, kind: str) -> dict:
        seed = self.spec["seed"] + 1 + index
        n = len(self.plan)
        trial = {"trial": index + 1, "kind": kind, "seed": seed, "problems": [], "comparisons": []}
        if kind == "reweighted":
            self.rerandomise_weights(seed)
        inputs = self.make_inputs(seed)
        label = f"trial {index + 1}/{n} ({kind})"
        pristine, out_first = self.check_call(trial, inputs, seed, label)

        if kind == "refill":
            # Same tensor objects, new values: a cache keyed on pointers or shapes returns stale results.
            del pristine, out_first  # the memory peak matters with 6 GB inputs
            for old, new in zip(inputs, self.make_inputs(seed + 10_000)):
                if isinstance(old, torch.Tensor):
                    old.copy_(new)
            before = len(trial["problems"])
            self.check_call(trial, inputs, seed, f"{label}, refilled in place")
            trial["problems"][before:] = [f"second call, on the refilled tensors: {p}"
                                          for p in trial["problems"][before:]]
        elif kind == "determinism" and not trial["problems"]:
            for old, saved in zip(inputs, pristine):
                if isinstance(old, torch.Tensor):
                    old.copy_(saved)
            out_again = self.call_candidate(inputs, seed, f"{label}, second run")
            trial["deterministic"] = same_bits([t for _, t in leaves(out_first)], [t for _, t in leaves(out_again)])
            if not trial["deterministic"] and not self.spec.get("uses_atomics"):
                trial["problems"].append("two runs on the same inputs differ bitwise (declare USES_ATOMICS = True "
                                         "in the candidate if it uses atomics)")
        self.check_buffers(trial)
        trial["passed"] = not trial["problems"]
        return trial

    def check_buffers(self, trial: dict) -> None:
        """Buffers (BatchNorm's running statistics) must evolve as the reference's do."""
        ref = dict(self.reference.named_buffers())
        for name, buf in self.candidate.named_buffers():
            other = ref.get(name)
            if other is None or not isinstance(buf, torch.Tensor) or buf.shape != other.shape:
                continue
            if buf.is_floating_point():
                ok = torch.allclose(buf.double(), other.double(), rtol=1e-4, atol=1e-4, equal_nan=True)
            else:
                ok = torch.equal(buf, other)
            if not ok:
                trial["problems"].append(f"buffer {name} differs from the reference's after the call "
                                         f"(running statistics not updated like PyTorch?)")

    # -- timing ----------------------------------------------------------------------------------------------
    def time_models(self) -> dict:
        self.events.stage("timing")
        inputs = self.make_inputs(self.spec["seed"] + 999)
        ref_inputs = [clone_value(v) for v in inputs]
        contenders = {"candidate": lambda: self.candidate(*inputs), "eager": lambda: self.reference(*ref_inputs)}
        compile_s, errors = {}, {}
        for mode in self.spec["compile_modes"]:
            name = f"compile:{mode}"
            self.events.stage(f"compiling the reference with torch.compile ({mode})")
            compiled = torch.compile(copy.deepcopy(self.reference),
                                     mode=None if mode == "default" else mode)
            began = time.perf_counter()
            try:  # torch.compile failing is the reference's business: reported, and timing goes on without it
                with torch.no_grad():
                    compiled(*ref_inputs)
                synchronize(self.device)
            except Exception as err:
                errors[name] = describe_exception(err)
                continue
            compile_s[name] = time.perf_counter() - began
            contenders[name] = lambda c=compiled: c(*ref_inputs)
        self.events.stage("timing (interleaved rounds)")
        s = self.spec
        plan = TimingPlan(warmup=s["warmup"], min_trials=s["timing_trials"], min_seconds=s["min_seconds"])
        with torch.no_grad():
            stats = time_interleaved(contenders, self.device, plan)
            out = self.reference(*ref_inputs)
            self.events.stage("counting bytes and FLOPs")
            dtype = next((t.dtype for _, t in leaves(out) if isinstance(t, torch.Tensor)), torch.float32)
            bound = roofline.floor(roofline.count_bytes(self.reference, ref_inputs, out),
                                   roofline.count_flops(self.reference, ref_inputs),
                                   roofline.device_ceilings(self.device), dtype)
        cand = stats["candidate"]["median_ms"]
        speedups = {f"vs_{name}": stats[name]["median_ms"] / cand for name in stats if name != "candidate"}
        flags = []
        # The copy ceiling is torch's own copy kernel at its best; a kernel may beat it by a few percent, not 10%.
        if cand < FLOOR_MARGIN * bound["floor_ms"]:
            flags.append(f"the candidate's median {cand:.4g} ms is more than {1 - FLOOR_MARGIN:.0%} below the roofline "
                         f"floor {bound['floor_ms']:.4g} ms: it cannot have done all the work in the timed region "
                         f"(side stream? skipped work?)")
        for name, ratio in speedups.items():
            if ratio > 10:
                flags.append(f"speedup {ratio:.1f}x {name.replace('_', ' ')} is above 10x: check what the "
                             f"candidate skips before trusting it")
        return {"unit": "ms", "stats": stats, "speedups": speedups, "compile_s": compile_s,
                "compile_errors": errors, "roofline": bound, "flags": flags,
                "achieved_fraction_of_floor": bound["floor_ms"] / cand if cand else None}

    # -- the whole protocol ------------------------------------------------------------------------------------
    def run(self) -> dict:
        self.load_problem()
        self.build_candidate()
        self.check_interface()
        self.construct()
        self.plan = trial_plan(self.spec["trials"])
        failed = None
        for index, kind in enumerate(self.plan):
            trial = self.run_trial(index, kind)
            self.report["trials"].append(trial)
            self.events.emit("trial", trial=trial["trial"], kind=kind, passed=trial["passed"])
            if not trial["passed"] and failed is None:
                failed = trial
                if not self.spec.get("all_trials"):
                    break
        self.report["kernelbench_pass"] = all(t.get("kernelbench_pass", False) for t in self.report["trials"])
        if failed:
            what = TRIAL_KINDS[failed["kind"]]
            reasons = [f"trial {failed['trial']} ({what}): {p}" for p in failed["problems"]]
            raise Outcome("incorrect", *reasons)
        if self.spec["time"]:
            self.report["timing"] = self.time_models()
        return self.report


def environment(device: torch.device) -> dict:
    info = {"target": device.type, "torch": torch.__version__, "python": sys.version.split()[0]}
    if device.type == "cuda":
        info["name"] = torch.cuda.get_device_name(device)
        info["cuda"] = torch.version.cuda
    else:
        info["name"] = "cpu"
    return info


def main(spec_path: str, events_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    events = Events(events_path)
    device = torch.device(spec["device"])
    if device.type == "cuda" and not torch.cuda.is_available():
        events.emit("outcome", status="usage", reasons=["--device cuda was asked for, but no CUDA GPU is visible"])
        return 0
    judgement = Judgement(spec, events)
    events.emit("environment", **environment(device))
    try:
        report = judgement.run()
        events.emit("outcome", status="correct", reasons=[], report=report)
    except Outcome as outcome:
        events.emit("outcome", status=outcome.status, reasons=outcome.reasons, report=judgement.report,
                    **outcome.details)
    except Exception as err:  # a failure of the judge itself: say so plainly, with the traceback in the log
        traceback.print_exc()
        events.emit("outcome", status="judge_error", reasons=[f"the judge failed: {describe_exception(err)}"],
                    report=judgement.report)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
