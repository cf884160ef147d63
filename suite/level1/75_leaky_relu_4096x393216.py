import torch
import torch.nn as nn


class Model(nn.Module):
    """LeakyReLU(0.01) on a 4096 x 393216 tensor: 1.6e9 elements, 6.4 GB; byte offsets overflow 32 bits."""

    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.leaky_relu(x, negative_slope=self.negative_slope)


batch_size = 4096
dim = 393216


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return [0.01]
