import torch
import torch.nn as nn


class Model(nn.Module):
    """ConvTranspose2d with groups, dilation, unequal strides and output padding, then ReLU and a scale."""

    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose2d(6, 40, (3, 2), stride=(2, 3), padding=(1, 0), output_padding=(1, 2), groups=2,
                                       dilation=(1, 2))

    def forward(self, x):
        return torch.relu(self.conv(x)) * 0.5


def get_inputs():
    return [torch.rand(2, 6, 7, 9)]


def get_init_inputs():
    return []
