import torch
import torch.nn as nn


class Model(nn.Module):
    """BatchNorm2d in training mode (batch statistics, running stats updated) followed by ReLU."""

    def __init__(self, channels):
        super().__init__()
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x):
        return torch.relu(self.bn(x))


def get_inputs():
    return [torch.randn(4, 6, 11, 9)]


def get_init_inputs():
    return [6]
