import torch
import torch.nn as nn


class Model(nn.Module):
    """Softplus (beta 1, threshold 20) on a 4096 x 131072 tensor."""
    # est. H100 eager: ~1.4 ms (one pass over 2^29 floats: 4.3 GB moved at ~3 TB/s)

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.nn.functional.softplus(x)


BATCH_SIZE = 4096
DIM = 131072


def get_inputs():
    return [torch.randn(BATCH_SIZE, DIM)]


def get_init_inputs():
    return []
