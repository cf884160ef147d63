import torch
import torch.nn as nn


class Model(nn.Module):
    """Batched matmul, LayerNorm over the last dim, then ReLU."""
    # est. H100 eager: ~1.7 ms (bmm 69 GFLOP fp32 SIMT ~1.4 ms; each pass over the 134 MB output ~0.08 ms)

    def __init__(self, n: int):
        super().__init__()
        self.layer_norm = nn.LayerNorm(n)

    def forward(self, a, b):
        x = torch.bmm(a, b)
        x = self.layer_norm(x)
        x = torch.relu(x)
        return x


BATCH_SIZE = 128
M = 512
K = 1024
N = 512


def get_inputs():
    return [torch.rand(BATCH_SIZE, M, K), torch.rand(BATCH_SIZE, K, N)]


def get_init_inputs():
    return [N]
