import torch
import torch.nn as nn


class Model(nn.Module):
    """In-place ops on values the forward computed, as networks write them: nn.ReLU(inplace=True) and `y += skip`
    (read as out-of-place ops: fused), beside a write that a view of its operand sees (stays in place)."""

    def __init__(self, features):
        super().__init__()
        self.fc = nn.Linear(features, features)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        y = self.fc(x)
        skip = y * 0.5
        y = self.act(y)
        y += skip
        seen = skip.view(-1)
        skip.mul_(2.0)
        return y, seen


def get_inputs():
    return [torch.randn(6, 24)]


def get_init_inputs():
    return [24]
