import torch
import torch.nn as nn


class Model(nn.Module):
    """Matrix products summed over their output features, each rewritten at capture as a column sum of the weight
    and a dot product per row (kfuse/compiler/rewrite.py): x @ W.T divided before a keepdim sum and scaled after it
    (suite/level2/25's form); nn.Linear with its bias over leading batch dims, scaled before the sum; addmm with a
    plain (K, N) weight, a number times it, then divided."""

    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features) * 0.1)
        self.linear = nn.Linear(in_features, out_features)
        self.weight_kn = nn.Parameter(torch.randn(in_features, out_features) * 0.1)
        self.bias = nn.Parameter(torch.randn(out_features))
        self.scaling_factor = scaling_factor

    def forward(self, x, y):
        a = torch.matmul(x, self.weight.T)
        a = a / 2
        a = torch.sum(a, dim=1, keepdim=True)
        a = a * self.scaling_factor
        b = torch.sum(self.linear(y) * self.scaling_factor, dim=-1)
        c = (3.0 * torch.addmm(self.bias, x, self.weight_kn) / 7).sum(dim=1)
        return a, b, c


batch_size = 13
in_features = 301
out_features = 97


def get_inputs():
    return [torch.randn(batch_size, in_features), torch.randn(2, batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, 1.5]
