"""Average pools on the strip kernel (kfuse/kernels/window.py, strip_length), irregular sizes: kernel 3 stride 1 padding 1
(problem 41's), stride 2 without padding and ceil_mode, kernel 5 padding 2 stride 2 count_include_pad=False, a
rectangular window with a stride over the kernel down the strip (rows no window holds), divisor_override (a
negative one too), a one-row window, 3D pools with ceil_mode (strips of 4 and of 2), a pool between pointwise
producers and consumers; and a 3D window too large for strips (80 taps: the general kernel)."""

import torch
import torch.nn.functional as F


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, v):
        a = F.avg_pool2d(x, 3, 1, 1)
        b = F.avg_pool2d(x, 2, 2, 0, ceil_mode=True)
        c = F.avg_pool2d(x, 5, 2, 2, count_include_pad=False)
        d = F.avg_pool2d(x, (2, 3), (3, 2), (1, 0), ceil_mode=True, count_include_pad=False)
        e = F.avg_pool2d(x, 3, 2, 1, divisor_override=5)
        f = F.avg_pool3d(v, 3, (1, 2, 2), 1, ceil_mode=True)
        g = torch.sigmoid(F.avg_pool2d(torch.tanh(x) - 0.5, 3, 1, 1, count_include_pad=False)) * 2.0
        h = F.avg_pool2d(x, (1, 3), (4, 4), 0, ceil_mode=True, divisor_override=-2)
        i = F.avg_pool3d(v, (5, 4, 3), (2, 1, 2), (0, 1, 0), ceil_mode=True, count_include_pad=False)
        j = F.avg_pool3d(v, (5, 4, 4), (2, 2, 4), (2, 2, 0), ceil_mode=True)
        return a, b, c, d, e, f, g, h, i, j


def get_inputs():
    return [torch.randn(2, 3, 19, 21), torch.randn(2, 2, 5, 11, 13)]


def get_init_inputs():
    return []
