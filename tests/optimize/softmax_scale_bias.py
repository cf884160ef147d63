import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """x * 2 -> softmax over the last dim -> + 1: one kernel."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x * 2.0, dim=-1) + 1.0


def get_inputs():
    return [torch.randn(37, 1023)]


def get_init_inputs():
    return []
