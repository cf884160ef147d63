import torch
import torch.nn as nn


class Model(nn.Module):
    """ConvTranspose2d 128 -> 64, kernel 3, stride 2, padding 1, output_padding 1 (2x upsample)."""
    # est. H100 eager: ~2.5 ms (155 GFLOP in TF32 + 1.5 GiB of activations)

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int):
        super().__init__()
        self.conv = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=1, output_padding=1
        )

    def forward(self, x):
        return self.conv(x)


BATCH_SIZE = 16
IN_CHANNELS = 128
OUT_CHANNELS = 64
HEIGHT = 256
WIDTH = 256
KERNEL_SIZE = 3
STRIDE = 2


def get_inputs():
    return [torch.rand(BATCH_SIZE, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL_SIZE, STRIDE]
