import torch
import torch.nn as nn


class Model(nn.Module):
    """AvgPool1d (kernel 4, stride 2, padding 1)."""
    # est. H100 eager: ~1.0 ms (reads 2 GiB, writes 1 GiB)

    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.pool = nn.AvgPool1d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x):
        return self.pool(x)


BATCH_SIZE = 64
FEATURES = 128
SEQ_LEN = 65536
KERNEL_SIZE = 4
STRIDE = 2
PADDING = 1


def get_inputs():
    return [torch.randn(BATCH_SIZE, FEATURES, SEQ_LEN)]


def get_init_inputs():
    return [KERNEL_SIZE, STRIDE, PADDING]
