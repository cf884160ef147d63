import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cin, cout, groups, bias):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 1, groups=groups, bias=bias)

    def forward(self, x):
        return self.conv(x) + 1.0


def get_inputs():
    return [torch.rand(2, 64, 30, 30)]


def get_init_inputs():
    return [64, 128, 1, True]
