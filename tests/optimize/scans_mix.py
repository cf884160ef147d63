"""Scans: cumsum over a middle dim after pointwise ops, a reverse cumsum (flip -> cumsum -> flip), a masked
cumsum (x * a bool mask), an exclusive cumsum over dim 0 (cumsum(x) - x), a cumprod after sigmoid, and exclusive
scans written as concatenations (the identity, then the scan of all but the last): a cumsum over dim 1 with a
consumer, a cumprod over dim 0 after sigmoid; with a fill that is not the identity the concatenation stays. The
last dim is longer than a CUDA step (256 elements)."""

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
        f = torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)), torch.cumsum(x.narrow(1, 0, x.size(1) - 1), 1)),
                      dim=1) * 0.5
        g = torch.cat([torch.ones_like(x[:1]), torch.cumprod(torch.sigmoid(x[:-1]), 0)], 0)
        h = torch.cat([torch.full_like(x[:, :, :1], 2.0), torch.cumsum(x[:, :, :-1], 2)], 2)
        return a, b, c, d, e, f, g, h


def get_inputs():
    return [torch.randn(3, 33, 300), torch.rand(3, 33, 300) > 0.5]


def get_init_inputs():
    return []
