"""No custom kernel at all: forward just calls torch.nn.functional.leaky_relu.

Expected verdict: rejected (no custom kernel).
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.leaky_relu(x, negative_slope=self.negative_slope)


batch_size = 263
dim = 1031


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [0.01]
