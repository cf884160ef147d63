import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """RMSNorm over the last dim (nn.RMSNorm) and the same written by hand; returns both."""

    def __init__(self, features):
        super().__init__()
        self.norm = nn.RMSNorm(features, eps=1e-5)

    def forward(self, x):
        manual = x / torch.sqrt(torch.mean(x ** 2, dim=-1, keepdim=True) + 1e-5)
        return self.norm(x), manual


def get_inputs():
    return [torch.randn(37, 1023)]


def get_init_inputs():
    return [1023]
