import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d, AvgPool2d(2), sigmoid, then sum over all but the batch."""
    # est. H100 eager: ~1.9 ms (conv 75 GFLOP TF32 ~1.5 ms in NCHW (the seed's 19 GFLOP conv takes ~1.1 ms); each
    #   pass over the 0.5 GB output ~0.35 ms; pool reads it once, the rest is on 1/4 of it)

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, pool_kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.avg_pool = nn.AvgPool2d(pool_kernel_size)

    def forward(self, x):
        x = self.conv(x)
        x = self.avg_pool(x)
        x = torch.sigmoid(x)
        x = torch.sum(x, dim=[1, 2, 3])
        return x


BATCH_SIZE = 128
IN_CHANNELS = 32
OUT_CHANNELS = 64
HEIGHT = 128
WIDTH = 128
KERNEL_SIZE = 3
POOL_KERNEL_SIZE = 2


def get_inputs():
    return [torch.rand(BATCH_SIZE, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL_SIZE, POOL_KERNEL_SIZE]
