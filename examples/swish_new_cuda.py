"""Swish as one CUDA pass: x * sigmoid(x) without the intermediate tensor."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

swish_declaration = "torch::Tensor swish_forward(torch::Tensor x);"

swish_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

// Replaces x * torch.sigmoid(x): one read of x, one write of the result. 64-bit indices: any size works.
__global__ void swish_kernel(const float* __restrict__ src, float* __restrict__ dst, int64_t n) {
    const int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float v = src[i];
        dst[i] = v / (1.0f + expf(-v));
    }
}

torch::Tensor swish_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "swish_forward expects a CUDA float32 tensor");
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    const int64_t n = input.numel();
    if (n == 0) return out;
    const int threads = 256;
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    const int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, (int64_t)sms * 8);
    swish_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        input.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

swish = load_inline(name="kfuse_example_swish_cuda", cpp_sources=swish_declaration, cuda_sources=swish_source,
                    functions=["swish_forward"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return swish.swish_forward(x)


batch_size = 1823
dim = 781


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
