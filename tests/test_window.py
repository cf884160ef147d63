"""Pooling and scan planning (kfuse/kernels/window.py) without builds: what stays an ATen call, and why."""

from pathlib import Path

from kfuse.compiler.optimize import optimize

PROBLEM = '''
import torch
import torch.nn.functional as F


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        a = torch.cumsum(x, 1, dtype=torch.float64)      # a float64 scan: not an fp32 kernel
        r = torch.relu(y)                                # read by the pool and the sum: written once, not fused
        b = F.max_pool2d(r, 2)
        c = r.sum()
        d = torch.cumsum(x.flip(1), 1)                   # one flip only: not a reverse scan
        e = F.adaptive_max_pool2d(y, (3, 2))             # no kernel for adaptive max pooling
        return a, b, c, d, e


def get_inputs():
    return [torch.randn(4, 9), torch.randn(2, 3, 8, 10)]


def get_init_inputs():
    return []
'''


def test_what_stays_an_aten_call(tmp_path: Path):
    problem = tmp_path / "p.py"
    problem.write_text(PROBLEM)
    result = optimize(problem, tmp_path / "p_new.py", "cpu")
    fused = [[op.split(".")[1] for op in k["fuses"]] for k in result.kernels]
    assert fused == [["relu"], ["max_pool2d"], ["sum"], ["cumsum"]]
    reasons = {u["op"]: u["reason"] for u in result.unfused}
    assert "dtype=torch.float64" in reasons["aten.cumsum.default"]
    assert reasons["aten.flip.default"].startswith("no kfuse kernel")
    assert "adaptive_max_pool2d" in str(reasons)


def test_average_pools_take_the_strip_kernel_and_match_pytorch_bit_for_bit(tmp_path: Path):
    """window.strip_length: every average pool of tests/optimize/avg_pool_strips.py runs the strip kernel (odd
    sizes, padding edges, stride 2, ceil_mode, count_include_pad=False, divisor_override, a stride over the kernel,
    3D). Its sums run in PyTorch's order and its division is PyTorch's, so the bare pools equal PyTorch's CPU
    kernels exactly, on fresh sizes and on strided inputs alike."""
    import torch

    from kfuse.loader import import_from_source
    from kfuse.problem import load_problem

    problems = Path(__file__).parent / "optimize"
    result = optimize(problems / "avg_pool_strips.py", tmp_path / "strips_new.py", "cpu")
    assert [k["fuses"][-1].split(".")[1] for k in result.kernels][:6] == ["avg_pool2d"] * 5 + ["avg_pool3d"]
    text = result.path.read_text()
    # every pool but the 80-tap 3D window (over window.STRIP_LOADS even in strips of 2: row strips)
    assert text.count("_strip<index_t>(A, base") == 9 and text.count("_rows<index_t, ROWS>(A, base") == 1
    assert all(f"constexpr int R = {r};" in text for r in (8, 4, 2))  # 3D windows: shorter strips
    problem, _ = load_problem(str(problems / "avg_pool_strips.py"))
    module = import_from_source(text, str(result.path), "strips_new")  # builds the CPU extension
    reference, candidate = problem.Model(), module.ModelNew()
    torch.manual_seed(3)
    inputs = [(torch.randn(3, 4, 26, 17), torch.randn(1, 3, 6, 9, 14)),
              (torch.randn(1, 2, 9, 40), torch.randn(2, 1, 5, 4, 7)),
              (torch.randn(3, 4, 17, 26).transpose(2, 3), torch.randn(1, 3, 14, 9, 6).permute(0, 1, 4, 3, 2))]
    for x, v in inputs:
        expected, got = reference(x, v), candidate(x, v)
        for k, (want, have) in enumerate(zip(expected, got)):
            if k == 6:
                torch.testing.assert_close(have, want)  # (tanh and sigmoid: ATen's own vectorized forms)
            else:
                assert want.shape == have.shape and torch.equal(want, have), k


def test_row_strip_pools_match_pytorch_bit_for_bit(tmp_path: Path):
    """window.takes_row_strips: every max pool and wide or 1D average pool of tests/optimize/row_strip_pools.py runs the
    row-strip kernel (4 outputs a thread, 4-float loads of their span where every input's rows are 16-byte aligned,
    2-float loads where they are 8-byte aligned, the per-output path at the edges and for unaligned rows). Its windows are walked in the per-output kernel's order,
    so the pools equal PyTorch's bit for bit: aligned and odd lengths, strided inputs, NaNs (which win a max)."""
    import torch

    from kfuse.loader import import_from_source
    from kfuse.problem import load_problem

    problems = Path(__file__).parent / "optimize"
    result = optimize(problems / "row_strip_pools.py", tmp_path / "rows_new.py", "cpu")
    text = result.path.read_text()
    assert text.count("_rows<index_t, ROWS>(A, base") == 9 and "kf::window_row_vector(A.v[0], g, 2)" in text
    problem, _ = load_problem(str(problems / "row_strip_pools.py"))
    module = import_from_source(text, str(result.path), "rows_new")  # builds the CPU extension
    torch.manual_seed(5)
    reference = problem.Model()
    candidate = module.ModelNew()
    candidate.load_state_dict(reference.state_dict())
    nan_row = torch.randn(2, 3, 64)
    nan_row[1, 2, 17] = float("nan")
    inputs = [(torch.randn(2, 3, 17, 40), torch.randn(2, 3, 64)),
              (torch.randn(1, 3, 9, 41), torch.randn(3, 3, 67)),
              (torch.randn(2, 3, 40, 17).transpose(2, 3), torch.randn(2, 64, 3).transpose(1, 2)),
              (torch.randn(2, 3, 16, 16)[:, :, 1:, 1:], torch.randn(1, 3, 25)[:, :, 1:]),  # rows not aligned
              (torch.randn(2, 3, 11, 42), torch.randn(2, 3, 66)),  # rows of 4k + 2: 2-float loads
              (torch.randn(2, 3, 6, 8), nan_row)]
    for x, v in inputs:
        expected, got = reference(x, v), candidate(x, v)
        for k, (want, have) in enumerate(zip(expected, got)):
            if k in (2, 6):  # (sigmoid: ATen's vectorized form; the convolution: kfuse's kernel)
                torch.testing.assert_close(have, want, equal_nan=True)
            else:
                assert want.shape == have.shape and torch.equal(want.isnan(), have.isnan()), k
                assert torch.equal(want.nan_to_num(), have.nan_to_num()), k
