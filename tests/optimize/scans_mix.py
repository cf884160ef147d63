"""Scans: cumsum over a middle dim after pointwise ops, a reverse cumsum (flip -> cumsum -> flip), a masked
cumsum (x * a bool mask), an exclusive cumsum over dim 0 (cumsum(x) - x) and a cumprod after sigmoid. The last
dim is longer than a CUDA step (256 elements)."""

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, mask):
        a = torch.cumsum(x * 2.0 + 1.0, dim=1)
        b = torch.cumsum(x.flip(2), 2).flip(2)
        c = torch.cumsum(x * mask, dim=-1)
        d = torch.cumsum(x, 0) - x
        e = torch.cumprod(torch.sigmoid(x), dim=1)
        return a, b, c, d, e


def get_inputs():
    return [torch.randn(3, 33, 300), torch.rand(3, 33, 300) > 0.5]


def get_init_inputs():
    return []
