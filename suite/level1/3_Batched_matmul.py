import torch
import torch.nn as nn


class Model(nn.Module):
    """Batched matrix multiply: torch.bmm of (B, M, K) and (B, K, N)."""
    # est. H100 eager: ~2.7 ms (2*128*512*1024*1024 = 137 GFLOP fp32 SIMT)

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.bmm(A, B)


BATCH = 128
M = 512
K = 1024
N = 1024


def get_inputs():
    return [torch.rand(BATCH, M, K), torch.rand(BATCH, K, N)]


def get_init_inputs():
    return []
