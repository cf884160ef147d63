import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear, then x * s + x where the residual is a detached copy of the GEMM output."""
    # est. H100 eager: ~2.8 ms (GEMM 137 GFLOP at ~50 TFLOP/s fp32 SIMT (the seed Linear measured 2.8 ms); the
    #   epilogue ops touch only 32 MB each)

    def __init__(self, in_features: int, out_features: int, scaling_factor: float):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = self.matmul(x)
        original_x = x.clone().detach()
        x = x * self.scaling_factor
        x = x + original_x
        return x


BATCH_SIZE = 1024
IN_FEATURES = 8192
OUT_FEATURES = 8192
SCALING_FACTOR = 0.5


def get_inputs():
    return [torch.rand(BATCH_SIZE, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES, SCALING_FACTOR]
