import torch
import torch.nn as nn


class Model(nn.Module):
    """GroupNorm with 8 groups over 64 channels."""
    # est. H100 eager: ~2.0 ms (stats pass + normalise pass over 2^29 floats)

    def __init__(self, num_features: int, num_groups: int):
        super().__init__()
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=num_features)

    def forward(self, x):
        return self.gn(x)


BATCH_SIZE = 128
FEATURES = 64
DIM1 = 256
DIM2 = 256
NUM_GROUPS = 8


def get_inputs():
    return [torch.randn(BATCH_SIZE, FEATURES, DIM1, DIM2)]


def get_init_inputs():
    return [FEATURES, NUM_GROUPS]
