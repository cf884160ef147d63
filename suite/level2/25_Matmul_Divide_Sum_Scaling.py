import torch
import torch.nn as nn


class Model(nn.Module):
    """x @ W.T with a weight parameter, divide by 2, sum over features (keepdim), then multiply by a constant."""
    # est. H100 eager: ~2.8 ms (GEMM 137 GFLOP at ~50 TFLOP/s fp32 SIMT (the seed Linear measured 2.8 ms); the
    #   epilogue ops touch only 32 MB each)

    def __init__(self, in_features: int, out_features: int, scaling_factor: float):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features) * 0.01)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = torch.matmul(x, self.weight.T)
        x = x / 2
        x = torch.sum(x, dim=1, keepdim=True)
        x = x * self.scaling_factor
        return x


BATCH_SIZE = 1024
IN_FEATURES = 8192
OUT_FEATURES = 8192
SCALING_FACTOR = 1.5


def get_inputs():
    return [torch.rand(BATCH_SIZE, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES, SCALING_FACTOR]
