import torch
import torch.nn as nn


class Model(nn.Module):
    """Mean squared error written by hand: mean((p - t)^2)."""
    # est. H100 eager: ~2.0 ms (subtract (3 GiB), square (2 GiB), mean (1 GiB) over 2^28 floats)

    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return torch.mean((predictions - targets) ** 2)


BATCH_SIZE = 4096
DIM = 65536


def get_inputs():
    return [torch.randn(BATCH_SIZE, DIM), torch.randn(BATCH_SIZE, DIM)]


def get_init_inputs():
    return []
