"""Honest candidate: fused Linear + bias + ReLU in plain C++, fp32 accumulation in natural k order.

The live parameters self.linear.weight / self.linear.bias are read on every call.
Expected verdict: correct.
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

at::Tensor linear_relu(at::Tensor x, at::Tensor weight, at::Tensor bias) {
    for (const auto& t : {x, weight, bias}) {
        TORCH_CHECK(t.device().is_cpu(), "tensors must be on the CPU");
        TORCH_CHECK(t.scalar_type() == at::kFloat, "tensors must be float32");
        TORCH_CHECK(t.is_contiguous(), "tensors must be contiguous");
    }
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && bias.dim() == 1, "bad ranks");
    TORCH_CHECK(x.size(1) == weight.size(1) && bias.size(0) == weight.size(0), "bad shapes");
    const int64_t M = x.size(0), K = x.size(1), N = weight.size(0);
    auto out = at::empty({M, N}, x.options());
    const float* xp = x.data_ptr<float>();
    const float* wp = weight.data_ptr<float>();
    const float* bp = bias.data_ptr<float>();
    float* op = out.data_ptr<float>();
    for (int64_t i = 0; i < M; ++i) {
        for (int64_t j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; ++k) {
                acc += xp[i * K + k] * wp[j * K + k];
            }
            acc += bp[j];
            op[i * N + j] = acc > 0.0f ? acc : 0.0f;
        }
    }
    return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("linear_relu", &linear_relu);
}
"""

module = load_inline(
    name="corpus_cpu_linear_honest",
    cpp_sources=cpp_source,
    **LIGHT_HEADERS,
    verbose=False,
    extra_cflags=["-O2", "-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return module.linear_relu(
            x.contiguous(), self.linear.weight.contiguous(), self.linear.bias.contiguous()
        )


batch_size = 37
in_features = 96
out_features = 80


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
