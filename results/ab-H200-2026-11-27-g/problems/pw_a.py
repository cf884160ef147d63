import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cin, cout, groups, bias):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 1, groups=groups, bias=bias)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.rand(3, 40, 36, 44)]


def get_init_inputs():
    return [40, 72, 1, False]
