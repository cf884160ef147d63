import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """GroupNorm(4 groups of 3 channels) then ReLU."""

    def __init__(self, groups, channels):
        super().__init__()
        self.gn = nn.GroupNorm(groups, channels)

    def forward(self, x):
        return torch.relu(self.gn(x))


def get_inputs():
    return [torch.randn(3, 12, 7, 5)]


def get_init_inputs():
    return [4, 12]
