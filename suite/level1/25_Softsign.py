import torch
import torch.nn as nn


class Model(nn.Module):
    """Softsign written by hand: x / (1 + |x|)."""
    # est. H100 eager: ~2.3 ms (three kernels (abs, add, div) over 2^28 floats: ~7 GiB moved)

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x / (1 + torch.abs(x))


BATCH_SIZE = 4096
DIM = 65536


def get_inputs():
    return [torch.randn(BATCH_SIZE, DIM)]


def get_init_inputs():
    return []
