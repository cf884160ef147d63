import torch
import torch.nn as nn


class Model(nn.Module):
    """Convolutions feeding reductions: each reduction kernel adds its convolution's bias as it reads the output
    (group norm, a scaled and clamped global average pool, a min over channels, a transposed convolution's mean)."""

    def __init__(self, in_channels, out_channels, groups):
        super().__init__()
        self.conv_norm = nn.Conv2d(in_channels, out_channels, 3)
        self.norm = nn.GroupNorm(groups, out_channels)
        self.conv_pool = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.conv_min = nn.Conv2d(in_channels, out_channels, (2, 3))
        self.up = nn.ConvTranspose2d(in_channels, out_channels, 4, stride=2, padding=1)

    def forward(self, x):
        normed = torch.relu(self.norm(self.conv_norm(x)))
        pooled = torch.clamp(self.conv_pool(x) * 0.5, 0.0, 1.0).mean(dim=[2, 3], keepdim=True)
        smallest = torch.min(self.conv_min(x), dim=1, keepdim=True)[0]
        up = self.up(x).mean(dim=[2, 3])
        return normed, pooled, smallest, up


def get_inputs():
    return [torch.randn(3, 5, 11, 13)]


def get_init_inputs():
    return [5, 12, 4]
