import torch
import torch.nn as nn


class Model(nn.Module):
    """A bare Conv2d with stride, padding, dilation, groups, an asymmetric kernel and no bias."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(6, 20, (3, 2), stride=2, padding=1, dilation=2, groups=2, bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.rand(2, 6, 17, 21)]


def get_init_inputs():
    return []
