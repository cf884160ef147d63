"""Code generation details that need no compiler: which helpers a kernel pulls in, how arguments are printed."""

import torch

from kfuse.codegen import _scalar, prelude_for, render_ivalue


def test_prelude_keeps_only_the_helpers_used_and_their_dependencies():
    text = prelude_for("const float t0 = kf_hardswish(a0);")
    assert "kf_hardswish" in text and "kf_clamp(" in text  # hardswish clamps
    assert "kf_gelu_erf" not in text and "kf_softplus" not in text
    assert text.count("#if") == text.count("#endif")


def test_prelude_for_plain_arithmetic_is_just_the_header():
    text = prelude_for("const float t0 = (a0 * 2.0f);")
    assert "kf_" not in text and "KF_INLINE" in text


def test_arguments_print_as_ivalues():
    assert render_ivalue(None, {}) == "c10::IValue()"
    assert render_ivalue(True, {}) == "c10::IValue(true)"
    assert render_ivalue([1, -2], {}) == "c10::IValue(std::vector<int64_t>{1, -2})"
    assert render_ivalue(torch.float16, {}) == "c10::IValue(int64_t(c10::ScalarType::Half))"
    assert "infinity" in render_ivalue(float("-inf"), {})


def test_numbers_passed_as_tensors_keep_their_kind():
    assert _scalar(True) == "at::Scalar(true)"
    assert _scalar(3) == "at::Scalar(int64_t(3))"
    assert _scalar(0.5) == "at::Scalar(double(0.5))"
    assert "quiet_NaN" in _scalar(float("nan"))
