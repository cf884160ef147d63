import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear, GroupNorm (16 groups), Swish, multiply by a learnable per-feature weight, Swish again."""
    # est. H100 eager: ~2.9 ms (GEMM 137 GFLOP at ~50 TFLOP/s fp32 SIMT (the seed Linear measured 2.8 ms); the
    #   epilogue ops touch only 32 MB each)

    def __init__(self, in_features: int, out_features: int, num_groups: int, multiply_weight_shape: tuple):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.group_norm = nn.GroupNorm(num_groups, out_features)
        self.multiply_weight = nn.Parameter(torch.randn(multiply_weight_shape))

    def forward(self, x):
        x = self.gemm(x)
        x = self.group_norm(x)
        x = x * torch.sigmoid(x)
        x = x * self.multiply_weight
        x = x * torch.sigmoid(x)
        return x


BATCH_SIZE = 1024
IN_FEATURES = 8192
OUT_FEATURES = 8192
NUM_GROUPS = 16
MULTIPLY_WEIGHT_SHAPE = (OUT_FEATURES,)


def get_inputs():
    return [torch.rand(BATCH_SIZE, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES, NUM_GROUPS, MULTIPLY_WEIGHT_SHAPE]
