"""Pooling and scan planning (kfuse/window.py) without builds: what stays an ATen call, and why."""

from pathlib import Path

from kfuse.optimize import optimize

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
