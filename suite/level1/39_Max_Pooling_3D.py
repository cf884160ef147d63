import torch
import torch.nn as nn


class Model(nn.Module):
    """MaxPool3d (kernel 3, stride 2, padding 1)."""
    # est. H100 eager: ~1.5 ms (reads 2 GiB, writes 0.25 GiB; 27-tap windows)

    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.pool = nn.MaxPool3d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x):
        return self.pool(x)


BATCH_SIZE = 16
CHANNELS = 32
DEPTH = 64
HEIGHT = 128
WIDTH = 128
KERNEL_SIZE = 3
STRIDE = 2
PADDING = 1


def get_inputs():
    return [torch.randn(BATCH_SIZE, CHANNELS, DEPTH, HEIGHT, WIDTH)]


def get_init_inputs():
    return [KERNEL_SIZE, STRIDE, PADDING]
