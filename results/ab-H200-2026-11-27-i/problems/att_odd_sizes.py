import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Head dims 20 (keys) and 40 (values), 77 queries, 130 keys: every tile edge ragged."""

    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


def get_inputs():
    return [torch.randn(3, 5, 77, 20), torch.randn(3, 5, 130, 20), torch.randn(3, 5, 130, 40)]


def get_init_inputs():
    return []
