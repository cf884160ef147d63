"""Never returns: before computing anything, the extension waits on a volatile flag that
nothing ever sets (holding the GIL all the while). It sleeps between looks, so the hang
costs the judge's wall clock, not a core: a spin would behave the same to the judge.

Expected verdict: timeout.

The extension holds all seven broken variants of the corpus (one build for them); this file
calls leaky_relu_hang.
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
#include <chrono>
#include <thread>
#include <cstdint>
#include <cstring>

// Each candidate of the corpus's broken LeakyReLU variants calls its own function; one build serves them all.

at::Tensor leaky_relu_first_row(at::Tensor x, double negative_slope) {
    TORCH_CHECK(x.device().is_cpu(), "x must be a CPU tensor");
    TORCH_CHECK(x.scalar_type() == at::kFloat, "x must be float32");
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    TORCH_CHECK(x.dim() >= 1, "x must have at least one dimension");
    auto out = at::empty_like(x);
    const float* src = x.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const float slope = static_cast<float>(negative_slope);
    const int64_t row = std::min<int64_t>(x.size(-1), x.numel());  // row 0 only
    for (int64_t i = 0; i < row; ++i) {
        const float v = src[i];
        dst[i] = v > 0.0f ? v : v * slope;
    }
    return out;
}

at::Tensor leaky_relu_fp16(at::Tensor x, double negative_slope) {
    TORCH_CHECK(x.device().is_cpu(), "x must be a CPU tensor");
    TORCH_CHECK(x.scalar_type() == at::kFloat, "x must be float32");
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    auto out = at::empty_like(x);
    const float* src = x.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const c10::Half slope = static_cast<c10::Half>(static_cast<float>(negative_slope));
    const c10::Half zero = static_cast<c10::Half>(0.0f);
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) {
        const c10::Half h = static_cast<c10::Half>(src[i]);
        const c10::Half r = h > zero ? h : static_cast<c10::Half>(h * slope);
        dst[i] = static_cast<float>(r);
    }
    return out;
}

static volatile int release_flag = 0;  // nothing ever writes this

at::Tensor leaky_relu_hang(at::Tensor x, double negative_slope) {
    TORCH_CHECK(x.device().is_cpu(), "x must be a CPU tensor");
    TORCH_CHECK(x.scalar_type() == at::kFloat, "x must be float32");
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    while (release_flag == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
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

at::Tensor leaky_relu_segfault(at::Tensor x, double negative_slope) {
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
    volatile float* wild = out.data_ptr<float>();
    wild[(int64_t)1 << 40] = 0.0f;  // out-of-bounds host store
    return out;
}

at::Tensor leaky_relu_truncated_mantissa(at::Tensor x, double negative_slope) {
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
        float r = v > 0.0f ? v : v * slope;
        uint32_t bits;
        std::memcpy(&bits, &r, sizeof bits);
        bits &= 0xFFFFFE00u;
        std::memcpy(&r, &bits, sizeof r);
        dst[i] = r;
    }
    return out;
}

at::Tensor leaky_relu_unwritten(at::Tensor x, double negative_slope) {
    TORCH_CHECK(x.device().is_cpu(), "x must be a CPU tensor");
    TORCH_CHECK(x.scalar_type() == at::kFloat, "x must be float32");
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    (void)negative_slope;
    return at::empty_like(x);
}

at::Tensor leaky_relu_writes_input(at::Tensor x, double negative_slope) {
    TORCH_CHECK(x.device().is_cpu(), "x must be a CPU tensor");
    TORCH_CHECK(x.scalar_type() == at::kFloat, "x must be float32");
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    float* p = x.data_ptr<float>();
    const float slope = static_cast<float>(negative_slope);
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) {
        const float v = p[i];
        p[i] = v > 0.0f ? v : v * slope;
    }
    return x;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("leaky_relu_first_row", &leaky_relu_first_row);
    m.def("leaky_relu_fp16", &leaky_relu_fp16);
    m.def("leaky_relu_hang", &leaky_relu_hang);
    m.def("leaky_relu_segfault", &leaky_relu_segfault);
    m.def("leaky_relu_truncated_mantissa", &leaky_relu_truncated_mantissa);
    m.def("leaky_relu_unwritten", &leaky_relu_unwritten);
    m.def("leaky_relu_writes_input", &leaky_relu_writes_input);
}
"""

module = load_inline(
    name="corpus_cpu_leaky_variants",
    cpp_sources=cpp_source,
    **LIGHT_HEADERS,
    verbose=False,
    extra_cflags=["-O2", "-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return module.leaky_relu_hang(x.contiguous(), self.negative_slope)


batch_size = 263
dim = 1031


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [0.01]
