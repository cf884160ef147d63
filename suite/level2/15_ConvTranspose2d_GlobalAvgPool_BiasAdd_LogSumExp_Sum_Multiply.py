import torch
import torch.nn as nn


class Model(nn.Module):
    """ConvTranspose2d, global average pool, add a (C, 1, 1) bias, logsumexp over channels, sum, multiply by 10."""
    # est. H100 eager: ~1.0 ms (transposed conv 34 GFLOP TF32 + 0.4 GB moved ~0.8 ms; each pass over the 0.27 GB
    #   output ~0.18 ms; the pool reads it once, the rest is tiny)

    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int, bias_shape: tuple
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding
        )
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.conv_transpose(x)
        x = torch.mean(x, dim=(2, 3), keepdim=True)
        x = x + self.bias
        x = torch.logsumexp(x, dim=1, keepdim=True)
        x = torch.sum(x, dim=(2, 3))
        x = x * 10.0
        return x


BATCH_SIZE = 128
IN_CHANNELS = 64
OUT_CHANNELS = 32
HEIGHT = 64
WIDTH = 64
KERNEL_SIZE = 4
STRIDE = 2
PADDING = 1
BIAS_SHAPE = (OUT_CHANNELS, 1, 1)


def get_inputs():
    return [torch.rand(BATCH_SIZE, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL_SIZE, STRIDE, PADDING, BIAS_SHAPE]
