import torch
import torch.nn as nn


class Model(nn.Module):
    """ConvTranspose2d with groups, dilation, unequal strides and output padding, then ReLU and a scale; and a
    ConvTranspose1d (aten.conv_transpose1d.default: no .input overload, unlike 2d and 3d) with stride, padding and
    dilation."""

    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose2d(6, 40, (3, 2), stride=(2, 3), padding=(1, 0), output_padding=(1, 2), groups=2,
                                       dilation=(1, 2))
        self.conv1d = nn.ConvTranspose1d(5, 7, 3, stride=2, padding=1, dilation=2, bias=False)

    def forward(self, x, y):
        return torch.relu(self.conv(x)) * 0.5, self.conv1d(y)


def get_inputs():
    return [torch.rand(2, 6, 7, 9), torch.rand(3, 5, 29)]


def get_init_inputs():
    return []
