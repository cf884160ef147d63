import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d, multiply by a constant, clamp to [0, 1], then global average pooling (keepdim)."""
    # est. H100 eager: ~2.4 ms (conv 75 GFLOP TF32 ~1.5 ms in NCHW (the seed's 19 GFLOP conv takes ~1.1 ms); each
    #   pass over the 0.5 GB output ~0.35 ms; scale, clamp, mean)

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, scale: float):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.scale = scale

    def forward(self, x):
        x = self.conv(x)
        x = x * self.scale
        x = torch.clamp(x, min=0.0, max=1.0)
        x = torch.mean(x, dim=[2, 3], keepdim=True)
        return x


BATCH_SIZE = 128
IN_CHANNELS = 32
OUT_CHANNELS = 64
HEIGHT = 128
WIDTH = 128
KERNEL_SIZE = 3
SCALE = 0.5


def get_inputs():
    return [torch.rand(BATCH_SIZE, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL_SIZE, SCALE]
