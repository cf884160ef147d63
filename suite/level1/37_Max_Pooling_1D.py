import torch
import torch.nn as nn


class Model(nn.Module):
    """MaxPool1d (kernel 8, stride 2, padding 2, dilation 3)."""
    # est. H100 eager: ~0.9 ms (reads 1 GiB, writes 0.5 GiB of values and 1 GiB of int64 indices (eager keeps them))

    def __init__(self, kernel_size: int, stride: int, padding: int, dilation: int):
        super().__init__()
        self.pool = nn.MaxPool1d(kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation)

    def forward(self, x):
        return self.pool(x)


BATCH_SIZE = 32
FEATURES = 128
SEQ_LEN = 65536
KERNEL_SIZE = 8
STRIDE = 2
PADDING = 2
DILATION = 3


def get_inputs():
    return [torch.randn(BATCH_SIZE, FEATURES, SEQ_LEN)]


def get_init_inputs():
    return [KERNEL_SIZE, STRIDE, PADDING, DILATION]
