import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d -> /2 -> LeakyReLU(0.01), the seed problem's shape at a small size."""

    def __init__(self, in_channels, out_channels, kernel_size, divisor):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.divisor = divisor

    def forward(self, x):
        x = self.conv(x)
        x = x / self.divisor
        return torch.nn.functional.leaky_relu(x, negative_slope=0.01)


def get_inputs():
    return [torch.rand(3, 5, 19, 23)]


def get_init_inputs():
    return [5, 7, 3, 2]
