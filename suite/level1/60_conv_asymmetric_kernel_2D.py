import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d 64 -> 64 with an asymmetric 3 x 7 kernel, padding (1, 3)."""
    # est. H100 eager: ~3.5 ms (361 GFLOP in TF32)

    def __init__(self, in_channels: int, out_channels: int, kernel_size: tuple):
        super().__init__()
        self.conv = nn.Conv2d(
            in_channels, out_channels, kernel_size, padding=(kernel_size[0] // 2, kernel_size[1] // 2)
        )

    def forward(self, x):
        return self.conv(x)


BATCH_SIZE = 32
IN_CHANNELS = 64
OUT_CHANNELS = 64
HEIGHT = 256
WIDTH = 256
KERNEL_SIZE = (3, 7)


def get_inputs():
    return [torch.rand(BATCH_SIZE, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL_SIZE]
