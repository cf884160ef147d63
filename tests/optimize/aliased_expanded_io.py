import torch
import torch.nn as nn


class Model(nn.Module):
    """An expanded input (stride 0: the judge refills it through one row) and outputs that are an input or a view
    of one (the judge keeps their values from before its refill)."""

    def __init__(self):
        super().__init__()

    def forward(self, z, x):
        return z * 2.0 + x, x.t(), x


def get_inputs():
    return [torch.randn(1, 13).expand(7, 13), torch.randn(7, 13)]


def get_init_inputs():
    return []
