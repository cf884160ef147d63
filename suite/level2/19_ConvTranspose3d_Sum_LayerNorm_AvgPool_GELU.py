import torch
import torch.nn as nn


class Model(nn.Module):
    """ConvTranspose3d, add a learnable scalar, LayerNorm over the last dim (W), AvgPool3d(2), then GELU."""
    # est. H100 eager: ~1.7 ms (transposed conv3d 29 GFLOP TF32 ~1 ms; each pass over the 0.27 GB output ~0.18 ms;
    #   add, LayerNorm, pool, GELU on 1/8)

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int,
        padding: int,
        output_padding: int,
        sum_weight: float,
        norm_shape: tuple,
        pool_kernel_size: tuple,
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.sum_weight = nn.Parameter(torch.tensor(sum_weight))
        self.norm = nn.LayerNorm(norm_shape)
        self.avg_pool = nn.AvgPool3d(kernel_size=pool_kernel_size)

    def forward(self, x):
        x = self.conv_transpose(x)
        x = x + self.sum_weight
        x = self.norm(x)
        x = self.avg_pool(x)
        x = torch.nn.functional.gelu(x)
        return x


BATCH_SIZE = 16
IN_CHANNELS = 64
OUT_CHANNELS = 32
DEPTH = 16
HEIGHT = 32
WIDTH = 32
KERNEL_SIZE = 3
STRIDE = 2
PADDING = 1
OUTPUT_PADDING = 1
SUM_WEIGHT = 1.0
NORM_SHAPE = (WIDTH * STRIDE,)
POOL_KERNEL_SIZE = (2, 2, 2)


def get_inputs():
    return [torch.rand(BATCH_SIZE, IN_CHANNELS, DEPTH, HEIGHT, WIDTH)]


def get_init_inputs():
    return [
        IN_CHANNELS,
        OUT_CHANNELS,
        KERNEL_SIZE,
        STRIDE,
        PADDING,
        OUTPUT_PADDING,
        SUM_WEIGHT,
        NORM_SHAPE,
        POOL_KERNEL_SIZE,
    ]
