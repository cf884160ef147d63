"""`kfuse check`: the verdict on one candidate, from the static check and an isolated worker.

The parent never imports user code. It parses both files, applies the static rules, then runs the trusted worker
(`kfuse.judge.launch`, then `kfuse.judge.worker`) in a new process session with a wall-clock timeout (build
included) and, on the CPU target, a cap on host memory.
Whatever the worker does — segfault, illegal address, hang, OOM — the parent survives and turns it into a verdict.
"""

from __future__ import annotations

import ast
import json
import os
import random
import secrets
import signal
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

from kfuse import PRECISIONS, __version__
from kfuse.errors import UsageError
from kfuse.extract import ExtractionError
from kfuse.loader import check_problem_source, parse_python, read_candidate, top_level_names
from kfuse.judge.static import check_source
from kfuse.judge.zygote import popen

# correct-parity: every kfuse check passed, KernelBench's allclose(1e-4) against eager did not (eager's own result
# is that far from float64: TF32 convolutions). Reported apart, never counted as correct.
STATUSES = ("correct", "correct-parity", "incorrect", "compile_error", "crashed", "timeout", "rejected")
SCHEMA = "kfuse.verdict/1"
LOG_TAIL_CHARS = 4000


@dataclass
class CheckOptions:
    device: str = "cuda"
    trials: int = 5
    timeout: float = 300.0
    seed: int | None = None            # None: a fresh random base seed each run (recorded in the verdict)
    time: bool = True                  # time the candidate when it is correct
    compile_modes: list[str] = field(default_factory=lambda: ["default"])
    warmup: int = 3
    timing_trials: int = 30
    min_seconds: float = 1.0
    memory_limit_gb: float | None = None   # CPU target only; None: three quarters of physical memory
    precision: str = "fp32"            # fp32 (PyTorch's defaults) or tf32 (TF32 allowed for reference and candidate)
    all_trials: bool = False           # keep going after the first failed trial


def memory_cap_bytes(options: CheckOptions) -> int:
    if options.memory_limit_gb is not None:
        return int(options.memory_limit_gb * (1 << 30))
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 3 // 4)


def declares_atomics(tree: ast.Module) -> bool:
    """`USES_ATOMICS = True` at the top of a candidate allows run-to-run differences (atomic reductions)."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value is True:
            if any(isinstance(t, ast.Name) and t.id == "USES_ATOMICS" for t in node.targets):
                return True
    return False


def needs_precision_fallback(status: str | None, precision_only: bool) -> bool:
    """Whether kfuse optimize's fallbacks apply (the problem planned again with each of
    choices.PRECISION_FALLBACKS in turn): a correct-parity file (as accurate as eager, not within KernelBench's 1e-4
    of it), or one incorrect on precision parity alone (within 1e-4 of eager, further than its bound from float64)."""
    return status == "correct-parity" or (status == "incorrect" and precision_only)


# A correct file timed below this share of eager's speed is planned again with kfuse tune's alternatives (kfuse
# optimize and kfuse bench), keeping the fastest correct one.
SLOWER_THAN_EAGER = 0.95


def slower_than_eager(status: str | None, vs_eager: float | None) -> bool:
    return status == "correct" and vs_eager is not None and vs_eager < SLOWER_THAN_EAGER


def vs_eager(verdict: dict | None) -> float | None:
    """The verdict's speedup over eager, None where it was not timed."""
    return (((verdict or {}).get("timing") or {}).get("speedups") or {}).get("vs_eager")


def new_verdict(problem: str, candidate: str, options: CheckOptions) -> dict:
    return {
        "schema": SCHEMA, "kfuse_version": __version__, "status": None, "reasons": [],
        "problem": str(problem), "candidate": str(candidate), "extraction": None,
        "options": asdict(options), "environment": None, "static": [], "stage": None, "build_s": None,
        "kernelbench_pass": None, "precision_only": False, "other_batch": None, "other_length": None, "trials": [],
        "timing": None,
        "error_log": None, "elapsed_s": None, "stages_s": None, "gpu_wait_s": None, "gpu_peak_bytes": None,
    }


def finish(verdict: dict, status: str, reasons: list[str], began: float) -> dict:
    assert status in STATUSES, status
    verdict["status"] = status
    verdict["reasons"] = reasons
    verdict["elapsed_s"] = round(time.perf_counter() - began, 3)
    return verdict


def check(problem: str | Path, candidate: str | Path, options: CheckOptions,
          on_stage: Callable[[str], None] = lambda stage: None, gpu_checked: bool = False) -> dict:
    """Judge `candidate` against `problem`. Raises UsageError for bad input; every other outcome is a verdict.

    `gpu_checked`: the caller knows a CUDA GPU is there (kfuse bench): no torch import here to ask, 2-4 s of each
    judgement before its worker starts (the worker asks too, and says the same)."""
    began = time.perf_counter()
    if options.trials < 5:
        raise UsageError(f"--trials must be at least 5 (got {options.trials})")
    check_problem_source(problem)  # parsed here, imported by the worker
    if options.precision not in PRECISIONS:
        raise UsageError(f"--precision must be one of {', '.join(PRECISIONS)} (got {options.precision!r})")
    if options.device not in ("cuda", "cpu"):
        raise UsageError(f"--device must be cuda or cpu (got {options.device!r})")
    if options.device == "cuda" and not gpu_checked:
        import torch

        if not torch.cuda.is_available():
            raise UsageError("--device cuda was asked for, but no CUDA GPU is visible (use --device cpu)")
    if options.seed is None:
        options = replace(options, seed=random.SystemRandom().randrange(1 << 30))
    verdict = new_verdict(problem, candidate, options)

    try:
        source = read_candidate(candidate)
    except ExtractionError as err:
        return finish(verdict, "compile_error", [f"no code to judge: {err}"], began)
    verdict["extraction"] = source.extraction
    try:
        tree = parse_python(source.code, str(candidate))
        findings = check_source(tree, options.device)
    except SyntaxError as err:
        return finish(verdict, "compile_error", [str(err)], began)
    except (RecursionError, MemoryError, ValueError) as err:  # absurdly nested or huge sources
        return finish(verdict, "compile_error", [f"the candidate's source cannot be analysed "
                                                 f"({type(err).__name__})"], began)
    if "ModelNew" not in top_level_names(tree):
        return finish(verdict, "rejected", ["the candidate does not define class ModelNew"], began)
    verdict["static"] = [f.to_dict() for f in findings]
    errors = [f for f in findings if f.level == "error"]
    if errors:
        return finish(verdict, "rejected", [f"static check: {f}" for f in errors], began)

    spec = {**asdict(options), "problem": str(Path(problem).resolve()), "candidate": str(Path(candidate).resolve()),
            "candidate_code": source.code, "uses_atomics": declares_atomics(tree)}
    status, reasons = run_worker(spec, options, verdict, on_stage)
    if status == "usage":
        raise UsageError(reasons[0] if reasons else "the problem could not be run")
    return finish(verdict, status, reasons, began)


SIGNAL_MEANING = {signal.SIGSEGV: "segmentation fault", signal.SIGBUS: "bus error", signal.SIGABRT: "abort",
                  signal.SIGFPE: "floating-point exception", signal.SIGILL: "illegal instruction",
                  signal.SIGKILL: "killed, likely out of host memory"}


# The worker's stage while the candidate's file is imported (its extensions built).
BUILD_STAGE = "building the candidate"
# ...and while it waits for other judges' timing to end before its own (kfuse bench --per-gpu).
WAIT_STAGE = "waiting for the GPU to time alone"


def stage_bucket(stage: str) -> str:
    """Where a worker stage's seconds are reported: the parts of a judgement a user can act on."""
    if stage == BUILD_STAGE:
        return "build"
    if stage == WAIT_STAGE:
        return "gpu_wait"
    if stage.startswith("compiling the reference"):
        return "compile"
    if stage.startswith("timing"):
        return "timing"
    return "trials"  # loading, the reference and its float64 truth, the trials, the checks after timing


def stage_timeline(events: list[dict], started: float, ended: float) -> list[list]:
    """Each worker stage in order with its seconds ([stage, seconds]), the first being the worker's start (the
    process and its imports): where one judgement's time went."""
    marks = [("starting the worker", started)] + [(e["stage"], e["t"]) for e in events if e["event"] == "stage"]
    return [[stage, round(max(0.0, t_next - t), 3)]
            for (stage, t), (_, t_next) in zip(marks, marks[1:] + [("", ended)])]


def stage_seconds(timeline: list[list]) -> dict[str, float]:
    """The timeline's seconds per bucket (stage_bucket); the worker's start is "startup"."""
    seconds: dict[str, float] = {}
    for i, (stage, spent) in enumerate(timeline):
        bucket = "startup" if i == 0 else stage_bucket(stage)
        seconds[bucket] = seconds.get(bucket, 0.0) + spent
    return {bucket: round(s, 3) for bucket, s in seconds.items()}


def stale_build_locks(code: str, since: float) -> list[str]:
    """torch's build locks (`<build root>/<extension>/lock`) older than `since`, of extensions the candidate's code
    names. A build stopped midway (a judge killed at a bench's interruption) leaves its lock behind, and every later
    build of that extension waits for it to go away: a timeout that is not the candidate's doing."""
    try:
        if os.environ.get("TORCH_EXTENSIONS_DIR"):
            locks = list(Path(os.environ["TORCH_EXTENSIONS_DIR"]).glob("*/lock"))
        else:  # torch's default root, one folder per Python and CUDA version (py312_cu130) under it
            from torch.utils.cpp_extension import get_default_build_root

            locks = list(Path(get_default_build_root()).glob("*/*/lock"))
    except Exception:  # no torch here, or an unreadable build root: nothing to report
        return []
    found = []
    for lock in locks:
        try:
            stale = lock.stat().st_mtime < since
        except OSError:  # removed meanwhile: its build finished
            continue
        if stale and lock.parent.name in code:
            found.append(str(lock))
    return sorted(found)


def run_worker(spec: dict, options: CheckOptions, verdict: dict, on_stage: Callable[[str], None]) -> tuple:
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="kfuse-check-") as tmp:
        spec_path, events_path, log_path = (Path(tmp) / n for n in ("spec.json", "events.jsonl", "worker.log"))
        spec_path.write_text(json.dumps(spec))
        events_path.touch()
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        limit = None
        if options.device == "cpu":
            # Blocks up to 32 MiB (glibc's largest mmap threshold) come from the heap and freed ones stay there,
            # not returned to the OS as fresh zero pages, so the NaN poisoning reaches the candidate's
            # allocations; and the worker may not take the whole host.
            env.update(MALLOC_MMAP_THRESHOLD_=str(32 << 20), MALLOC_TRIM_THRESHOLD_=str(1 << 40))
            limit = memory_cap_bytes(options)
        with open(log_path, "w") as log:
            # forked by the run's zygote where one serves (it imported torch once), else a process of its own
            process = popen(["-m", "kfuse.judge.launch", str(spec_path), str(events_path)], env=env,
                            stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, memory_cap=limit)
            # The token marks the trusted worker's lines: the candidate's process can find the events file,
            # never the token (it was read from a pipe before the candidate started).
            token = secrets.token_hex(16)
            process.stdin.write(f"{token}\n".encode())
            process.stdin.close()
            timed_out = wait_with_stages(process, events_path, token, options.timeout, on_stage)
        events = read_events(events_path, token)
        log_text = log_path.read_text(errors="replace")
    verdict["timeline"] = stage_timeline(events, started, time.time())
    verdict["stages_s"] = stage_seconds(verdict["timeline"])

    stages = [e["stage"] for e in events if e["event"] == "stage"]
    verdict["stage"] = stages[-1] if stages else "starting the worker"
    for e in events:
        if e["event"] == "environment":
            verdict["environment"] = {k: v for k, v in e.items() if k not in ("event", "t", "token")}
    outcome = next((e for e in reversed(events) if e["event"] == "outcome"), None)
    if outcome:
        report = outcome.get("report") or {}
        verdict["build_s"] = report.get("build_s")
        verdict["trials"] = report.get("trials", [])
        verdict["kernelbench_pass"] = report.get("kernelbench_pass")
        verdict["precision_only"] = bool(report.get("precision_only"))
        verdict["other_batch"] = report.get("other_batch")
        verdict["other_length"] = report.get("other_length")
        verdict["timing"] = report.get("timing")
        verdict["gpu_wait_s"] = report.get("gpu_wait_s")
        verdict["gpu_peak_bytes"] = report.get("gpu_peak_bytes")
    if timed_out:
        verdict["error_log"] = log_text[-LOG_TAIL_CHARS:]
        reasons = [f"timed out after {options.timeout:g} s while {verdict['stage']} (build included in the limit)"]
        locks = stale_build_locks(spec["candidate_code"], started) if verdict["stage"] == BUILD_STAGE else []
        if locks:
            verdict["stale_build_locks"] = locks
            reasons.append(f"a build lock older than this judge was in the way: {locks[0]} (an interrupted build "
                           f"leaves it; delete it and judge again)")
        return "timeout", reasons
    if outcome is None:
        verdict["error_log"] = log_text[-LOG_TAIL_CHARS:]
        code = process.returncode
        if code < 0:
            sig = signal.Signals(-code)
            return "crashed", [f"the worker died with {sig.name} ({SIGNAL_MEANING.get(sig, 'signal')}) while "
                               f"{verdict['stage']}"]
        return "crashed", [f"the worker exited with code {code} while {verdict['stage']}"]
    status = outcome["status"]
    if status == "correct" and verdict["kernelbench_pass"] is False:
        return "correct-parity", [
            "every kfuse check passed, but KernelBench's check (allclose, atol = rtol = 1e-4 against eager's output) "
            "failed in some trial: the candidate is as close to float64 as eager is, not within 1e-4 of eager"]
    if status == "judge_error":
        verdict["error_log"] = log_text[-LOG_TAIL_CHARS:]
        return "crashed", outcome["reasons"] + ["(the judge itself failed here: please report this with the log)"]
    if status in ("compile_error", "crashed"):
        verdict["error_log"] = log_text[-LOG_TAIL_CHARS:]
    return status, outcome["reasons"]


def wait_with_stages(process: subprocess.Popen, events_path: Path, token: str, timeout: float,
                     on_stage: Callable[[str], None]) -> bool:
    """Wait for the worker, passing each new stage to `on_stage`. True if it had to be killed at the timeout.

    If the wait itself is interrupted (Ctrl-C, or a caller such as `kfuse bench` stopping us), the worker's whole
    session goes too: it runs in its own session, so no signal to ours would reach it.
    """
    deadline = time.monotonic() + timeout
    seen = 0
    try:
        while True:
            try:
                process.wait(timeout=0.2)
                return False
            except subprocess.TimeoutExpired:
                pass
            events = read_events(events_path, token)
            for e in events[seen:]:
                if e["event"] == "stage":
                    on_stage(e["stage"])
            seen = len(events)
            if time.monotonic() > deadline:
                kill_session(process)  # the whole session: compilers and ninja too
                return True
    except BaseException:
        kill_session(process)
        raise


def kill_session(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def read_events(path: Path, token: str) -> list[dict]:
    events = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:  # a line cut short by a crash mid-write
            continue
        if isinstance(event, dict) and event.get("token") == token:
            events.append(event)
    return events
