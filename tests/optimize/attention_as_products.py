import torch
import torch.nn as nn


class Model(nn.Module):
    """Attention multiplied out, as nn.MultiheadAttention does when it returns its weights: softmax(Q K^T / 3) V,
    softmax((0.5 Q) K^T) V with 13 keys for 11 queries, and a causal GPT's masked_fill(tril == 0, -inf) of the scaled
    scores. Each becomes one attention call (kfuse/compiler/rewrite.py; nn.MultiheadAttention itself:
    tests/test_rewrite.py)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("tril", torch.tril(torch.ones(16, 16)).view(1, 16, 16))

    def forward(self, q, k, v):
        scores = torch.bmm(q, k.transpose(1, 2)) / 3.0
        divided = torch.bmm(torch.softmax(scores, dim=-1), v)
        scaled_query = torch.bmm(torch.softmax(torch.bmm(q * 0.5, k.transpose(-2, -1)), -1), v)
        scaled = torch.bmm(q, k.transpose(1, 2)) * 0.3
        masked = scaled.masked_fill(self.tril[:, :q.size(1), :k.size(1)] == 0, float("-inf"))
        causal = torch.bmm(torch.softmax(masked, dim=-1), v)
        return divided, scaled_query, causal


def get_inputs():
    return [torch.randn(6, 11, 7), torch.randn(6, 13, 7), torch.randn(6, 13, 5)]


def get_init_inputs():
    return []
