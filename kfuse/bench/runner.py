"""`kfuse bench`: optimize or judge a whole folder of problems, resumably, one worker per GPU (or Ray tasks).

Without candidates, each problem streams through a Pipeline: optimized (`kfuse optimize --no-check`, a process
each, several at once), built, then judged as soon as it is built, while later problems are still being optimized
and built. Each problem with a candidate is one *job* run in a fresh process (`python -m kfuse.bench.runner JOB OUT`):
`kfuse.judge.check`, which starts its own sandboxed processes under their timeouts. A job carries the problem's and
candidate's text, not paths, so it runs the same on this machine or on a Ray node. A finished job's result goes to
`--out/cache/<sha256>.json` at once: a rerun, or a run after Ctrl-C, judges only what is not there yet. The report
(`kfuse.bench.report`) is built from the records.
"""

from __future__ import annotations

import ast
import collections
import contextlib
import hashlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Callable

from kfuse import __version__
from kfuse import gpulock
from kfuse.judge import zygote
from kfuse.errors import UsageError
from kfuse.judge.verdict import kill_session, needs_precision_fallback, slower_than_eager, vs_eager
from kfuse.loader import top_level_names

SCHEMA = "kfuse.bench/1"
CANDIDATE_SUFFIXES = (".py", "_new.py", ".txt", ".md")
IGNORED_DIRS = {"__pycache__", ".git", ".hg", ".svn", ".venv", "venv", "node_modules", ".pytest_cache"}
# The pipeline's optimize and build processes run niced: they fill the cores the judges leave idle, and a judge's
# own CPU work (its trials, torch.compile) is not slowed by a dozen compilers beside it.
NICE = 10
JOB_MARGIN_S = 120.0  # beyond the judge's own timeout and optimize's, for imports and the process itself


@dataclass
class BenchOptions:
    device: str = "cuda"
    out: Path = Path("bench-out")
    candidates: Path | None = None        # None: optimize every problem
    workers: int | None = None            # None: every visible GPU (cuda), 1 (cpu)
    per_gpu: int = 1                      # jobs sharing each GPU (their timing still runs alone: kfuse.gpulock)
    quiet_timing: bool = True             # per_gpu > 1: timing stops the other jobs' processes (kfuse.gpulock)
    ray: str | None = None                # None, "local", or a cluster address
    timeout: float = 300.0                # per problem, for the judge (build included) and again for optimize
    time: bool = True
    min_seconds: float = 1.0
    compile_modes: list[str] = field(default_factory=lambda: ["default"])
    trials: int = 5
    seed: int | None = 0                  # fixed, so that a cached result is the result of a rerun

    def check_options(self):
        from kfuse.judge.verdict import CheckOptions

        return CheckOptions(device=self.device, trials=self.trials, timeout=self.timeout, seed=self.seed,
                            time=self.time, compile_modes=list(self.compile_modes), min_seconds=self.min_seconds)


@dataclass
class Problem:
    id: str          # the stem, or folder__stem where two problems share a stem
    path: Path
    candidate: Path | None = None


# ---------------------------------------------------------------------------------------------------- discovery

def defines_problem(tree: ast.Module) -> bool:
    names = top_level_names(tree)
    return "Model" in names and "get_inputs" in names


def looks_like_problem(path: Path) -> bool:
    """A `.py` that defines class Model and get_inputs at the top level, found by parsing (never importing).

    A file that does not parse counts when its text plainly defines both, so that it is reported, not skipped.
    """
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return False
    try:
        return defines_problem(ast.parse(text, filename=str(path)))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "class Model" in text and "def get_inputs" in text


def natural_key(path: Path) -> list:
    """KernelBench order: 2_ReLU before 10_GELU (numbers compared as numbers), folder by folder."""
    return [[(0, int(t), "") if t.isdigit() else (1, 0, t.lower()) for t in re.split(r"(\d+)", part)]
            for part in path.parts]


def discover(paths: list[Path], skip: list[Path] = ()) -> list[Problem]:
    """Problem files under `paths` (files as given, folders searched recursively), in a stable order."""
    if not paths:
        raise UsageError("give at least one problem file or folder")
    skip = [s.resolve() for s in skip if s]
    found: list[Path] = []
    for path in paths:
        if not path.exists():
            raise UsageError(f"not found: {path}")
        if path.is_file():
            if path.suffix != ".py":
                raise UsageError(f"a problem must be a .py file: {path}")
            found.append(path)
            continue
        in_folder = []
        for file in sorted(path.rglob("*.py"), key=natural_key):
            relative = file.relative_to(path).parts[:-1]
            if any(part in IGNORED_DIRS or part.startswith(".") for part in relative):
                continue
            if any(file.resolve().is_relative_to(s) for s in skip):
                continue
            if looks_like_problem(file):
                in_folder.append(file)
        if not in_folder:
            raise UsageError(f"no problem files (a .py defining class Model and get_inputs) under {path}")
        found.extend(in_folder)
    unique = list(dict.fromkeys(p.resolve() for p in found))
    stems: dict[str, int] = {}
    for p in unique:
        stems[p.stem] = stems.get(p.stem, 0) + 1
    problems = []
    for p in unique:
        pid = p.stem if stems[p.stem] == 1 else f"{p.parent.name}__{p.stem}"
        problems.append(Problem(pid, p))
    ids = [p.id for p in problems]
    if len(set(ids)) != len(ids):
        raise UsageError("two problems share a file name and a folder name; bench them in separate runs")
    return problems


def find_candidate(folder: Path, stem: str) -> Path | None:
    """`<stem>.py`, `<stem>_new.py`, `<stem>.txt` or `<stem>.md` in `folder` (or, if only there, one below it)."""
    names = [stem + suffix for suffix in CANDIDATE_SUFFIXES]
    for name in names:
        if (folder / name).is_file():
            return folder / name
    for name in names:
        below = sorted(folder.rglob(name))
        if len(below) == 1:
            return below[0]
    return None


# -------------------------------------------------------------------------------------------------------- cache

def torch_version() -> str:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "?"


def cache_key(problem_bytes: bytes, candidate_bytes: bytes | None, options: BenchOptions) -> str:
    """sha256 of the problem, the candidate (or "optimize"), kfuse's and torch's versions, the device, the options."""
    h = hashlib.sha256()
    check = {k: v for k, v in asdict(options.check_options()).items()}
    for part in (problem_bytes, candidate_bytes if candidate_bytes is not None else b"optimize",
                 __version__.encode(), torch_version().encode(), options.device.encode(),
                 json.dumps(check, sort_keys=True, default=str).encode()):
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()


def read_cache(folder: Path, key: str) -> dict | None:
    try:
        data = json.loads((folder / f"{key}.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if data.get("key") == key else None


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.part")
    partial.write_text(text)
    os.replace(partial, path)


# --------------------------------------------------------------------------------------------------------- jobs

def make_job(problem: Problem, options: BenchOptions) -> dict:
    job = {"id": problem.id, "problem_name": problem.path.name, "problem_path": str(problem.path),
           "problem_text": problem.path.read_text("utf-8-sig"),
           "device": options.device, "check": asdict(options.check_options())}
    if problem.candidate is not None:
        job["candidate_name"] = problem.candidate.name
        job["candidate_path"] = str(problem.candidate)
        job["candidate_text"] = problem.candidate.read_text(encoding="utf-8-sig", errors="replace")
    return job


def first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def run_job(job: dict) -> dict:
    """Judge one problem's candidate in this process. Never raises for a verdict.

    Messages name the files as the user gave them, not the job's temporary copies.
    """
    result = _run_job(job)
    for tmp, given in job.get("_copies", {}).items():
        result["reasons"] = [r.replace(tmp, given) for r in result["reasons"]]
    return result


def _run_job(job: dict) -> dict:
    from kfuse.judge.verdict import CheckOptions, check

    result = {"status": None, "reasons": [], "verdict": None, "optimized": job.get("optimized"),
              "candidate_code": job["candidate_text"] if job.get("optimized") else None,
              "data_bytes": job.get("data_bytes")}
    with tempfile.TemporaryDirectory(prefix="kfuse-bench-") as tmp:
        # Under the problem's own file name: emitted extension names and messages carry its stem.
        problem = Path(tmp) / "problem" / job["problem_name"]
        problem.parent.mkdir()
        problem.write_text(job["problem_text"])
        job["_copies"] = {str(problem): job.get("problem_path", problem.name)}
        candidate = Path(tmp) / "candidate" / job["candidate_name"]
        candidate.parent.mkdir()
        candidate.write_text(job["candidate_text"])
        job["_copies"][str(candidate)] = job.get("candidate_path", candidate.name)
        try:
            mark_stage(job, "judging")
            # The GPU was checked by the bench (worker_slots), or given by Ray: the judge need not import torch for it.
            verdict = check(problem, candidate, CheckOptions(**job["check"]), gpu_checked=True)
        except UsageError as err:
            result.update(status="unsupported", reasons=[str(err)])
            return result
        result.update(status=verdict["status"], reasons=verdict["reasons"], verdict=verdict)
        if verdict.get("stale_build_locks"):  # kfuse.judge.verdict.stale_build_locks: not the candidate's verdict, not cached
            result["infra"] = True
    return result


def mark_stage(job: dict, stage: str) -> None:
    if job.get("_stage_file"):
        Path(job["_stage_file"]).write_text(stage)


def run_job_isolated(job: dict, env: dict | None = None) -> dict:
    """`run_job` in a fresh process, so that a problem which kills or hangs its importer only ends its own job.

    Interrupted (Ctrl-C, a Ray cancel), the job process is asked to stop (it then ends the judge's worker) and
    killed if it does not.
    """
    limit = 2 * job["check"]["timeout"] + JOB_MARGIN_S
    with tempfile.TemporaryDirectory(prefix="kfuse-bench-job-") as tmp:
        job_path, result_path, log_path = Path(tmp) / "job.json", Path(tmp) / "result.json", Path(tmp) / "job.log"
        job_path.write_text(json.dumps(job))
        began = time.perf_counter()
        with open(log_path, "w") as log:
            process = subprocess.Popen([sys.executable, "-m", "kfuse.bench.runner", str(job_path), str(result_path)],
                                       stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                       env=job_environment(env), start_new_session=True)
            with RUNNING_LOCK:
                RUNNING.add(process)
            try:
                process.wait(timeout=limit)
                timed_out = False
            except subprocess.TimeoutExpired:
                stop(process)
                timed_out = True
            except BaseException:
                stop(process)
                raise
            finally:
                with RUNNING_LOCK:
                    RUNNING.discard(process)
        elapsed = round(time.perf_counter() - began, 3)
        if result_path.exists():
            result = json.loads(result_path.read_text())
        else:
            stage_path = Path(f"{result_path}.stage")
            stage = stage_path.read_text() if stage_path.exists() else "starting"
            tail = log_path.read_text(errors="replace").strip().splitlines()[-3:]
            if timed_out:
                reason = f"the job ran past {limit:g} s while {stage} and was stopped"
            elif process.returncode < 0:
                reason = f"the job's process died with {signal.Signals(-process.returncode).name} while {stage}"
            else:
                reason = f"the job's process exited with code {process.returncode} while {stage}"
            status = "timeout" if timed_out else "crashed"
            if tail:
                reason += ": " + " | ".join(line.strip() for line in tail)[-600:]
            result = {"status": status, "reasons": [reason], "verdict": None, "optimized": None,
                      "candidate_code": None}
    result["elapsed_s"] = elapsed
    return result


def job_environment(extra: dict | None) -> dict:
    """Ours, plus the slot's (CUDA_VISIBLE_DEVICES), with this kfuse importable: on a Ray node it may have come
    with the task (py_modules) rather than installed."""
    env = {**os.environ, **(extra or {})}
    root = str(Path(__file__).resolve().parents[2])  # the folder that holds the kfuse package
    paths = env.get("PYTHONPATH", "").split(os.pathsep) if env.get("PYTHONPATH") else []
    installed = Path(root).name in ("site-packages", "dist-packages")  # there already, and never before stdlib
    if root not in paths and not installed:
        env["PYTHONPATH"] = os.pathsep.join([root] + paths)
    return env


def stop(process: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGINT first (the job then ends the judge's worker), SIGKILL to the job's session after `grace` seconds."""
    try:
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    except ProcessLookupError:
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def job_main(job_path: str, result_path: str) -> int:
    # A parent may have left SIGINT ignored or blocked (Ray's workers do, and exec keeps both): being stopped must
    # raise KeyboardInterrupt here, so that the judge ends its worker, which runs in a session of its own.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    job = json.loads(Path(job_path).read_text())
    job["_stage_file"] = f"{result_path}.stage"
    try:
        result = run_job(job)
    except KeyboardInterrupt:
        return 130
    write_atomically(Path(result_path), json.dumps(result, default=str))
    return 0


# ------------------------------------------------------------------------------------------------- optimizing

def kfuse_sources_digest() -> str:
    """sha256 of kfuse's own source files: an emitted ModelNew depends on them, not only on the version number."""
    h = hashlib.sha256()
    root = Path(__file__).resolve().parents[1]  # the kfuse package, subpackages included
    for file in sorted(root.rglob("*.py")):
        h.update(file.relative_to(root).as_posix().encode())
        h.update(hashlib.sha256(file.read_bytes()).digest())
    return h.hexdigest()


class Optimizer:
    """`kfuse optimize --no-check` of one problem in its own process (CPU work: capture on the meta device, no
    build). The judge's cache is then keyed on the emitted file itself, so a rerun after kfuse changed judges
    again exactly the problems whose ModelNew changed.

    An emitted file is kept in `--out/optimized/` under a hash of the problem, kfuse's sources, torch's version and
    the device, so a resumed run (a fresh machine with the carried --out) skips optimizing what it did before.
    """

    def __init__(self, options: BenchOptions, fallback: str | None = None, ungraphed: bool = False,
                 env: dict | None = None, choice: str | None = None):
        # fallback: one of PRECISION_FALLBACKS (`kfuse optimize --fallback`); ungraphed: `--cuda-graph off`; env: a
        # worker slot's (its GPU and the judges' lock, which the plan's probes of eager's precision take); choice:
        # one of SPEED_ALTERNATIVES (`kfuse optimize --choice`)
        self.options, self.fallback, self.ungraphed, self.env = options, fallback, ungraphed, env
        self.choice = choice
        self.folder, self.memo = options.out / "candidates", options.out / "optimized"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.memo.mkdir(exist_ok=True)
        self.salt = (f"{kfuse_sources_digest()} {torch_version()} {options.device} {fallback or ''}"
                     f"{' ungraphed' * ungraphed}{f' {choice}' if choice else ''}").encode()

    def __call__(self, problem: Problem) -> dict:
        """{"path", "optimized", "reused"}, or {"status": "unsupported", "reasons"}."""
        options = self.options
        stem = (f"{problem.id}_new{f'_{self.fallback}' if self.fallback else ''}{'_ungraphed' * self.ungraphed}"
                f"{'_' + re.sub(r'[^0-9A-Za-z_]+', '_', self.choice) if self.choice else ''}")
        path, report = self.folder / f"{stem}.py", self.folder / f".{stem}.json"
        for stale in (path, report):  # a file from an earlier run must not stand for this one
            stale.unlink(missing_ok=True)
        kept = None
        try:
            kept = self.memo / f"{hashlib.sha256(problem.path.read_bytes() + self.salt).hexdigest()}.json"
            earlier = json.loads(kept.read_text())
            write_atomically(path, earlier["candidate"])
            reused = {**earlier["optimized"], "optimize_s": 0.0}  # no time spent on it in this run
            return {"path": path, "optimized": reused, "reused": True}
        except (OSError, json.JSONDecodeError, KeyError):
            pass  # not emitted before (or unreadable: optimize says why)
        command = ["-m", "kfuse", "optimize", str(problem.path), "-o", str(path), "--device", options.device,
                   "--no-check", "--json", str(report)] + ["--fallback", self.fallback] * bool(self.fallback) \
            + ["--cuda-graph", "off"] * self.ungraphed + ["--choice", self.choice] * bool(self.choice)
        began = time.perf_counter()
        for attempt in range(1, OPTIMIZE_ATTEMPTS + 1):
            result = self._optimize_once(command, path, report)
            if result.get("status") != "unsupported" or attempt == OPTIMIZE_ATTEMPTS \
                    or "out of memory" not in " ".join(result["reasons"]).lower():
                break
            # The plan's probes of eager's precision run on the GPU, beside the judges: their memory, not the
            # problem's, was missing (two problems of an H100 run, 2026-11-26). Again once some has been handed back.
            time.sleep(OPTIMIZE_RETRY_S * attempt)
        if result.get("status") == "unsupported":
            return result
        result["optimized"]["optimize_s"] = round(time.perf_counter() - began, 3)  # the process: imports included
        try:  # only a shortcut for the next run
            if kept is not None:
                write_atomically(kept, json.dumps({"candidate": path.read_text(), "optimized": result["optimized"]}))
        except OSError:
            pass
        return result

    def _optimize_once(self, command: list[str], path: Path, report: Path) -> dict:
        """`python COMMAND` (kfuse optimize), forked by the run's zygote where one serves."""
        if STOPPING.is_set():
            raise KeyboardInterrupt
        with tempfile.TemporaryFile("w+") as errors:
            done = zygote.popen(command, env=job_environment(self.env), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=errors, nice=NICE)
            try:
                with preparing(done):
                    done.wait(timeout=self.options.timeout)
            except subprocess.TimeoutExpired:
                return unsupported(f"the problem could not be optimized in {self.options.timeout:g} s")
            finally:
                kill_session(done)
            errors.seek(0)
            stderr = errors.read()
        if done.returncode == 0 and report.exists():
            optimized = json.loads(report.read_text())
            report.unlink()
            optimized = {k: optimized.get(k) for k in ("kernels", "library_calls", "unfused", "stages_s", "launches",
                                                       "cuda_graph")}
            return {"path": path, "optimized": optimized, "reused": False}
        errors = [line for line in stderr.splitlines() if line.startswith("kfuse: error: ")]
        if errors:  # kfuse's own one-line refusal
            return unsupported(errors[-1].removeprefix("kfuse: error: "))
        how = (f"died with {signal.Signals(-done.returncode).name}" if done.returncode < 0
               else f"exited with code {done.returncode}")
        tail = " | ".join(line.strip() for line in stderr.strip().splitlines()[-3:])[-600:]
        return unsupported(f"the problem could not be optimized: the process {how} while optimizing"
                           + (f": {tail}" if tail else ""))


# kfuse.kernels.choices.PRECISION_FALLBACKS by name, in their order (`kfuse optimize --fallback NAME`)
PRECISION_FALLBACKS = ("library_gemms", "eager_rounding")

# kfuse.kernels.choices.ALTERNATIVES after the defaults, as `kfuse optimize --choice` takes them (the bench does not
# import the planner; a test keeps the two equal). A correct file judged slower than eager (verdict.slower_than_eager)
# is planned again with each (speed_pass), and the fastest correct file kept where it beats the first by more than
# SPEED_MARGIN (kfuse.tune.MARGIN: the spread of one problem's ratio between judge runs).
SPEED_ALTERNATIVES = ("gemm_kernels=false", "gemm_wgmma=false", "conv_kernels=all", "conv_kernels=library",
                      "small_filter_tensor_cores=false", "channels_last=false", "cuda_graph=on", "cuda_graph=off",
                      "conv_pointwise_tc=false")
SPEED_MARGIN = 0.02

# An optimize that ran out of GPU memory is tried again, after OPTIMIZE_RETRY_S, then twice that.
OPTIMIZE_ATTEMPTS, OPTIMIZE_RETRY_S = 3, 20


def optimize_all(problems: list[Problem], options: BenchOptions) -> dict[str, dict]:
    """Optimizer over every problem, in parallel, before any judging (the Ray runner's way; the local runner
    streams each problem through optimize, build and judge instead: Pipeline)."""
    optimize = Optimizer(options)
    with ThreadPoolExecutor(max_workers=max(1, min(os.cpu_count() or 1, 16))) as pool:
        return dict(zip((p.id for p in problems), pool.map(optimize, problems)))


def unsupported(reason: str) -> dict:
    return {"status": "unsupported", "reasons": [reason]}


def bench_failure(reason: str) -> dict:
    """A result for a failure of kfuse bench itself around one problem: `crashed`, never cached (`infra`)."""
    return {"status": "crashed", "reasons": [reason], "verdict": None, "optimized": None, "candidate_code": None,
            "infra": True}


# ------------------------------------------------------------------------------------------------------ building

def extension_names(code: str) -> list[str]:
    """The `name=` of every `load_inline(...)`/`load(...)` call with a constant name in a candidate's source."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if func in ("load_inline", "load"):
                for kw in node.keywords:
                    if kw.arg == "name" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                        names.append(kw.value.value)
    return names


def built_already(code: str, root: Path) -> bool:
    """Every extension the source names has a built library in torch's build folder `root` (a cache hit: torch
    rebuilds only what changed, and emitted names carry a hash of their sources and flags)."""
    names = extension_names(code)
    return bool(names) and all(any((root / name).glob(f"{name}*.so")) for name in names)


def build_candidate(path: Path, env: dict, timeout: float) -> dict:
    """Build an emitted file's extensions by importing it in a fresh process (its module-level load_inline), so
    that the judge later finds them built. Only for files kfuse emitted: others are imported by the judge alone.

    Returns {"build_s", "cache_hit", "ok"}; a failed build is not a verdict here (the judge builds again and says
    why)."""
    code = path.read_text()
    root = Path(env["TORCH_EXTENSIONS_DIR"])
    if built_already(code, root):  # the judge's import finds it: nothing to do here
        return {"build_s": 0.0, "cache_hit": True, "ok": True}
    began = time.perf_counter()
    if STOPPING.is_set():
        raise KeyboardInterrupt
    importer = "import runpy, sys; runpy.run_path(sys.argv[1])"
    process = zygote.popen(["-c", importer, str(path)], env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, nice=NICE)
    try:
        with preparing(process):
            ok = process.wait(timeout=timeout) == 0
    except subprocess.TimeoutExpired:
        ok = False
    finally:
        kill_session(process)  # its compilers too, all in the build's own session
    return {"build_s": round(time.perf_counter() - began, 3), "cache_hit": False, "ok": ok}


def clear_build_locks(root: Path) -> None:
    """torch's build locks left in a build folder that only this bench uses, by builds stopped midway (an
    interrupted run): each would keep the next build of its extension waiting until the judge's timeout."""
    for lock in root.glob("*/lock"):
        lock.unlink(missing_ok=True)


class Pipeline:
    """Each problem on its way to the judges as soon as it can go: optimized (a process of one core each, up to
    `optimizers` at once), admitted (`admit`: recorded and dropped if unsupported or judged before, else its job),
    then built (up to `builders` at once, while the GPU judges the problems built before it), so the GPU starts
    within a minute rather than after the whole set is optimized and built. Building is CPU work; it reads the
    GPU's architecture, to build for it alone, and nothing else of the GPU."""

    def __init__(self, optimize: Callable[[Problem], dict], admit: Callable[[Problem, dict], dict | None],
                 env: dict, optimizers: int, builders: int, timeout: float):
        self.optimize, self.admit, self.env, self.timeout = optimize, admit, env, timeout
        self.optimizing = ThreadPoolExecutor(max_workers=optimizers, thread_name_prefix="kfuse-optimize")
        self.building = ThreadPoolExecutor(max_workers=builders, thread_name_prefix="kfuse-build")
        self.builds: dict[str, dict] = {}  # problem id -> build_candidate's result
        self.sizes: dict[Path, int] = {}   # problem path -> data bytes (start)

    def start(self, problems: list[Problem], sizes: dict[Path, int]) -> dict[str, Future]:
        """A future per problem of its job (None: nothing to judge), started in `start_order` of their data bytes
        (`footprints`)."""
        ready = {problem.id: Future() for problem in problems}
        self.sizes = sizes
        for problem in start_order(problems, self.sizes):
            self.optimizing.submit(self._optimized, problem, ready[problem.id])
        return ready

    def _optimized(self, problem: Problem, ready: Future) -> None:
        try:
            emitted = self.optimize(problem)
            if STOPPING.is_set():  # killed midway, perhaps: not a verdict to record
                raise KeyboardInterrupt
            job = self.admit(problem, emitted)
            if job is None:
                ready.set_result(None)
            else:
                job["data_bytes"] = self.sizes.get(problem.path)  # (LocalRunner: its GPU memory; None: unknown)
                self.building.submit(self._built, problem, job, ready)
        except BaseException as err:  # noqa: BLE001 - handed to whoever waits for this problem
            ready.set_exception(err)

    def _built(self, problem: Problem, job: dict, ready: Future) -> None:
        try:
            self.builds[problem.id] = build_candidate(problem.candidate, self.env, self.timeout)
            ready.set_result(job)
        except BaseException as err:  # noqa: BLE001
            ready.set_exception(err)

    def shutdown(self) -> None:
        """Stop: queued work is dropped, running builds killed (an interrupted run's builds must not outlive it)."""
        for pool in (self.optimizing, self.building):
            pool.shutdown(wait=False, cancel_futures=True)
        signal_sessions(PREPARING, signal.SIGKILL)


# Problems whose data (inputs and outputs) is this large go first (start_order): each needs most of the GPU's memory
# (JUDGE_COPIES), so they are judged back to back while the rest of the set is optimized and built.
BIG_DATA_BYTES = 2 << 30


def start_order(problems: list[Problem], sizes: dict[Path, int]) -> list[Problem]:
    """The problems with big data (largest first), then the rest: the largest problem files (the networks, the
    slowest builds) alternating with the smallest, so no long build is left for last. (On the development set: of 20
    problems judged alone, 11 were still waiting at the end of a 26-minute run started in file-size order alone, each
    then holding the whole GPU for 35-100 s. Taking turns with the rest, each big one waited for the GPU to drain of
    the small ones started before it: the ledger replayed on an H100 run's jobs, scripts/replay_ledger.py, gave
    1,305 s that way against 1,535 s.)"""
    big = sorted((p for p in problems if sizes.get(p.path, 0) >= BIG_DATA_BYTES), key=lambda p: -sizes[p.path])
    by_size = sorted((p for p in problems if p not in big), key=lambda p: p.path.stat().st_size)
    rest = []
    while by_size:
        rest.append(by_size.pop())
        if by_size:
            rest.append(by_size.pop(0))
    return big + rest


# A judgement's GPU memory at its peak, in copies of the problem's data (`footprints`: inputs, outputs, parameters
# and the largest intermediate, fp32). Its three processes each keep what their caching allocator reserved: the
# worker's reference call (the output, the float64 upcast of the inputs and the float64 truth), the candidate's
# process (its inputs, its outputs, two more for the determinism trial) and the reference's timing process (eager's
# and torch.compile's inputs and outputs, prepared during the trials). The sums of each process's own peak were
# 7-11x on the development set (H100, 2026-11-26), an upper bound (the processes peak at different stages); counted
# at 5x, eight judgements of that run ran out of memory beside others and were judged again alone, each draining the
# GPU first (some 500 s of a 1,560 s run). 6x is between: replayed through the ledger (scripts/replay_ledger.py), that
# run's jobs take 1,177 s at 5x, 1,305 at 6x and 1,579 at 8x, against 610 s for the judges alone. Memory, not the
# judges, bounds a run on an 80 GB GPU: a judge that holds less is what would shorten it.
JUDGE_COPIES = 6
# ...plus what a judge holds whatever the problem: three CUDA contexts, cuBLAS and cuDNN workspaces, torch.compile.
JUDGE_OVERHEAD_BYTES = 2 << 30
# A problem whose data the footprint helper could not count (an import past its time limit): counted as this much,
# not as nothing (Mamba2's judgement, counted as nothing, held 18.6 GiB).
UNKNOWN_DATA_BYTES = 2 << 30
# The share of the GPU's memory the ledger hands out (LocalRunner): allocator slack and fragmentation keep the rest.
MEMORY_BUDGET = 0.9


def gpu_need(job: dict) -> int:
    """The GPU memory a job's judgement may hold at its peak."""
    data = job.get("data_bytes")
    return JUDGE_COPIES * (UNKNOWN_DATA_BYTES if data is None else data) + JUDGE_OVERHEAD_BYTES


# Run in a process of its own: a problem file is code, imported only outside the bench's own process.
_FOOTPRINTS = r"""
import json, signal, sys, torch
from torch.utils._python_dispatch import TorchDispatchMode
from kfuse.problem import load_problem, make_inputs

def nbytes(values):
    if isinstance(values, torch.Tensor):
        return values.numel() * values.element_size()
    if isinstance(values, (list, tuple)):
        return sum(nbytes(v) for v in values)
    if isinstance(values, dict):
        return sum(nbytes(v) for v in values.values())
    return 0

class Largest(TorchDispatchMode):  # the largest tensor any op of the forward makes (attention's scores, say)
    def __init__(self):
        super().__init__()
        self.most = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.most = max(self.most, nbytes(out))
        return out

class Late(BaseException):  # (not an Exception: load_problem would report it as the problem's own error)
    pass

def late(*_):
    raise Late()

signal.signal(signal.SIGALRM, late)
meta = torch.device("meta")
# What the first problem would otherwise pay inside its time limit, on a machine just started (its disk cold): the
# lazy imports behind modules, functional ops and the dispatch mode. (An H100 run without this counted a 12 GiB
# problem as its inputs alone and an 8 GiB one as nothing, and both ran out of memory beside other judges.)
with torch.device(meta), torch.no_grad(), Largest():
    torch.nn.functional.mse_loss(torch.nn.Linear(4, 4)(torch.rand(2, 4)), torch.rand(2, 4)).cumsum(0)
sizes = {}
for path in sys.argv[1:]:
    inputs = None
    try:
        signal.setitimer(signal.ITIMER_REAL, 10.0)  # a problem that hangs on import is the judge's to report
        problem, init = load_problem(path)
        inputs = make_inputs(problem, 0, meta)
        sizes[path] = nbytes(inputs)
        # The rest without a byte of data, five seconds at most (an LSTM takes a minute on meta): the outputs, the
        # parameters and buffers, and the largest intermediate.
        signal.setitimer(signal.ITIMER_REAL, 5.0)
        largest = Largest()
        with torch.device(meta), torch.no_grad():
            model = problem.Model(*init)
            with largest:
                out = model(*inputs)
        sizes[path] += nbytes(out) + nbytes(list(model.parameters()) + list(model.buffers()))
        sizes[path] += max(0, largest.most - nbytes(out))
    except (Exception, Late):
        # (data-dependent shapes, .item(), too slow): the inputs twice over, as if the output were as large, or
        # nothing where even the inputs are unknown
        if inputs is not None:
            sizes[path] = 2 * nbytes(inputs)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
gpu = torch.cuda.get_device_properties(0).total_memory if torch.cuda.is_available() else None
print(json.dumps({"sizes": sizes, "gpu_bytes": gpu}))
"""


def footprints(problems: list[Problem], env: dict, timeout: float = 180) -> tuple[dict[Path, int], int | None]:
    """Each problem's data bytes (inputs plus outputs, from a run on the meta device in a helper process) and the
    memory of the GPU the judges get (None without one). ({}, None) if the helper fails: the order then ignores
    sizes, and no job waits for memory."""
    try:
        done = subprocess.run([sys.executable, "-c", _FOOTPRINTS, *(str(p.path) for p in problems)], env=env,
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        found = json.loads(done.stdout.strip().splitlines()[-1])
        return {Path(k): int(v) for k, v in found["sizes"].items()}, found["gpu_bytes"]
    except (subprocess.TimeoutExpired, json.JSONDecodeError, IndexError, KeyError, ValueError, OSError):
        return {}, None


def builders_for(cpus: int, judges: int) -> int:
    """Build processes beside `judges` judges: each build runs two compilers at most (MAX_JOBS=2: the kernels'
    .cu and the host .cpp), niced, so the judges' own work comes first; half a core is left per judge. (Four
    builders on 16 cores with 8 judges were the longest lane of the development set: 3,180 s of builds, 800 s of
    wall in four lanes, while the judges mostly waited on the GPU.)"""
    return max(1, (cpus - judges // 2) // 2)


def cache_environment(options: BenchOptions) -> dict:
    """Build caches inside --out (unless the user chose their own): torch's extension builds and Inductor's
    compiled graphs, so a rerun, or a resumed run, rebuilds nothing it built before."""
    env = {}
    if "TORCH_EXTENSIONS_DIR" not in os.environ:
        env["TORCH_EXTENSIONS_DIR"] = str((options.out / "extensions").resolve())
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        env["TORCHINDUCTOR_CACHE_DIR"] = str((options.out / "inductor").resolve())
    return env


# ------------------------------------------------------------------------------------------------------ records

def record(problem: Problem, key: str | None, result: dict, options: BenchOptions, cached: bool) -> dict:
    """What results.json keeps per problem (the full verdict goes to verdicts/<id>.json)."""
    verdict = result.get("verdict") or {}
    timing = verdict.get("timing") or {}
    optimized = result.get("optimized") or {}
    candidate = problem.candidate
    if options.candidates is None and result.get("candidate_code") is not None:
        candidate = options.out / "candidates" / f"{problem.id}_new.py"
    return {
        "id": problem.id,
        "problem": str(problem.path),
        "candidate": str(candidate) if candidate else None,
        "mode": "candidate" if options.candidates is not None else "optimize",
        "status": result["status"],
        "reasons": result.get("reasons", []),
        "kernelbench_pass": verdict.get("kernelbench_pass"),
        "precision_only": bool(verdict.get("precision_only")),  # incorrect on precision parity alone
        "other_batch": verdict.get("other_batch"),
        "other_length": verdict.get("other_length"),
        "build_s": verdict.get("build_s"),
        "times_ms": {name: s["median_ms"] for name, s in (timing.get("stats") or {}).items()},
        "speedups": dict(timing.get("speedups") or {}),
        "roofline_fraction": timing.get("achieved_fraction_of_floor"),
        "roofline_bound": (timing.get("roofline") or {}).get("bound"),
        "flags": timing.get("flags", []),
        "compile_errors": timing.get("compile_errors", {}),
        # torch.compile's own output against eager's by KernelBench's check, per mode (kfuse.judge.sandbox)
        "compile_agreement": timing.get("compile_agreement", {}),
        "kernels": [{"name": k.get("name"), "fuses": k.get("fuses", []), "in_place_into": k.get("in_place_into")}
                    for k in optimized.get("kernels", [])],
        "unfused": [{k: u[k] for k in ("op", "reason", "channels_last") if k in u}  # (a convolution: its layout)
                    for u in optimized.get("unfused", [])],
        "launches": optimized.get("launches"),  # kernels and library calls per forward
        "cuda_graph": bool(optimized.get("cuda_graph")),  # ... launched as one CUDA graph
        "elapsed_s": result.get("elapsed_s"),
        "stages_s": stage_totals(optimized, result.get("prebuild"), verdict),
        "build_cache_hit": (result.get("prebuild") or {}).get("cache_hit"),
        "gpu_wait_s": verdict.get("gpu_wait_s"),  # of the stages above, seconds blocked by other judges
        "gpu_peak_bytes": verdict.get("gpu_peak_bytes"),  # the judgement's, at most (LocalRunner's ledger)
        "data_bytes": result.get("data_bytes"),
        "judged_at_s": result.get("judged_at_s"),  # [started, ended], seconds into the run's segment
        "gpu_to_itself": bool(result.get("gpu_to_itself")),  # out of GPU memory beside others, judged again alone
        "cached": cached,
        "key": key,
        "precision_fallback": result.get("precision_fallback"),  # the fallback's name: a second file (its pass)
        "ungraphed": bool(result.get("ungraphed")),  # ... or a file without the CUDA graph (ungraphed_pass)
        "tuned": result.get("tuned"),  # the choice whose file replaced a slower one (speed_pass)
    }


def stage_totals(optimized: dict, prebuild: dict | None, verdict: dict) -> dict[str, float]:
    """Seconds per stage of one problem: optimizing (capture and plan, in its own process), building (the
    prebuild and whatever the judge still built), then the judge's trials, torch.compile, waiting for the GPU and
    timing (kfuse.judge.verdict.stage_seconds)."""
    judged = dict(verdict.get("stages_s") or {})
    stages = {"capture_plan": optimized.get("optimize_s"),
              "build": (prebuild or {}).get("build_s", 0.0) + judged.pop("build", 0.0),
              "trials": judged.pop("startup", 0.0) + judged.pop("trials", 0.0), **judged}
    return {k: round(v, 3) for k, v in stages.items() if v}


def tally_text(records: list[dict], baselines: list[str]) -> str:
    correct = sum(r["status"] == "correct" for r in records)
    parts = [f"[green]{correct} correct[/]"]
    for b in baselines:
        n = sum(r["status"] == "correct" and (r["speedups"].get(b) or 0) > 1 for r in records)
        parts.append(f"{n} > {'eager' if b == 'vs_eager' else 'compile'}")
    return " · ".join(parts)


def baselines_for(options: BenchOptions) -> list[str]:
    return ["vs_eager"] + [f"vs_compile:{m}" for m in options.compile_modes]


# ------------------------------------------------------------------------------------------------------ workers

def visible_gpus() -> list[str]:
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [d.strip() for d in listed.split(",") if d.strip() and d.strip() != "-1"]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def worker_slots(options: BenchOptions) -> list[dict]:
    """The environment of each local worker: one GPU each on the CUDA target, or `per_gpu` workers per GPU
    that share one lock file, so that each one's timing has the GPU to itself (kfuse.gpulock)."""
    if options.workers is not None and options.workers < 1:
        raise UsageError(f"--workers must be at least 1 (got {options.workers})")
    if options.per_gpu < 1:
        raise UsageError(f"--per-gpu must be at least 1 (got {options.per_gpu})")
    if options.device == "cpu":
        return [{} for _ in range(options.workers or 1)]
    gpus = visible_gpus()
    if not gpus:
        raise UsageError("--device cuda was asked for, but no CUDA GPU is visible (use --device cpu)")
    if options.workers is not None:
        gpus = gpus[:options.workers]
    if options.per_gpu == 1 and not options.quiet_timing:
        slots = [{"CUDA_VISIBLE_DEVICES": gpu} for gpu in gpus]
    else:
        # One judge per GPU takes the lock too under quiet timing: the run's optimize and build processes go on
        # beside it, and its timing stops them.
        locks = (options.out / "locks").resolve()
        quiet = {gpulock.QUIET_ENV: "1"} if options.quiet_timing else {}
        slots = [{"CUDA_VISIBLE_DEVICES": gpu, gpulock.ENV: str(locks / f"gpu{gpu}.lock"),
                  gpulock.SHARERS_ENV: str(options.per_gpu), **quiet} for gpu in gpus for _ in range(options.per_gpu)]
    # torch.compile's workers take every core by default; side by side, the judges share them, so one job's
    # torch.compile does not starve another's build (which counts against its timeout: two GEMM seeds timed out
    # building beside five other judges on 16 cores). With several judges per GPU, one thread each: a pool of
    # compile workers is a few Python processes importing torch and Triton per judge, CPU that the other judges
    # need more (the development set on an H100 machine was CPU-bound). A value the user set stays.
    if "TORCHINDUCTOR_COMPILE_THREADS" not in os.environ:
        threads = str(1 if options.per_gpu > 1 else max(1, (os.cpu_count() or 1) // len(slots)))
        for slot in slots:
            slot["TORCHINDUCTOR_COMPILE_THREADS"] = threads
    return slots


def out_of_gpu_memory(result: dict) -> bool:
    """A job that ran out of GPU memory: with other judges on the GPU, their memory may be what was missing."""
    text = " ".join(map(str, result.get("reasons") or [])).lower()
    return result.get("status") != "correct" and "out of memory" in text


class LocalRunner:
    """A thread per worker slot; each job a fresh process with its slot's environment.

    Jobs start in the order they come, each on a free slot whose GPU has memory for it: the needs (`gpu_need`) of
    the jobs running on a GPU add up to at most MEMORY_BUDGET of its memory, and a job needing more runs with its
    GPU to itself. The first job in line that does not fit waits, and every big job behind it (else small ones
    would keep a big one waiting to the end: on the development set, 11 of 115 jobs judged alone after all the
    others were the last 300 s of a 1,581 s run, 7 of 8 judges and most cores idle). Small jobs (data under
    BIG_DATA_BYTES) behind it start beside the running ones where the small jobs' needs together with the waiting
    job's still fit the budget: the waiting job then starts as soon as the big jobs ahead of it are done, as
    before, and the small ones no longer wait behind a chain of big ones (on an 80 GB H100 the development set's 8-14
    GiB problems take the GPU one at a time: 36 of 115 verdicts in 24 minutes, 2026-11-26).

    A job that runs out of GPU memory all the same, beside other judges, is judged once more at once, next in line,
    with its GPU to itself (and its GPU sections exclusive, kfuse.gpulock `sole`): the verdict then says what the
    problem and candidate need, not what the neighbours held."""

    def __init__(self, slots: list[dict], gpu_bytes: int | None = None):
        self.free = list(slots)
        self.probe_env = slots[0]  # where the plan's GPU probes run when a problem is optimized again
        self.shared = any(int(slot.get(gpulock.SHARERS_ENV, "1")) > 1 for slot in slots)
        self.workers = len(slots)
        self.budget = int(MEMORY_BUDGET * gpu_bytes) if gpu_bytes else None
        self.held: dict[str, int] = {}     # GPU -> the needs of the jobs running on it
        self.held_small: dict[str, int] = {}  # GPU -> ... of its small jobs (is_small)
        self.running: dict[str, int] = {}  # GPU -> how many jobs run on it
        self.whole: set[str] = set()       # GPUs a job has to itself

    @staticmethod
    def gpu_of(slot: dict) -> str:
        return slot.get("CUDA_VISIBLE_DEVICES", "")

    def place(self, job: dict, whole: bool, waiting: int | None = None) -> dict | None:
        """A free slot for the job, or None: it waits. `waiting`: the need of a job ahead of it in line that waits
        (this one is small): it goes only where the small jobs' needs and that need fit the budget together."""
        need = gpu_need(job)
        for slot in self.free:
            gpu = self.gpu_of(slot)
            if gpu in self.whole:
                continue
            if waiting is not None and (self.budget is None
                                        or self.held_small.get(gpu, 0) + need + waiting > self.budget):
                continue
            if not self.running.get(gpu):
                return slot
            if not whole and self.budget is not None and self.held.get(gpu, 0) + need <= self.budget:
                return slot
            if not whole and self.budget is None:
                return slot
        return None

    @staticmethod
    def is_small(job: dict) -> bool:
        return (job.get("data_bytes") or 0) < BIG_DATA_BYTES

    def take(self, slot: dict, job: dict, whole: bool) -> None:
        gpu = self.gpu_of(slot)
        self.free.remove(slot)
        self.running[gpu] = self.running.get(gpu, 0) + 1
        self.held[gpu] = self.held.get(gpu, 0) + gpu_need(job)
        if self.is_small(job):
            self.held_small[gpu] = self.held_small.get(gpu, 0) + gpu_need(job)
        if whole or (self.budget is not None and gpu_need(job) > self.budget):
            self.whole.add(gpu)

    def give_back(self, slot: dict, job: dict) -> None:
        gpu = self.gpu_of(slot)
        self.free.append(slot)
        self.running[gpu] -= 1
        self.held[gpu] -= gpu_need(job)
        if self.is_small(job):
            self.held_small[gpu] -= gpu_need(job)
        self.whole.discard(gpu)

    def _run(self, job: dict, slot: dict, sole: bool = False) -> dict:
        try:
            return run_job_isolated(job, {**slot, gpulock.SOLE_ENV: "1"} if sole else slot)
        except Exception as err:  # bench's own failure around one job (a full disk...): that job, not the run
            return bench_failure(f"kfuse bench could not run this job: {first_line(err)}")
        finally:
            if gpulock.QUIET_ENV in slot:  # a judge killed while it timed leaves the others stopped
                gpulock.resume_orphaned(slot[gpulock.ENV])

    def run(self, jobs: list[tuple[object, dict | Future]], on_start: Callable, on_done: Callable) -> None:
        """Judge every job. A job may be a future of one (Pipeline): it joins the line once the future has it, in
        the order they come; a future of None is a problem with nothing to judge, an exception a bench failure."""
        futures, coming = {}, {}
        line: collections.deque = collections.deque()  # (tag, job, again): waiting for a slot
        pending: set = set()
        self.pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="kfuse-bench")  # per run

        def dispatch() -> None:
            waiting = None  # the need of the first job in line that does not fit (the whole budget: alone)
            for entry in list(line):
                tag, job, again = entry
                if waiting is None:
                    slot = self.place(job, whole=again)
                    if slot is None:
                        needs_whole = again or self.budget is None or gpu_need(job) > self.budget
                        waiting = (self.budget or 0) + 1 if needs_whole else gpu_need(job)
                        continue
                elif again or not self.is_small(job):
                    continue  # big jobs keep their turn behind it
                else:
                    slot = self.place(job, whole=False, waiting=waiting)
                    if slot is None:
                        continue
                line.remove(entry)
                self.take(slot, job, whole=again)
                # (a job judged again: on_start saw it already)
                judged = self.pool.submit(self._started, tag, job, slot, None if again else on_start, again)
                futures[judged] = (tag, job, slot, again)
                pending.add(judged)

        for tag, job in jobs:
            if isinstance(job, Future):
                coming[job] = tag
                pending.add(job)
            else:
                line.append((tag, job, False))
        dispatch()
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    if future in coming:  # ready: now it can be judged
                        tag = coming.pop(future)
                        try:
                            job = future.result()
                        except Exception as err:  # a bench failure around this problem: its record, not the run's
                            on_done(tag, bench_failure(f"kfuse bench could not prepare this problem: "
                                                       f"{first_line(err)}"))
                            continue
                        if job is not None:
                            line.append((tag, job, False))
                        continue
                    tag, job, slot, again = futures.pop(future)
                    self.give_back(slot, job)
                    result = future.result()
                    if self.shared and not again and out_of_gpu_memory(result):
                        line.appendleft((tag, job, True))
                    else:
                        result["gpu_to_itself"] = again  # (judged again so: the ledger's estimate was short)
                        on_done(tag, result)
                dispatch()
            self.pool.shutdown(wait=True)
        except BaseException:
            for future in pending:
                future.cancel()
            stop_running_jobs()
            self.pool.shutdown(wait=True, cancel_futures=True)
            raise

    def _started(self, tag, job, slot, on_start, again=False):
        if STOPPING.is_set():
            raise KeyboardInterrupt
        if on_start is not None:
            on_start(tag)
        return self._run(job, slot, sole=again)


STOPPING = threading.Event()
RUNNING: set[subprocess.Popen] = set()
PREPARING: set[subprocess.Popen] = set()  # the Pipeline's optimize and build processes
RUNNING_LOCK = threading.Lock()
QUIET_LOCKS: list[str] = []  # the run's GPU lock files whose timing stops the other sessions (kfuse.gpulock)


@contextlib.contextmanager
def preparing(process):
    """An optimize or build process of the run, while it runs: in PREPARING (Ctrl-C reaches it) and, under quiet
    timing, registered with every GPU's lock, so that a judge's timing stops its CPU work too."""
    with RUNNING_LOCK:
        PREPARING.add(process)
    for lock in QUIET_LOCKS:
        gpulock.register_session(lock, process.pid)
    try:
        yield
    finally:
        for lock in QUIET_LOCKS:
            gpulock.unregister_session(lock, process.pid)
        with RUNNING_LOCK:
            PREPARING.discard(process)


def quiet_locks(slots: list[dict] | None) -> list[str]:
    return sorted({slot[gpulock.ENV] for slot in slots or [] if slot.get(gpulock.QUIET_ENV)})


def stop_running_jobs() -> None:
    """Ctrl-C: job processes run in their own sessions, so the terminal's signal did not reach them; pass it on.

    Each then ends its judge's worker; the threads waiting on them return, and `stop` kills any that linger.
    """
    STOPPING.set()
    signal_sessions(RUNNING, signal.SIGINT)


def signal_sessions(processes: set[subprocess.Popen], sig: int) -> None:
    """`sig` to the session of each process in `processes` (one of the sets above) that is still there."""
    with RUNNING_LOCK:
        processes = list(processes)
    for process in processes:
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass


class RayRunner:
    """Each job a Ray task: `num_gpus=1` on the CUDA target, `num_cpus=1` on the CPU target."""

    def __init__(self, address: str, options: BenchOptions):
        try:
            import ray
        except ImportError:
            raise UsageError("--ray needs Ray: pip install 'kfuse[ray]'") from None
        self.ray = ray
        self.started_here = False
        if not ray.is_initialized():
            if address == "local":
                resources = {"num_cpus": options.workers or os.cpu_count() or 1}
                if options.device == "cuda":
                    gpus = visible_gpus()
                    if not gpus:
                        raise UsageError("--device cuda was asked for, but no CUDA GPU is visible (use --device cpu)")
                    resources["num_gpus"] = len(gpus[:options.workers] if options.workers else gpus)
                ray.init(include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING, **resources)
            else:
                # A cluster elsewhere gets this kfuse with the tasks (torch must be installed there).
                package = str(Path(__file__).resolve().parents[1])  # the kfuse package
                ray.init(address=address, log_to_driver=False, runtime_env={"py_modules": [package]})
            self.started_here = True
        need = {"num_gpus": 1} if options.device == "cuda" else {"num_cpus": 1}
        self.task = ray.remote(max_retries=0, **need)(run_job_isolated)

    def run(self, jobs: list[tuple[object, dict]], on_start: Callable, on_done: Callable) -> None:
        ray = self.ray
        refs = {}
        for tag, job in jobs:
            refs[self.task.remote(job)] = tag
        pending = list(refs)
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1, timeout=1.0)
                for ref in done:
                    try:
                        result = ray.get(ref)
                    except Exception as err:  # the task itself failed: a crash of this problem's job
                        result = bench_failure(f"the Ray task failed: {first_line(err)}")
                    on_done(refs[ref], result)
        except BaseException:
            for ref in pending:
                ray.cancel(ref)  # raises KeyboardInterrupt in the task, which stops its job process
            if pending:  # let them stop their job processes before the cluster goes
                ray.wait(pending, num_returns=len(pending), timeout=30)
            raise
        finally:
            if self.started_here:
                ray.shutdown()


# --------------------------------------------------------------------------------------------------------- bench

@dataclass
class BenchRun:
    records: list[dict]
    summary: dict
    judged: int          # jobs run this time
    cached: int          # results taken from the cache
    interrupted: bool
    files: dict
    meta: dict


def bench(paths: list[Path], options: BenchOptions, console=None) -> BenchRun:
    """Run the benchmark and write the report. UsageError for bad input; Ctrl-C keeps what finished."""
    # The judgements' workers are forked from one process that imported torch once (kfuse.judge.zygote): each saves
    # a worker's `import torch`. Ray's nodes start their workers themselves.
    with contextlib.nullcontext() if options.ray else zygote.serving():
        return _bench(paths, options, console)


def _bench(paths: list[Path], options: BenchOptions, console=None) -> BenchRun:
    from rich.console import Console

    from kfuse.bench import report as bench_report

    console = console or Console(stderr=True)
    began = time.perf_counter()
    STOPPING.clear()
    ENVIRONMENT.clear()
    if options.device not in ("cuda", "cpu"):
        raise UsageError(f"--device must be cuda or cpu (got {options.device!r})")
    if options.candidates is not None and not options.candidates.is_dir():
        raise UsageError(f"--candidates is not a folder: {options.candidates}")
    if options.trials < 5:
        raise UsageError(f"--trials must be at least 5 (got {options.trials})")
    problems = discover(paths, skip=[options.out, options.candidates])
    slots = None if options.ray else worker_slots(options)  # bad --workers, or no GPU: said before any work
    QUIET_LOCKS[:] = quiet_locks(slots)
    out = options.out
    caches = cache_environment(options)
    for slot in slots or []:
        slot.update(caches)
    if "TORCH_EXTENSIONS_DIR" in caches:
        clear_build_locks(Path(caches["TORCH_EXTENSIONS_DIR"]))
    for sub in ("cache", "verdicts"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    if options.candidates is None:
        (out / "candidates").mkdir(exist_ok=True)

    records: dict[str, dict] = {}
    keys: dict[str, str] = {}
    lock = threading.Lock()  # records and counts: written by the pipeline's threads and the runner's
    counts = {"cached": 0, "reused": 0}
    after_record: list[Callable[[], None]] = []  # the progress bar's refresh, once it exists

    def admit(problem: Problem, emitted: dict | None) -> dict | None:
        """The problem's job, or None once it is recorded without judging (unsupported, missing, cached)."""
        def recorded(result: dict, key: str | None = None, cached: bool = False) -> None:
            with lock:
                finish_problem(problem, key, result, options, records, cached=cached)
                counts["cached"] += cached
                for update in after_record:
                    update()

        if emitted is not None:
            if "path" not in emitted:
                return recorded(emitted)
            with lock:
                counts["reused"] += bool(emitted.get("reused"))
            problem.candidate = emitted["path"]
        else:
            problem.candidate = find_candidate(options.candidates, problem.path.stem)
            if problem.candidate is None:
                names = ", ".join(problem.path.stem + s for s in CANDIDATE_SUFFIXES)
                return recorded({"status": "missing", "reasons": [f"no candidate in {options.candidates} ({names})"]})
        try:
            key = cache_key(problem.path.read_bytes(), problem.candidate.read_bytes(), options)
            job = make_job(problem, options)
            job["optimized"] = (emitted or {}).get("optimized")
        except (OSError, UnicodeDecodeError) as err:
            return recorded({"status": "unsupported", "reasons": [f"cannot read: {first_line(err)}"]})
        keys[problem.id] = key
        hit = read_cache(out / "cache", key)
        if hit is not None:
            return recorded(hit["result"], key, cached=True)
        return job

    if options.ray and options.workers is not None and options.workers < 1:
        raise UsageError(f"--workers must be at least 1 (got {options.workers})")
    baselines = baselines_for(options)
    pipeline = None
    jobs: list[tuple[Problem, dict | Future]] = []
    # Data bytes per problem (the pipeline's start order, each job's GPU memory) and the GPU's memory (LocalRunner's
    # ledger); a helper process that imports torch and every problem, so only where they are used.
    sizes, gpu_bytes = {}, None
    if not options.ray and (options.device == "cuda" or options.candidates is None):
        sizes, gpu_bytes = footprints(problems, job_environment(slots[0]))
    if options.device != "cuda":
        gpu_bytes = None
    if options.candidates is None and not options.ray:  # kfuse's own files: safe to build outside the judge
        cpus = os.cpu_count() or 1
        pipeline = Pipeline(Optimizer(options, env=slots[0]), admit, job_environment({**slots[0], "MAX_JOBS": "2"}),
                            optimizers=max(1, cpus // 2), builders=builders_for(cpus, len(slots)),
                            timeout=options.timeout)
        jobs = list(zip(problems, pipeline.start(problems, sizes).values()))
        what = "each optimized, built and judged as soon as it can be"
    else:
        emitted = {}
        if options.candidates is None:
            with console.status(f"optimizing {len(problems)} problems"):
                emitted = optimize_all(problems, options)
        for problem in problems:
            job = admit(problem, emitted.get(problem.id))
            if job is not None:
                job["data_bytes"] = sizes.get(problem.path)
                jobs.append((problem, job))
        what = f"{len(jobs)} to run, {counts['cached']} from the cache"
    runner = (RayRunner(options.ray, options) if options.ray else LocalRunner(slots, gpu_bytes)) if jobs else None
    where = f"Ray ({options.ray})" if options.ray else (
        f"{len(slots)} worker{'s' if len(slots) > 1 else ''}" + (
            (" (one per GPU" if options.per_gpu == 1 else f" ({options.per_gpu} per GPU, timing one at a time")
            + (", the other processes stopped while one times)" if QUIET_LOCKS else ")")
            if options.device == "cuda" else ""))
    console.print(f"[bold]kfuse bench[/]: {len(problems)} problems, {what}; "
                  f"{options.device} target, {where}; results in {out}", highlight=False)

    interrupted = False
    judged = 0
    if jobs:
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                                   TimeElapsedColumn)

        running: list[str] = []
        progress = Progress(SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(),
                            MofNCompleteColumn(), TimeElapsedColumn(), eta_column(),
                            TextColumn("{task.fields[tally]}"), console=console, transient=False)
        # Streamed, every problem counts (the pipeline records some without judging); else the jobs alone.
        already = 0 if pipeline is not None else len(records)
        task = progress.add_task("judging", total=len(problems) - already,
                                 tally=tally_text(list(records.values()), baselines))

        def refresh() -> None:  # (holding `lock`)
            progress.update(task, completed=len(records) - already, description=describe_running(running),
                            tally=tally_text(list(records.values()), baselines))

        with lock:
            after_record.append(refresh)
            refresh()

        started: dict[str, float] = {}

        def on_start(problem: Problem) -> None:
            with lock:
                started[problem.id] = time.perf_counter() - began
                running.append(problem.id)
                progress.update(task, description=describe_running(running))

        def on_done(problem: Problem, result: dict) -> None:
            nonlocal judged
            with lock:
                if problem.id in running:
                    running.remove(problem.id)
                if pipeline is not None and problem.id in pipeline.builds:
                    result["prebuild"] = pipeline.builds[problem.id]
                # when it was judged, in this segment's seconds: where a run's tail comes from
                result["judged_at_s"] = [round(started.get(problem.id, 0.0), 1), round(time.perf_counter() - began, 1)]
                key = keys.get(problem.id)  # (none: the pipeline failed before it had one)
                if not result.pop("infra", False) and key is not None:
                    write_atomically(out / "cache" / f"{key}.json",
                                     json.dumps({"key": key, "problem": str(problem.path), "result": result},
                                                default=str))
                finish_problem(problem, key, result, options, records, cached=False)
                judged += 1
                refresh()
                if not console.is_terminal:  # a log (a detached run): one line per problem, what a live bar shows
                    record = records.get(problem.id) or {}
                    stages = ", ".join(f"{k} {v:.0f}" for k, v in (record.get("stages_s") or {}).items())
                    alone = ", GPU to itself" if record.get("gpu_to_itself") else ""
                    console.print(f"[{time.perf_counter() - began:5.0f} s] {len(records) - already}/"
                                  f"{len(problems) - already} {problem.id}: {record.get('status')} "
                                  f"(judged {result['judged_at_s'][0]:.0f}-{result['judged_at_s'][1]:.0f} s{alone}; "
                                  f"{stages})", highlight=False, soft_wrap=True)

        with progress:
            try:
                runner.run(jobs, on_start, on_done)
                if pipeline is not None:
                    try:
                        judged += precision_fallback_pass(problems, records, options, runner, on_start, lock)
                        judged += ungraphed_pass(problems, records, options, runner, on_start, lock)
                        judged += speed_pass(problems, records, options, runner, on_start, lock)
                    except Exception as err:  # noqa: BLE001 - the first verdicts stand; the run's report is written
                        console.print(f"[yellow]kfuse bench: a second pass failed[/]: {first_line(err)}",
                                      highlight=False)
            except KeyboardInterrupt:
                interrupted = True
            finally:
                if pipeline is not None:
                    pipeline.shutdown()
                for lock_path in QUIET_LOCKS:
                    gpulock.resume_orphaned(lock_path)
                QUIET_LOCKS.clear()
            progress.update(task, description="stopped" if interrupted else "finished")
        if interrupted:
            console.print(f"[yellow]interrupted[/]: {judged} judged this time and kept in {out / 'cache'}; "
                          f"run the same command again to go on", highlight=False)
    if counts["reused"]:
        console.print(f"kfuse: {counts['reused']} of {len(problems)} emitted files reused from "
                      f"{options.out / 'optimized'} (same problem, kfuse sources, torch and device)", highlight=False)

    ordered = [records[p.id] for p in problems if p.id in records]
    summary = bench_report.summarize(ordered, baselines, total=len(problems))
    complete = not interrupted and len(ordered) == len(problems)
    segments = add_segment(out, round(time.perf_counter() - began, 3), judged, complete)
    prebuilt = list(pipeline.builds.values()) if pipeline is not None else []
    meta = {"schema": SCHEMA, "kfuse_version": __version__, "torch": torch_version(), "device": options.device,
            "mode": "candidates" if options.candidates is not None else "optimize",
            "candidates": str(options.candidates) if options.candidates else None,
            "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(options).items()},
            "paths": [str(p) for p in paths], "problems": len(problems), "judged": judged, "cached": counts["cached"],
            "interrupted": interrupted, "environment": ENVIRONMENT.get("seen"),
            "wall_s": round(sum(seg["wall_s"] for seg in segments), 3), "segments": segments,
            "build_cache": {"hits": sum(b["cache_hit"] for b in prebuilt),
                            "built": sum(not b["cache_hit"] for b in prebuilt),
                            "failed": sum(not b["ok"] for b in prebuilt)},
            "caches": caches,
            "written": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    files = bench_report.write_report(out, ordered, summary, meta)
    return BenchRun(ordered, summary, judged, counts["cached"], interrupted, files, meta)


def precision_fallback_pass(problems: list[Problem], records: dict, options: BenchOptions, runner,
                            on_start: Callable, lock: threading.Lock) -> int:
    """kfuse optimize's fallbacks (needs_precision_fallback), at the end of the run: each such problem is optimized
    again with each of choices.PRECISION_FALLBACKS in turn and judged; the first new file the judge finds correct
    replaces the first. Returns the number judged."""
    judged = 0
    for name in PRECISION_FALLBACKS:
        again = [p for p in problems if needs_precision_fallback(records.get(p.id, {}).get("status"),
                                                                 bool(records.get(p.id, {}).get("precision_only")))]
        optimize = Optimizer(options, fallback=name, env=getattr(runner, "probe_env", None))
        judged += replan(again, optimize, {"precision_fallback": name}, records, options,
                         runner, on_start, lock)
    return judged


def ungraphed_pass(problems: list[Problem], records: dict, options: BenchOptions, runner, on_start: Callable,
                   lock: threading.Lock) -> int:
    """kfuse optimize's fallback for a file whose forward runs as one CUDA graph and that the judge did not find
    correct (kfuse/compiler/graphed.py): optimized again without the graph (with the precision fallback the failed
    file had, if any) and judged again, replacing the first verdict where correct. Returns the number judged."""
    judged = 0
    for fallback in (None, *PRECISION_FALLBACKS):
        again = [p for p in problems if records.get(p.id, {}).get("cuda_graph")
                 and records[p.id].get("status") not in ("correct", "correct-parity")
                 and records[p.id].get("precision_fallback") == fallback]
        optimize = Optimizer(options, fallback=fallback, ungraphed=True, env=getattr(runner, "probe_env", None))
        marks = {"ungraphed": True, "precision_fallback": fallback}
        judged += replan(again, optimize, marks, records, options, runner, on_start, lock)
    return judged


def speed_pass(problems: list[Problem], records: dict, options: BenchOptions, runner, on_start: Callable,
               lock: threading.Lock) -> int:
    """`kfuse tune` for the files that came out slower than eager, at the end of the run: each such problem planned
    again with each of SPEED_ALTERNATIVES (on top of the precision fallback or `--cuda-graph off` its file has), every
    distinct new file judged, and the fastest correct one replacing the record where its ratio to eager (timed in the
    same interleaved rounds as eager) beats the first's by more than SPEED_MARGIN. The record says which choice
    (`tuned`). Returns the number judged."""
    if not options.time:
        return 0
    jobs, keys, best = [], {}, {}

    def keep_if_faster(variant: Problem, result: dict, cached: bool) -> None:
        key, marks = keys[id(variant)]
        ratio = vs_eager(result.get("verdict"))
        with lock:
            if result.get("status") == "correct" and ratio is not None \
                    and ratio > best[variant.id] * (1 + SPEED_MARGIN):
                best[variant.id] = ratio
                finish_problem(variant, key, {**result, **marks}, options, records, cached=cached)

    def on_done(variant: Problem, result: dict) -> None:
        key, _ = keys[id(variant)]
        if not result.pop("infra", False):
            write_atomically(options.out / "cache" / f"{key}.json",
                             json.dumps({"key": key, "problem": str(variant.path), "result": result}, default=str))
        keep_if_faster(variant, result, cached=False)

    slow = [p for p in problems if p.id in records
            and slower_than_eager(records[p.id]["status"], (records[p.id].get("speedups") or {}).get("vs_eager"))]
    firsts = {p.id: records[p.id] for p in slow}  # (a record may be replaced below, by a cached verdict)
    tasks = []  # (problem, choice, its Optimizer): optimized side by side, a process each
    for problem in slow:
        first = firsts[problem.id]
        best[problem.id] = first["speedups"]["vs_eager"]
        fallback, ungraphed = first.get("precision_fallback"), bool(first.get("ungraphed"))
        for choice in SPEED_ALTERNATIVES:
            if ungraphed and choice.startswith("cuda_graph="):
                continue  # (the graph failed the judge: the file stays without it)
            tasks.append((problem, choice, Optimizer(options, fallback=fallback, ungraphed=ungraphed,
                                                     env=getattr(runner, "probe_env", None), choice=choice)))
    with ThreadPoolExecutor(max_workers=max(1, (os.cpu_count() or 2) // 2)) as pool:
        emitted_all = list(pool.map(lambda task: task[2](task[0]), tasks))
    seen: dict[str, set[bytes]] = {}
    for (problem, choice, _), emitted in zip(tasks, emitted_all):
        first = firsts[problem.id]
        if problem.id not in seen:
            try:
                seen[problem.id] = {Path(first["candidate"]).read_bytes()}
            except (OSError, TypeError, KeyError):
                seen[problem.id] = set()
        try:
            code = emitted["path"].read_bytes()
        except (KeyError, OSError):
            continue  # (the choice leaves no kernel: nothing to judge)
        if code in seen[problem.id]:
            continue  # a file judged already (most choices change nothing in a given problem)
        seen[problem.id].add(code)
        variant = replace(problem, candidate=emitted["path"])
        key = cache_key(problem.path.read_bytes(), code, options)
        marks = {"precision_fallback": first.get("precision_fallback"), "ungraphed": first.get("ungraphed"),
                 "tuned": choice}
        keys[id(variant)] = (key, marks)
        hit = read_cache(options.out / "cache", key)
        if hit is not None:
            keep_if_faster(variant, hit["result"], cached=True)
        else:
            jobs.append((variant, {**make_job(variant, options), "optimized": emitted["optimized"]}))
    if jobs:
        runner.run(jobs, on_start, on_done)
    return len(jobs)


def replan(again: list[Problem], optimize: Optimizer, marks: dict, records: dict, options: BenchOptions, runner,
           on_start: Callable, lock: threading.Lock) -> int:
    """Each problem of `again` optimized again by `optimize` and judged; a correct verdict replaces its record,
    with `marks` added (cached verdicts are reused). Returns the number judged."""
    jobs, keys = [], {}
    for problem in again:
        emitted = optimize(problem)
        if "path" not in emitted:
            continue  # (no kernel left: the first file stays)
        with contextlib.suppress(OSError):
            if problem.candidate not in (None, emitted["path"]) \
                    and emitted["path"].read_bytes() == problem.candidate.read_bytes():
                continue  # the same file as the one judged last: nothing to learn
        problem.candidate = emitted["path"]
        try:
            key = cache_key(problem.path.read_bytes(), problem.candidate.read_bytes(), options)
        except OSError:
            continue
        hit = read_cache(options.out / "cache", key)
        if hit is not None:
            if hit["result"].get("status") == "correct":
                with lock:
                    finish_problem(problem, key, {**hit["result"], **marks}, options, records, cached=True)
            continue
        keys[problem.id] = key
        jobs.append((problem, {**make_job(problem, options), "optimized": emitted["optimized"]}))

    def on_done(problem: Problem, result: dict) -> None:
        key = keys[problem.id]
        with lock:
            if not result.pop("infra", False):
                write_atomically(options.out / "cache" / f"{key}.json",
                                 json.dumps({"key": key, "problem": str(problem.path), "result": result},
                                            default=str))
            if result.get("status") == "correct":
                finish_problem(problem, key, {**result, **marks}, options, records, cached=False)

    if jobs:
        runner.run(jobs, on_start, on_done)
    return len(jobs)


def add_segment(out: Path, wall_s: float, judged: int, complete: bool) -> list[dict]:
    """This command's wall-clock seconds, added to those of the earlier commands of the same run (a run resumed
    after an interruption sums its segments); a command after a complete run starts a new run."""
    path = out / "run-segments.json"
    try:
        state = json.loads(path.read_text())
        segments = [] if state.get("complete") else list(state["segments"])
    except (OSError, json.JSONDecodeError, KeyError, TypeError):
        segments = []
    segments.append({"ended": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "wall_s": wall_s, "judged": judged})
    write_atomically(path, json.dumps({"segments": segments, "complete": complete}, indent=2))
    return segments


def eta_column():
    """Time left from the mean time per finished problem so far: problems take minutes, and rich's own estimate
    (from the last 30 s of progress) would mostly show nothing."""
    from datetime import timedelta

    from rich.progress import ProgressColumn
    from rich.text import Text

    class Eta(ProgressColumn):
        def render(self, task) -> Text:
            if task.finished:
                return Text("done", style="green")
            if not task.completed or task.elapsed is None:
                return Text("eta ?", style="cyan")
            left = task.elapsed / task.completed * (task.total - task.completed)
            return Text(f"eta {timedelta(seconds=round(left))}", style="cyan")

    return Eta()


def describe_running(running: list[str]) -> str:
    if not running:
        return "judging"
    shown = ", ".join(running[:3]) + (f" +{len(running) - 3}" if len(running) > 3 else "")
    return shown if len(shown) <= 48 else shown[:45] + "..."


def finish_problem(problem: Problem, key: str | None, result: dict, options: BenchOptions, records: dict,
                   cached: bool) -> None:
    """Record one result; write the emitted ModelNew and the full verdict beside the report."""
    if options.candidates is None and result.get("candidate_code") is not None:
        path = options.out / "candidates" / f"{problem.id}_new.py"
        if not path.exists() or path.read_text() != result["candidate_code"]:
            write_atomically(path, result["candidate_code"])
    verdict = result.get("verdict")
    if verdict is not None:
        verdict = {**verdict, "problem": str(problem.path)}
        if problem.candidate is not None:
            verdict["candidate"] = str(problem.candidate)
        elif options.candidates is None:
            verdict["candidate"] = str(options.out / "candidates" / f"{problem.id}_new.py")
        result = {**result, "verdict": verdict}
        write_atomically(options.out / "verdicts" / f"{problem.id}.json", json.dumps(verdict, indent=2, default=str))
    records[problem.id] = record(problem, key, result, options, cached)
    if verdict is not None and verdict.get("environment"):
        ENVIRONMENT.setdefault("seen", verdict["environment"])


ENVIRONMENT: dict = {}  # the first environment a verdict reports (GPU name, torch), for the report's header


if __name__ == "__main__":
    sys.exit(job_main(sys.argv[1], sys.argv[2]))
