import torch
import torch.nn as nn


class Model(nn.Module):
    """Matrix products whose sums are not dot products (kfuse/compiler/rewrite.py leaves them): a ReLU between product and
    sum; a scaled product that is returned too; a sum over both dims of the product."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features) * 0.1)
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        a = torch.relu(torch.matmul(x, self.weight.T)).sum(dim=-1)
        scaled = self.linear(x) * 2.0
        b = scaled.sum(dim=-1)
        c = torch.matmul(x, self.weight.T).sum(dim=(0, 1))
        return a, b, scaled, c


batch_size = 13
in_features = 301
out_features = 97


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
