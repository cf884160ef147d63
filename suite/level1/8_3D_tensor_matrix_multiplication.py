import torch
import torch.nn as nn


class Model(nn.Module):
    """3D tensor times matrix: A (N, M, K) @ B (K, L)."""
    # est. H100 eager: ~2.7 ms (2*64*1024*2048*512 = 137 GFLOP fp32 SIMT)

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


N = 64
M = 1024
K = 2048
L = 512


def get_inputs():
    return [torch.rand(N, M, K), torch.rand(K, L)]


def get_init_inputs():
    return []
