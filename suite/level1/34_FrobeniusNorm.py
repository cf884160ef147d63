import torch
import torch.nn as nn


class Model(nn.Module):
    """Divide a tensor by its Frobenius norm."""
    # est. H100 eager: ~2.0 ms (norm reads 2 GiB, divide reads 2 GiB and writes 2 GiB)

    def __init__(self):
        super().__init__()

    def forward(self, x):
        norm = torch.norm(x, p="fro")
        return x / norm


BATCH_SIZE = 128
FEATURES = 64
DIM1 = 256
DIM2 = 256


def get_inputs():
    return [torch.randn(BATCH_SIZE, FEATURES, DIM1, DIM2)]


def get_init_inputs():
    return []
