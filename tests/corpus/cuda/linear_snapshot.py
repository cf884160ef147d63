"""Snapshots the weights: __init__ copies self.linear.weight / bias into plain attributes
(not parameters, not buffers) and forward uses those copies, so weights loaded or
re-randomised after construction are ignored. The kernel math itself is right.

Expected verdict: incorrect (weights re-randomised).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = "torch::Tensor linear_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);"

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

__global__ void linear_relu_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                   const float* __restrict__ b, float* __restrict__ out,
                                   int64_t M, int64_t N, int64_t K) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < M * N; idx += stride) {
        const int64_t i = idx / N, j = idx % N;
        float acc = 0.0f;
        for (int64_t k = 0; k < K; ++k) {
            acc += x[i * K + k] * w[j * K + k];
        }
        acc += b[j];
        out[idx] = acc > 0.0f ? acc : 0.0f;
    }
}

torch::Tensor linear_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    for (const auto& t : {x, weight, bias}) {
        TORCH_CHECK(t.is_cuda(), "tensors must be CUDA tensors");
        TORCH_CHECK(t.scalar_type() == torch::kFloat32, "tensors must be float32");
        TORCH_CHECK(t.is_contiguous(), "tensors must be contiguous");
    }
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && bias.dim() == 1, "bad ranks");
    TORCH_CHECK(x.size(1) == weight.size(1) && bias.size(0) == weight.size(0), "bad shapes");
    const c10::cuda::CUDAGuard guard(x.device());
    const int64_t M = x.size(0), K = x.size(1), N = weight.size(0);
    auto out = torch::empty({M, N}, x.options());
    if (M * N == 0) {
        return out;
    }
    const int threads = 256;
    const int blocks = (int)std::min<int64_t>((M * N + threads - 1) / threads, 65535);
    linear_relu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(),
        out.data_ptr<float>(), M, N, K);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

module = load_inline(
    name="corpus_cuda_linear_snapshot",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["linear_relu"],
    verbose=False,
    extra_cflags=["-O2"],
    extra_cuda_cflags=["-O2"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.w = self.linear.weight.detach().clone()  # frozen at construction
        self.b = self.linear.bias.detach().clone()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.w.to(x.device).contiguous()
        b = self.b.to(x.device).contiguous()
        return module.linear_relu(x.contiguous(), w, b)


batch_size = 37
in_features = 96
out_features = 80


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
