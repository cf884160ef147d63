"""The candidate's process: builds ModelNew and runs it when the trusted worker asks, nothing more.

Its `main` runs in a process forked by kfuse.judge.launch, answering the worker's requests on one pipe. Everything
here shares a process with the candidate's code, so nothing here decides anything: it reports outputs (sent back
whole and compared by the trusted worker) and a few observations meant to catch honest bugs (mutated inputs,
run-to-run differences), plus the candidate's own timings, which only a candidate that tampers with torch's timers
could falsify.

The same program, set up with `own_reference`, is the reference's timing process: there the model under test is
the problem's own Model, timed with its torch.compile'd copies, so that every contender is timed alike, in a
process of its own answering the worker's requests (a call timed in the worker's process and one timed in
another process differed by 30-60 us on the same kernel).
"""

from __future__ import annotations

import inspect
import os
import time

import torch

from kfuse.judge import roofline, wire
from kfuse.judge.compare import compare_outputs, leaves, same_bits
from kfuse.loader import import_from_source
from kfuse.problem import (L2Flush, ProblemError, apply_precision, build_reference, copy_model, describe_exception,
                           judge_inputs, load_problem, make_inputs, refill, release_cached_memory, rerandomise,
                           synchronize, time_one_call, weight_scales)


def _cloned_where_aliased(out, inputs: list):
    """`out` with every tensor that shares storage with one of the inputs replaced by a copy."""
    storages = {t.untyped_storage().data_ptr() for t in inputs if isinstance(t, torch.Tensor)}
    return torch.utils._pytree.tree_map(
        lambda t: t.clone() if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() in storages else t, out)


def compile_agreement(eager: torch.nn.Module, compiled_out, inputs: list, device: torch.device) -> dict:
    """torch.compile's output against eager's own call on the same inputs, from the same state, by KernelBench's
    check (allclose at 1e-4): Inductor may trade eager's precision for speed (TF32 convolutions channels-last, its
    own reduction orders), and a speedup over it reads differently where its output is not eager's. Here, in the
    reference's process, only the problem's Model and torch.compile run. Not compared (with the reason) where
    eager's output would not fit beside the compiled one on the GPU, or eager's call fails."""
    held = sum(t.numel() * t.element_size() for _, t in leaves(compiled_out) if isinstance(t, torch.Tensor))
    if device.type == "cuda" and torch.cuda.mem_get_info(device)[0] < 2 * held + (1 << 30):
        return {"compared": False, "reason": "no room on the GPU for eager's output beside torch.compile's"}
    try:
        with torch.no_grad():
            comparison = compare_outputs(compiled_out, eager(*inputs))
    except Exception as err:
        return {"compared": False, "reason": describe_exception(err)}
    return {"compared": True, "kernelbench_pass": comparison.kernelbench_pass,
            "max_abs_diff": max((t.max_abs_diff for t in comparison.tensors), default=0.0)}


class Refusal(Exception):
    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def run_error(err: BaseException, who: str) -> Refusal:
    message = describe_exception(err)
    if isinstance(err, (torch.cuda.OutOfMemoryError, MemoryError)):
        return Refusal("crashed", f"{who} ran out of memory ({message})")
    if "CUDA error" in message or "illegal" in message.lower() or type(err).__name__ == "AcceleratorError":
        return Refusal("crashed", f"{who} hit a CUDA error: {message}")
    return Refusal("crashed", f"{who} raised {message}")


def plain_outputs(out):
    """The output as plain tensors and containers; anything else (tensor subclasses, objects) is refused."""
    for _, leaf in leaves(out):
        if isinstance(leaf, torch.Tensor) and type(leaf) is not torch.Tensor:
            raise Refusal("incorrect", f"the output is a {type(leaf).__name__}, not a plain torch.Tensor")
        if not isinstance(leaf, (torch.Tensor, int, float, bool, type(None))):
            raise Refusal("incorrect", f"the output holds a {type(leaf).__name__}, not tensors")
    return out


class Sandbox:
    def __init__(self):
        self.device = None
        self.own_reference = False  # True: the reference's timing process (setup's own_reference)
        self.poison_sizes: set[int] = set()
        self.last_output = None

    @property
    def who(self) -> str:
        """The model under test, in messages."""
        return "the reference" if self.own_reference else "the candidate"

    # -- commands ------------------------------------------------------------------------------------------
    def setup(self, problem: str, candidate: str, code: str, device: str, precision: str = "fp32",
              own_reference: bool = False) -> dict:
        self.device = torch.device(device)
        apply_precision(precision)
        try:
            self.problem, self.init_inputs = load_problem(problem)
        except ProblemError as err:
            raise Refusal("usage", str(err))
        if own_reference:  # the reference's timing process: the model under test is Model itself
            self.own_reference = True
            return {"build_s": 0.0}
        began = time.perf_counter()
        try:
            module = import_from_source(code, candidate, "kfuse_candidate")
        except Exception as err:
            raise Refusal("compile_error", f"the candidate failed to build or import: {describe_exception(err)}")
        build_s = time.perf_counter() - began
        if not inspect.isclass(getattr(module, "ModelNew", None)):
            raise Refusal("rejected", "the candidate does not define class ModelNew")
        want = _parameters(self.problem.Model.__init__)
        got = _parameters(module.ModelNew.__init__)
        if want != got:
            raise Refusal("rejected", f"ModelNew.__init__{inspect.signature(module.ModelNew.__init__)} differs "
                                      f"from Model.__init__{inspect.signature(self.problem.Model.__init__)}: the "
                                      f"signature (parameter names, kinds, defaults) must be the same")
        self.module = module
        return {"build_s": build_s}

    def construct(self, seed: int) -> dict:
        self.seed = seed
        if self.own_reference:  # the timing process times Model itself: one construction, no reweighting
            self.candidate = build_reference(self.problem, self.init_inputs, seed, self.device)
            return {}
        self.reference = build_reference(self.problem, self.init_inputs, seed, self.device)
        self.scales = weight_scales(self.reference)
        torch.manual_seed(seed)
        try:
            self.candidate = self.module.ModelNew(*self.init_inputs).to(self.device)
        except Exception as err:
            raise run_error(err, "ModelNew's constructor")
        if not isinstance(self.candidate, torch.nn.Module):
            raise Refusal("rejected", "ModelNew is not a torch.nn.Module")
        self._load_reference_state()
        return {}

    def reweight(self, seed: int) -> dict:
        rerandomise(self.reference, seed, self.scales)
        # Only what was re-randomised: counters such as num_batches_tracked keep counting in the candidate.
        fresh = {k: v for k, v in self.reference.state_dict().items() if k in self.scales}
        self.candidate.load_state_dict(fresh, strict=False)
        return {}

    def call(self, seed: int, inputs_seed: int, refill_seed: int | None = None, twice: bool = False,
             layout: str = "contiguous", second: bool = False) -> dict:
        inputs = judge_inputs(self.problem, inputs_seed, self.device, layout)
        self.poison_sizes.update(v.numel() * v.element_size() for v in inputs if isinstance(v, torch.Tensor))
        pristine = [v.clone() if isinstance(v, torch.Tensor) else v for v in inputs]
        outputs = [self._forward(inputs, seed)]
        mutated = [i for i, (a, b) in enumerate(zip(inputs, pristine)) if not same_bits(a, b)]
        del pristine
        reply = {"mutated": mutated}
        if twice and not mutated:
            first = [t.clone() if isinstance(t, torch.Tensor) else t for _, t in leaves(outputs[0])]
            again = self._forward(inputs, seed)
            reply["deterministic"] = same_bits(first, [t for _, t in leaves(again)])
            if second:  # (compared with the reference's second call where the Model keeps state)
                reply["second"] = again
        if refill_seed is not None:
            # an output that is an input or a view of one would show the refilled values: keep what it was
            outputs[0] = _cloned_where_aliased(outputs[0], inputs)
            refill(inputs, self.problem, refill_seed, self.device)
            outputs.append(self._forward(inputs, seed))
        reply["outputs"] = outputs
        reply["buffers"] = dict(self.candidate.named_buffers())
        return reply

    def time_prepare(self, inputs_seed: int, name: str, compile_modes: list[str], count: bool = False) -> dict:
        """The timing inputs, and the contenders this process times: the model under test as `name`, plus a
        torch.compile'd copy of it per mode (the reference's process; a compile error is reported, not fatal).
        `count` (the reference's process): also the bytes and FLOPs of a call, for the roofline floor (CPU work on
        the meta device, overlapping the worker's trials instead of following the timing)."""
        self.timing_inputs = make_inputs(self.problem, inputs_seed, self.device)
        self.flush = L2Flush(self.device)
        self.timed = {name: self.candidate}
        compile_s, errors, agreement = {}, {}, {}
        for mode in compile_modes:
            # The same module, not a copy: its weights once in GPU memory (eager and the compiled graph only read
            # them; what a training-mode call updates, running statistics, no timing depends on).
            compiled = torch.compile(self.candidate, mode=None if mode == "default" else mode)
            twin = copy_model(self.candidate)  # eager's call from the state the compiled call starts from
            refill(self.timing_inputs, self.problem, inputs_seed, self.device)
            began = time.perf_counter()
            try:
                with torch.no_grad():
                    out = compiled(*self.timing_inputs)
                synchronize(self.device)
            except Exception as err:
                errors[f"compile:{mode}"] = describe_exception(err)
                continue
            compile_s[f"compile:{mode}"] = time.perf_counter() - began
            self.timed[f"compile:{mode}"] = compiled
            # eager's call on the inputs the compiled one got: drawn again in place (a model may write into them)
            out = _cloned_where_aliased(out, self.timing_inputs)
            refill(self.timing_inputs, self.problem, inputs_seed, self.device)
            agreement[f"compile:{mode}"] = compile_agreement(twin, out, self.timing_inputs, self.device)
            del twin, out
        counts = roofline.count_call(self.problem, self.init_inputs, self.seed, self.candidate,
                                     self.timing_inputs) if count else None
        return {"timed": list(self.timed), "compile_s": compile_s, "compile_errors": errors,
                "compile_agreement": agreement, "counts": counts}

    def time_setup(self, inputs_seed: int, warmup: int) -> dict:
        for name, model in self.timed.items():
            for _ in range(warmup):
                self._forward(self.timing_inputs, inputs_seed, model)
        return {}

    def time_once(self, name: str, refill_seed: int) -> dict:
        refill(self.timing_inputs, self.problem, refill_seed, self.device)
        synchronize(self.device)
        model = self.timed[name]
        try:
            with torch.no_grad():
                ms, out = time_one_call(lambda: model(*self.timing_inputs), self.device, self.flush)
        except Exception as err:
            who = self.who if name in ("candidate", "eager") else f"{self.who} ({name})"
            raise run_error(err, f"{who}, while being timed,")
        self.last_output = out
        return {"ms": ms}

    def buffers(self) -> dict:
        return {"buffers": dict(self.candidate.named_buffers())}

    def timed_output(self) -> dict:
        return {"outputs": [plain_outputs(self.last_output)]}

    # -- helpers -------------------------------------------------------------------------------------------
    def _load_reference_state(self) -> None:
        try:
            self.candidate.load_state_dict(self.reference.state_dict(), strict=True)
        except RuntimeError as err:
            detail = " ".join(str(err).split())[:500]
            raise Refusal("rejected", f"ModelNew's parameters and buffers differ from Model's: {detail}")

    def _poison(self) -> None:
        """Fill freed memory with NaN so a candidate that leaves its output unwritten returns NaN, not zeros.

        The CUDA caching allocator hands a freed block of the same size straight back; glibc is less
        predictable, so the CPU target poisons a few blocks of each size (best effort there)."""
        copies = 1 if self.device.type == "cuda" else 3
        for nbytes in sorted(self.poison_sizes, reverse=True):
            blocks = [torch.empty(max(nbytes // 4, 1), dtype=torch.float32, device=self.device)
                      for _ in range(copies)]
            for block in blocks:
                block.fill_(float("nan"))
            synchronize(self.device)
            del blocks, block

    def _forward(self, inputs: list, seed: int, model=None):
        self._poison()
        torch.manual_seed(seed)
        try:
            with torch.no_grad():
                out = (self.candidate if model is None else model)(*inputs)
            synchronize(self.device)  # a CUDA error surfaces here, still charged to the candidate
        except Exception as err:
            raise run_error(err, self.who)
        out = plain_outputs(out)
        for _, t in leaves(out):
            if isinstance(t, torch.Tensor):
                self.poison_sizes.add(t.numel() * t.element_size())
        return out


def _parameters(init) -> list[tuple]:
    """What a constructor's signature must agree on: names, kinds and defaults (annotations may differ)."""
    return [(p.name, p.kind, repr(p.default)) for p in inspect.signature(init).parameters.values()]


TIMING_COMMANDS = {"time_setup", "time_once"}  # the worker holds the GPU alone meanwhile


def main(read_fd: int, write_fd: int) -> int:
    incoming = os.fdopen(read_fd, "rb")
    outgoing = os.fdopen(write_fd, "wb")
    sandbox = Sandbox()
    command = None
    while True:
        if command in TIMING_COMMANDS:
            wire.spin_until_readable(incoming, seconds=2.0)  # the next timed round is coming: stay warm
        try:
            request = wire.receive(incoming)
        except wire.PeerGone:
            return 0
        command = request.pop("command")
        try:
            reply = getattr(sandbox, command)(**request)
            reply["status"] = "ok"
        except Refusal as refusal:
            reply = {"status": refusal.status, "message": refusal.message}
        except ProblemError as err:
            reply = {"status": "usage", "message": str(err)}
        except Exception as err:  # anything else (out of memory making the timing inputs...): a verdict, said
            refusal = run_error(err, sandbox.who)
            reply = {"status": refusal.status, "message": refusal.message}
        if sandbox.device is not None and sandbox.device.type == "cuda":
            reply["peak_bytes"] = torch.cuda.max_memory_reserved(sandbox.device)  # (the judge's gpu_peak_bytes)
        wire.send(outgoing, reply, share_cuda=True)
        del reply
        # Cached blocks go back to the driver between trials (the worker may need them for a 6 GB problem), but
        # never between timed calls: the reference keeps its cache while timed, so the candidate keeps its own
        # (an empty cache costs a cudaMalloc of every output on every call: +0.4 ms on the conv seed).
        if sandbox.device is not None and command not in TIMING_COMMANDS:
            release_cached_memory(sandbox.device)
