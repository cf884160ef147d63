import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Attention with odd sequence lengths and head dim: plain, and causal with an explicit scale and 23 keys."""

    def __init__(self):
        super().__init__()

    def forward(self, q, k, v, k_short, v_short):
        plain = F.scaled_dot_product_attention(q, k, v)
        causal = F.scaled_dot_product_attention(q, k_short, v_short, is_causal=True, scale=0.3)
        return plain, causal


def get_inputs():
    return [torch.randn(2, 3, 37, 24), torch.randn(2, 3, 37, 24), torch.randn(2, 3, 37, 24),
            torch.randn(2, 3, 23, 24), torch.randn(2, 3, 23, 20)]


def get_init_inputs():
    return []
