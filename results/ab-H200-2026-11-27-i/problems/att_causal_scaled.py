import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Causal, an explicit scale, 200 queries and keys, head dim 64."""

    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)


def get_inputs():
    return [torch.randn(4, 6, 200, 64), torch.randn(4, 6, 200, 64), torch.randn(4, 6, 200, 64)]


def get_init_inputs():
    return []
