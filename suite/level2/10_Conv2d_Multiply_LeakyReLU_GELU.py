import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d, multiply by a learnable per-channel (C, 1, 1) scale, LeakyReLU, then GELU."""
    # est. H100 eager: ~2.6 ms (conv 75 GFLOP TF32 ~1.5 ms in NCHW (the seed's 19 GFLOP conv takes ~1.1 ms); each
    #   pass over the 0.5 GB output ~0.35 ms; 3 passes)

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, multiplier_shape: tuple):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.multiplier = nn.Parameter(torch.randn(multiplier_shape))

    def forward(self, x):
        x = self.conv(x)
        x = x * self.multiplier
        x = torch.nn.functional.leaky_relu(x)
        x = torch.nn.functional.gelu(x)
        return x


BATCH_SIZE = 128
IN_CHANNELS = 32
OUT_CHANNELS = 64
HEIGHT = 128
WIDTH = 128
KERNEL_SIZE = 3
MULTIPLIER_SHAPE = (OUT_CHANNELS, 1, 1)


def get_inputs():
    return [torch.rand(BATCH_SIZE, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL_SIZE, MULTIPLIER_SHAPE]
