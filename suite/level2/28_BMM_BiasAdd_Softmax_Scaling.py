import torch
import torch.nn as nn


class Model(nn.Module):
    """Batched matmul, add a per-column bias parameter, softmax over the last dim, multiply by a constant."""
    # est. H100 eager: ~1.7 ms (bmm 69 GFLOP fp32 SIMT ~1.4 ms; each pass over the 134 MB output ~0.08 ms)

    def __init__(self, n: int, scale: float):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(n))
        self.scale = scale

    def forward(self, a, b):
        x = torch.bmm(a, b)
        x = x + self.bias
        x = torch.softmax(x, dim=-1)
        x = x * self.scale
        return x


BATCH_SIZE = 128
M = 512
K = 1024
N = 512
SCALE = 4.0


def get_inputs():
    return [torch.rand(BATCH_SIZE, M, K), torch.rand(BATCH_SIZE, K, N)]


def get_init_inputs():
    return [N, SCALE]
