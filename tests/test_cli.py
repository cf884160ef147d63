"""The command line: exit codes, the JSON file, and one clear line (never a traceback) for bad input."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CORPUS, PROBLEMS

LEAKY = PROBLEMS / "leaky_relu.py"
HONEST = CORPUS / "cpu" / "leaky_honest.py"


def kfuse(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfuse", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


def assert_one_line_error(done: subprocess.CompletedProcess, *words: str) -> None:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kfuse: error:"), done.stderr
    for word in words:
        assert word in lines[0], lines[0]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_missing_files(tmp_path):
    assert_one_line_error(kfuse("check", tmp_path / "nope.py", HONEST, "--device", "cpu"), "not found")
    assert_one_line_error(kfuse("check", LEAKY, tmp_path / "nope.py", "--device", "cpu"), "not found")


def test_problem_with_a_syntax_error(tmp_path):
    bad = write(tmp_path, "bad.py", "class Model(:\n")
    assert_one_line_error(kfuse("check", bad, HONEST, "--device", "cpu"), "syntax error", ":1")


def test_problem_missing_get_inputs(tmp_path):
    text = LEAKY.read_text().replace("def get_inputs", "def make_inputs")
    assert_one_line_error(kfuse("check", write(tmp_path, "p.py", text), HONEST, "--device", "cpu"), "get_inputs")


def test_get_inputs_returning_something_else(tmp_path, built_cpu_corpus):
    text = LEAKY.read_text().replace("return [torch.randn(batch_size, dim)]", "return ['not a tensor']")
    problem = write(tmp_path, "leaky_relu.py", text)
    assert_one_line_error(kfuse("check", problem, HONEST, "--device", "cpu"), "get_inputs", "str")


def test_cuda_asked_for_but_absent():
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert_one_line_error(kfuse("check", LEAKY, HONEST, "--device", "cuda"), "no CUDA GPU")


def test_too_few_trials():
    assert_one_line_error(kfuse("check", LEAKY, HONEST, "--device", "cpu", "--trials", "3"), "at least 5")


def test_candidate_syntax_error_is_a_compile_error_verdict(tmp_path):
    bad = write(tmp_path, "cand.py", "class ModelNew(:\n")
    out = tmp_path / "v.json"
    done = kfuse("check", LEAKY, bad, "--device", "cpu", "--json", out)
    assert done.returncode == 1
    verdict = json.loads(out.read_text())
    assert verdict["status"] == "compile_error" and "syntax error" in verdict["reasons"][0]


def test_candidate_without_model_new_is_rejected(tmp_path):
    cand = write(tmp_path, "cand.py", "import torch\nclass Model(torch.nn.Module):\n    x = 1\n")
    out = tmp_path / "v.json"
    assert kfuse("check", LEAKY, cand, "--device", "cpu", "--json", out).returncode == 1
    assert json.loads(out.read_text())["status"] == "rejected"


def test_correct_candidate_exits_zero_and_writes_the_schema(tmp_path, built_cpu_corpus):
    out = tmp_path / "v.json"
    done = kfuse("check", LEAKY, HONEST, "--device", "cpu", "--compile-modes", "none", "--min-seconds", "0.05",
                 "--json", out)
    assert done.returncode == 0, done.stdout + done.stderr
    verdict = json.loads(out.read_text())
    assert verdict["schema"] == "kfuse.verdict/1"
    assert verdict["status"] == "correct" and verdict["reasons"] == []
    assert set(verdict["timing"]["stats"]) == {"candidate", "eager"}
    assert "CORRECT" in done.stdout


def test_answer_text_is_extracted_then_judged(tmp_path, built_cpu_corpus):
    answer = "Here is a draft:\n```python\nclass ModelNew: ...\n```\nFinal:\n```python\n" + HONEST.read_text() \
        + "```\nAnd a cut-off retry:\n```python\nclass ModelNew(\n"
    out = tmp_path / "v.json"
    done = kfuse("check", LEAKY, write(tmp_path, "answer.md", answer), "--device", "cpu", "--no-timing",
                 "--json", out)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(out.read_text())["extraction"]["block"] == 2


def test_extract_command(tmp_path):
    answer = write(tmp_path, "a.txt", "```python\nclass ModelNew:\n    x = 1\n```\n")
    target = tmp_path / "m.py"
    done = kfuse("extract", answer, "-o", target)
    assert done.returncode == 0 and target.read_text() == "class ModelNew:\n    x = 1\n"
    assert_one_line_error(kfuse("extract", write(tmp_path, "b.txt", "no code here\n")), "no fenced code blocks")


def test_random_reference_is_refused_with_a_reason(tmp_path, built_cpu_corpus):
    text = LEAKY.read_text().replace(
        "return torch.nn.functional.leaky_relu(x, negative_slope=self.negative_slope)",
        "return torch.nn.functional.dropout(torch.nn.functional.leaky_relu(x, self.negative_slope), p=0.5)")
    problem = write(tmp_path, "leaky_relu.py", text)
    assert_one_line_error(kfuse("check", problem, HONEST, "--device", "cpu", "--no-timing"), "dropout")


def test_version_comes_from_one_place():
    import kfuse

    done = subprocess.run([sys.executable, "-m", "kfuse", "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == f"kfuse, version {kfuse.__version__}"
    pyproject = (Path(__file__).parent.parent / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject and 'version = {attr = "kfuse.__version__"}' in pyproject


def test_an_unknown_planner_choice_is_a_one_line_error(tmp_path):
    done = kfuse("optimize", str(PROBLEMS / "leaky_relu.py"), "-o", str(tmp_path / "new.py"), "--device", "cpu",
                 "--no-check", "--choice", "channels_last=maybe")
    assert_one_line_error(done, "--choice", "true or false")
    assert not (tmp_path / "new.py").exists()


def test_a_file_incorrect_on_precision_alone_is_planned_again_with_eager_rounding(tmp_path, monkeypatch):
    """kfuse optimize's fallbacks (verdict.needs_precision_fallback): the first file's verdict incorrect with
    precision_only, the file planned again with each of choices.PRECISION_FALLBACKS in turn (one that writes the
    same file is not judged) and kept where the judge finds it correct; an incorrect verdict for another reason is
    left as it is."""
    from click.testing import CliRunner

    from kfuse import cli

    problem = Path(__file__).parent / "optimize" / "activation_chain.py"  # (eager's rounding keeps a kernel)

    def run(first: dict) -> tuple[list, object, dict]:
        planned = []
        verdicts = iter([first, {"status": "correct", "reasons": []}])

        def judge(_problem, candidate, _options):
            planned.append(candidate.name)
            return next(verdicts)

        monkeypatch.setattr(cli, "judge_with_progress", judge)
        out = tmp_path / f"new_{first['reasons'][0]}.py"
        result = CliRunner().invoke(cli.main, ["optimize", str(problem), "-o", str(out), "--device", "cpu",
                                               "--no-timing", "--json", str(out.with_suffix(".json"))])
        return planned, result, json.loads(out.with_suffix(".json").read_text())

    planned, result, report = run({"status": "incorrect", "reasons": ["precision"], "precision_only": True})
    assert result.exit_code == 0, result.output
    assert len(planned) == 2 and planned[1].endswith("_eager_rounding.py") and report["eager_rounding_fallback"]
    assert "incorrect on precision alone" in result.output and report["status"] == "correct"
    planned, result, report = run({"status": "incorrect", "reasons": ["mismatch"], "precision_only": False})
    assert len(planned) == 1 and report["status"] == "incorrect" and result.exit_code != 0
    # a file with a kfuse GEMM tries the library's GEMMs first (the file above has none: the same file, not judged)
    problem = Path(__file__).parent / "optimize" / "linear_scale_leaky.py"
    planned, result, report = run({"status": "incorrect", "reasons": ["gemm"], "precision_only": True})
    assert result.exit_code == 0, result.output
    assert len(planned) == 2 and planned[1].endswith("_library_gemms.py") and report["library_gemms_fallback"]
    assert not any(kernel["name"].startswith("gemm") for kernel in report["kernels"])


def test_a_file_slower_than_eager_is_planned_again_with_kfuse_tunes_alternatives(tmp_path, monkeypatch):
    """kfuse optimize: a correct file timed below 0.95x eager is planned with each of choices.ALTERNATIVES; each new
    file is judged and the fastest correct one kept where it beats the first by more than the margin (the report
    says `tuned`); a file as fast as eager is left alone."""
    from click.testing import CliRunner

    from kfuse import cli

    problem = Path(__file__).parent / "optimize" / "linear_scale_leaky.py"  # (a GEMM: cuBLAS is one alternative)

    def timed(status: str, ratio: float) -> dict:
        return {"status": status, "reasons": [], "timing": {"speedups": {"vs_eager": ratio}}}

    def run(name: str, verdicts: dict) -> tuple[list, object, dict]:
        judged = []

        def judge(_problem, candidate, _options):
            judged.append(candidate.name)
            return verdicts.get(candidate.name.removeprefix(name + "_").removesuffix(".py"), verdicts["other"])

        monkeypatch.setattr(cli, "judge_with_progress", judge)
        out = tmp_path / f"{name}.py"
        result = CliRunner().invoke(cli.main, ["optimize", str(problem), "-o", str(out), "--device", "cpu",
                                               "--json", str(out.with_suffix(".json"))])
        return judged, result, json.loads(out.with_suffix(".json").read_text())

    slow = {"slow": timed("correct", 0.5), "gemm_kernels_False": timed("correct", 0.9), "other": timed("correct", 0.6)}
    judged, result, report = run("slow", slow)
    assert result.exit_code == 0, result.output
    assert judged[0] == "slow.py" and "slow_gemm_kernels_False.py" in judged and len(judged) == len(set(judged))
    assert report["tuned"] == "gemm_kernels=False" and report["verdict"]["timing"]["speedups"]["vs_eager"] == 0.9
    assert not any(kernel["name"].startswith("gemm") for kernel in report["kernels"])  # the kept file's kernels
    assert sorted(p.name for p in tmp_path.glob("slow*.py")) == ["slow.py"]  # the others' files removed
    judged, result, report = run("fast", {"fast": timed("correct", 0.97), "other": timed("correct", 2.0)})
    assert judged == ["fast.py"] and "tuned" not in report
    # the search has a time budget: spent, it stops and the first file stays
    monkeypatch.setattr(cli, "SPEED_SEARCH_S", -1.0)
    judged, result, report = run("late", {"late": timed("correct", 0.5), "other": timed("correct", 2.0)})
    assert judged == ["late.py"] and "tuned" not in report and "stopping there" in result.output
