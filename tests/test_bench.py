"""`kfuse bench` on the CPU target: statuses, the fast_p math, the cache, the report, bad input, Ctrl-C and Ray."""

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kfuse.bench import runner as bench_module
from kfuse.bench.runner import BenchOptions, LocalRunner, discover, find_candidate, worker_slots
from kfuse.bench.report import fast_p, geomean, summarize, write_report
from kfuse.errors import UsageError
from tests.conftest import CORPUS, PROBLEMS, build_extension

HERE = Path(__file__).parent
BENCH_PROBLEMS = HERE / "bench_problems"
HONEST = CORPUS / "cpu" / "leaky_honest.py"


def kfuse(*args, env=None, timeout=900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfuse", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "MAX_JOBS": "1", **(env or {})})


def results(out: Path) -> dict:
    return json.loads((out / "results.json").read_text())


def statuses(data: dict) -> dict:
    return {p["id"]: p["status"] for p in data["problems"]}


def assert_one_line_error(done: subprocess.CompletedProcess, *words: str) -> None:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kfuse: error:"), done.stderr
    for word in words:
        assert word in lines[0], lines[0]


# --------------------------------------------------------------------------------------------- the numbers alone

def rec(status, eager=None, compiled=None, roofline=None, unfused=()):
    speedups = {k: v for k, v in (("vs_eager", eager), ("vs_compile:default", compiled)) if v is not None}
    return {"id": f"p{id(speedups)}", "status": status, "reasons": [] if status == "correct" else [f"{status}!"],
            "speedups": speedups, "times_ms": {"candidate": 1.0} if speedups else {}, "roofline_fraction": roofline,
            "kernels": [], "unfused": [{"op": op, "reason": "library"} for op in unfused], "flags": []}


RECORDS = [rec("correct", 2.0, 0.5), rec("correct", 1.0, 3.5), rec("correct", 0.8),  # no torch.compile timing
           rec("correct"),  # not timed at all
           rec("incorrect"), rec("unsupported"), rec("missing"), rec("timeout")]


def test_fast_p_is_kernelbench_definition():
    # fraction of ALL 8 problems that are correct and have speedup > p; fast_0 is the fraction correct
    assert fast_p(RECORDS, 0.0, "vs_eager") == 4 / 8
    assert fast_p(RECORDS, 0.0, "vs_compile:default") == 4 / 8
    assert fast_p(RECORDS, 0.5, "vs_eager") == 3 / 8
    assert fast_p(RECORDS, 0.9, "vs_eager") == 2 / 8
    assert fast_p(RECORDS, 1.0, "vs_eager") == 1 / 8          # 1.0 is not > 1
    assert fast_p(RECORDS, 1.0, "vs_compile:default") == 1 / 8  # the 3.5; absent speedups are not fast
    assert fast_p(RECORDS, 0.4, "vs_compile:default") == 2 / 8
    assert fast_p(RECORDS, 3.0, "vs_compile:default") == 1 / 8
    assert fast_p(RECORDS, 3.5, "vs_compile:default") == 0.0
    assert fast_p([], 1.0, "vs_eager") == 0.0
    # a speedup on an incorrect result never counts
    assert fast_p([rec("incorrect", 5.0)], 1.0, "vs_eager") == 0.0
    # total = every problem benched, also those without a record
    assert fast_p(RECORDS, 1.0, "vs_eager", total=16) == 1 / 16


def test_geomean_over_correct_timed_problems():
    value, count = geomean(RECORDS, "vs_eager")
    assert count == 3 and value == pytest.approx((2.0 * 1.0 * 0.8) ** (1 / 3))
    value, count = geomean(RECORDS, "vs_compile:default")
    assert count == 2 and value == pytest.approx(math.sqrt(0.5 * 3.5))
    assert geomean([rec("incorrect", 5.0)], "vs_eager") == (None, 0)


def test_summary_counts():
    records = RECORDS + [rec("correct", 1.2, 1.1, roofline=0.5, unfused=["aten.linear.default"]),
                         rec("correct", 1.5, 0.9, roofline=0.25, unfused=["aten.linear.default", "aten.sum.dim_IntList"])]
    s = summarize(records, ["vs_eager", "vs_compile:default"])
    assert s["problems"] == 10 and s["correct"] == 6 and s["correct_fraction"] == 0.6
    assert s["statuses"]["incorrect"] == 1 and "crashed" not in s["statuses"]
    assert s["fast_1"] == {"vs_eager": 3 / 10, "vs_compile:default": 2 / 10}
    assert s["fast_p"]["p"][0] == 0 and s["fast_p"]["p"][-1] == 3.0
    assert s["fast_p"]["vs_eager"][0] == 0.6
    assert s["roofline_fraction"] == {"median": 0.375, "count": 2}
    assert s["unfused_ops"] == {"linear": 2, "sum": 1}
    assert [f["reason"] for f in s["failures"]["timeout"]] == ["timeout!"]
    assert s["precision_fallbacks"] == {}


def test_summary_counts_precision_fallbacks_and_tuned_files():
    """The problems whose file is a precision fallback's, per fallback, and those whose file an alternative's that
    beat a first file slower than eager, per choice, in the summary and its headlines."""
    from kfuse.bench.report import headlines

    records = RECORDS + [dict(rec("correct", 1.1), precision_fallback="library_gemms"),
                         dict(rec("correct", 0.9), precision_fallback="library_gemms"),
                         dict(rec("correct", 1.0), precision_fallback="eager_rounding", tuned="channels_last=false")]
    s = summarize(records, ["vs_eager"])
    assert s["precision_fallbacks"] == {"library_gemms": 2, "eager_rounding": 1}
    assert s["tuned"] == {"channels_last=false": 1}
    rows = [row[:2] for row in headlines(s)]
    assert ("precision fallbacks", "2 library_gemms, 1 eager_rounding") in rows
    assert ("tuned for speed", "1 channels_last=false") in rows
    assert summarize(RECORDS, ["vs_eager"])["tuned"] == {}


def test_summary_counts_torch_compile_outputs_outside_kernelbench_tolerance():
    """torch.compile's own output against eager's (the judge's compile_agreement), per mode: within 1e-4, outside
    it, and outside it where torch.compile timed faster than a correct kfuse file."""
    from kfuse.bench.report import headlines

    def seen(passed):
        return {"compile:default": {"compared": True, "kernelbench_pass": passed,
                                    "max_abs_diff": 0.0 if passed else 0.02}}

    records = [dict(rec("correct", 1.2, 0.8), id="faster_compile_outside", compile_agreement=seen(False)),
               dict(rec("correct", 1.2, 1.3), id="slower_compile_outside", compile_agreement=seen(False)),
               dict(rec("correct", 1.2, 0.9), id="within", compile_agreement=seen(True)),
               dict(rec("incorrect", 1.2, 0.5), id="incorrect_kfuse", compile_agreement=seen(False)),
               dict(rec("correct", 1.1, 1.1), id="big", compile_agreement={"compile:default": {
                   "compared": False, "reason": "no room on the GPU"}})]
    s = summarize(records, ["vs_eager", "vs_compile:default"])
    m = s["compile_agreement"]["compile:default"]
    assert m["within"] == 1 and m["not_compared"] == 1
    assert m["outside"] == ["faster_compile_outside", "slower_compile_outside", "incorrect_kfuse"]
    assert m["outside_and_faster"] == ["faster_compile_outside"]  # (kfuse's incorrect file does not count)
    assert ("torch.compile's own output", "1 of 4 within 1e-4") in [row[:2] for row in headlines(s)]
    assert summarize(RECORDS, ["vs_eager"])["compile_agreement"] == {}


def test_report_files_and_headlines(tmp_path):
    records = [dict(r, id=f"problem_{k}") for k, r in enumerate(RECORDS)]
    records[0]["unfused"] = [{"op": "aten.linear.default", "reason": "library call"}]
    summary = summarize(records, ["vs_eager", "vs_compile:default"])
    meta = {"schema": "kfuse.bench/1", "kfuse_version": "0", "torch": "2", "device": "cpu", "mode": "optimize",
            "candidates": None, "options": {"time": True}, "environment": None, "written": "now"}
    files = write_report(tmp_path, records, summary, meta)
    for name in ("speedups", "fast_p", "roofline", "statuses"):
        if name == "roofline":
            assert "roofline" not in files  # no record has a roofline fraction
            continue
        assert files[name].exists() and files[name].read_bytes()[:4] == b"\x89PNG"
    page = (tmp_path / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 3
    for text in ("50.0%", "12.5%", "1.17×", "1.32×", "over 3 correct problems timed", "problem_7", "timeout!",
                 "linear", "fast_1 vs torch.compile", "geomean vs eager"):
        assert text in page, text
    assert results_json_round_trips(tmp_path)


def results_json_round_trips(out: Path) -> bool:
    data = results(out)
    return data["summary"]["correct"] == 4 and len(data["problems"]) == 8


# ----------------------------------------------------------------------------------------------------- discovery

def test_discovery_parses_and_skips(tmp_path):
    problems = discover([BENCH_PROBLEMS])
    assert [p.id for p in problems] == ["broken_import", "plain_matmul", "scale_relu"]  # not helper.py
    # a KernelBench-like tree: level folders, same stems in two folders get the folder's name
    for level in ("level1", "level2"):
        (tmp_path / "KernelBench" / level).mkdir(parents=True)
        shutil.copy(BENCH_PROBLEMS / "scale_relu.py", tmp_path / "KernelBench" / level / "1_Scale_ReLU.py")
    (tmp_path / "KernelBench" / "level1" / "19_syntax.py").write_text("class Model(:\ndef get_inputs(): pass\n")
    found = discover([tmp_path / "KernelBench" / "level1"])
    assert [p.id for p in found] == ["1_Scale_ReLU", "19_syntax"]  # the unparsable one is reported, not skipped
    both = discover([tmp_path / "KernelBench"])
    assert [p.id for p in both] == ["level1__1_Scale_ReLU", "19_syntax", "level2__1_Scale_ReLU"]
    with pytest.raises(UsageError, match="no problem files"):
        discover([tmp_path / "KernelBench" / "level1" / "..", tmp_path], skip=[tmp_path])


def test_find_candidate(tmp_path):
    (tmp_path / "a_new.py").write_text("")
    (tmp_path / "b.md").write_text("")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.py").write_text("")
    assert find_candidate(tmp_path, "a") == tmp_path / "a_new.py"
    assert find_candidate(tmp_path, "b") == tmp_path / "b.md"
    assert find_candidate(tmp_path, "c") == tmp_path / "sub" / "c.py"
    assert find_candidate(tmp_path, "d") is None


def test_one_worker_per_visible_gpu(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,3")
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "4")  # the user's choice: kept, not set per slot
    busy = {"quiet_timing": False}
    assert worker_slots(BenchOptions(device="cuda", **busy)) == [{"CUDA_VISIBLE_DEVICES": g} for g in ("0", "1", "3")]
    assert worker_slots(BenchOptions(device="cuda", workers=2, **busy)) == [{"CUDA_VISIBLE_DEVICES": g}
                                                                            for g in ("0", "1")]
    # quiet timing (the default): each GPU's judge takes its lock too, its timing stopping the run's builds
    quiet = worker_slots(BenchOptions(device="cuda", out=tmp_path))
    assert [s["CUDA_VISIBLE_DEVICES"] for s in quiet] == ["0", "1", "3"]
    assert len({s["KFUSE_GPU_LOCK"] for s in quiet}) == 3
    assert all(s["KFUSE_GPU_SHARERS"] == "1" and s["KFUSE_GPU_QUIET"] == "1" for s in quiet)
    assert not LocalRunner(quiet).shared  # (one judge per GPU: no neighbour's memory to blame for an OOM)
    assert worker_slots(BenchOptions(device="cpu")) == [{}]
    assert worker_slots(BenchOptions(device="cpu", workers=3)) == [{}, {}, {}]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(UsageError, match="no CUDA GPU"):
        worker_slots(BenchOptions(device="cuda"))


def test_jobs_sharing_a_gpu_share_its_lock(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,2")
    slots = worker_slots(BenchOptions(device="cuda", per_gpu=3, out=tmp_path))
    assert [s["CUDA_VISIBLE_DEVICES"] for s in slots] == ["0", "0", "0", "2", "2", "2"]
    locks = {s["CUDA_VISIBLE_DEVICES"]: s["KFUSE_GPU_LOCK"] for s in slots}
    assert len({s["KFUSE_GPU_LOCK"] for s in slots}) == 2 and locks["0"] != locks["2"]
    assert all(s["KFUSE_GPU_SHARERS"] == "3" for s in slots)
    # quiet timing (the default): a judge's timed rounds stop the other jobs' processes (kfuse.gpulock); the
    # run's optimize and build processes register with both GPUs' locks
    assert all(s["KFUSE_GPU_QUIET"] == "1" for s in slots)
    assert bench_module.quiet_locks(slots) == sorted(set(locks.values()))
    busy = worker_slots(BenchOptions(device="cuda", per_gpu=3, out=tmp_path, quiet_timing=False))
    assert all("KFUSE_GPU_QUIET" not in s for s in busy) and bench_module.quiet_locks(busy) == []
    # torch.compile's workers: one thread per judge where judges share a GPU, else the cores shared among the
    # GPUs' judges, unless the user chose
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    assert {s["TORCHINDUCTOR_COMPILE_THREADS"] for s in worker_slots(BenchOptions(device="cuda", per_gpu=3))} == {"1"}
    assert {s["TORCHINDUCTOR_COMPILE_THREADS"] for s in worker_slots(BenchOptions(device="cuda"))} == {"8"}
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "5")
    assert all("TORCHINDUCTOR_COMPILE_THREADS" not in s for s in worker_slots(BenchOptions(device="cuda", per_gpu=3)))
    with pytest.raises(UsageError, match="--per-gpu"):
        worker_slots(BenchOptions(device="cuda", per_gpu=0))


def test_each_local_worker_keeps_its_gpu(monkeypatch):
    """Jobs run side by side, one per slot, each with its slot's CUDA_VISIBLE_DEVICES (no GPU needed)."""
    seen, lock, active, on_gpu = [], threading.Lock(), [0, 0], {}

    def fake_job(job, env=None):
        gpu = env["CUDA_VISIBLE_DEVICES"]
        with lock:
            active[0] += 1
            active[1] = max(active[1], active[0])
            on_gpu[gpu] = on_gpu.get(gpu, 0) + 1
            assert on_gpu[gpu] == 1, "two jobs on one GPU"
        time.sleep(0.2)
        with lock:
            active[0] -= 1
            on_gpu[gpu] -= 1
            seen.append((job["id"], gpu))
        return {"status": "correct", "reasons": []}

    monkeypatch.setattr(bench_module, "run_job_isolated", fake_job)
    slots = [{"CUDA_VISIBLE_DEVICES": g} for g in ("0", "1", "2")]
    done = []
    LocalRunner(slots).run([(k, {"id": k}) for k in range(12)], lambda tag: None,
                           lambda tag, result: done.append(tag))
    assert sorted(done) == list(range(12)) and len(seen) == 12
    assert 2 <= active[1] <= 3 and {gpu for _, gpu in seen} <= {"0", "1", "2"}


def test_jobs_that_come_later_are_judged_and_a_failed_preparation_is_one_problem_s_record(monkeypatch):
    """Pipeline hands the runner futures: a job is judged when its future has it, None is a problem with nothing
    to judge, and a future that failed becomes that problem's `crashed` record while the others go on."""
    from concurrent.futures import Future

    monkeypatch.setattr(bench_module, "run_job_isolated", lambda job, env=None: {"status": "correct", "reasons": []})
    later, nothing, failed = Future(), Future(), Future()
    done = []
    runner = LocalRunner([{}])
    timer = threading.Timer(0.2, lambda: (later.set_result({"id": "b"}), nothing.set_result(None),
                                          failed.set_exception(OSError("disk full"))))
    timer.start()
    runner.run([("a", {"id": "a"}), ("b", later), ("c", nothing), ("d", failed)], lambda tag: None,
               lambda tag, result: done.append((tag, result["status"], result["reasons"])))
    assert sorted(t for t, _, _ in done) == ["a", "b", "d"]
    crashed = next(r for t, _, r in done if t == "d")
    assert dict((t, s) for t, s, _ in done)["d"] == "crashed" and "OSError: disk full" in crashed[0]


def test_jobs_share_a_gpu_within_its_memory_and_one_too_big_for_it_runs_with_the_gpu_to_itself(monkeypatch):
    """LocalRunner's ledger: the jobs running on a GPU never need more than MEMORY_BUDGET of its memory together
    (gpu_need: JUDGE_COPIES x data bytes + a judge's overhead), a job needing more than that runs with nothing
    beside it, and the first job in line that does not fit holds back the big jobs behind it, while small ones
    start beside the running jobs where they leave it room; every job is judged."""
    gib = 1 << 30
    gpu_bytes = 100 * gib
    budget = bench_module.MEMORY_BUDGET * gpu_bytes
    lock, running, log = threading.Lock(), {}, []

    def fake_job(job, env=None):
        with lock:
            running[job["id"]] = bench_module.gpu_need(job)
            log.append((job["id"], dict(running)))
        time.sleep(0.05)
        with lock:
            del running[job["id"]]
        return {"status": "correct", "reasons": []}

    monkeypatch.setattr(bench_module, "run_job_isolated", fake_job)
    data = {"huge": 20 * gib, "big1": 9 * gib, "big2": 9 * gib, **{f"small{k}": gib // 8 for k in range(6)}}
    jobs = [(name, {"id": name, "data_bytes": size}) for name, size in data.items()]
    slots = [{"CUDA_VISIBLE_DEVICES": "0", "KFUSE_GPU_LOCK": "x"}] * 4
    done = []
    LocalRunner(slots, gpu_bytes).run(jobs, lambda tag: None, lambda tag, result: done.append(tag))
    assert sorted(done) == sorted(data)
    assert bench_module.gpu_need({"data_bytes": 20 * gib}) > budget > bench_module.gpu_need({"data_bytes": 9 * gib})
    for name, beside in log:
        assert len(beside) == 1 or sum(beside.values()) <= budget, (name, beside)
    assert all(len(beside) == 1 for name, beside in log if name == "huge" or "huge" in beside)
    assert not any({"big1", "big2"} <= set(beside) for _, beside in log)  # 2 x 47 GiB do not fit in 90
    assert [name for name, _ in log][:2] == ["huge", "big1"]  # nothing beside the one that needs the GPU alone
    order = [name for name, _ in log]
    assert order.index("small0") < order.index("big2")  # big2 waits for big1; the small ones run beside big1
    small_beside_big1 = [beside for name, beside in log if "big1" in beside and name.startswith("small")]
    assert small_beside_big1 and all(sum(v for k, v in b.items() if k.startswith("small"))
                                     + bench_module.gpu_need({"data_bytes": 9 * gib}) <= budget for b in small_beside_big1)


def test_an_optimize_that_ran_out_of_gpu_memory_is_tried_again(monkeypatch, tmp_path):
    """The plan's precision probes run on the GPU beside the judges: out of memory there is the neighbours' doing,
    so the optimize is tried again (OPTIMIZE_ATTEMPTS in all); other refusals stand at once."""
    answers = {"oom": [bench_module.unsupported("kfuse could not optimize x.py (AcceleratorError: CUDA error: out "
                                                "of memory); please report it")] * 2 + [None],
               "refused": [bench_module.unsupported("kfuse has no kernel for aten.foo")] * 3}
    calls = []

    def once(self, command, path, report):
        name = path.name.split("_new")[0]
        calls.append(name)
        answer = answers[name].pop(0)
        return answer or {"path": path, "optimized": {"kernels": []}, "reused": False}

    monkeypatch.setattr(bench_module.Optimizer, "_optimize_once", once)
    monkeypatch.setattr(bench_module, "OPTIMIZE_RETRY_S", 0)
    optimize = bench_module.Optimizer(BenchOptions(device="cuda", out=tmp_path))
    for name in answers:
        (tmp_path / f"{name}.py").write_text(f"# {name}\n")
    results = {name: optimize(bench_module.Problem(id=name, path=tmp_path / f"{name}.py")) for name in answers}
    assert calls == ["oom"] * 3 + ["refused"]
    assert "optimized" in results["oom"] and results["refused"]["status"] == "unsupported"


def test_out_of_gpu_memory_beside_other_judges_runs_again_at_once_with_the_gpu_to_itself(monkeypatch, tmp_path):
    """A job that ran out of GPU memory while judges shared the GPU is judged once more, next in line, with
    nothing else on its GPU (and its GPU sections exclusive, KFUSE_GPU_SOLE); what it gets then is its verdict."""
    calls, lock, running = [], threading.Lock(), set()

    def fake_job(job, env=None):
        with lock:
            again = (job["id"], bool(env.get("KFUSE_GPU_SOLE")))
            calls.append((job["id"], dict(env), set(running)))
            running.add(again)
        time.sleep(0.02)
        with lock:
            running.discard(again)
        if job["id"] == 2 and not env.get("KFUSE_GPU_SOLE"):
            return {"status": "unsupported", "reasons": ["get_inputs() failed: OutOfMemoryError: CUDA out of memory"]}
        if job["id"] == 5 and not env.get("KFUSE_GPU_SOLE"):  # (as an H100 run saw it: a neighbour's memory)
            return {"status": "incorrect", "reasons": ["the candidate's process sent back something that is not "
                                                       "plain tensors (OutOfMemoryError: CUDA out of memory.)"]}
        if job["id"] == 5:
            return {"status": "crashed", "reasons": ["the candidate ran out of memory (CUDA out of memory)"]}
        return {"status": "correct", "reasons": []}

    monkeypatch.setattr(bench_module, "run_job_isolated", fake_job)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    slots = worker_slots(BenchOptions(device="cuda", per_gpu=3, out=tmp_path))
    started, done = [], []
    results = []
    LocalRunner(slots, 80 << 30).run([(k, {"id": k, "data_bytes": 1 << 20}) for k in range(8)], started.append,
                                     lambda tag, result: (done.append((tag, result["status"])),
                                                          results.append((tag, result))))
    assert dict(done) == {**{k: "correct" for k in range(8)}, 5: "crashed"}
    assert sorted(started) == list(range(8)) and len(calls) == 10  # (each job shown as started once)
    assert sorted(tag for tag, result in results if result.get("gpu_to_itself")) == [2, 5]
    again = [(tag, beside) for tag, env, beside in calls if env.get("KFUSE_GPU_SOLE")]
    assert sorted(tag for tag, _ in again) == [2, 5] and all(not beside for _, beside in again)
    assert not any(sole for _, _, beside in calls for _, sole in beside)  # nothing started beside them either
    assert not bench_module.out_of_gpu_memory({"status": "correct", "reasons": ["out of memory"]})


def test_a_bench_job_leaves_the_gpu_check_to_the_worker(monkeypatch):
    """The bench has checked the GPU: a job's process does not import torch to ask (2-4 s of each judgement before
    its worker started); the worker asks too, and says the same."""
    from kfuse.judge import verdict as judge

    devices = []
    monkeypatch.setattr(judge, "run_worker", lambda spec, *rest: (devices.append(spec["device"]), ("correct", []))[1])
    monkeypatch.setitem(sys.modules, "torch", None)  # an import of torch now fails
    job = bench_module.make_job(bench_module.Problem("leaky_relu", PROBLEMS / "leaky_relu.py",
                                                     CORPUS / "cuda" / "leaky_honest.py"), BenchOptions(device="cuda"))
    assert bench_module.run_job(job)["status"] == "correct" and devices == ["cuda"]


def test_bad_input_exits(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.py").write_text("x = 1\n")
    assert_one_line_error(kfuse("bench", tmp_path / "empty", "--device", "cpu", "--out", tmp_path / "o"),
                          "no problem files")
    assert_one_line_error(kfuse("bench", tmp_path / "nope", "--device", "cpu", "--out", tmp_path / "o"), "not found")
    assert_one_line_error(kfuse("bench", BENCH_PROBLEMS, "--device", "cpu", "--candidates", tmp_path / "nope",
                                "--out", tmp_path / "o"), "--candidates")
    assert_one_line_error(kfuse("bench", "--device", "cpu", "--out", tmp_path / "o"), "at least one")
    assert_one_line_error(kfuse("bench", BENCH_PROBLEMS, "--device", "cpu", "--workers", "0",
                                "--out", tmp_path / "o"), "--workers")
    import torch

    if not torch.cuda.is_available():
        assert_one_line_error(kfuse("bench", BENCH_PROBLEMS, "--out", tmp_path / "o"), "no CUDA GPU")


# ------------------------------------------------------------------------------------------------ whole runs

EXPECTED_OPTIMIZE = {"broken_import": "unsupported", "plain_matmul": "unsupported", "scale_relu": "correct"}


@pytest.fixture(scope="module")
def optimize_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "out"
    done = kfuse("bench", BENCH_PROBLEMS, "--device", "cpu", "--no-timing", "--out", out)
    assert done.returncode == 0, done.stderr + done.stdout
    return out, done


def test_optimize_statuses(optimize_run):
    out, done = optimize_run
    data = results(out)
    assert statuses(data) == EXPECTED_OPTIMIZE
    by_id = {p["id"]: p for p in data["problems"]}
    assert "failed to import" in by_id["broken_import"]["reasons"][0]
    assert str(BENCH_PROBLEMS / "broken_import.py") in by_id["broken_import"]["reasons"][0]  # not the job's copy
    assert "no kernel" in by_id["plain_matmul"]["reasons"][0]
    assert [k["fuses"] for k in by_id["scale_relu"]["kernels"]] == [["aten.mul.Tensor", "aten.relu.default"]]
    assert (out / "candidates" / "scale_relu_new.py").exists()
    assert json.loads((out / "verdicts" / "scale_relu.json").read_text())["status"] == "correct"
    assert data["judged"] == 1 and data["cached"] == 0  # the unsupported two never reach a judge
    assert "reused" not in done.stderr and len(list((out / "optimized").glob("*.json"))) == 1  # the one emitted
    for name in ("broken_import", "plain_matmul", "scale_relu"):  # the terminal table names every problem
        assert name in done.stdout


def test_results_say_where_the_time_went(optimize_run):
    out, done = optimize_run
    data = results(out)
    assert data["wall_s"] > 0 and data["segments"][-1]["wall_s"] <= data["wall_s"]
    record = next(p for p in data["problems"] if p["id"] == "scale_relu")
    assert record["stages_s"]["trials"] > 0 and set(record["stages_s"]) <= {
        "capture_plan", "build", "trials", "compile", "gpu_wait", "timing"}
    assert data["build_cache"]["hits"] + data["build_cache"]["built"] <= 1  # one emitted file: built, or found built
    assert "judge trials" in done.stderr and "wall" in done.stderr


def test_a_resumed_run_sums_its_commands_and_a_finished_one_starts_again(tmp_path):
    add = bench_module.add_segment
    assert [s["wall_s"] for s in add(tmp_path, 10.0, 3, complete=False)] == [10.0]
    assert [s["wall_s"] for s in add(tmp_path, 5.0, 2, complete=True)] == [10.0, 5.0]  # resumed: both count
    assert [s["wall_s"] for s in add(tmp_path, 1.0, 0, complete=True)] == [1.0]  # after a complete run: a new run


def test_extension_names_and_the_build_cache(tmp_path):
    code = 'a = load_inline(name="kf_a", cpp_sources="")\nb = cpp_extension.load(name="kf_b", sources=[])\n'
    assert bench_module.extension_names(code) == ["kf_a", "kf_b"]
    assert not bench_module.built_already(code, tmp_path)
    for name in ("kf_a", "kf_b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / f"{name}.so").write_bytes(b"")
    assert bench_module.built_already(code, tmp_path)
    assert not bench_module.built_already("x = 1", tmp_path)  # nothing named: nothing known to be built


def test_report_written(optimize_run):
    out, _ = optimize_run
    page = (out / "report.html").read_text()
    assert "33.3%" in page and "fast_1 vs eager" in page and "geomean vs torch.compile" in page
    assert "unsupported" in page and "--no-timing" in page
    assert (out / "fast_p.png").exists() and (out / "statuses.png").exists()
    assert not (out / "speedups.png").exists()  # nothing timed


def test_rerun_comes_from_the_cache(optimize_run):
    out, _ = optimize_run
    began = time.perf_counter()
    done = kfuse("bench", BENCH_PROBLEMS, "--device", "cpu", "--no-timing", "--out", out)
    assert done.returncode == 0, done.stderr
    assert time.perf_counter() - began < 60  # optimizing again (seconds), judging nothing
    data = results(out)
    assert data["judged"] == 0 and data["cached"] == 1
    assert statuses(data) == EXPECTED_OPTIMIZE
    assert all(p["cached"] for p in data["problems"] if p["status"] != "unsupported")
    assert "0 judged now, 1 from the cache" in done.stderr
    # the emitted file itself comes back from --out/optimized (the refusals are optimized again)
    assert "1 of 3 emitted files reused" in done.stderr


def test_timed_run_has_speedups(tmp_path):
    out = tmp_path / "out"
    done = kfuse("bench", BENCH_PROBLEMS / "scale_relu.py", "--device", "cpu", "--min-seconds", "0.05",
                 "--compile-modes", "none", "--out", out)
    assert done.returncode == 0, done.stderr
    (problem,) = results(out)["problems"]
    assert problem["status"] == "correct"
    assert set(problem["times_ms"]) == {"candidate", "eager"} and problem["speedups"]["vs_eager"] > 0
    assert problem["roofline_fraction"] > 0
    assert results(out)["summary"]["baselines"] == ["vs_eager"]
    assert (out / "speedups.png").exists() and (out / "roofline.png").exists()


SEGFAULT_ON_IMPORT = """import ctypes
import torch
import torch.nn as nn

ctypes.string_at(0)  # kills whoever imports this problem


class Model(nn.Module):
    def forward(self, x):
        return x + 1


def get_inputs():
    return [torch.randn(4, 4)]


def get_init_inputs():
    return []
"""


def test_problems_that_fail_are_recorded(tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "segfault_on_import.py").write_text(SEGFAULT_ON_IMPORT)
    failing_forward = SEGFAULT_ON_IMPORT.replace("ctypes.string_at(0)  # kills whoever imports this problem", "") \
        .replace("return x + 1", "raise RuntimeError('this model is broken')")
    (tmp_path / "p" / "forward_raises.py").write_text(failing_forward)
    done = kfuse("bench", tmp_path / "p", "--device", "cpu", "--no-timing", "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    by_id = {p["id"]: p for p in results(tmp_path / "out")["problems"]}
    assert by_id["segfault_on_import"]["status"] == "unsupported"
    assert "SIGSEGV while optimizing" in by_id["segfault_on_import"]["reasons"][0]
    assert by_id["forward_raises"]["status"] == "unsupported"
    assert "this model is broken" in by_id["forward_raises"]["reasons"][0]


@pytest.fixture(scope="module")
def honest_built():
    path, code, err = build_extension(HONEST)
    assert code == 0, err
    return HONEST


def test_candidates_mode(tmp_path, honest_built):
    problems = tmp_path / "problems"
    shutil.copytree(BENCH_PROBLEMS, problems)
    shutil.copy(PROBLEMS / "leaky_relu.py", problems / "leaky_relu.py")
    candidates = tmp_path / "candidates"
    candidates.mkdir()
    shutil.copy(HONEST, candidates / "leaky_relu.py")
    shutil.copy(HONEST, candidates / "broken_import_new.py")  # its problem does not import
    out = tmp_path / "out"
    done = kfuse("bench", problems, "--candidates", candidates, "--device", "cpu", "--no-timing", "--out", out)
    assert done.returncode == 0, done.stderr
    data = results(out)
    assert statuses(data) == {"broken_import": "unsupported", "leaky_relu": "correct", "plain_matmul": "missing",
                              "scale_relu": "missing"}
    assert data["summary"]["correct_fraction"] == 0.25
    by_id = {p["id"]: p for p in data["problems"]}
    assert by_id["leaky_relu"]["candidate"] == str(candidates / "leaky_relu.py")
    assert "no candidate" in by_id["scale_relu"]["reasons"][0]
    assert "missing" in (out / "report.html").read_text()


HANG = """import time
import torch
import torch.nn as nn

time.sleep(600)  # importing this problem never finishes


class Model(nn.Module):
    def forward(self, x):
        return torch.nn.functional.leaky_relu(x, 0.01)


def get_inputs():
    return [torch.randn(4, 4)]


def get_init_inputs():
    return []
"""


def processes_mentioning(text: str) -> list[int]:
    """Processes with `text` in their command line or in the path of a file they hold open (a judge's worker forked
    by a zygote has the zygote's command line, and its log open)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                held = [os.readlink(fd) for fd in (entry / "fd").iterdir()]
                if text in (entry / "cmdline").read_bytes().decode(errors="replace") or any(text in p for p in held):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


@pytest.mark.parametrize("engine", ["local", pytest.param("ray", marks=pytest.mark.exhaustive)])  # Ray: 20 s
def test_ctrl_c_keeps_finished_results(tmp_path, honest_built, engine):
    if engine == "ray":
        pytest.importorskip("ray")
    problems, candidates, out, scratch = (tmp_path / n for n in ("problems", "candidates", "out", "scratch"))
    for folder in (problems, candidates, scratch):
        folder.mkdir()
    shutil.copy(PROBLEMS / "leaky_relu.py", problems / "a_leaky.py")
    shutil.copy(HONEST, candidates / "a_leaky.py")
    (problems / "b_hang.py").write_text(HANG)
    shutil.copy(HONEST, candidates / "b_hang.py")
    command = [sys.executable, "-m", "kfuse", "bench", str(problems), "--candidates", str(candidates), "--device",
               "cpu", "--no-timing", "--out", str(out)] + (["--ray", "local", "--workers", "2"] if engine == "ray" else [])
    env = {**os.environ, "TMPDIR": str(scratch), "RAY_TMPDIR": "/tmp/ray", "RAY_USAGE_STATS_ENABLED": "0"}
    # Ctrl-C as at a terminal: SIGINT at its default in the bench (a shell's background job, which pytest may be,
    # hands its children SIGINT ignored, and then the signal below would never arrive)
    bench = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    while not list((out / "cache").glob("*.json")) and time.monotonic() < deadline and bench.poll() is None:
        time.sleep(0.5)
    time.sleep(3)  # b_hang is now being judged (its worker is stuck importing the problem)
    assert processes_mentioning(f"{scratch}/kfuse-check-"), "the second job's judge should be running"
    bench.send_signal(signal.SIGINT)
    stdout, stderr = bench.communicate(timeout=60)
    assert bench.returncode == 130, stderr
    assert "interrupted" in stderr
    data = results(out)
    assert data["interrupted"] and statuses(data) == {"a_leaky": "correct"}
    assert len(list((out / "cache").glob("*.json"))) == 1
    time.sleep(1)
    assert processes_mentioning(f"{scratch}/kfuse-") == []  # the job and the judge's worker are gone


@pytest.mark.exhaustive  # a Ray cluster's start costs about 40 s of a 2-core machine: on demand, and in CI
def test_ray_local_cluster(tmp_path):
    pytest.importorskip("ray")
    out = tmp_path / "out"
    done = kfuse("bench", BENCH_PROBLEMS, "--device", "cpu", "--no-timing", "--ray", "local", "--workers", "2",
                 "--out", out, env={"RAY_USAGE_STATS_ENABLED": "0"})
    assert done.returncode == 0, done.stderr[-3000:]
    data = results(out)
    assert statuses(data) == EXPECTED_OPTIMIZE and data["judged"] == 1
    assert data["options"]["ray"] == "local"
    done = kfuse("bench", BENCH_PROBLEMS, "--device", "cpu", "--no-timing", "--ray", "local", "--workers", "2",
                 "--out", out, env={"RAY_USAGE_STATS_ENABLED": "0"})
    assert done.returncode == 0 and results(out)["cached"] == 1


def test_problems_with_big_inputs_start_first_then_the_rest(tmp_path):
    """bench_module.start_order: problems with big data (2 GiB and more) go first, largest first, back to back; the
    rest alternate between the largest and smallest files. footprints counts inputs and
    outputs on meta."""
    files = {"big": "(64, 1024, 1024, 16)", "huge": "(128, 1024, 1024, 16)", "small": "(4, 4)"}
    problems = []
    for name, shape in files.items():
        path = tmp_path / f"{name}.py"
        path.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
                        f"def get_inputs():\n    return [torch.rand{shape}]\ndef get_init_inputs():\n    return []\n")
        problems.append(bench_module.Problem(name, path))
    for name, padding in (("short_file", ""), ("long_file", "#" * 5000 + "\n")):
        path = tmp_path / f"{name}.py"
        path.write_text(padding + (tmp_path / "small.py").read_text())
        problems.append(bench_module.Problem(name, path))
    sizes, _ = bench_module.footprints(problems, bench_module.job_environment(None))
    assert sizes[tmp_path / "huge.py"] == 2 * 128 * 1024 * 1024 * 16 * 4 and sizes[tmp_path / "small.py"] == 2 * 64
    order = [p.id for p in bench_module.start_order(problems, sizes)]
    assert order == ["huge", "big", "long_file", "small", "short_file"]
    assert {p.id for p in bench_module.start_order(problems, {})} == set(order)  # no sizes: file sizes alone


def test_a_correct_parity_file_is_optimized_again_with_each_precision_fallback(tmp_path, monkeypatch):
    """bench.precision_fallback_pass: a problem recorded correct-parity, or incorrect on precision parity alone, is
    optimized again with each of choices.PRECISION_FALLBACKS in turn and judged; the first correct verdict replaces
    the first one, an incorrect one leaves it (a second pass finds them cached), and a fallback that writes the same
    file again is not judged."""
    import threading

    from kfuse.bench import runner as bench
    from kfuse.kernels.choices import PRECISION_FALLBACKS

    rungs = [name for name, _ in PRECISION_FALLBACKS]
    assert tuple(rungs) == bench.PRECISION_FALLBACKS  # (the bench names them: it may not import the kernels)
    paths = {}
    for name in ("first", "second", "same"):
        paths[name] = tmp_path / f"{name}.py"
        paths[name].write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n"
                               "def get_inputs():\n    return []\n")
    problems = [bench.Problem(name, path) for name, path in paths.items()]
    options = bench.BenchOptions(device="cpu", out=tmp_path / "out")
    (options.out / "cache").mkdir(parents=True)
    asked = []

    def optimize(self, problem):
        asked.append((problem.id, self.fallback))
        path = tmp_path / f"{problem.id}_{self.fallback}.py"
        path.write_text(f"# {problem.id}{f' with {self.fallback}' if problem.id != 'same' else ''}\n")
        return {"path": path, "optimized": {"kernels": []}}

    monkeypatch.setattr(bench.Optimizer, "__call__", optimize)
    verdicts = {"first": "correct", "second": "incorrect", "same": "incorrect"}

    class Runner:
        def run(self, jobs, on_start, on_done):
            for problem, job in jobs:
                assert "# " + problem.id in job["candidate_text"]
                on_done(problem, {"status": verdicts[problem.id]})

    records = {p.id: {"status": "correct-parity"} for p in problems}
    assert bench.precision_fallback_pass(problems, records, options, Runner(), lambda p: None,
                                         threading.Lock()) == 4
    assert asked == [("first", rungs[0]), ("second", rungs[0]), ("same", rungs[0]), ("second", rungs[1]),
                     ("same", rungs[1])]  # (same: its second file is its first's again, not judged)
    assert records["first"]["status"] == "correct" and records["first"]["precision_fallback"] == rungs[0]
    assert records["second"] == {"status": "correct-parity"} and records["same"] == {"status": "correct-parity"}
    records = {p.id: {"status": "correct-parity"} for p in problems}
    asked.clear()
    judged = bench.precision_fallback_pass(problems, records, options, Runner(), lambda p: None, threading.Lock())
    assert judged == 0, asked
    assert records["first"]["status"] == "correct" and records["first"]["cached"]
    assert records["second"] == {"status": "correct-parity"}
    # incorrect on precision parity alone is planned again the same way; incorrect otherwise is not
    records = {"first": {"status": "incorrect", "precision_only": True}, "second": {"status": "incorrect"}}
    asked.clear()
    assert bench.precision_fallback_pass(problems, records, options, Runner(), lambda p: None,
                                         threading.Lock()) == 0
    assert asked == [("first", rungs[0])] and records["first"]["status"] == "correct"
    assert records["second"] == {"status": "incorrect"}


def test_a_graphed_file_the_judge_failed_is_optimized_again_without_the_graph(tmp_path, monkeypatch):
    """bench.ungraphed_pass: a problem whose file ran as one CUDA graph and failed is optimized again with
    `--cuda-graph off` (and the precision fallback its file had); correct or correct-parity ones are left."""
    import threading

    from kfuse.bench import runner as bench

    problems = []
    for name in ("crashed", "rounded", "fine", "plain"):
        path = tmp_path / f"{name}.py"
        path.write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n")
        problems.append(bench.Problem(name, path))
    options = bench.BenchOptions(device="cpu", out=tmp_path / "out")
    (options.out / "cache").mkdir(parents=True)
    asked = []

    def optimize(self, problem):
        assert self.ungraphed
        asked.append((problem.id, self.fallback))
        path = tmp_path / f"{problem.id}_ungraphed.py"
        path.write_text(f"# {problem.id} without the graph\n")
        return {"path": path, "optimized": {"kernels": []}}

    monkeypatch.setattr(bench.Optimizer, "__call__", optimize)

    class Runner:
        def run(self, jobs, on_start, on_done):
            for problem, job in jobs:
                on_done(problem, {"status": "correct"})

    records = {"crashed": {"status": "crashed", "cuda_graph": True},
               "rounded": {"status": "incorrect", "cuda_graph": True, "precision_fallback": "eager_rounding"},
               "fine": {"status": "correct", "cuda_graph": True},
               "plain": {"status": "crashed", "cuda_graph": False}}
    assert bench.ungraphed_pass(problems, records, options, Runner(), lambda p: None, threading.Lock()) == 2
    assert asked == [("crashed", None), ("rounded", "eager_rounding")]
    assert records["crashed"]["status"] == "correct" and records["crashed"]["ungraphed"]
    assert records["rounded"]["precision_fallback"] == "eager_rounding" and records["rounded"]["ungraphed"]
    assert records["plain"]["status"] == "crashed"


def test_a_file_slower_than_eager_is_planned_again_with_each_alternative_and_the_fastest_kept(tmp_path, monkeypatch):
    """bench.speed_pass: a correct problem timed below 0.95x eager is optimized again with each of kfuse tune's
    alternatives (on top of its precision fallback); files seen already are not judged; the fastest correct one
    replaces the record only where it beats the first by more than the margin; fast problems are left."""
    import threading

    from kfuse.bench import runner as bench
    from kfuse.kernels.choices import ALTERNATIVES, Choices

    def as_flag(choice: Choices) -> str:  # (the bench names them: it may not import the kernels)
        name, value = choice.label().split("=")
        return f"{name}={str(value).lower()}"

    assert bench.SPEED_ALTERNATIVES == tuple(as_flag(c) for c in ALTERNATIVES[1:])
    problems = []
    for name in ("slow", "noisy", "fast"):
        path = tmp_path / f"{name}.py"
        path.write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n")
        problems.append(bench.Problem(name, path))
        (tmp_path / f"{name}_first.py").write_text(f"# {name} first\n")
    options = bench.BenchOptions(device="cpu", out=tmp_path / "out")
    (options.out / "cache").mkdir(parents=True)
    asked = []
    # the files each choice writes: most write the first file again, two write new ones, one of them twice (the
    # record names the first choice that wrote it)
    writes = {"conv_kernels=all": "library", "conv_kernels=library": "library", "channels_last=false": "nchw"}

    def optimize(self, problem):
        asked.append((problem.id, self.choice, self.fallback))
        path = tmp_path / f"{problem.id}_{self.choice}.py"
        path.write_text(f"# {problem.id} {writes[self.choice]}\n" if self.choice in writes
                        else f"# {problem.id} first\n")
        return {"path": path, "optimized": {"kernels": []}}

    monkeypatch.setattr(bench.Optimizer, "__call__", optimize)
    ratios = {("slow", "library"): 1.10, ("slow", "nchw"): 0.80, ("noisy", "library"): 0.905,
              ("noisy", "nchw"): 0.5}
    judged = []

    class Runner:
        def run(self, jobs, on_start, on_done):
            for problem, job in jobs:
                which = job["candidate_text"].split()[2]
                judged.append((problem.id, which))
                on_done(problem, {"status": "correct", "candidate_code": job["candidate_text"],
                                  "verdict": {"timing": {"speedups": {"vs_eager": ratios[problem.id, which]}}}})

    records = {p.id: {"status": "correct", "candidate": str(tmp_path / f"{p.id}_first.py"),
                      "speedups": {"vs_eager": r}} for p, r in zip(problems, (0.60, 0.90, 1.5))}
    records["noisy"]["precision_fallback"] = "library_gemms"
    assert bench.speed_pass(problems, records, options, Runner(), lambda p: None, threading.Lock()) == 4
    assert sorted(judged) == [("noisy", "library"), ("noisy", "nchw"), ("slow", "library"), ("slow", "nchw")]
    assert {c for p, c, _ in asked if p == "slow"} == set(bench.SPEED_ALTERNATIVES)
    assert "fast" not in {p for p, *_ in asked}
    assert {f for p, _, f in asked if p == "noisy"} == {"library_gemms"}
    assert records["slow"]["tuned"] == "conv_kernels=all" and records["slow"]["speedups"] == {"vs_eager": 1.10}
    assert (options.out / "candidates" / "slow_new.py").read_text() == "# slow library\n"
    assert "tuned" not in records["noisy"]  # 0.905 against 0.90: within the margin, the first file stays
    assert "tuned" not in records["fast"]
    # a second run finds the verdicts cached
    records["slow"] = {"status": "correct", "candidate": str(tmp_path / "slow_first.py"), "speedups": {"vs_eager": 0.6}}
    judged.clear()
    assert bench.speed_pass(problems[:1], records, options, Runner(), lambda p: None, threading.Lock()) == 0
    assert records["slow"]["tuned"] == "conv_kernels=all" and records["slow"]["cached"]
    # no timing, no speed pass
    untimed = bench.BenchOptions(device="cpu", out=tmp_path / "out", time=False)
    assert bench.speed_pass(problems, records, untimed, Runner(), lambda p: None, threading.Lock()) == 0


def test_the_ledger_replay_reads_a_run_and_replays_it(tmp_path):
    """scripts/replay_ledger.py: a run's judgements (data bytes from results.json, lengths from the log's `judged A-B
    s` lines) through LocalRunner; two jobs needing 38 GiB each do not fit in 90% of 80 GiB, so they run one after
    the other."""
    gib = 1 << 30
    rows = [{"problem": f"/x/level1/{name}.py", "data_bytes": size} for name, size in
            (("big_a", 6 * gib), ("big_b", 6 * gib), ("small", gib // 8))]
    (tmp_path / "results.json").write_text(json.dumps({"problems": rows}))
    (tmp_path / "bench.log").write_text("\n".join([
        "[  40 s] 1/3 big_a: correct (judged 10-40 s; trials 20)",
        "[  70 s] 2/3 big_b: correct (judged 40-70 s; trials 20)",
        "[  90 s] 3/3 small: correct (judged 30-90 s, GPU to itself; trials 20)"]))
    done = subprocess.run([sys.executable, "scripts/replay_ledger.py", str(tmp_path / "results.json"),
                           str(tmp_path / "bench.log"), "--copies", "6", "--gpu-gib", "80"],
                          capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[1],
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip()
    assert line.startswith("3 judgements, 6 copies"), line
    replayed = float(line.split("the ledger's run ")[1].split(" s")[0])
    assert replayed >= 50 + 2 * 30 * 0.95, line  # the first arrives at 50 s; the two big ones one after the other


def test_the_note_of_a_correct_row_counts_kernels_launches_and_the_graph():
    from kfuse.bench.report import launch_note

    assert launch_note({"kernels": [{}] * 3, "launches": 373, "cuda_graph": True}) == \
        "3 kernel(s), 373 launches, one CUDA graph"
    assert launch_note({"kernels": [{}], "launches": 1, "cuda_graph": False}) == "1 kernel(s)"
    assert launch_note({"kernels": []}) == ""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="quiet timing reads /proc")
def test_optimize_runs_with_a_slots_gpu_lock_and_registers_for_quiet_timing(monkeypatch, tmp_path):
    """`kfuse optimize` under the bench probes eager's precision on the GPU: it runs with a worker slot's environment
    (the judges' lock, which its probes take), and while it runs its session is one that a judge's timing stops."""
    from kfuse import gpulock

    lock = str(tmp_path / "locks" / "gpu0.lock")
    slot = {"CUDA_VISIBLE_DEVICES": "0", "KFUSE_GPU_LOCK": lock, "KFUSE_GPU_QUIET": "1"}
    seen = {}

    def popen(command, env, **_):
        seen["env"] = env
        return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1)"], start_new_session=True)

    registered, register_session = [], gpulock.register_session

    def register(lock_path, pid):
        entry = register_session(lock_path, pid)
        registered.append(entry)
        return entry

    monkeypatch.setattr(bench_module.zygote, "popen", popen)
    monkeypatch.setattr(bench_module.gpulock, "register_session", register)
    monkeypatch.setattr(bench_module, "QUIET_LOCKS", bench_module.quiet_locks([slot]))
    (tmp_path / "p.py").write_text("# p\n")
    optimize = bench_module.Optimizer(BenchOptions(device="cuda", out=tmp_path), env=slot)
    result = optimize(bench_module.Problem(id="p", path=tmp_path / "p.py"))
    assert result["status"] == "unsupported"  # (the stand-in wrote no file)
    assert seen["env"]["KFUSE_GPU_LOCK"] == lock and seen["env"]["CUDA_VISIBLE_DEVICES"] == "0"
    assert len(registered) == 1 and registered[0] is not None and registered[0].parent == gpulock.sessions_folder(lock)
    assert not registered[0].exists()  # unregistered once it ended
