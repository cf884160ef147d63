import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d 64 -> 128, kernel 3, no padding."""
    # est. H100 eager: ~3 ms (304 GFLOP in TF32; cuDNN NCHW reaches well under half the 430 TFLOP/s peak + 1.5 GiB
    #   of activations)

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        return self.conv(x)


BATCH_SIZE = 32
IN_CHANNELS = 64
OUT_CHANNELS = 128
HEIGHT = 256
WIDTH = 256
KERNEL_SIZE = 3


def get_inputs():
    return [torch.rand(BATCH_SIZE, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL_SIZE]
