"""The judge's trusted worker: runs the protocol of DESIGN.md §4 against a candidate kept in its own process.

Runs in kfuse.judge.launch's process (`python -m kfuse.judge.launch SPEC.json EVENTS.jsonl`, a one-line token on
stdin), which forks the candidate's process and the reference's timing process beforehand. The problem's reference,
its float64 ground truth, the inputs, every comparison and the verdict live here; the candidate's code runs only
in a child process (kfuse.judge.sandbox) that builds ModelNew and returns its outputs as data. Each step appends one
JSON line, carrying the token, to EVENTS, so the parent knows where the run was if it dies, and lines written by
anyone without the token are ignored.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

import torch

from kfuse import gpulock
from kfuse.judge import roofline, wire
from kfuse.judge.compare import compare_outputs, compare_tensor, float64_chunks, leaves, same_bits
from kfuse.judge.verdict import BUILD_STAGE, WAIT_STAGE
from kfuse.problem import (ProblemError, apply_precision, build_reference, copy_model, describe_exception,
                           judge_inputs, length_cuts, load_problem, make_inputs, release_cached_memory, rerandomise,
                           synchronize, weight_scales)
from kfuse.judge.timing import TimingPlan, time_interleaved

# The copy ceiling is torch's own copy kernel at its best; a kernel may beat it by a few percent, not 10%.
FLOOR_MARGIN = 0.9

TRIAL_KINDS = {
    "determinism": "fresh inputs, run twice",
    "reweighted": "weights re-randomised after construction",
    "refill": "same input tensors refilled in place",
    "strided": "non-contiguous inputs",
    "resized": "half the batch plus one",  # (these three told, not judged: check_other_sizes)
    "doubled": "twice the batch",
    "lengthened": "another length",
    "fresh": "fresh inputs",
}


class Outcome(Exception):
    """Ends the run with a status (or "usage" for the user's own mistake) and reasons."""

    def __init__(self, status: str, *reasons: str):
        super().__init__(reasons[0] if reasons else status)
        self.status, self.reasons = status, list(reasons)


class Events:
    def __init__(self, path: str, token: str):
        self.file = open(path, "a", buffering=1)
        self.token = token
        self.last_stage = "starting"

    def emit(self, event: str, **fields) -> None:
        line = {"event": event, "t": time.time(), "token": self.token, **fields}
        self.file.write(json.dumps(line, default=str) + "\n")
        self.file.flush()

    def stage(self, name: str) -> None:
        self.last_stage = name
        self.emit("stage", stage=name)


def trial_plan(n: int) -> list[str]:
    """What each trial checks besides fresh inputs: bitwise determinism, weights re-randomised after
    construction (twice), the same input tensors refilled in place, and non-contiguous inputs. (Other batch sizes
    and another length are checked after them, and told apart: Judgement.check_other_sizes.)"""
    base = ["determinism", "reweighted", "refill", "reweighted", "strided"]
    return (base + ["fresh"] * n)[:max(n, len(base))]


class CandidateProcess:
    """The sandbox child: requests go down one pipe, replies (data only) come up another. `role` names it in
    verdicts: the candidate's process, or the reference's timing process (see kfuse.judge.sandbox)."""

    def __init__(self, device: torch.device, events: Events, spawned, role: str = "the candidate's process"):
        """`spawned`: the sandbox process kfuse.judge.launch forked (its Spawned: the process and the two pipes)."""
        self.device, self.events, self.role = device, events, role
        self.process, self.requests, self.replies = spawned.process, spawned.requests, spawned.replies
        self.peak_bytes = 0  # its GPU memory at its peak so far (the caching allocator's, from its replies)

    def request(self, command: str, spin: bool = False, **fields) -> dict:
        """`spin`: busy-wait for the reply (a timed call), so this process is as warm afterwards as the
        candidate's was (see wire.spin_until_readable)."""
        self.send(command, **fields)
        return self.reply(spin)

    def send(self, command: str, **fields) -> None:
        """A request whose reply is read later (`reply`), so the work overlaps the caller's own."""
        try:
            wire.send(self.requests, {"command": command, **fields})
        except (wire.PeerGone, BrokenPipeError):
            raise Outcome("crashed", self._death()) from None

    def reply(self, spin: bool = False) -> dict:
        """The reply to the oldest request not yet answered."""
        try:
            if spin:
                wire.spin_until_readable(self.replies, seconds=600.0)
            reply = wire.receive(self.replies, str(self.device))
        except (wire.PeerGone, BrokenPipeError):
            raise Outcome("crashed", self._death()) from None
        except Exception as err:  # a reply that is not plain data (tensor subclasses, objects): refused
            raise Outcome("incorrect", f"{self.role} sent back something that is not plain "
                                       f"tensors ({describe_exception(err)})") from None
        self.peak_bytes = max(self.peak_bytes, int(reply.get("peak_bytes") or 0))
        status = reply.get("status")
        if status != "ok":
            raise Outcome(status if isinstance(status, str) else "crashed", str(reply.get("message", "")))
        return reply

    def _death(self) -> str:
        code = self.process.wait()
        stage = self.events.last_stage
        if code < 0:
            import signal

            sig = signal.Signals(-code)
            meaning = {signal.SIGSEGV: "segmentation fault", signal.SIGBUS: "bus error", signal.SIGABRT: "abort",
                       signal.SIGFPE: "floating-point exception", signal.SIGILL: "illegal instruction",
                       signal.SIGKILL: "killed, likely out of host memory"}.get(sig, "signal")
            return f"{self.role} died with {sig.name} ({meaning}) while {stage}"
        return f"{self.role} exited with code {code} while {stage}"

    def close(self, at_once: bool = False) -> None:
        """`at_once`: kill it now (a judgement that ended early: its pending work is not wanted)."""
        if at_once:
            self.process.kill()
        for stream in (self.requests, self.replies):
            try:
                stream.close()
            except OSError:
                continue
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


class Judgement:
    def __init__(self, spec: dict, events: Events, early: list):
        self.spec = spec
        self.early = early  # the sandbox processes launch forked: the candidate's, then the timer's
        self.events = events
        self.device = torch.device(spec["device"])
        self.report: dict = {"trials": []}
        self.gpu = gpulock.from_environment()  # other judges may share this GPU (kfuse bench --per-gpu)
        self.big = False                       # True: a problem too big for two judges' copies in GPU memory
        self.stateful = False                  # True: the Model's output depends on its earlier calls
        self.reference_varies = False          # True: two runs of the Model itself differ bitwise (atomics)
        # the float64 ground truth's buffers (running statistics) since both sides last had the reference's: each
        # truth call goes on from them, as each side goes on from its own (a candidate nearer the truth than the
        # reference stays nearer it, call after call); None after a call with no truth
        self.truth_buffers: dict[str, torch.Tensor] | None = None

    def untimed(self):
        """A section of untimed GPU work: shared with other judges' untimed work; for a big problem, with no other
        big problem's (kfuse.gpulock, `big`)."""
        return self.gpu.big() if self.big else self.gpu.shared()

    def too_big_to_share(self) -> bool:
        """Inputs so large that two judges' copies of them (clones, float64 truths: ~16x) might not fit. (Two, not
        every sharer: most neighbours are small, and a job that runs out of memory beside others is judged again,
        its GPU sections exclusive, then if need be alone at the end, kfuse.bench.runner.LocalRunner.)"""
        if self.device.type != "cuda" or isinstance(self.gpu, gpulock.NoLock):
            return False
        made = make_inputs(self.problem, self.spec["seed"], torch.device("meta"))
        size = sum(t.numel() * t.element_size() for _, t in leaves(made) if isinstance(t, torch.Tensor))
        sharers = min(2, max(1, int(os.environ.get(gpulock.SHARERS_ENV, "1"))))
        return 16 * size * sharers > torch.cuda.get_device_properties(self.device).total_memory

    def inputs(self, seed: int, layout: str = "contiguous") -> list:
        return judge_inputs(self.problem, seed, self.device, layout)

    # -- one checked call ------------------------------------------------------------------------------------
    def reference_call(self, inputs: list, seed: int):
        """The reference's output and the float64 ground truth on upcast copies, from the same model state;
        and which inputs the reference itself modifies."""
        pristine = [v.clone() if isinstance(v, torch.Tensor) else v for v in inputs]
        before = copy_model(self.reference)
        torch.manual_seed(seed)
        try:
            with torch.no_grad():
                out = self.reference(*inputs)
            synchronize(self.device)
        except Exception as err:
            raise Outcome("usage", f"the problem's Model failed: {describe_exception(err)}") from None
        mutated = [i for i, (a, b) in enumerate(zip(inputs, pristine)) if not same_bits(a, b)]
        # Emptied, not just unnamed (the caller's frame holds the lists until this returns): the float64 upcast
        # is never held beside the inputs and their clone. A 6 GB problem needs that memory (kfuse.bench.runner's
        # JUDGE_COPIES counts on it).
        # Their blocks go back to the driver too: the float64 copies are twice their size and could not reuse them,
        # and the other processes of this judge and the judges beside it need that memory (an 8 GiB cumsum's worker
        # held 37.6 GiB without this, 2026-11-26).
        inputs.clear()
        release_cached_memory(self.device)
        upcast = [v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in pristine]
        pristine.clear()
        release_cached_memory(self.device)
        truth = self.float64_truth(before, upcast, seed)
        upcast.clear()
        release_cached_memory(self.device)
        return out, truth, mutated

    def reference_again(self, seed: int) -> None:
        """A call of the reference for its state alone (running statistics), as the candidate's second call of the
        determinism trial: no output is compared, so no float64 truth."""
        inputs = self.inputs(seed)
        torch.manual_seed(seed)
        with torch.no_grad():
            self.reference(*inputs)
        synchronize(self.device)
        self.truth_buffers = None
        del inputs
        release_cached_memory(self.device)

    def float64_truth(self, model: torch.nn.Module, upcast: list, seed: int):
        torch.manual_seed(seed)
        try:
            model = model.to(torch.float64)
            for module in model.modules():  # plain tensor attributes (an LSTM's h0 made in __init__) too
                for name, value in list(vars(module).items()):
                    if isinstance(value, torch.Tensor) and value.is_floating_point() \
                            and not isinstance(value, torch.nn.Parameter):
                        setattr(module, name, value.double())
            if self.truth_buffers:  # (not the first call since both sides were synchronised: go on from its own)
                with torch.no_grad():
                    for name, buffer in model.named_buffers():
                        if name in self.truth_buffers:
                            buffer.copy_(self.truth_buffers[name])
            self.truth_buffers = None
            with torch.no_grad():
                out = model(*upcast)
            self.truth_buffers = dict(model.named_buffers())
            return out
        except Exception as err:  # some ops have no float64 kernel: parity is then skipped, and said so
            self.notes.append(f"no float64 ground truth ({describe_exception(err)}); precision parity not checked")
            return None

    def judge_output(self, trial: dict, candidate_out, inputs_seed: int, seed: int, label: str = "",
                     layout: str = "contiguous") -> None:
        out_ref, truth, ref_mutated = self.reference_call(self.inputs(inputs_seed, layout), seed)
        comparison = compare_outputs(candidate_out, out_ref, truth)
        trial["comparisons"].append(comparison.to_dict())
        trial["problems"].extend(f"{label}{p}" for p in comparison.problems())
        trial["kernelbench_pass"] = trial.get("kernelbench_pass", True) and comparison.kernelbench_pass
        trial["reference_mutates"] = ref_mutated

    def run_trial(self, index: int, kind: str, layout: str | None = None) -> dict:
        """One checked call. `layout`: the inputs' (judge_inputs), where the caller has already found that the
        reference takes them; by default the kind's own, probed here."""
        seed = self.spec["seed"] + 1 + index
        trial = {"trial": index + 1, "kind": kind, "seed": seed, "problems": [], "comparisons": []}
        self.notes = trial.setdefault("notes", [])
        label = f"trial {index + 1}/{len(self.plan)} ({kind})" if index < len(self.plan) else TRIAL_KINDS[kind]
        if kind == "reweighted":
            rerandomise(self.reference, seed, self.scales)
            self.truth_buffers = None  # (both sides' buffers are the reference's again)
            self.candidate.request("reweight", seed=seed)
        self.events.stage(label)
        refill_seed = seed + 10_000 if kind == "refill" else None
        probed = layout is not None
        if layout is None:
            layout = kind if kind in ("strided", "resized", "doubled") else "contiguous"
        if layout != "contiguous" and not probed:
            refused = self.reference_refuses(seed, layout)
            if refused:  # a candidate need not take inputs the Model itself does not
                what = "non-contiguous inputs" if layout == "strided" else "another batch size"
                trial.update(passed=True, skipped=f"the problem's Model does not take {what} ({refused}): the "
                                                  f"candidate is not asked to")
                self.notes.append(trial["skipped"])
                return trial
        reply = self.candidate.request("call", seed=seed, inputs_seed=seed, refill_seed=refill_seed,
                                       twice=kind == "determinism", layout=layout, second=self.stateful)
        outputs = reply["outputs"]
        self.judge_output(trial, outputs[0], seed, seed, layout=layout)
        if reply.get("deterministic") is not None and self.stateful:  # its second call, against the reference's
            self.notes.append("the Model's output depends on its earlier calls (state kept across calls): both "
                              "models are called in step, this trial compares their second calls, and the last "
                              "timed call's output is not compared")
            self.judge_output(trial, reply["second"], seed, seed, layout=layout,
                              label="second call on the same inputs (the Model keeps state across calls): ")
        elif reply.get("deterministic") is not None:  # the candidate ran twice: so does the reference (its state)
            self.reference_again(seed)
        if sorted(reply["mutated"]) != trial["reference_mutates"]:
            changed = ", ".join(map(str, reply["mutated"])) or "none"
            trial["problems"].append(f"the candidate modified inputs [{changed}]; the reference modifies "
                                     f"[{', '.join(map(str, trial['reference_mutates'])) or 'none'}]")
        if refill_seed is not None:
            self.judge_output(trial, outputs[1], refill_seed, seed, label="second call, on the refilled tensors: ")
        if reply.get("deterministic") is False and not self.spec.get("uses_atomics") and not self.stateful:
            if self.reference_varies:
                self.notes.append("the candidate's two runs on the same inputs differ bitwise, as the problem's "
                                  "Model's own do (an atomic library call): allowed")
            else:
                trial["problems"].append("two runs on the same inputs differ bitwise (declare USES_ATOMICS = True "
                                         "in the candidate if it uses atomics)")
        trial["deterministic"] = reply.get("deterministic")
        self.check_buffers(trial, reply.get("buffers", {}))
        trial["passed"] = not trial["problems"]
        del reply, outputs
        release_cached_memory(self.device)
        return trial

    def reference_refuses(self, seed: int, layout: str) -> str | None:
        """Why the reference fails on the inputs laid out so: non-contiguous copies (a `.view` of an input, cuDNN's
        LSTM with a strided h0), another batch (state or a view sized for the problem's batch, inputs with no
        common batch dim), indices out of range (a cut class dim under cross-entropy's targets); or None. Run on a
        copy of the model: its state (running statistics) stays as it is. Where an input is integer (values that
        index), on the CPU: an index out of range is a device-side assert on CUDA, which no exception handler
        survives (the judge's process is lost with it), and a clear error on the CPU."""
        inputs = self.inputs(seed, layout)
        if inputs is None:
            return "its inputs share no batch dim" + (" or are over 256 MB doubled" if layout == "doubled" else "")
        probe = copy_model(self.reference)
        indexing = any(isinstance(v, torch.Tensor) and not v.is_floating_point() and not v.is_complex()
                       and v.dtype != torch.bool for v in inputs)
        if indexing and self.device.type != "cpu":
            probe = probe.cpu()
            inputs = [v.cpu() if isinstance(v, torch.Tensor) else v for v in inputs]
        torch.manual_seed(seed)
        try:
            with torch.no_grad():
                probe(*inputs)
            synchronize(self.device)
        except Exception as err:
            return describe_exception(err)
        finally:
            del probe, inputs
            release_cached_memory(self.device)
        return None

    def check_buffers(self, trial: dict, theirs: dict) -> None:
        """Buffers (BatchNorm's running statistics) must evolve as the reference's do: within 1e-4 of the
        reference's, or, where the reference's own buffer misses that against the float64 truth's (statistics of a
        deep network's activations carry its rounding), about as accurate as it (the outputs' precision parity)."""
        for name, ours in self.reference.named_buffers():
            other = theirs.get(name)
            if not isinstance(other, torch.Tensor) or other.shape != ours.shape:
                trial["problems"].append(f"buffer {name} was not reported back with its shape")
                continue
            if ours.is_floating_point():
                other = other.to(ours.device)
                ok = torch.allclose(other.double(), ours.double(), rtol=1e-4, atol=1e-4, equal_nan=True)
                truth = (self.truth_buffers or {}).get(name)
                if not ok and truth is not None and truth.shape == ours.shape:
                    report = compare_tensor(f"buffer {name}", other, ours, truth)
                    ok = not report.ref_accurate and report.passed
            else:
                ok = torch.equal(other, ours)
            if not ok:
                trial["problems"].append(f"buffer {name} differs from the reference's after the call "
                                         f"(running statistics not updated like PyTorch?)")

    # -- timing ----------------------------------------------------------------------------------------------
    def prepare_reference_timing(self) -> None:
        """Set up the reference's timing process, torch.compile included, without waiting for it: its compile
        (CPU work, mostly) runs while this process judges the trials. The replies are read by
        `reference_timing_prepared`."""
        s = self.spec
        self.timer.send("setup", problem=s["problem"], candidate=s["problem"], code="", device=str(self.device),
                        precision=s.get("precision", "fp32"), own_reference=True)
        self.timer.send("construct", seed=s["seed"])
        self.timer.send("time_prepare", inputs_seed=s["seed"] + 999, name="eager",
                        compile_modes=list(s["compile_modes"]), count=True)

    def reference_timing_prepared(self) -> dict:
        """time_prepare's reply. Waited for outside any GPU section: torch.compile's compile is CPU work, tens of
        seconds of it, and holding the lock meanwhile would keep a judge that waits to time (and, behind it, every
        other judge) waiting too. Its GPU work (the compiled graph's first call, Inductor's benchmarks of a few
        kernel configs) is milliseconds that may fall into another judge's timed rounds: one round's samples at
        most, which the median of the interleaved rounds does not follow."""
        if self.spec["compile_modes"]:
            self.events.stage(f"compiling the reference with torch.compile ({', '.join(self.spec['compile_modes'])})")
        self.timer.reply()
        self.timer.reply()
        return self.timer.reply()

    def time_models(self, reference: dict) -> dict:
        """Every contender is timed in a process of its own that answers the worker's requests: the candidate in
        its sandbox, eager and torch.compile in the reference's timing process (kfuse.judge.sandbox, own_reference)."""
        s = self.spec
        base = s["seed"] + 999
        plan = TimingPlan(warmup=s["warmup"], min_trials=s["timing_trials"], min_seconds=s["min_seconds"])
        with self.untimed():
            self.candidate.request("time_prepare", inputs_seed=base, name="candidate", compile_modes=[])
        self.events.stage(WAIT_STAGE)
        with self.gpu.exclusive():
            ceilings = roofline.device_ceilings(self.device)  # measured once per device: a timing of its own
            stats = self._timed_rounds(plan, base, reference["timed"])
        # Killed, not asked to exit: its work is done, and its GPU memory comes back at once for the checks below
        # (a process's own exit, torch's teardown, took about 2 s on the CPU).
        self.timer.close(at_once=True)
        self.timer = None
        timing = self._after_timing(stats, base, reference["counts"], ceilings)
        return {**timing, "compile_s": reference["compile_s"], "compile_errors": reference["compile_errors"],
                "compile_agreement": reference.get("compile_agreement", {})}

    def _timed_rounds(self, plan: TimingPlan, base: int, reference_names: list[str]) -> dict:
        """Warm-ups, then interleaved rounds: the only part of a judgement that needs the GPU to itself."""
        self.events.stage("timing: warming up")
        self.candidate.request("time_setup", inputs_seed=base, warmup=plan.warmup)
        self.timer.request("time_setup", inputs_seed=base, warmup=plan.warmup)
        self.last_round = 0

        def timed_in(process: CandidateProcess, name: str):
            def one(round_: int) -> float:
                if process is self.candidate:
                    self.last_round = round_
                return float(process.request("time_once", spin=True, name=name, refill_seed=base + 1 + round_)["ms"])
            return one

        contenders = {"candidate": timed_in(self.candidate, "candidate"),
                      **{name: timed_in(self.timer, name) for name in reference_names}}
        self.events.stage("timing (interleaved rounds)")
        return time_interleaved(contenders, plan)

    def _after_timing(self, stats: dict, base: int, counts: dict, ceilings: dict) -> dict:
        # The last timed call's output must be right too: a candidate that skips work while timed fails here. (Not
        # where the Model keeps state: the timing called the two models different numbers of times.)
        if not self.stateful:
            with self.untimed():
                self.events.stage("checking the output of the last timed call")
                trial = {"problems": [], "comparisons": []}
                self.notes = []
                last = self.candidate.request("timed_output")["outputs"][0]
                self.judge_output(trial, last, base + 1 + self.last_round, base)
                if trial["problems"]:
                    raise Outcome("incorrect", *(f"the output of a timed call is wrong: {p}"
                                                 for p in trial["problems"]))

        bound = roofline.floor(counts["bytes"], counts["flops"], ceilings, counts["dtype"])
        cand = stats["candidate"]["median_ms"]
        speedups = {f"vs_{name}": stats[name]["median_ms"] / cand if cand > 0 else float("inf")
                    for name in stats if name != "candidate"}
        flags = []
        # On the CPU nothing flushes the caches, so a small problem can beat the DRAM floor honestly.
        if self.device.type == "cuda" and cand < FLOOR_MARGIN * bound["floor_ms"]:
            flags.append(f"the candidate's median {cand:.4g} ms is more than {1 - FLOOR_MARGIN:.0%} below the "
                         f"roofline floor {bound['floor_ms']:.4g} ms: it cannot have done all the work in the "
                         f"timed region (side stream? skipped work?)")
        for name, ratio in speedups.items():
            if ratio > 10:
                flags.append(f"speedup {ratio:.1f}x {name.replace('_', ' ')} is above 10x: check what the "
                             f"candidate skips before trusting it")
        return {"unit": "ms", "stats": stats, "speedups": speedups, "roofline": bound, "flags": flags,
                "achieved_fraction_of_floor": bound["floor_ms"] / cand if cand > 0 else None}

    # -- the whole protocol ------------------------------------------------------------------------------------
    def run(self) -> dict:
        self.events.stage("loading the problem")
        try:
            self.problem, init_inputs = load_problem(self.spec["problem"])
            self.init_inputs = init_inputs
            self.big = self.too_big_to_share()
            with self.untimed():
                self.inputs(self.spec["seed"])  # validates get_inputs() before any build
                self.reference = build_reference(self.problem, init_inputs, self.spec["seed"], self.device)
                self.scales = weight_scales(self.reference)
        except ProblemError as err:
            raise Outcome("usage", str(err)) from None
        with self.untimed():
            self.refuse_random_reference()
        self.candidate = CandidateProcess(self.device, self.events, self.early.pop(0))
        # It only times the reference (time_models): set up now, so that its compile overlaps the trials.
        self.timer = CandidateProcess(self.device, self.events, self.early.pop(0),
                                      "the reference's timing process") if self.spec["time"] else None
        try:
            self.events.stage(BUILD_STAGE)  # CPU work: no GPU section
            built = self.candidate.request("setup", problem=self.spec["problem"], candidate=self.spec["candidate"],
                                           code=self.spec["candidate_code"], device=str(self.device),
                                           precision=self.spec.get("precision", "fp32"))
            self.report["build_s"] = built["build_s"]
            with self.untimed():
                self.events.stage("constructing the models")
                self.candidate.request("construct", seed=self.spec["seed"])
            if self.timer is not None:
                self.prepare_reference_timing()
            self.check_trials()
            if self.timer is not None:
                self.report["timing"] = self.time_models(self.reference_timing_prepared())
            self.check_other_sizes()
            return self.report
        finally:
            self.candidate.close(at_once=True)  # its work is done or not wanted: no teardown to wait for
            if self.timer is not None:  # (time_models closes it) the judgement ended early: its compile is not wanted
                self.timer.close(at_once=True)

    def gpu_peak_bytes(self) -> int | None:
        """The judgement's GPU memory at its peak, at most: each process's own peak, summed (kfuse bench sizes
        its ledger with JUDGE_COPIES; this is what a run can check it against)."""
        if self.device.type != "cuda":
            return None
        helpers = [getattr(self, name, None) for name in ("candidate", "timer")]
        return torch.cuda.max_memory_reserved(self.device) + sum(p.peak_bytes for p in helpers if p is not None)

    def refuse_random_reference(self) -> None:
        """A Model whose output depends on the RNG (dropout with p > 0 in training mode) cannot be compared
        elementwise with any other implementation: say so instead of failing every honest candidate."""
        self.events.stage("checking that the reference is deterministic")
        outputs = []
        for call, seed in enumerate((1, 2, 2)):
            # Fresh copies for the first two calls: the model may write into its inputs or buffers (x += 1, running
            # stats). The third call is the second copy's second, with the same seed: a difference there is state
            # the Model carries from call to call (an Elman cell's hidden state in a plain attribute).
            probe = copy_model(self.reference) if call < 2 else probe
            inputs = self.inputs(self.spec["seed"])
            torch.manual_seed(seed)
            with torch.no_grad():
                outputs.append([t for _, t in leaves(probe(*inputs)) if isinstance(t, torch.Tensor)])
            del inputs  # one set of inputs at a time: a 6.4 GB problem fits twice, not four times
            if call == 1:
                # a library call that adds with atomics (index_add, scatter_add on CUDA) varies in its last bits
                self.reference_varies = not all(same_bits(a, b) for a, b in zip(*outputs))
                if not all(_same_but_for_rounding(a, b) for a, b in zip(*outputs)):
                    raise Outcome("usage", "the problem's Model gives different outputs for the same inputs under "
                                           "different random seeds (dropout with p > 0?): no candidate can be compared "
                                           "with it elementwise; use p = 0 or put the model in eval mode in the "
                                           "problem file")
                del outputs[0]
        self.stateful = not all(_same_but_for_rounding(a, b) for a, b in zip(*outputs))
        del probe, outputs
        release_cached_memory(self.device)

    def check_trials(self) -> None:
        self.plan = trial_plan(self.spec["trials"])
        failed = None
        for index, kind in enumerate(self.plan):
            with self.untimed():  # a section per trial: a judge waiting to time waits for one trial, not five
                trial = self.run_trial(index, kind)
            self.report["trials"].append(trial)
            self.events.emit("trial", trial=trial["trial"], kind=kind, passed=trial["passed"])
            if not trial["passed"] and failed is None:
                failed = trial
                if not self.spec.get("all_trials"):
                    break
        # KernelBench's rule alone, on what KernelBench would run: contiguous inputs, the weights the problem's own
        # construction gives. (Re-randomised weights can leave eager's own float32 output far from float64, 0.94 of
        # an EfficientNet-B2's logits on the CPU: there precision parity decides, as item 5 of DESIGN.md section 4 says.)
        self.report["kernelbench_pass"] = all(t.get("kernelbench_pass", False) for t in self.report["trials"]
                                              if t["kind"] not in ("strided", "reweighted"))
        if failed:
            what = TRIAL_KINDS[failed["kind"]]
            self.report["precision_only"] = precision_only(failed)
            raise Outcome("incorrect", *(f"trial {failed['trial']} ({what}): {p}" for p in failed["problems"]))

    def check_other_sizes(self) -> None:
        """Other sizes, after the judged trials and the timed rounds: half the batch plus one, twice the batch (small
        inputs only), then another length. Their outcome is told (`other_batch`, `other_length`), not judged:
        KernelBench runs a problem at its own sizes and the judge's rules are its rules (DESIGN.md section 4); other
        sizes are what a drop-in replacement owes its user (DESIGN.md section 2; kfuse's own files are held to them
        by their tests). Last, because a candidate that fails them may take its process down."""
        self.adopt_candidate_buffers()
        trials = []
        for offset, kind in enumerate(("resized", "doubled")):
            try:
                with self.untimed():
                    trials.append(self.run_trial(len(self.plan) + offset, kind))
            except Outcome as outcome:  # (its process may be gone: nothing more is asked of it)
                trials.append({"kind": kind, "passed": False,
                               "problems": [f"{outcome.status}: {'; '.join(outcome.reasons) or outcome.status}"]})
                self.report["other_batch"] = other_batch(trials)
                return
        self.report["other_batch"] = other_batch(trials)
        self.report["other_length"] = self.check_other_length(len(self.plan) + 2)

    def check_other_length(self, index: int) -> str:
        """Another length: the first of the first input's lengths (last dim first) whose cut the Model takes
        (problem.length_cuts, cut_length: a sequence, a signal, an image side), the candidate called on it once.
        "passed", "failed: what" or "skipped: why" (the Model takes none: its lengths are its weights')."""
        seed = self.spec["seed"] + 1 + index
        refusals = []
        for layout in length_cuts(make_inputs(self.problem, seed, torch.device("meta"))):  # (shapes only)
            dim = layout[len("length"):]
            refused = self.reference_refuses(seed, layout)
            if refused:
                refusals.append(f"dim {dim}: {refused}")
                continue
            try:
                with self.untimed():
                    trial = self.run_trial(index, "lengthened", layout)
            except Outcome as outcome:
                return f"failed: {outcome.status}: {'; '.join(outcome.reasons) or outcome.status}"
            return "passed" if trial["passed"] else f"failed (dim {dim}): " + "; ".join(trial["problems"])
        return "skipped: " + ("; ".join(refusals[:2]) if refusals else "no input dim past the batch is 4 or longer")


    def adopt_candidate_buffers(self) -> None:
        """Before the other sizes, the reference takes the candidate's buffers, which the trials found evolving as
        its own, so that each later trial compares one call's update: the timed calls moved the candidate's running
        statistics on and not the reference's (its timing process has a model of its own), and calls since the
        last re-randomised weights let the two drift apart by their roundings."""
        theirs = self.candidate.request("buffers")["buffers"]
        with torch.no_grad():
            for name, ours in self.reference.named_buffers():
                other = theirs.get(name)
                if isinstance(other, torch.Tensor) and other.shape == ours.shape:
                    ours.copy_(other)
        self.truth_buffers = None  # (both sides' buffers are the candidate's now)


def precision_only(trial: dict) -> bool:
    """A failed trial whose every problem is an output's precision parity (compare.TensorReport.precision_only):
    `kfuse optimize` and `kfuse bench` then plan the file again with eager's own rounding, as for correct-parity."""
    said = [p for c in trial["comparisons"] for p in c["problems"]]
    return (bool(said) and len(said) == len(trial["problems"])
            and all(c["passed"] or c["precision_only"] for c in trial["comparisons"]))


def other_batch(trials: list[dict]) -> str:
    """The verdict's line for the other batch sizes: "passed" (every one run passed), "failed: what" or "skipped: why"
    (none could run)."""
    failed = [f"{TRIAL_KINDS[t['kind']]}: {p}" for t in trials if not t["passed"] for p in t["problems"]]
    if failed:
        return "failed: " + "; ".join(failed)
    if all("skipped" in t for t in trials):
        return "skipped: " + trials[0]["skipped"]
    return "passed"


def _same_but_for_rounding(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Two calls of the reference on the same inputs agree but for rounding: within 1% of the output's largest finite
    value, NaN where NaN. A library may pick another algorithm for the second call (cuDNN, when less memory is free
    for its workspace: an 8.6 GB conv1d on an H100 came out over 1e-4 apart), which moves results by about 1e-3 of
    their scale; the randomness this check is for (dropout) zeroes elements, which moves them by their whole size."""
    if a.shape != b.shape:
        return False
    if a.numel() == 0 or not a.is_floating_point():
        return torch.equal(a, b)
    scale = max(float(x.nan_to_num(0.0, 0.0, 0.0).abs().max()) for _, (x, _) in float64_chunks(a, b))
    return all(torch.equal(x.isnan(), y.isnan()) and bool(((x - y).nan_to_num(0.0).abs() <= 1e-2 * scale).all())
               for _, (x, y) in float64_chunks(a, b))


def environment(device: torch.device) -> dict:
    info = {"target": device.type, "torch": torch.__version__, "python": sys.version.split()[0]}
    if device.type == "cuda":
        info["name"] = torch.cuda.get_device_name(device)
        info["cuda"] = torch.version.cuda
    else:
        info["name"] = "cpu"
    return info


def main(spec_path: str, events_path: str, token: str, early: list) -> int:
    """The judgement, its outcome written to EVENTS. `early`: the sandbox processes kfuse.judge.launch forked
    (the candidate's, then the timer's where the spec times); the caller kills those not taken."""
    spec = json.loads(Path(spec_path).read_text())
    events = Events(events_path, token)
    device = torch.device(spec["device"])
    if device.type == "cuda" and not torch.cuda.is_available():
        events.emit("outcome", status="usage", reasons=["--device cuda was asked for, but no CUDA GPU is visible"])
        return 0
    events.emit("environment", **environment(device))
    apply_precision(spec.get("precision", "fp32"))
    judgement = Judgement(spec, events, early)
    try:
        report = judgement.run()
        report["gpu_wait_s"] = round(judgement.gpu.waited_s, 3)
        report["gpu_peak_bytes"] = judgement.gpu_peak_bytes()
        events.emit("outcome", status="correct", reasons=[], report=report)
    except Outcome as outcome:
        judgement.report["gpu_wait_s"] = round(judgement.gpu.waited_s, 3)
        judgement.report["gpu_peak_bytes"] = judgement.gpu_peak_bytes()
        events.emit("outcome", status=outcome.status, reasons=outcome.reasons, report=judgement.report)
    except Exception as err:  # a failure of the judge itself: say so plainly, with the traceback in the log
        traceback.print_exc()
        events.emit("outcome", status="judge_error", reasons=[f"the judge failed: {describe_exception(err)}"],
                    report=judgement.report)
    return 0
