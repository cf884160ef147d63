import torch
import torch.nn as nn


class Model(nn.Module):
    """Attention scores under causal masks held as (1, 1, T, T) buffers: the comparison that makes the bool mask
    fuses into the masked_fill of the (B, H, T, T) scores it broadcasts over, one kernel with the scale and the ReLU
    after it; a (1, 1, T, T) bias read over (B, H, T, T) as one run of T * T values (its two dims contiguous), and
    a slice of a larger mask, not contiguous, through its strides."""

    def __init__(self):
        super().__init__()
        self.register_buffer("causal", torch.tril(torch.ones(7, 7)).view(1, 1, 7, 7))
        self.register_buffer("wide", torch.tril(torch.ones(9, 9)).view(1, 1, 9, 9))
        self.pos = nn.Parameter(torch.randn(1, 1, 7, 7))

    def forward(self, q, k):
        t = q.size(-2)
        att = (q @ k.transpose(-2, -1)) * 0.5
        relu_att = torch.relu(att.masked_fill(self.causal == 0, float("-inf")))
        shifted = (att + self.pos).masked_fill(self.wide[:, :, :t, :t] == 0, -1e4)
        return relu_att, shifted


def get_inputs():
    return [torch.randn(2, 3, 7, 5), torch.randn(2, 3, 7, 5)]


def get_init_inputs():
    return []
