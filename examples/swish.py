import torch
import torch.nn as nn


class Model(nn.Module):
    """Swish (SiLU): x * sigmoid(x)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x)


batch_size = 1823
dim = 781


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
