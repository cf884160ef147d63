import torch
import torch.nn as nn


class Model(nn.Module):
    """RMS normalisation over the channel dimension, written by hand."""
    # est. H100 eager: ~1.8 ms (x**2 (2 GiB), mean over dim 1 (1 GiB read), divide (2 GiB) on 2^28 floats)

    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x):
        rms = torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + self.eps)
        return x / rms


BATCH_SIZE = 64
FEATURES = 64
DIM1 = 256
DIM2 = 256


def get_inputs():
    return [torch.randn(BATCH_SIZE, FEATURES, DIM1, DIM2)]


def get_init_inputs():
    return [FEATURES]
