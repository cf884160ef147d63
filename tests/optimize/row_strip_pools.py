"""Max pools and 1D average pools on the row-strip kernel (window.takes_row_strips): strips of 4 outputs along the
last dim reading their span with 4-float loads where every input's rows are aligned, the per-output path at the
edges. 1D max pools with dilation, stride 1 and 2, padding not a multiple of 4; a 2D max pool (3x3, stride 2)
after a producer chain with a per-channel operand and before a consumer; 1D average pools with and without
count_include_pad, and ceil_mode; a convolution's bias moved into a max pool's kernel; 2D average pools too wide for
the strip kernel (window.strip_length), with padding rows, ceil_mode and both divisors."""

import torch
import torch.nn.functional as F


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.randn(3, 1, 1))
        self.conv = torch.nn.Conv1d(3, 4, 3)

    def forward(self, x, v):
        a = F.max_pool1d(v, 8, 1, 4, dilation=3)
        b = F.max_pool1d(v, 3, 2, 1, ceil_mode=True)
        c = torch.sigmoid(F.max_pool2d(torch.tanh(x) * self.scale, 3, 2, 1)) + 1.0
        d = F.avg_pool1d(v, 8, 1, 4)
        e = F.avg_pool1d(v, 5, 2, 2, ceil_mode=True, count_include_pad=False)
        f = F.avg_pool1d(v, 3, 1, 1, count_include_pad=False) * 3.0
        g = F.max_pool1d(self.conv(v), 2)
        h = F.avg_pool2d(x, 9, 2, 4, ceil_mode=True, count_include_pad=False)
        i = F.avg_pool2d(x, (10, 9), (3, 4), (4, 3))
        return a, b, c, d, e, f, g, h, i


def get_inputs():
    return [torch.randn(2, 3, 17, 40), torch.randn(2, 3, 64)]


def get_init_inputs():
    return []
