import torch
import torch.nn as nn
import kfuse_no_such_module  # deliberate: this problem cannot be imported


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x + 1


def get_inputs():
    return [torch.randn(4, 4)]


def get_init_inputs():
    return []
