import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear, subtract each row's max, GELU, then the mean over features."""
    # est. H100 eager: ~2.8 ms (GEMM 137 GFLOP at ~50 TFLOP/s fp32 SIMT (the seed Linear measured 2.8 ms); the
    #   epilogue ops touch only 32 MB each)

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = self.gemm(x)
        x = x - torch.max(x, dim=1, keepdim=True)[0]
        x = torch.nn.functional.gelu(x)
        x = torch.mean(x, dim=1)
        return x


BATCH_SIZE = 1024
IN_FEATURES = 8192
OUT_FEATURES = 8192


def get_inputs():
    return [torch.rand(BATCH_SIZE, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
