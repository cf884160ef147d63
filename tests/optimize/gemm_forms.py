import torch
import torch.nn as nn


class Model(nn.Module):
    """Matrix products on kfuse's own GEMM: A^T @ B (the transpose read through strides), a batched product with
    a scale and residual add as its epilogue, a 3D tensor times a matrix (einsum), addmm with its bias."""

    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(23))

    def forward(self, a, b, c, d, r, e, f, g, h):
        t = torch.matmul(a.T, b)
        y = torch.tanh(torch.bmm(c, d) * 0.5 + r)
        z = torch.einsum("bij,jk->bik", e, f)
        q = torch.addmm(self.bias, g, h)
        return t, y, z, q


def get_inputs():
    return [torch.randn(45, 37), torch.randn(45, 29),
            torch.randn(3, 13, 19), torch.randn(3, 19, 17), torch.randn(3, 13, 17),
            torch.randn(2, 11, 21), torch.randn(21, 9),
            torch.randn(31, 27), torch.randn(27, 23)]


def get_init_inputs():
    return []
