import torch
import torch.nn as nn


class Model(nn.Module):
    """Vector norms of every order on signed values: the infinity norms are extremes of |x|, not |extremes|."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return (torch.linalg.vector_norm(x, ord=float("inf"), dim=-1),
                torch.linalg.vector_norm(x - 0.5, ord=float("-inf"), dim=1, keepdim=True),
                torch.linalg.vector_norm(torch.relu(x), ord=0, dim=(0, 2)),
                torch.linalg.vector_norm(x, ord=3, dim=1),
                torch.linalg.vector_norm(x, ord=0.5, dim=-1))


def get_inputs():
    return [torch.randn(5, 17, 23)]


def get_init_inputs():
    return []
