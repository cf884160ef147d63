import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Centre each row: x - mean(x, -1, keepdim=True) (one kernel: mean, then the subtraction re-reading x)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x - torch.mean(x, dim=-1, keepdim=True)


def get_inputs():
    return [torch.randn(37, 1023)]


def get_init_inputs():
    return []
