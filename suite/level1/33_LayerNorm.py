import torch
import torch.nn as nn


class Model(nn.Module):
    """LayerNorm over the last three dimensions (64 x 256 x 256 per sample)."""
    # est. H100 eager: ~3 ms (stats + normalise over 2^29 floats; only 128 rows of 4M elements, poor parallelism in
    #   eager)

    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x):
        return self.ln(x)


BATCH_SIZE = 128
FEATURES = 64
DIM1 = 256
DIM2 = 256


def get_inputs():
    return [torch.randn(BATCH_SIZE, FEATURES, DIM1, DIM2)]


def get_init_inputs():
    return [(FEATURES, DIM1, DIM2)]
