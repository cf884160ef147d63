"""Pooling with PyTorch's edge cases, fused with producers and consumers: max_pool2d with padding, dilation and
ceil_mode after x * scale (per channel) and before sigmoid; avg_pool3d with ceil_mode, count_include_pad=False;
avg_pool2d with divisor_override then - 1; max_pool1d with its indices used; a general adaptive_avg_pool2d; a
global average pool after a pointwise op (a mean: the reduction kernel's); convolutions whose bias moves into the
pool's kernel, with and without pointwise ops between."""

import torch
import torch.nn.functional as F


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.randn(3, 1, 1))
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.conv_b = torch.nn.Conv2d(3, 2, 2)

    def forward(self, x, v):
        a = torch.sigmoid(F.max_pool2d(torch.tanh(x) * self.scale, 3, 2, 1, dilation=2, ceil_mode=True))
        b = F.avg_pool3d(v, (3, 2, 3), (2, 2, 1), (1, 1, 1), ceil_mode=True, count_include_pad=False)
        c = F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, divisor_override=4) - 1.0
        m, i = F.max_pool1d(x.flatten(2), 4, 3, 2, return_indices=True)
        d = F.adaptive_avg_pool2d(x, (4, 6))
        e = F.adaptive_avg_pool2d(x * 2.0, (1, 1))
        f = F.avg_pool2d(torch.tanh(self.conv(x) - 0.5), 2)
        g = F.max_pool2d(self.conv_b(x), 3, 2)
        return a, b, c, m, i, d, e, f, g


def get_inputs():
    return [torch.randn(2, 3, 17, 23), torch.randn(2, 3, 7, 6, 9)]


def get_init_inputs():
    return []
