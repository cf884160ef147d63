"""Reduction planning without a compiler (one helper compiled as plain C++): which ops join a reduction's kernel, what
stays an ATen call and why."""

import re

import pytest
import torch
import torch.nn as nn

from kfuse.compiler.capture import capture
from kfuse.compiler.codegen import generate
from kfuse.compiler.plan import plan
from kfuse.kernels.reduce import _row_broadcast_ok


class Fn(nn.Module):
    def __init__(self, fn, **modules):
        super().__init__()
        self.fn = fn
        for name, module in modules.items():
            setattr(self, name, module)

    def forward(self, *args):
        return self.fn(self, *args)


def planned(fn, *shapes, **modules):
    meta = torch.device("meta")
    model = Fn(fn, **modules).to(meta)
    captured = capture(model, [torch.randn(*s, device=meta) for s in shapes])
    steps = plan(captured.graph)
    sources = generate(captured, steps, "cpu")
    kernels = [[op.split(".")[1] for op in k["fuses"]] for k in sources.kernels]
    return kernels, [u["op"].split(".")[1] for u in sources.unfused], sources


def test_scale_softmax_shift_is_one_kernel():
    kernels, library, _ = planned(lambda m, x: torch.softmax(x * 2.0, dim=-1) + 1.0, (4, 33))
    assert kernels == [["mul", "softmax", "add"]] and library == []


def test_a_prologue_shared_with_another_consumer_is_recomputed_not_stored():
    # exp(x) feeds the softmax and sigmoid: the softmax kernel computes it in registers and writes both the
    # softmax and sigmoid(exp(x)); the sum then reads the latter. exp(x) itself is never stored.
    def fn(m, x):
        y = torch.exp(x)
        return torch.softmax(y, dim=1), torch.sigmoid(y).sum()
    kernels, _, _ = planned(fn, (4, 33))
    assert kernels == [["exp", "softmax", "sigmoid"], ["sum"]]


def test_a_prologue_returned_by_the_model_is_not_absorbed():
    def fn(m, x):
        y = torch.exp(x)
        return torch.softmax(y, dim=1), y
    kernels, _, _ = planned(fn, (4, 33))
    assert kernels == [["exp"], ["softmax"]]


def test_row_value_needed_before_the_epilogue_keeps_the_epilogue_out():
    def fn(m, x):
        s = x.sum(1, keepdim=True)
        t = torch.flip(s, [0])  # (an op without a kernel)
        return x / s + t
    kernels, library, _ = planned(fn, (5, 7))
    assert kernels == [["sum"], ["div", "add"]] and library == ["flip"]


def test_row_value_and_normalised_tensor_both_written():
    def fn(m, x):
        norm = x.norm(dim=-1, keepdim=True)
        return x / norm, norm
    kernels, _, sources = planned(fn, (6, 10))
    assert kernels == [["linalg_vector_norm", "div"]]
    assert "std::vector<at::Tensor> fused_linalg_vector_norm_div_out" in sources.cpp


def test_unfusable_reductions_stay_aten_calls_with_a_reason():
    def fn(m, x):
        return torch.flip(x, [1]), torch.softmax(x.double(), -1), x.sum(1, dtype=torch.float64)
    _, library, sources = planned(fn, (3, 4))
    reasons = {u["op"].split(".")[1]: u["reason"] for u in sources.unfused}
    assert "softmax" in library and "sum" in library and "flip" in library
    assert "float64" in reasons["softmax"] and "fp32" in reasons["softmax"]
    assert "dtype=torch.float64" in reasons["sum"]


def test_instance_norm_with_running_stats_stays_an_aten_call():
    _, library, sources = planned(lambda m, x: m.norm(x), (2, 3, 5, 4),
                                  norm=nn.InstanceNorm2d(3, track_running_stats=True))
    assert "instance_norm" in library
    assert any("running statistics" in u["reason"] for u in sources.unfused)


def test_keepdim_false_row_value_does_not_broadcast_per_row():
    # x.sum(1) has shape [5]; x / x.sum(1) broadcasts it along the last dim (per column), so no fusion there
    kernels, _, _ = planned(lambda m, x: x / x.sum(1), (5, 5))
    assert kernels == [["sum"], ["div"]]


def test_row_broadcast_rule():
    assert _row_broadcast_ok((5, 1), (5, 7), [1])
    assert _row_broadcast_ok((), (5, 7), [0, 1])
    assert _row_broadcast_ok((7,), (5, 7), [0])          # sum over a leading dim, keepdim=False
    assert not _row_broadcast_ok((5,), (5, 5), [1])
    assert not _row_broadcast_ok((1, 7), (5, 7), [1])


def test_layer_norm_with_pointwise_around_is_one_kernel():
    kernels, _, _ = planned(lambda m, x: torch.relu(m.ln(x * 0.5)) * 3.0, (3, 4, 17), ln=nn.LayerNorm(17))
    assert kernels == [["mul", "layer_norm", "relu", "mul"]]


def test_a_pointwise_kernel_feeding_another_reduction_becomes_its_prologue():
    # h = relu(bn(x)) is needed anyway; h * 2 only feeds the softmax, so the softmax computes it from h
    def fn(m, x):
        h = torch.relu(m.bn(x))
        return torch.softmax(h * 2.0, dim=-1), h
    kernels, library, _ = planned(fn, (8, 12), bn=nn.BatchNorm1d(12))
    # (the batch counter's += 1: its own launch, kfuse/kernels/counters.py)
    assert kernels == [["add_"], ["batch_norm", "relu"], ["mul", "softmax"]] and library == []


def cuda_source(fn, *shapes, train=True, **modules):
    meta = torch.device("meta")
    model = Fn(fn, **modules).to(meta).train(train)
    captured = capture(model, [torch.randn(*s, device=meta) for s in shapes])
    return generate(captured, plan(captured.graph, "cuda"), "cuda").cuda


def test_a_file_holds_the_reduction_loops_once_whatever_its_number_of_reductions():
    """Each reduction kernel prints its policy struct; the loops over rows and columns are templates written once."""
    source = cuda_source(lambda m, x: (torch.softmax(x, dim=-1), x.sum(1), x.amax(-1), torch.layer_norm(x, (64,))),
                         (4, 8, 64))
    assert len(re.findall(r"^struct \w+_reduction \{", source, re.M)) == 4
    for loop in ("void reduce_rows(", "void reduce_cols(", "void reduce_launch(", "reduce_group("):
        assert source.count(loop) == 1, loop


def test_rows_read_twice_are_held_in_shared_memory_where_the_reduction_reads_them():
    # a softmax reads its row for the statistics, then again for the result: the rows kernel can hold it
    # (the policy's CACHED: the views held; the shared launch holds them where it is above 0)
    cached = lambda source: [int(n) for n in re.findall(r"\bCACHED = (\d+)", source)]  # noqa: E731
    softmax = cuda_source(lambda m, x: torch.softmax(x, dim=-1), (4, 4096))
    assert cached(softmax) == [1] and "if constexpr (R::CACHED > 0)" in softmax
    # eval-mode batch norm takes its statistics as operands and reads its input once: nothing to hold
    eval_norm = cuda_source(lambda m, x: m.bn(x), (4, 8, 64, 64), train=False, bn=nn.BatchNorm2d(8))
    assert "__global__" in eval_norm and cached(eval_norm) == [0]
    # a plain sum has no second phase
    assert cached(cuda_source(lambda m, x: x.sum(-1), (4, 4096))) == [0]


def test_the_four_value_welford_step_agrees_with_four_single_steps(tmp_path):
    """CUDA's float4 path folds four values into a Welford state at once (kfr_welford_step4: their own mean and
    squared deviations, merged by Chan's formula); compiled here as C++ (double), it must give the one-at-a-time
    mean and M2, on values far from zero too (where a sum-of-squares shortcut would cancel)."""
    import ctypes
    import random
    import shutil
    import subprocess

    from kfuse.kernels.reduce import REDUCE_PRELUDE
    if shutil.which("g++") is None:
        pytest.skip("g++ not on PATH")
    source = ("#include <cmath>\n#include <cstdint>\n#define KF_INLINE static inline\n" + REDUCE_PRELUDE + """
extern "C" void fold(const double* v, int n, int four, double* out) {
    kf_acc mean = 0, m2 = 0, count = 0;
    for (int i = 0; i < n; i += 4) {
        if (four) kfr_welford_step4(mean, m2, count, v[i], v[i + 1], v[i + 2], v[i + 3]);
        else for (int j = i; j < i + 4; ++j) kfr_welford_step(mean, m2, count, v[j]);
    }
    out[0] = mean; out[1] = m2; out[2] = count;
}""")
    (tmp_path / "step.cpp").write_text(source)
    library = tmp_path / "step.so"
    subprocess.run(["g++", "-O1", "-shared", "-fPIC", str(tmp_path / "step.cpp"), "-o", str(library)], check=True)
    fold = ctypes.CDLL(str(library)).fold
    rng = random.Random(0)
    for offset, n in ((0.0, 8), (1e4, 400), (-3.5, 1000)):
        values = [offset + rng.uniform(-1, 1) for _ in range(n)]
        buffer = (ctypes.c_double * n)(*values)
        got, want = (ctypes.c_double * 3)(), (ctypes.c_double * 3)()
        fold(buffer, n, 1, got)
        fold(buffer, n, 0, want)
        assert list(got) == pytest.approx(list(want), rel=1e-9), (offset, n)


def test_the_four_value_softmax_step_agrees_with_four_single_steps(tmp_path):
    """CUDA's float4 path folds four values into the online softmax state at once (kfr_softmax_step4); compiled
    here as C++ (double), it must give the one-at-a-time state, -inf and NaN included."""
    import ctypes
    import math
    import shutil
    import subprocess

    from kfuse.kernels.reduce import REDUCE_PRELUDE
    if shutil.which("g++") is None:
        pytest.skip("g++ not on PATH")
    source = ("#include <cmath>\n#include <cstdint>\n#define KF_INLINE static inline\n" + REDUCE_PRELUDE + """
extern "C" void fold(const double* v, int n, int four, double* out) {
    kf_acc m = -INFINITY, s = 0;
    for (int i = 0; i < n; i += 4) {
        if (four) kfr_softmax_step4(m, s, v[i], v[i + 1], v[i + 2], v[i + 3]);
        else for (int j = i; j < i + 4; ++j) kfr_softmax_step(m, s, v[j]);
    }
    out[0] = m; out[1] = s;
}""")
    (tmp_path / "step.cpp").write_text(source)
    library = tmp_path / "step.so"
    subprocess.run(["g++", "-O1", "-shared", "-fPIC", str(tmp_path / "step.cpp"), "-o", str(library)], check=True)
    fold = ctypes.CDLL(str(library)).fold
    inf, nan = math.inf, math.nan
    cases = [[0.5, -1.0, 3.0, 2.0, 4.5, -7.0, 1.0, 0.0],
             [-inf, -inf, -inf, -inf, 1.0, -inf, 2.0, -3.0],   # an all -inf first group leaves the state empty
             [-inf] * 8,
             [1.0, nan, 2.0, 3.0, 0.0, 1.0, 2.0, 3.0]]
    for values in cases:
        buffer = (ctypes.c_double * 8)(*values)
        got, want = (ctypes.c_double * 2)(), (ctypes.c_double * 2)()
        fold(buffer, 8, 1, got)
        fold(buffer, 8, 0, want)
        for a, b in zip(got, want):
            assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-12), (values, list(got), list(want))


def test_a_file_holds_the_reduction_helpers_it_calls():
    """prelude_for keeps the helpers the code calls and those they call (argmax's float4 step: the lane lookups and
    the NaN-propagating max), drops the rest; split and joined again, the parts are the whole prelude."""
    from kfuse.kernels.reduce import REDUCE_PRELUDE, _prelude_parts, prelude_for

    head, helpers = _prelude_parts()
    assert "\n".join(head + [line for _, lines in helpers for line in lines]) == REDUCE_PRELUDE.strip("\n")
    kept = prelude_for("kfr_argmax_next4(s.m, s.i, v0, v1, v2, v3, r);")
    for name in ("kfr_argmax_next4(", "kfr_lane_of(", "kfr_lane(", "kfr_max(", "typedef float kf_acc"):
        assert name in kept, name
    for name in ("kfr_argmin_next4(", "kfr_welford_step(", "kfr_softmax_merge(", "KFR_ARG_INDEX"):
        assert name not in kept, name


def test_alias_ops_fuse_as_the_ops_they_name():
    # torch.multiply, torch.clip and torch.special.expit reach the graph as aten.multiply, aten.clip and
    # aten.special_expit: named by their ops, the chain and the batch norm after it are one kernel, no library call
    def fn(m, x):
        y = torch.multiply(torch.tanh(nn.functional.softplus(x)), x)
        return torch.special.expit(torch.clip(m.bn(y), -1.0, 1.0))

    kernels, library, _ = planned(fn, (4, 6, 5, 5), bn=nn.BatchNorm2d(6).eval())
    assert library == [] and len(kernels) == 1
    assert {"mul", "clamp", "sigmoid"} <= set(kernels[0]) and "multiply" not in kernels[0]


def test_a_dropout_that_returns_its_input_does_not_cut_the_chain_and_a_real_one_stays_eager_s():
    # p = 0.0 (MinGPT's, AlexNet's) or outside training: eager returns the input itself, drawing no random numbers
    kernels, library, _ = planned(lambda m, x: torch.softmax(nn.functional.dropout(x * 2.0, 0.0, True), -1) + 1.0,
                                  (4, 33))
    assert kernels == [["mul", "softmax", "add"]] and library == []
    kernels, library, _ = planned(lambda m, x: nn.functional.dropout(x * 2.0, 0.3, False) + 1.0, (4, 33))
    assert kernels == [["mul", "add"]] and library == []
    # p > 0 in training: the Model's random mask, the same numbers drawn only by eager's own call
    _, library, _ = planned(lambda m, x: nn.functional.dropout(x * 2.0, 0.3, True) + 1.0, (4, 33))
    assert library == ["dropout"]
