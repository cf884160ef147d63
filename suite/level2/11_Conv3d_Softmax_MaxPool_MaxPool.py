import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv3d, softmax over channels, then two MaxPool3d(2)."""
    # est. H100 eager: ~3.1 ms (conv3d 102 GFLOP TF32 ~2 ms; each pass over the 0.47 GB output ~0.3 ms; softmax 3
    #   passes, pools on 1/8 then 1/64)

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, pool_kernel_size: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.pool1 = nn.MaxPool3d(pool_kernel_size)
        self.pool2 = nn.MaxPool3d(pool_kernel_size)

    def forward(self, x):
        x = self.conv(x)
        x = torch.softmax(x, dim=1)
        x = self.pool1(x)
        x = self.pool2(x)
        return x


BATCH_SIZE = 32
IN_CHANNELS = 16
OUT_CHANNELS = 32
DEPTH = 32
HEIGHT = 64
WIDTH = 64
KERNEL_SIZE = 3
POOL_KERNEL_SIZE = 2


def get_inputs():
    return [torch.rand(BATCH_SIZE, IN_CHANNELS, DEPTH, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL_SIZE, POOL_KERNEL_SIZE]
