import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B with a tall, skinny A (131072 x 1024) and a 1024 x 256 B."""
    # est. H100 eager: ~1.4 ms (2*131072*1024*256 = 69 GFLOP fp32 SIMT)

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


M = 131072
K = 1024
N = 256


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, N)]


def get_init_inputs():
    return []
