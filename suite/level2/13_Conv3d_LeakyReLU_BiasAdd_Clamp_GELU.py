import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv3d, LeakyReLU(0.2), add a (C, 1, 1, 1) bias parameter, clamp to [-1, 1], then GELU."""
    # est. H100 eager: ~3.2 ms (conv3d 102 GFLOP TF32 ~2 ms; each pass over the 0.47 GB output ~0.3 ms; 4 passes)

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias_shape: tuple):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.conv(x)
        x = torch.nn.functional.leaky_relu(x, negative_slope=0.2)
        x = x + self.bias
        x = torch.clamp(x, min=-1.0, max=1.0)
        x = torch.nn.functional.gelu(x)
        return x


BATCH_SIZE = 32
IN_CHANNELS = 16
OUT_CHANNELS = 32
DEPTH = 32
HEIGHT = 64
WIDTH = 64
KERNEL_SIZE = 3
BIAS_SHAPE = (OUT_CHANNELS, 1, 1, 1)


def get_inputs():
    return [torch.rand(BATCH_SIZE, IN_CHANNELS, DEPTH, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL_SIZE, BIAS_SHAPE]
