import torch
import torch.nn as nn


class Model(nn.Module):
    """0-dim tensors made in forward: folded into the kernel as the numbers they hold. (No __init__ of its own:
    ModelNew has none either.)"""

    def forward(self, x):
        return torch.where(x > 0, x, torch.tensor(0.5)) * torch.tensor(3) - torch.tensor(0.25, dtype=torch.float64)


def get_inputs():
    return [torch.randn(7, 29)]


def get_init_inputs():
    return []
