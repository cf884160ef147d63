import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear, multiply by a constant, HardTanh(-2, 2), then GELU."""
    # est. H100 eager: ~2.8 ms (GEMM 137 GFLOP at ~50 TFLOP/s fp32 SIMT (the seed Linear measured 2.8 ms); the
    #   epilogue ops touch only 32 MB each)

    def __init__(
        self, in_features: int, out_features: int, scaling_factor: float, hardtanh_min: float, hardtanh_max: float
    ):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor
        self.hardtanh_min = hardtanh_min
        self.hardtanh_max = hardtanh_max

    def forward(self, x):
        x = self.gemm(x)
        x = x * self.scaling_factor
        x = torch.nn.functional.hardtanh(x, min_val=self.hardtanh_min, max_val=self.hardtanh_max)
        x = torch.nn.functional.gelu(x)
        return x


BATCH_SIZE = 1024
IN_FEATURES = 8192
OUT_FEATURES = 8192
SCALING_FACTOR = 0.5
HARDTANH_MIN = -2.0
HARDTANH_MAX = 2.0


def get_inputs():
    return [torch.rand(BATCH_SIZE, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES, SCALING_FACTOR, HARDTANH_MIN, HARDTANH_MAX]
