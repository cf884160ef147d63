import torch
import torch.nn as nn


class Model(nn.Module):
    """x @ W.T plus bias, clamp to [-10, 10], logsumexp over features (keepdim), then y * mish(y)."""
    # est. H100 eager: ~2.8 ms (GEMM 137 GFLOP at ~50 TFLOP/s fp32 SIMT (the seed Linear measured 2.8 ms); the
    #   epilogue ops touch only 32 MB each)

    def __init__(self, in_features: int, out_features: int, clamp_min: float, clamp_max: float):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features) * 0.01)
        self.bias = nn.Parameter(torch.zeros(out_features))
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        x = torch.matmul(x, self.weight.T) + self.bias
        x = torch.clamp(x, min=self.clamp_min, max=self.clamp_max)
        x = torch.logsumexp(x, dim=1, keepdim=True)
        x = x * torch.nn.functional.mish(x)
        return x


BATCH_SIZE = 1024
IN_FEATURES = 8192
OUT_FEATURES = 8192
CLAMP_MIN = -10.0
CLAMP_MAX = 10.0


def get_inputs():
    return [torch.rand(BATCH_SIZE, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES, CLAMP_MIN, CLAMP_MAX]
