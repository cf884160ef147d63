import torch
import torch.nn as nn


class Model(nn.Module):
    """ConvTranspose3d 64 -> 32, kernel 3, stride 2, padding 1, output_padding 1 (2x upsample)."""
    # est. H100 eager: ~4 ms (232 GFLOP in TF32; 1.25 GiB of activations)

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int):
        super().__init__()
        self.conv = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size, stride=stride, padding=1, output_padding=1
        )

    def forward(self, x):
        return self.conv(x)


BATCH_SIZE = 8
IN_CHANNELS = 64
OUT_CHANNELS = 32
DEPTH = 32
HEIGHT = 64
WIDTH = 64
KERNEL_SIZE = 3
STRIDE = 2


def get_inputs():
    return [torch.rand(BATCH_SIZE, IN_CHANNELS, DEPTH, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL_SIZE, STRIDE]
