import torch
import torch.nn as nn


class Model(nn.Module):
    """The tuple forms a decomposition leaves: native_layer_norm, native_group_norm and eval batch norm, with only
    the normalised tensor used."""

    def __init__(self, channels):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(channels) + 0.5)
        self.bias = nn.Parameter(torch.randn(channels))
        self.register_buffer("running_mean", torch.randn(channels))
        self.register_buffer("running_var", torch.rand(channels) + 0.5)

    def forward(self, x, y):
        ln = torch.native_layer_norm(y, [y.shape[-1]], None, None, 1e-5)[0]
        n, c = x.shape[0], x.shape[1]
        gn = torch.native_group_norm(x.contiguous(), self.weight, self.bias, n, c, x.shape[2] * x.shape[3], 2, 1e-5)[0]
        bn = torch._native_batch_norm_legit_no_training(x, self.weight, self.bias, self.running_mean,
                                                        self.running_var, 0.1, 1e-5)[0]
        return torch.relu(ln), gn * 2.0, bn - 1.0


def get_inputs():
    return [torch.randn(3, 6, 5, 7), torch.randn(9, 61)]


def get_init_inputs():
    return [6]
