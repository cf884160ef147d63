import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv3d, then a per-channel bias parameter of shape (C, 1, 1, 1), then tanh and a scale."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1, 1) * 0.1)

    def forward(self, x):
        return torch.tanh(self.conv(x) + self.bias) * 1.5


def get_inputs():
    return [torch.rand(3, 5, 9, 11, 13)]


def get_init_inputs():
    return [5, 37, 3]
