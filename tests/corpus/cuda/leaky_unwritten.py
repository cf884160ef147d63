"""Writes nothing: the wrapper allocates torch::empty_like(x) and launches a kernel that
returns at once without storing anything, so the result is whatever the caching allocator
handed out (NaN once the judge has poisoned it).

Expected verdict: incorrect (nan).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = "torch::Tensor leaky_relu(torch::Tensor x, double negative_slope);"

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

__global__ void leaky_relu_kernel(const float* __restrict__ x, float* __restrict__ out,
                                  float slope, int64_t n) {
    return;  // forgets to compute: out is never written
}

torch::Tensor leaky_relu(torch::Tensor x, double negative_slope) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    const c10::cuda::CUDAGuard guard(x.device());
    auto out = torch::empty_like(x);
    const int64_t n = x.numel();
    if (n == 0) {
        return out;
    }
    const int threads = 256;
    const int blocks = (int)std::min<int64_t>((n + threads - 1) / threads, 65535);
    leaky_relu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), out.data_ptr<float>(), static_cast<float>(negative_slope), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

module = load_inline(
    name="corpus_cuda_leaky_unwritten",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["leaky_relu"],
    verbose=False,
    extra_cflags=["-O2"],
    extra_cuda_cflags=["-O2"],
)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return module.leaky_relu(x.contiguous(), self.negative_slope)


batch_size = 263
dim = 1031


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [0.01]
