import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """x divided by its Frobenius norm (one reduction over every element)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x / torch.norm(x, p="fro")


def get_inputs():
    return [torch.randn(4, 37, 19)]


def get_init_inputs():
    return []
