import torch
import torch.nn as nn


class Model(nn.Module):
    """Indexing by tensors, kept as ATen calls whose indices are a `Tensor?[]` (a list of optional tensors): Swin
    V2's relative position bias (a table gathered through a flat index buffer, viewed back), a gather along a
    middle dim (`x[:, idx]`: a None entry first) and a scatter into a copy (`y[idx] = v`: index_put)."""

    def __init__(self, entries, heads, window):
        super().__init__()
        self.table = nn.Parameter(torch.randn(entries, heads))
        coords = torch.arange(window)
        self.register_buffer("index", (coords[:, None] - coords[None, :] + window - 1) % entries)
        self.register_buffer("rows", torch.tensor([2, 0, 3]))

    def forward(self, x):
        n = self.index.shape[0]
        bias = self.table[self.index.view(-1)].view(n, n, -1).permute(2, 0, 1).contiguous()
        attn = torch.softmax(x + bias.unsqueeze(0), dim=-1)
        picked = attn[:, self.rows]
        scattered = attn.clone()
        scattered[:, self.rows] = picked * 0.5
        return picked.sigmoid(), scattered


def get_inputs():
    return [torch.randn(2, 4, 5, 5)]


def get_init_inputs():
    return [9, 4, 5]
