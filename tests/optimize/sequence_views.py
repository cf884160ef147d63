import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Causal self-attention in MinGPT's manner: a mask made for the longest sequence and sliced to this one's length,
    views by (batch, length, heads, head size). Export writes the length as a number in each."""

    def __init__(self, n_embd, n_head, max_len):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.n_head = n_head
        self.register_buffer("bias", torch.tril(torch.ones(max_len, max_len)).view(1, 1, max_len, max_len))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        return (att @ v).transpose(1, 2).contiguous().view(B, T, C)


def get_inputs():
    return [torch.randn(3, 10, 16)]


def get_init_inputs():
    return [16, 2, 24]
