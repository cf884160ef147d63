import torch
import torch.nn as nn


class Model(nn.Module):
    """Outputs nested as the model nests them: a list, a tuple inside a tuple, a dict; a one-element list."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = x * 2.0
        return [y + 1.0], (torch.relu(x), (torch.sigmoid(x),)), {"tanh": torch.tanh(y), "exp": torch.exp(x)}


def get_inputs():
    return [torch.randn(7, 13)]


def get_init_inputs():
    return []
