"""A candidate whose last bits vary from run to run as its problem's Model's own do (leaky_relu_varying: the values
nearest zero move by one ulp on every other call, as an atomic library call's sums would): not its fault.

Expected verdict: correct (with a note), though it does not declare USES_ATOMICS.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Only the headers the source includes (older torch versions lack the option and add torch/extension.h)
LIGHT_HEADERS = {"no_implicit_headers": True} if "no_implicit_headers" in load_inline.__code__.co_varnames else {}

cpp_source = r"""
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <torch/csrc/utils/pybind.h>

at::Tensor leaky_relu(at::Tensor x, double negative_slope) {
    TORCH_CHECK(x.device().is_cpu(), "x must be a CPU tensor");
    TORCH_CHECK(x.scalar_type() == at::kFloat, "x must be float32");
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    auto out = at::empty_like(x);
    const float* src = x.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const float slope = static_cast<float>(negative_slope);
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) {
        const float v = src[i];
        dst[i] = v > 0.0f ? v : v * slope;
    }
    return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("leaky_relu", &leaky_relu);
}
"""

module = load_inline(
    name="corpus_cpu_leaky_inherited_variation",
    cpp_sources=cpp_source,
    **LIGHT_HEADERS,
    verbose=False,
    extra_cflags=["-O2", "-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = module.leaky_relu(x.contiguous(), self.negative_slope)
        self.calls += 1
        if self.calls % 2:
            y = torch.where(x.abs() < 1e-3, torch.nextafter(y, torch.full_like(y, float("inf"))), y)
        return y


batch_size = 263
dim = 1031


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [0.01]
