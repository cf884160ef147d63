import torch
import torch.nn as nn


class Model(nn.Module):
    """HardTanh clamping to [-1, 1]."""
    # est. H100 eager: ~1.4 ms (one pass over 2^29 floats: 4.3 GB moved at ~3 TB/s)

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.nn.functional.hardtanh(x, min_val=-1.0, max_val=1.0)


BATCH_SIZE = 4096
DIM = 131072


def get_inputs():
    return [torch.randn(BATCH_SIZE, DIM)]


def get_init_inputs():
    return []
