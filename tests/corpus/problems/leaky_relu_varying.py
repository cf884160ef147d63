import torch
import torch.nn as nn


class Model(nn.Module):
    """LeakyReLU whose last bits vary from run to run, as a library call that adds with atomics does (index_add on
    CUDA): here the draw of the RNG decides whether the values nearest zero move by one ulp."""

    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.leaky_relu(x, negative_slope=self.negative_slope)
        if torch.rand(()) < 0.7:
            y = torch.where(x.abs() < 1e-3, torch.nextafter(y, torch.full_like(y, float("inf"))), y)
        return y


batch_size = 263
dim = 1031


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [0.01]
