"""Output comparison: structure, KernelBench's allclose, unwritten memory and float64 precision parity."""

import copy

import pytest
import torch

from kfuse.judge.compare import compare_outputs, same_bits


def data(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_identical_outputs_pass():
    ref = data(33, 17)
    result = compare_outputs(ref.clone(), ref, ref.double())
    assert result.passed and result.kernelbench_pass and result.problems() == []


def test_structure_differences_are_named():
    ref = data(4, 5)
    assert "tensor[4, 4]" in compare_outputs(ref[:, :4], ref).problems()[0]
    assert "float16" in compare_outputs(ref.half(), ref).problems()[0]
    assert not compare_outputs((ref, ref), ref).passed


def test_nan_where_reference_is_finite_fails():
    ref = data(10, 10)
    cand = ref.clone()
    cand[3, 4] = float("nan")
    problems = compare_outputs(cand, ref, ref.double()).problems()
    assert any("NaN/Inf" in p for p in problems)


def test_half_precision_compute_fails_allclose():
    ref = data(200, 300) * 4
    cand = ref.half().float()
    result = compare_outputs(cand, ref, ref.double())
    assert not result.kernelbench_pass and not result.passed and not result.precision_only


def test_truncated_mantissa_passes_allclose_but_fails_parity():
    ref = data(200, 300)
    cand = (ref.view(torch.int32) & ~0x1FF).view(torch.float32)  # 14 mantissa bits left
    truth = ref.double()
    result = compare_outputs(cand, ref, truth)
    assert result.kernelbench_pass
    assert not result.passed
    assert any("precision below the reference" in p for p in result.problems())
    # failed on precision alone: `kfuse optimize` may plan it again with eager's rounding (verdict.needs_precision_fallback)
    assert result.precision_only and result.to_dict()["precision_only"]
    poisoned = cand.clone()
    poisoned[0, 0] = float("nan")  # ... but not with a NaN beside it, nor with a second output that mismatches
    assert not compare_outputs(poisoned, ref, truth).precision_only
    assert not compare_outputs((cand, ref.half().float() * 4), (ref, ref * 4), (truth, truth * 4)).precision_only
    assert compare_outputs((cand, ref), (ref, ref), (truth, truth)).precision_only


def test_parity_decides_where_the_reference_itself_misses_the_tolerance():
    truth = data(100, 100).double()
    ref = (truth + 3e-4 * data(100, 100, seed=1).double()).float()      # a TF32-like reference
    close_to_truth = (truth + 1e-5).float()                             # more accurate than the reference
    result = compare_outputs(close_to_truth, ref, truth)
    assert not result.kernelbench_pass and result.passed
    far_from_truth = (truth + 5e-2).float()                             # worse than 10x the reference's error
    assert not compare_outputs(far_from_truth, ref, truth).passed


def test_integer_outputs_compare_exactly():
    ref = torch.arange(10)
    assert compare_outputs(ref.clone(), ref).passed
    cand = ref.clone()
    cand[7] = 0
    assert "1 of 10" in compare_outputs(cand, ref).problems()[0]


def test_same_bits_sees_nan_payloads_and_signed_zero():
    a = torch.tensor([0.0, float("nan")])
    assert same_bits(a, a.clone())
    assert not same_bits(a, torch.tensor([-0.0, float("nan")]))


def _buffers_judged(ref: float, cand: float, truth: float | None) -> list[str]:
    """Judgement.check_buffers on one running_var of value `ref` in the reference, `cand` in the candidate and
    `truth` in the float64 ground truth's model (None: no truth for that call)."""
    from kfuse.judge.worker import Judgement

    judgement = Judgement.__new__(Judgement)  # (no processes: check_buffers reads these two only)
    judgement.reference = torch.nn.BatchNorm1d(1)
    judgement.reference.running_var.fill_(ref)
    judgement.truth_buffers = None if truth is None else {
        name: torch.full_like(b, truth, dtype=torch.float64) if b.is_floating_point() else b.clone()
        for name, b in judgement.reference.named_buffers() if name == "running_var"}
    theirs = {name: b.clone() for name, b in judgement.reference.named_buffers()}
    theirs["running_var"].fill_(cand)
    trial = {"problems": []}
    judgement.check_buffers(trial, theirs)
    return trial["problems"]


def test_running_statistics_follow_the_outputs_rule_where_the_reference_s_own_are_off():
    # within 1e-4 of the reference's: passes, truth or not
    assert _buffers_judged(2.0, 2.0001, None) == [] and _buffers_judged(2.0, 2.0001, 2.0) == []
    # off by 1e-3 where the reference is exact: a wrong update, with or without a truth to ask
    assert _buffers_judged(2.0, 2.003, 2.0) and _buffers_judged(2.0, 2.003, None)
    # the reference's own statistic 3e-3 from the float64 truth's (a deep network's rounding in its activations):
    # a candidate nearer the truth passes, one ten times further than the reference does not
    assert _buffers_judged(2.006, 2.0004, 2.0) == []
    assert _buffers_judged(2.006, 2.07, 2.0)


def test_the_truth_s_running_statistics_go_on_from_its_own_until_both_sides_are_synchronised():
    from kfuse.judge.worker import Judgement

    judgement = Judgement.__new__(Judgement)
    judgement.notes, judgement.truth_buffers = [], None
    reference = torch.nn.BatchNorm1d(2)  # running_mean 0
    x = torch.tensor([[1.0, 2.0], [3.0, 6.0]], dtype=torch.float64)
    judgement.float64_truth(copy.deepcopy(reference), [x], seed=0)  # (the judge hands it a copy, as here)
    first = judgement.truth_buffers["running_mean"].clone()
    assert torch.allclose(first, torch.tensor([0.2, 0.4], dtype=torch.float64))  # 0.9 * 0 + 0.1 * batch mean
    # the next call starts from the truth's statistics, not from the (float32) reference's, still at 0
    judgement.float64_truth(copy.deepcopy(reference), [x], seed=0)
    assert torch.allclose(judgement.truth_buffers["running_mean"], 0.9 * first + 0.1 * torch.tensor([2.0, 4.0]))


def test_a_model_copy_s_stored_lambdas_call_the_copy_s_layers():
    """KernelBench's MinGPT block keeps `self.mlpf = lambda x: m.c_proj(m.act(m.c_fc(x)))`: a plain deepcopy's
    forward ran the original's layers, so the judge's float64 truth (the copy upcast) met float32 weights and failed."""
    from kfuse.problem import copy_model

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.mlp = torch.nn.ModuleDict(dict(fc=torch.nn.Linear(4, 8), proj=torch.nn.Linear(8, 4)))
            m = self.mlp
            self.mlpf = lambda x: m.proj(torch.relu(m.fc(x)))
            self.bn = torch.nn.BatchNorm1d(4)
            self.norm = lambda x, *, scale=2.0: self.bn(x) * scale

        def forward(self, x):
            return self.norm(self.mlpf(x))

    original = Block()
    truth = copy_model(original).to(torch.float64)
    x = torch.randn(5, 4)
    assert truth(x.double()).dtype == torch.float64  # (a plain deepcopy: "mat1 and mat2 must have the same dtype")
    assert original.bn.num_batches_tracked.item() == 0 and truth.bn.num_batches_tracked.item() == 1
    with torch.no_grad():  # (the same layers' values: training-mode statistics come from the batch itself)
        assert torch.allclose(truth(x.double()).float(), original(x), atol=1e-5)


def test_torch_compile_s_output_is_held_to_eager_s_by_kernelbench_s_check():
    """The reference's timing process compares torch.compile's first output with eager's own call from the same
    state (a copy of the model): within 1e-4 passes, beyond it fails with the largest difference."""
    from kfuse.judge.sandbox import compile_agreement

    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.Tanh())
    x = torch.randn(4, 16)
    with torch.no_grad():
        out = model(x)
    same = compile_agreement(model, out.clone(), [x], torch.device("cpu"))
    assert same == {"compared": True, "kernelbench_pass": True, "max_abs_diff": 0.0}
    off = out.clone()
    off[1, 2] += 3e-3
    seen = compile_agreement(model, off, [x], torch.device("cpu"))
    assert seen["compared"] and not seen["kernelbench_pass"] and seen["max_abs_diff"] == pytest.approx(3e-3, rel=1e-3)
    broken = compile_agreement(model, out, [torch.randn(4, 3)], torch.device("cpu"))
    assert not broken["compared"] and "mat1 and mat2" in broken["reason"]
