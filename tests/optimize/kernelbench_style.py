"""A problem file whose docstrings a regex would read as code: the forward pass, every layer except the last."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """Written the way many KernelBench problems are: super(Model, self), a helper method used by __init__, a
    forward with a default argument, and an in-place add between two reads of the input."""

    def __init__(self, features):
        """One scale per feature; nothing else to pass in, no try/except around the init."""
        super(Model, self).__init__()
        self.scale = nn.Parameter(torch.empty(features))
        self._init_scale()

    def _init_scale(self):
        """Scales drawn once; a second pass would redraw them."""
        nn.init.uniform_(self.scale, 0.5, 1.5)

    def forward(self, x, offset=1.0):
        y = torch.sigmoid(x)
        x += offset
        return x * y * self.scale


def unused_helper():
    """Nothing here but a docstring: pass."""


def get_inputs():
    return [torch.randn(9, 27)]


def get_init_inputs():
    return [27]
