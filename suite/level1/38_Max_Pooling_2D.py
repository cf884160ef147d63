import torch
import torch.nn as nn


class Model(nn.Module):
    """MaxPool2d (kernel 4, stride 2, padding 1)."""
    # est. H100 eager: ~1.0 ms (reads 2 GiB, writes 0.5 GiB)

    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x):
        return self.pool(x)


BATCH_SIZE = 32
CHANNELS = 64
HEIGHT = 512
WIDTH = 512
KERNEL_SIZE = 4
STRIDE = 2
PADDING = 1


def get_inputs():
    return [torch.randn(BATCH_SIZE, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [KERNEL_SIZE, STRIDE, PADDING]
