"""Attention with a head dim past kfuse's attention kernel (128): products around a softmax, with a value head dim
of its own (136) and the default scale, or an explicit scale; a head dim of 64 stays one attention kernel."""

import torch
import torch.nn.functional as F


class Model(torch.nn.Module):
    def forward(self, q, k, v, q2, k2, v2):
        a = F.scaled_dot_product_attention(q, k, v)
        b = F.scaled_dot_product_attention(q, k, k, scale=0.3)
        c = F.scaled_dot_product_attention(q2, k2, q2)
        return a, b, c


def get_inputs():
    return [torch.rand(2, 3, 67, 160), torch.rand(2, 3, 65, 160), torch.rand(2, 3, 65, 136),
            torch.rand(2, 3, 21, 64), torch.rand(2, 3, 21, 64), torch.rand(2, 3, 21, 64)]


def get_init_inputs():
    return []
