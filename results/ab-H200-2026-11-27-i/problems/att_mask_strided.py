import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Heads split from (B, L, H*E) as strided views, head dim 96, a boolean mask broadcast over batch and heads."""

    def __init__(self, heads):
        super().__init__()
        self.heads = heads

    def forward(self, x, mask):
        b, n, c = x.shape
        q, k, v = x.view(b, n, 3, self.heads, c // (3 * self.heads)).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def get_inputs():
    mask = torch.rand(1, 1, 150, 150) > 0.4
    mask |= torch.eye(150, dtype=torch.bool)
    return [torch.randn(2, 150, 3 * 4 * 96), mask]


def get_init_inputs():
    return [4]
