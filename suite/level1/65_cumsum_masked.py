import torch
import torch.nn as nn


class Model(nn.Module):
    """Prefix sum along dim 1 of only the elements where a boolean mask is set."""
    # est. H100 eager: ~1.2 ms (mask multiply (2.25 GiB moved) then scan (2 GiB moved))

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x, mask):
        return torch.cumsum(x * mask, dim=self.dim)


BATCH_SIZE = 32768
DIM = 8192


def get_inputs():
    return [torch.rand(BATCH_SIZE, DIM), torch.rand(BATCH_SIZE, DIM) > 0.5]


def get_init_inputs():
    return [1]
