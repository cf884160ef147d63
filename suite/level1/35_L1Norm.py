import torch
import torch.nn as nn


class Model(nn.Module):
    """L1 normalisation of each row: x / sum(|x|, dim=1)."""
    # est. H100 eager: ~1.7 ms (abs (2 GiB), row sum (1 GiB), divide (2 GiB) on 2^28 floats)

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x / torch.sum(torch.abs(x), dim=1, keepdim=True)


BATCH_SIZE = 4096
DIM = 65536


def get_inputs():
    return [torch.randn(BATCH_SIZE, DIM)]


def get_init_inputs():
    return []
