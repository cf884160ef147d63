import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv1d, depthwise with 2 output channels per input channel, strided and padded, then tanh."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(8, 16, 5, stride=3, padding=2, groups=8)

    def forward(self, x):
        return torch.tanh(self.conv(x))


def get_inputs():
    return [torch.rand(3, 8, 101)]


def get_init_inputs():
    return []
