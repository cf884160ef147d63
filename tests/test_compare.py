"""Output comparison: structure, KernelBench's allclose, unwritten memory and float64 precision parity."""

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
    assert not result.kernelbench_pass and not result.passed


def test_truncated_mantissa_passes_allclose_but_fails_parity():
    ref = data(200, 300)
    cand = (ref.view(torch.int32) & ~0x1FF).view(torch.float32)  # 14 mantissa bits left
    truth = ref.double()
    result = compare_outputs(cand, ref, truth)
    assert result.kernelbench_pass
    assert not result.passed
    assert any("precision below the reference" in p for p in result.problems())


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
