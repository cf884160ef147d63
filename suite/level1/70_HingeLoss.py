import torch
import torch.nn as nn


class Model(nn.Module):
    """Hinge loss: mean(clamp(1 - p * t, min=0)) with +-1 targets per row."""
    # est. H100 eager: ~2.3 ms (mul, rsub, clamp (2 GiB each) and mean over 2^28 floats)

    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))


BATCH_SIZE = 4096
DIM = 65536


def get_inputs():
    return [torch.randn(BATCH_SIZE, DIM), torch.randint(0, 2, (BATCH_SIZE, 1)).float() * 2 - 1]


def get_init_inputs():
    return []
