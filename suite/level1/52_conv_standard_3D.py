import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv3d 32 -> 64, kernel 3, no padding."""
    # est. H100 eager: ~4 ms (214 GFLOP in TF32; 3D convs run well below the 2D rate)

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        return self.conv(x)


BATCH_SIZE = 8
IN_CHANNELS = 32
OUT_CHANNELS = 64
DEPTH = 64
HEIGHT = 64
WIDTH = 128
KERNEL_SIZE = 3


def get_inputs():
    return [torch.rand(BATCH_SIZE, IN_CHANNELS, DEPTH, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL_SIZE]
