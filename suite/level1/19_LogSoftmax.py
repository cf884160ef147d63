import torch
import torch.nn as nn


class Model(nn.Module):
    """LogSoftmax over the last dimension (rows of 131072)."""
    # est. H100 eager: ~2.0 ms (row max, row sum of exp and write: ~3 passes over 2 GiB)

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.log_softmax(x, dim=1)


BATCH_SIZE = 4096
DIM = 131072


def get_inputs():
    return [torch.randn(BATCH_SIZE, DIM)]


def get_init_inputs():
    return []
