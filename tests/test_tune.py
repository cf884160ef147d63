"""`kfuse tune`: the variants a problem's plan has, the choice among judged variants, and the whole command on
the CPU target."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kfuse.kernels import choices
from kfuse.tune import Variant, emit_variants, pick

PROBLEMS = Path(__file__).parent / "optimize"


def test_choices_apply_inside_the_block_only():
    assert choices.current() == choices.Choices() and choices.Choices().label() == "default"
    library = choices.Choices(gemm_kernels=False, channels_last=False)
    with choices.using(library):
        assert choices.current() is library
    assert choices.current() == choices.Choices()
    assert library.label() == "gemm_kernels=False, channels_last=False"


def test_each_distinct_plan_is_one_variant(tmp_path):
    # CUDA files are only written here (nothing is built): the GEMM seed has three plans (kfuse's template with
    # its Hopper kernel, mma.sync only, cuBLAS with the epilogue after it); the other choices change nothing
    gemm = emit_variants(PROBLEMS / "linear_wide_leaky.py", tmp_path / "gemm", "cuda", "fp32")
    assert [v.choices[0].label() for v in gemm] == ["default", "gemm_kernels=False", "gemm_wgmma=False"]
    assert sum(len(v.choices) for v in gemm) == len(choices.ALTERNATIVES)
    assert [k["name"] for k in gemm[1].kernels] == ["fused_mul_leaky_relu"]  # the epilogue after cuBLAS
    assert len({v.path.read_text() for v in gemm}) == 3 and all(v.path.exists() for v in gemm)
    # the conv seed (the suite's file: its filter takes the small-filter kernels): the tensor-core kernel, cuDNN
    # with the epilogue after it, the FFMA kernel
    seed = Path(__file__).parents[1] / "suite" / "level2" / "30_conv2d_div_leaky_relu.py"
    conv = emit_variants(seed, tmp_path / "conv", "cuda", "fp32")
    labels = [v.choices[0].label() for v in conv]
    assert labels == ["default", "conv_kernels=library", "small_filter_tensor_cores=False"], labels
    assert "conv2d_small_filter_forward<8, 3, 3, 1, 1, 1, 1, 64, true>" in conv[0].path.read_text()
    assert "conv2d_small_filter_forward<8, 3, 3, 1, 1, 1, 1, 64, false>" in conv[2].path.read_text()


def _variant(label_choices, status, ms):
    return Variant([label_choices], Path("x.py"), [], status=status, ms=ms)


def test_the_defaults_stand_within_the_margin():
    default = _variant(choices.Choices(), "correct", 1.00)
    close = _variant(choices.Choices(gemm_kernels=False), "correct", 0.99)
    assert pick([default, close]) is default                  # 1% faster: noise
    faster = _variant(choices.Choices(gemm_wgmma=False), "correct", 0.90)
    assert pick([default, close, faster]) is faster
    wrong = _variant(choices.Choices(channels_last=False), "incorrect", 0.10)
    assert pick([default, wrong]) is default                  # an incorrect file is never chosen
    assert pick([_variant(choices.Choices(), "incorrect", 1.0), close]) is close
    assert pick([wrong]) is None


def test_tune_on_the_cpu_judges_each_plan_and_keeps_the_fastest(tmp_path):
    out, report = tmp_path / "tuned.py", tmp_path / "tuned.json"
    done = subprocess.run([sys.executable, "-m", "kfuse", "tune", str(PROBLEMS / "linear_scale_leaky.py"),
                           "-o", str(out), "--device", "cpu", "--min-seconds", "0.2", "--json", str(report)],
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    tuned = json.loads(report.read_text())
    variants = tuned["variants"]
    assert [v["choices"][0] for v in variants] == ["default", "gemm_kernels=False"]
    assert all(v["status"] == "correct" and v["ms"] > 0 for v in variants)
    default, library = variants
    expected = "gemm_kernels=False" if library["ms"] < default["ms"] * 0.98 else "default"
    assert tuned["chosen"].startswith(expected)
    text = out.read_text()
    assert "Tuned by kfuse tune on cpu" in text and "<- chosen" in text
    assert not (tmp_path / "tuned_variants").exists()  # variants removed unless --keep-variants


def test_a_missing_problem_is_one_line_error(tmp_path):
    done = subprocess.run([sys.executable, "-m", "kfuse", "tune", str(tmp_path / "nope.py"), "--device", "cpu"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [f"kfuse: error: problem file not found: {tmp_path / 'nope.py'}"]


def test_optimize_sets_the_planner_s_choices_by_name():
    picked = choices.parse(["channels_last=false", "conv_kernels=library"])
    assert picked == choices.Choices(channels_last=False, conv_kernels="library")
    assert choices.parse(["gemm_wgmma=False"], choices.EAGER_ROUNDING).eager_bits == "all"
    for wrong in (["channel_last=false"], ["channels_last=no"], ["channels_last"]):
        with pytest.raises(ValueError, match="--choice"):
            choices.parse(wrong)
