import torch
import torch.nn as nn


class Model(nn.Module):
    """Written the way many KernelBench problems are: super(Model, self), a helper method used by __init__, a
    forward with a default argument, and an in-place add between two reads of the input."""

    def __init__(self, features):
        super(Model, self).__init__()
        self.scale = nn.Parameter(torch.empty(features))
        self._init_scale()

    def _init_scale(self):
        nn.init.uniform_(self.scale, 0.5, 1.5)

    def forward(self, x, offset=1.0):
        y = torch.sigmoid(x)
        x += offset
        return x * y * self.scale


def get_inputs():
    return [torch.randn(9, 27)]


def get_init_inputs():
    return [27]
