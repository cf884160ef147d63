"""Print a plan as C++ source: one fused-kernel IR, two printers (CUDA C++ and plain C++ for the CPU target).

The CUDA target yields two sources: `cuda` holds the kernels and includes only the CUDA runtime (it compiles in
seconds), `cpp` holds the host side (ATen calls, launches, the pybind entry `forward`). The CPU target puts
everything in `cpp`. Every size is read at run time: kernels work for any shape of the captured rank.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from kfuse.compiler.capture import Captured
from kfuse.compiler.sizes import SIZES
from kfuse.compiler.plan import Plan
from kfuse.kernels import attention, counters, ops, recurrent
from kfuse.kernels import conv as convolutions
from kfuse.kernels import gemm as gemms
from kfuse.kernels import reduce as reductions
from kfuse.kernels import window as windows
from kfuse.kernels.printing import kernel_argument, op_function
from kfuse.kernels.steps import FusedKernel, LibraryCall, TupleItem, boxed_arguments, tensor_meta

MAX_DIMS = 8

# Plain C++ shared by both compilers, in units that a file includes only where it uses them (common_for): the
# header, how a kernel sees each operand and the output's shape, division by multiplication, and the loads.
COMMON_HEADER = f"""
#include <cstdint>
#define KF_MAX_DIMS {MAX_DIMS}
#ifdef __CUDACC__
#define KF_HD __host__ __device__ __forceinline__
#else
#define KF_HD inline
#endif
"""
COMMON_VIEWS = """namespace kf {
// One operand of a fused kernel, viewed with the output's shape: strides in elements, 0 along broadcast dims.
struct Operand {
    const float* data;
    int64_t strides[KF_MAX_DIMS];
    // 1: laid out like the output; 0: one value for all elements; 2: one value per index of a single dim (a bias
    // of shape (C, 1, 1), a row or column vector); -1: strided (general indexing)
    int64_t step;
    int64_t inner, count, stride;  // step 2: element i reads data[(i / inner) % count * stride]
    uint32_t inner_magic, inner_shift, count_magic, count_shift;  // ... inner and count for div32 (set by prepare)
};
struct Shape {
    int ndim;
    int64_t sizes[KF_MAX_DIMS];
    int64_t numel;
    // sizes[d] as a divisor by multiplication for 32-bit indices (div32; set by prepare)
    uint32_t magic[KF_MAX_DIMS];
    uint32_t shift[KF_MAX_DIMS];
};
}  // namespace kf
"""
COMMON_DIVISION = """namespace kf {
// n / divisor for 0 <= n < 2^31 by a multiply-high and a shift: (hi32(n * magic) + n) >> shift, the divisor's magic
// number and shift from set_divisor (Granlund-Montgomery's multiplier, as PyTorch's IntDivider). A division by a
// run-time value is ~20 instructions, this 3; the strided and per-channel loads divide per element (and the
// reductions and windows through kf::Div, kfuse.kernels.printing).
KF_HD uint32_t div32(uint32_t n, uint32_t magic, uint32_t shift) {
#ifdef __CUDA_ARCH__
    const uint32_t t = __umulhi(n, magic);
#else
    const uint32_t t = (uint32_t)(((uint64_t)n * magic) >> 32);
#endif
    return (t + n) >> shift;
}
// div32's magic number and shift for a divisor in [1, 2^31) (another divisor: never used, 32-bit indices being
// chosen only where every size and offset is below 2^31).
inline void set_divisor(int64_t divisor, uint32_t& magic, uint32_t& shift) {
    const uint64_t d = divisor > 1 ? (uint64_t)divisor : 1;
    shift = d > 1 ? 64 - __builtin_clzll(d - 1) : 0;  // the least with 2^shift >= d
    magic = d < (uint64_t(1) << 31) ? (uint32_t)((uint64_t(1) << 32) * ((uint64_t(1) << shift) - d) / d + 1) : 0;
}
}  // namespace kf
"""
COMMON_LOAD = """namespace kf {
// The value of operand `o` for output element i, for every mode but the strided one.
template <typename index_t>
KF_HD float load(const Operand& o, index_t i) {
    if (o.step == 1) return o.data[i];
    if (o.step == 0) return o.data[0];
    if constexpr (sizeof(index_t) == 4) {  // (32-bit indices: every size and offset below 2^31)
        const uint32_t q = div32((uint32_t)i, o.inner_magic, o.inner_shift);
        const uint32_t along = q - div32(q, o.count_magic, o.count_shift) * (uint32_t)o.count;
        return o.data[(index_t)along * (index_t)o.stride];
    }
    return o.data[(i / (index_t)o.inner) % (index_t)o.count * (index_t)o.stride];
}
}  // namespace kf
"""
COMMON_LOAD4 = """namespace kf {
#ifdef __CUDACC__
// Elements 4q .. 4q + 3 of operand `o` (the vec4 kernels; an output 16-byte aligned, a step-1 operand too). A
// per-channel value whose run of equal elements is a multiple of 4 (a bias over 4k spatial positions) is one load
// and one division for the four, not four: a fused conv epilogue with two such operands ran 3x slower than its
// bytes with four.
template <typename index_t>
__device__ __forceinline__ float4 load4(const Operand& o, index_t q) {
    if (o.step == 1) return reinterpret_cast<const float4*>(o.data)[q];
    if (o.step == 0 || (o.inner & 3) == 0) {
        const float v = load(o, 4 * q);
        return make_float4(v, v, v, v);
    }
    // a contiguous run that changes every element (a row vector over the last dim, a (T, T) mask over (B, H, T, T)),
    // in fours: the four neighbours one 16-byte load at one division, not four loads at two each
    if (o.step == 2 && o.inner == 1 && o.stride == 1 && (o.count & 3) == 0
        && (reinterpret_cast<uintptr_t>(o.data) & 15) == 0) {
        index_t along;
        if constexpr (sizeof(index_t) == 4) {
            const uint32_t i = 4u * (uint32_t)q;
            along = (index_t)(i - div32(i, o.count_magic, o.count_shift) * (uint32_t)o.count);
        } else {
            along = (4 * q) % (index_t)o.count;
        }
        return *reinterpret_cast<const float4*>(o.data + along);
    }
    return make_float4(load(o, 4 * q), load(o, 4 * q + 1), load(o, 4 * q + 2), load(o, 4 * q + 3));
}
#endif
}  // namespace kf
"""
# Every unit: what the tests compile on their own.
COMMON = COMMON_HEADER + COMMON_VIEWS + COMMON_DIVISION + COMMON_LOAD + COMMON_LOAD4


def common_for(code: str) -> str:
    """The units of COMMON that `code` uses, each with the ones it needs (names matched as words: a mention in a
    comment keeps a unit too, never drops one). A file of one GEMM without epilogue operands needs the header only."""
    load4 = re.search(r"(?<![\w.])load4\s*[(<]", code) is not None
    load = load4 or re.search(r"(?<![\w.])load\s*[(<]", code) is not None
    division = load or re.search(r"\b(div32|set_divisor)\b", code) is not None
    views = load or re.search(r"\b(Operand|Shape)\b", code) is not None
    return (COMMON_HEADER + (COMMON_VIEWS if views else "") + (COMMON_DIVISION if division else "")
            + (COMMON_LOAD if load else "") + (COMMON_LOAD4 if load4 else ""))


# The 16-byte transposes' shared half (CUDA only): in a file only where a channels-last copy or kernel uses it.
TILE_FILL = r"""
namespace kf {
// 64 x 64 tiles of a [rows][cols] matrix (cols contiguous; both counts multiples of 4, 16-byte aligned), 256
// threads, four float4 a thread each way. Thread j-th slot: a tile row and a float4 (quad) along it, lanes
// 8 quads x 4 rows, so that a warp reads or writes four whole 128-byte rows and both shared-memory passes, whose
// rows are padded by one float, are conflict-free. (64 x 32 tiles of two float4 a thread moved 3.3 TB/s on an H200,
// these 3.4, and 4.0 with streaming stores: scripts/bench/transpose_tiles.py, results/transpose-tiles-H200-2026-11-28.)
__device__ __forceinline__ void tile4_slot(int j, int& row, int& quad) {
    const int step = threadIdx.x / 32 + 8 * j;
    row = threadIdx.x % 32 / 8 + 4 * (step % 16);
    quad = threadIdx.x % 8 + 8 * (step / 16);
}

// rows [r0, r0 + 64) x columns [k0, k0 + 64) into tile[column][row]; all four loads issued before any is stored
__device__ __forceinline__ void fill_tile4(float (&tile)[64][64 + 1], const float* __restrict__ src, int64_t rows,
                                           int64_t cols, int64_t r0, int64_t k0) {
    float4 v[4];
    #pragma unroll
    for (int j = 0; j < 4; ++j) {
        int row, quad;
        tile4_slot(j, row, quad);
        const int64_t r = r0 + row, k = k0 + 4 * quad;
        v[j] = r < rows && k < cols ? *reinterpret_cast<const float4*>(src + r * cols + k) : make_float4(0, 0, 0, 0);
    }
    #pragma unroll
    for (int j = 0; j < 4; ++j) {
        int row, quad;
        tile4_slot(j, row, quad);
        float* t = &tile[4 * quad][row];
        t[0] = v[j].x; t[64 + 1] = v[j].y; t[2 * (64 + 1)] = v[j].z; t[3 * (64 + 1)] = v[j].w;
    }
}
}  // namespace kf
"""

# Host helpers (ATen side): broadcasting operands to the output's shape.
HOST_RUNTIME = r"""
namespace kf {
// Broadcasts the operands to one shape, fills their descriptors and returns the output: `into` when it already
// has that shape and layout (an anchor's fresh buffer, overwritten in place), else a new contiguous tensor.
// Strides are computed here rather than through expand(): no tensor is created on the way (host latency).
inline at::Tensor prepare(const at::Tensor* const* inputs, int count, const at::Tensor* into, Operand* operands,
                          Shape& shape) {
    int ndim = 0;
    for (int k = 0; k < count; ++k) ndim = std::max(ndim, static_cast<int>(inputs[k]->dim()));
    TORCH_CHECK(ndim <= KF_MAX_DIMS, "kfuse kernels support up to ", KF_MAX_DIMS, " dimensions");
    shape.ndim = ndim;
    shape.numel = 1;
    for (int d = 0; d < ndim; ++d) {
        int64_t size = 1;
        for (int k = 0; k < count; ++k) {
            const int64_t at_d = d - (ndim - inputs[k]->dim());
            const int64_t own = at_d < 0 ? 1 : inputs[k]->size(at_d);
            TORCH_CHECK(own == size || own == 1 || size == 1, "kfuse kernel: operand shapes do not broadcast");
            if (own != 1) size = own;
        }
        shape.sizes[d] = size;
        shape.numel *= size;
        set_divisor(size, shape.magic[d], shape.shift[d]);
    }
    const at::Tensor& first = *inputs[0];
    for (int k = 0; k < count; ++k) {
        const at::Tensor& t = *inputs[k];
        TORCH_CHECK(t.scalar_type() == at::kFloat, "kfuse kernel expects float32 operands");
        TORCH_CHECK(t.device() == first.device(), "kfuse kernel: operands on different devices");
        operands[k].data = t.data_ptr<float>();
        for (int d = 0; d < ndim; ++d) {
            const int64_t at_d = d - (ndim - t.dim());
            operands[k].strides[d] = (at_d < 0 || t.size(at_d) == 1) ? 0 : t.stride(at_d);
        }
        const bool single = t.numel() == 1;
        const bool dense = t.numel() == shape.numel && t.is_contiguous();
        operands[k].step = single ? 0 : (dense ? 1 : -1);
        // The dims along which this operand changes: one, or a run of neighbours it holds contiguously (a
        // (1, 1, T, T) mask over (B, H, T, T) scores), make element i one of `count` values, `inner` elements each.
        int first = -1, last = -1, count = 0;
        for (int d = 0; d < ndim; ++d)
            if (operands[k].strides[d] != 0 && shape.sizes[d] > 1) { first = first < 0 ? d : first; last = d; ++count; }
        bool run = count >= 1 && count == last - first + 1;
        for (int d = first; run && d < last; ++d)
            run = operands[k].strides[d] == operands[k].strides[d + 1] * shape.sizes[d + 1];
        if (operands[k].step == -1 && run) {
            operands[k].step = 2;
            operands[k].inner = 1;
            for (int d = last + 1; d < ndim; ++d) operands[k].inner *= shape.sizes[d];
            operands[k].count = 1;
            for (int d = first; d <= last; ++d) operands[k].count *= shape.sizes[d];
            operands[k].stride = operands[k].strides[last];
            set_divisor(operands[k].inner, operands[k].inner_magic, operands[k].inner_shift);
            set_divisor(operands[k].count, operands[k].count_magic, operands[k].count_shift);
        }
    }
    const c10::IntArrayRef sizes(shape.sizes, ndim);
    const bool reuse = into != nullptr && into->sizes() == sizes && into->is_contiguous()
                       && into->scalar_type() == at::kFloat;
    return reuse ? *into : kf::empty(sizes, first.options().memory_format(at::MemoryFormat::Contiguous));
}
}  // namespace kf
"""

# Calling any ATen op by name: only in files that keep ATen ops (its headers cost seconds of build).
DISPATCH_RUNTIME = r"""
namespace kf {
// An ATen op through the dispatcher: any op the graph holds that kfuse does not fuse.
inline std::vector<c10::IValue> call(const c10::OperatorHandle& op, std::vector<c10::IValue> args) {
    op.callBoxed(args);
    return args;
}
// A Python number passed where an op takes a Tensor: a 0-dim CPU tensor marked as a wrapped number, so type
// promotion treats it as a scalar (as eager PyTorch does).
inline c10::IValue wrapped_number(const at::Scalar& value) {
    at::Tensor t = c10::scalar_to_tensor(value);
    t.unsafeGetTensorImpl()->set_wrapped_number(true);
    return t;
}
inline c10::OperatorHandle aten(const char* name, const char* overload) {
    return c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
}
}  // namespace kf
"""

# The host side includes only the headers it uses (not torch/extension.h, which pulls in all of ATen's ops): the
# extension builds in a third of the time. pybind11 with torch's tensor casters binds `forward`: the shortest call
# path from Python (a torch.ops op boxes its arguments through the dispatcher: on the CPU target's judge a + b ran at
# 0.63-0.67x eager through torch.ops and 1.09-1.13x bound with pybind11; results/host-binding-cpu-2026-11-23.md).
HOST_HEADERS = """#include <algorithm>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty_ops.h>
#include <torch/csrc/utils/pybind.h>
"""
# at::empty(sizes, options) as ATen/ops/empty.h defines it, without that header: it brings in ATen/Context.h and
# the rest, a third of a host build's parsing (g++ -fsyntax-only of the host headers: 7.8 s of CPU against 11.5).
HOST_EMPTY = r"""
namespace kf {
inline at::Tensor empty(c10::IntArrayRef sizes, const c10::TensorOptions& options) {
    return at::_ops::empty_memory_format::call(
        c10::fromIntArrayRefSlow(sizes), c10::optTypeMetaToScalarType(options.dtype_opt()), options.layout_opt(),
        options.device_opt(), options.pinned_memory_opt(),
        c10::impl::check_tensor_options_and_extract_memory_format(options, std::nullopt));
}
}  // namespace kf
"""
# Headers only some files need, by what their host code calls (each costs ~1-3 s of a host build that a launch-bound
# file, with a one-kernel .cu, waits for).
CALLS_ATEN = "kf::call("  # host code that keeps an ATen op: DISPATCH_RUNTIME and its headers
USE_HEADERS = {
    CALLS_ATEN: ("ATen/core/dispatch/Dispatcher.h", "ATen/ScalarOps.h"),
    "at::infer_size(": ("ATen/ExpandUtils.h",),
    "at::empty_strided(": ("ATen/ops/empty_strided.h",),
    "at::addmm(": ("ATen/ops/addmm.h",),
    "at::mm(": ("ATen/ops/mm.h",),
    "at::cat(": ("ATen/ops/cat.h",),
    "at::empty_like(": ("ATen/ops/empty_like.h",),
}


def host_headers(host_code: str) -> str:
    extra = dict.fromkeys(h for use, headers in USE_HEADERS.items() if use in host_code for h in headers)
    return HOST_HEADERS + "".join(f"#include <{h}>\n" for h in extra) + HOST_EMPTY


def _host_runtime(host: str) -> str:
    """HOST_RUNTIME where the host code broadcasts operands (kf::prepare): a bare product's file does not."""
    return HOST_RUNTIME if "kf::prepare(" in host else ""


CUDA_HOST_HEADERS = """#include <cuda_runtime_api.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
"""

# The SM count sizes every grid; asked once per device (the properties call costs microseconds).
CUDA_HOST_RUNTIME = r"""
namespace kf {
inline int sm_count(int device) {
    static int counts[256] = {0};
    if (counts[device] == 0) C10_CUDA_CHECK(cudaDeviceGetAttribute(&counts[device], cudaDevAttrMultiProcessorCount, device));
    return counts[device];
}
}  // namespace kf
"""

# The copy into channels-last that a channels-last convolution's input and weight take (emitted only in such
# files). ATen's own copy ran at ~1.1 TB/s on an H100 (a 1.07 GB input: 1.91 ms; results/conv-layout-survey-*.json);
# a tile through shared memory makes the read (along the positions) and the write (along the channels) coalesce
# both. With 16-byte accesses on both sides (channels and positions multiples of 4) it ran at the copy roofline
# (0.181 ms for 0.54 GB, a clone 0.181) where 32x32 tiles of 4-byte accesses took 0.240
# (scripts/bench/transpose_vec4.py, results/transpose-vec4-NVIDIA-H100-80GB-HBM3-2026-11-23/).
CHANNELS_LAST_COPY_DEVICE = r"""
__global__ void kf_to_channels_last(const float* __restrict__ in, float* __restrict__ out, int64_t batch,
                                    int64_t channels, int64_t spatial) {
    __shared__ float tile[32][33];  // one padding column: the transposed reads hit 32 different banks
    const int64_t s0 = (int64_t)blockIdx.x * 32, c0 = (int64_t)blockIdx.y * 32;
    for (int64_t n = blockIdx.z; n < batch; n += gridDim.z) {
        const float* src = in + n * channels * spatial;
        float* dst = out + n * channels * spatial;
        float v[4];  // (blocks of 32 x 8: four rows a thread, read before any is stored: four loads in flight)
        #pragma unroll
        for (int k = 0; k < 4; ++k) {
            const int64_t c = c0 + threadIdx.y + 8 * k, s = s0 + threadIdx.x;
            v[k] = c < channels && s < spatial ? src[c * spatial + s] : 0.0f;
        }
        #pragma unroll
        for (int k = 0; k < 4; ++k) tile[threadIdx.y + 8 * k][threadIdx.x] = v[k];
        __syncthreads();
        #pragma unroll
        for (int i = threadIdx.y; i < 32; i += 8) {
            const int64_t s = s0 + i, c = c0 + threadIdx.x;
            if (c < channels && s < spatial) dst[s * channels + c] = tile[threadIdx.x][i];
        }
        __syncthreads();
    }
}

// 64 x 64 tiles (channels x positions), float4 accesses on both sides, one tile a block (a grid walking tiles
// was slower); the stores streaming (st.global.cs): the written lines are not read again by this kernel, and
// evicting them first took the copy from 3.4 to 4.0 TB/s (H200, scripts/bench/transpose_tiles.py)
// (no __launch_bounds__(256): with it CUDA 13's ptxas capped the kernels at 48 registers and spilled)
__global__ void kf_to_channels_last4(const float* __restrict__ in, float* __restrict__ out, int64_t batch,
                                     int64_t channels, int64_t spatial) {
    __shared__ float tile[64][64 + 1];  // [position][channel]
    const int64_t ctiles = (channels + 63) / 64, per_image = ctiles * ((spatial + 63) / 64);
    for (int64_t u = blockIdx.x; u < batch * per_image; u += gridDim.x) {  // (u: a tile)
        const int64_t n = u / per_image, c0 = u % per_image % ctiles * 64, s0 = u % per_image / ctiles * 64;
        kf::fill_tile4(tile, in + n * channels * spatial, channels, spatial, c0, s0);
        __syncthreads();
        float* dst = out + n * channels * spatial;
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            int row, quad;
            kf::tile4_slot(j, row, quad);
            const int64_t s = s0 + row, c = c0 + 4 * quad;
            if (s < spatial && c < channels) {
                const float* v = &tile[row][4 * quad];
                __stcs(reinterpret_cast<float4*>(dst + s * channels + c), make_float4(v[0], v[1], v[2], v[3]));
            }
        }
        __syncthreads();
    }
}

void kf_to_channels_last_launch(const float* in, float* out, int64_t batch, int64_t channels, int64_t spatial,
                                cudaStream_t stream) {
    const bool aligned = reinterpret_cast<uintptr_t>(in) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0;
    if (aligned && channels % 4 == 0 && spatial % 4 == 0) {
        const int64_t tiles = batch * ((channels + 63) / 64) * ((spatial + 63) / 64);
        kf_to_channels_last4<<<(unsigned)std::min<int64_t>(tiles, INT32_MAX), 256, 0, stream>>>(in, out, batch,
                                                                                               channels, spatial);
        return;
    }
    const dim3 threads(32, 8);
    const dim3 blocks((unsigned)((spatial + 31) / 32), (unsigned)((channels + 31) / 32),
                      (unsigned)std::min<int64_t>(batch, 65535));
    kf_to_channels_last<<<blocks, threads, 0, stream>>>(in, out, batch, channels, spatial);
}
"""

CHANNELS_LAST_COPY_HOST = r"""
void kf_to_channels_last_launch(const float* in, float* out, int64_t batch, int64_t channels, int64_t spatial,
                                cudaStream_t stream);
namespace kf {
// x in channels-last memory: kfuse's transposing copy for a contiguous fp32 batch, ATen's copy for anything else.
inline at::Tensor channels_last(const at::Tensor& x) {
    const auto layout = x.dim() == 5 ? at::MemoryFormat::ChannelsLast3d : at::MemoryFormat::ChannelsLast;
    if (x.scalar_type() != at::kFloat || x.numel() == 0 || !x.is_contiguous() || x.is_contiguous(layout)
        || x.size(1) > 65535 * 32 || x.stride(1) > (int64_t)INT32_MAX * 32)
        return x.contiguous(layout);  // (the grid's limits: 65535 blocks of channels, 2^31 - 1 of positions)
    at::Tensor out = kf::empty(x.sizes(), x.options().memory_format(layout));
    kf_to_channels_last_launch(x.data_ptr<float>(), out.data_ptr<float>(), x.size(0), x.size(1), x.stride(1),
                               c10::cuda::getCurrentCUDAStream());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
}  // namespace kf
"""


# `forward` as the extension module's one function (load_inline defines TORCH_EXTENSION_NAME as the module's name).
REGISTRATION = '\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n    m.def("forward", &forward);\n}\n'


def _prelude_units(body: str) -> list[str]:
    """ops.PRELUDE's helpers one by one: a definition with the comment above it, or a whole #if ... #endif."""
    units, current, depth, open_ifs = [], [], 0, 0
    for line in body.splitlines():
        text = line.strip()
        at_top = depth == 0 and open_ifs == 0
        only_comments = all(x.strip().startswith(("/*", "*", "//")) for x in current)
        if at_top and (not text or (text.startswith(("KF_INLINE", "/*", "#if")) and not only_comments)):
            if current:
                units.append("\n".join(current))
            current = []
        if text:
            current.append(line)
        if depth == 0 and text.startswith("#if"):
            open_ifs += 1
        elif depth == 0 and text.startswith("#endif"):
            open_ifs -= 1
        depth += line.count("{") - line.count("}")
    if current:
        units.append("\n".join(current))
    return units


def prelude_for(code: str) -> str:
    """The helpers of ops.PRELUDE that `code` uses, directly or through other helpers: short generated files."""
    header, _, body = ops.PRELUDE.strip("\n").partition("\n\n")
    units = _prelude_units(body)
    defines = [set(re.findall(r"KF_INLINE\s+\w+\s+(kf_\w+)\s*\(", unit)) for unit in units]
    wanted = set(re.findall(r"\bkf_\w+", code))
    keep: set[int] = set()
    while True:
        more = {i for i, names in enumerate(defines) if names & wanted} - keep
        if not more:
            break
        keep |= more
        for i in more:
            wanted |= set(re.findall(r"\bkf_\w+", units[i]))
    return "\n".join([header, ""] + [units[i] for i in sorted(keep)]) + "\n"


@dataclass
class Sources:
    cpp: str
    cuda: str | None
    kernels: list[dict]          # what each generated kernel fuses
    library_calls: list[str]     # ATen ops kept as library calls (anchors and the rest)
    unfused: list[dict]          # ops left unfused, with the reason
    sm90a: bool = False          # the CUDA source has a kernel for sm_90a (kfuse's wgmma GEMM)
    packed: bool = False         # forward takes its tensors as one list (PACKED_ARGUMENTS)


def _offsets(operands: list[str], index: str, index_t: str = "index_t", indent: int = 8, cuda: bool = True) -> str:
    """C++ that computes each operand's element offset for output element `index` (general indexing).

    The loop runs over every possible dim, unrolled, skipping those past the shape's: each stride and size is then
    read at a constant index. Indexed by a loop variable, the operand and shape structs (kernel parameters) were
    copied to local memory per thread, 184-392 bytes of stack per general kernel (the channels-last kernel's
    GENERAL path was 6x slower than its bytes so: _channels_last_kernel)."""
    pad = " " * indent
    decl = "".join(f"{pad}{index_t} off{k} = 0;\n" for k in range(len(operands)))
    acc = "".join(f" off{k} += c * {o}.strides[d];" for k, o in enumerate(operands))
    unroll = f"{pad}#pragma unroll  // constant indices: no local-memory copy of the structs\n" if cuda else ""
    # 32-bit indices (CUDA, index_t int32_t: every size and offset below 2^31) divide by multiplication (kf::div32)
    divide = (f"{pad}    {index_t} c;\n"
              f"{pad}    if constexpr (sizeof({index_t}) == 4) {{\n"
              f"{pad}        const {index_t} q = ({index_t})kf::div32((uint32_t)rest, shape.magic[d], shape.shift[d]);\n"
              f"{pad}        c = rest - q * ({index_t})shape.sizes[d];\n"
              f"{pad}        rest = q;\n"
              f"{pad}    }} else {{\n"
              f"{pad}        c = rest % ({index_t})shape.sizes[d];\n"
              f"{pad}        rest /= ({index_t})shape.sizes[d];\n"
              f"{pad}    }}\n") if cuda else (
              f"{pad}    const {index_t} c = rest % ({index_t})shape.sizes[d];\n"
              f"{pad}    rest /= ({index_t})shape.sizes[d];\n")
    return (f"{decl}{pad}{index_t} rest = {index};\n"
            f"{unroll}{pad}for (int d = KF_MAX_DIMS - 1; d >= 0; --d) {{\n"
            f"{pad}    if (d >= shape.ndim) continue;\n"
            f"{divide}{pad}   {acc}\n"
            f"{pad}}}\n")


def _cuda_kernels(kernel: FusedKernel) -> str:
    n = len(kernel.inputs)
    operands = ", ".join(f"kf::Operand o{k}" for k in range(n))
    dense_loads = ", ".join(f"kf::load(o{k}, i)" for k in range(n))
    general_loads = ", ".join(f"o{k}.data[off{k}]" for k in range(n))
    vec_loads = "".join(f"        const float4 v{k} = kf::load4(o{k}, q);\n" for k in range(n))
    lanes = "".join(
        f"        r.{c} = {kernel.name}_op({', '.join(f'v{k}.{c}' for k in range(n))});\n" for c in "xyzw")
    args = ", ".join(f"o[{k}]" for k in range(n))
    return f"""
// Operands laid out like the output, single values or per-channel values: element i of each, 4 at a time.
// One float4 per thread over a grid that covers everything: on an H100 this streams at 3.03 TB/s where a
// grid-stride loop of any grid size stayed at 2.83 (scripts/bench/vec4_variants.cu).
template <typename index_t>
__global__ void {kernel.name}_vec4({operands}, index_t groups, float* __restrict__ out) {{
    const index_t q = (index_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (q < groups) {{
{vec_loads}        float4 r;
{lanes}        reinterpret_cast<float4*>(out)[q] = r;
    }}
}}

template <typename index_t>
__global__ void {kernel.name}_dense({operands}, index_t begin, index_t end, float* __restrict__ out) {{
    const index_t stride = (index_t)blockDim.x * gridDim.x;
    for (index_t i = begin + (index_t)blockIdx.x * blockDim.x + threadIdx.x; i < end; i += stride) {{
        out[i] = {kernel.name}_op({dense_loads});
    }}
}}

// Strided operands: each operand's offset from the output element's coordinates.
template <typename index_t>
__global__ void {kernel.name}_general({operands}, kf::Shape shape, float* __restrict__ out) {{
    const index_t stride = (index_t)blockDim.x * gridDim.x;
    for (index_t i = (index_t)blockIdx.x * blockDim.x + threadIdx.x; i < (index_t)shape.numel; i += stride) {{
{_offsets([f"o{k}" for k in range(n)], "i")}        out[i] = {kernel.name}_op({general_loads});
    }}
}}

void {kernel.name}_launch(const kf::Operand* o, const kf::Shape& shape, float* out, bool small_index,
                          int sms, cudaStream_t stream) {{
    const int threads = 256;
    auto blocks_for = [&](int64_t work) {{
        return (unsigned)std::max<int64_t>(1, std::min<int64_t>((work + threads - 1) / threads, (int64_t)sms * 8));
    }};
    bool dense = true, aligned = (reinterpret_cast<uintptr_t>(out) % 16) == 0;
    for (int k = 0; k < {n}; ++k) {{
        dense = dense && o[k].step >= 0;
        aligned = aligned && (o[k].step != 1 || reinterpret_cast<uintptr_t>(o[k].data) % 16 == 0);
    }}
    if (!dense) {{
        if (small_index) {kernel.name}_general<int32_t><<<blocks_for(shape.numel), threads, 0, stream>>>({args}, shape, out);
        else {kernel.name}_general<int64_t><<<blocks_for(shape.numel), threads, 0, stream>>>({args}, shape, out);
        return;
    }}
    int64_t done = 0;
    if (aligned && shape.numel >= 4) {{
        const int64_t groups = shape.numel / 4;
        const unsigned blocks = (unsigned)((groups + threads - 1) / threads);
        if (small_index) {kernel.name}_vec4<int32_t><<<blocks, threads, 0, stream>>>({args}, (int32_t)groups, out);
        else {kernel.name}_vec4<int64_t><<<blocks, threads, 0, stream>>>({args}, groups, out);
        done = groups * 4;
    }}
    if (done < shape.numel) {{  // the tail the vector loop left, or everything when unaligned
        const int64_t rest = shape.numel - done;
        if (small_index) {kernel.name}_dense<int32_t><<<blocks_for(rest), threads, 0, stream>>>({args}, (int32_t)done, (int32_t)shape.numel, out);
        else {kernel.name}_dense<int64_t><<<blocks_for(rest), threads, 0, stream>>>({args}, done, shape.numel, out);
    }}
}}
"""


def _per_channel_lambda(o: str) -> str:
    """C++ `per_channel(operand)`: a channels-last epilogue's operand holds one value per channel (a bias). In the
    kernels, and in their launch, which picks the instantiation that reads every other operand at c."""
    return (f"auto per_channel = [&](const kf::Operand& {o}) "
            f"{{ return {o}.step == 2 && {o}.inner == spatial && {o}.count == channels; }};\n")


def _channels_last_kernel(kernel: FusedKernel) -> str:
    """The kernel for a channels-last input ([N][S][C] in memory, S the spatial positions) and a contiguous
    result ([N][C][S]): a tile passes through shared memory, so reads and writes both coalesce; 64x64 with 16-byte
    accesses on both sides and streaming stores where the sizes and operands allow (level2/54's epilogue at 3.4
    TB/s, torch.compile's Triton kernel 3.1, the 64x32 tile this replaced 2.6: H200,
    results/transpose-tiles-H200-2026-11-28/), else 32x32 with 4-byte accesses. Other
    operands are read at the result's element index like the NCHW kernel reads them (kf::load: one value, laid
    out like the result, or one per channel); strided ones, through their strides, in the GENERAL instantiation
    only. Why two: indexing an operand's stride array with a loop variable put the operand structs in local
    memory (per thread), and that traffic made the kernel 6x slower than its bytes (4.19 ms against a replica's
    0.67 ms on suite/level2/1_Conv2d_ReLU_BiasAdd, H100: results/probes-NVIDIA-H100-80GB-HBM3-2026-11-22-s3.md).
    Positions not in fours, channels in fours: 32 channels x 128 positions, 16-byte reads and 4-byte writes (an
    earlier 64 x 32 tile of that kind made a 513 x 513 epilogue's file 4.29 -> 5.97 ms, the 32 x 128 one runs that
    epilogue at 3.5 TB/s: H200, results/transpose-odd-H200-2026-11-28/); anything else, the scalar 32 x 32 tile."""
    n = len(kernel.inputs)
    source = kernel.inputs.index(kernel.channels_last_input)
    operands = ", ".join(f"kf::Operand o{k}" for k in range(n))
    others = [k for k in range(n) if k != source]
    offsets = ""
    if others:
        decl = "".join(f"                    index_t off{k} = (index_t)n * o{k}.strides[0] + (index_t)c * o{k}.strides[1];\n"
                       for k in others)
        acc = "".join(f" off{k} += x * o{k}.strides[d];" for k in others)
        offsets = (f"                if constexpr (GENERAL) {{\n"
                   f"{decl}                    index_t rest = (index_t)s;\n"
                   f"                    #pragma unroll  // constant indices: no local-memory copy of the structs\n"
                   f"                    for (int d = KF_MAX_DIMS - 1; d >= 2; --d) {{\n"
                   f"                        if (d >= shape.ndim) continue;\n"
                   f"                        const index_t x = rest % (index_t)shape.sizes[d];\n"
                   f"                        rest /= (index_t)shape.sizes[d];{acc}\n"
                   f"                    }}\n"
                   + "".join(f"                    v{k} = o{k}.data[o{k}.step ? off{k} : 0];\n" for k in others)
                   + "                } else {\n"
                   + "".join(f"                    v{k} = per_channel(o{k}) ? o{k}.data[c * o{k}.stride] : kf::load(o{k}, at);\n"
                             for k in others)
                   + "                }\n")
    values = "".join(f"                float v{k};\n" for k in others)
    loads = ", ".join("tile[threadIdx.x][i]" if k == source else f"v{k}" for k in range(n))
    args = ", ".join(f"o[{k}]" for k in range(n))
    general = " || ".join(f"o[{k}].step < 0" for k in others) or "false"
    values4 = "".join(f"                const float* p{k} = per_channel(o{k}) ? o{k}.data + c * o{k}.stride : nullptr;\n"
                      for k in others)

    def lane(j: int) -> str:
        loads = ", ".join(f"t[{j}]" if k == source else f"(p{k} ? *p{k} : kf::load(o{k}, at + {j}))"
                          for k in range(n))
        return f"{kernel.name}_op({loads})"
    results4 = ",\n".join(f"                    {lane(j)}" for j in range(4))
    # (the per-channel test once a thread, not once an element: its operands' fields are the same for all)
    channel_rows = "".join(f"    const float* const r{k} = per_channel(o{k}) ? o{k}.data : nullptr;\n" for k in others)
    values_scalar = "".join(f"                const float v{k} = CHANNELS ? o{k}.data[c * o{k}.stride]\n"
                            f"                                   : r{k} ? r{k}[c * o{k}.stride] : kf::load(o{k}, at);\n"
                            for k in others)
    # every other operand one value per channel (biases, the common case), asked on the host: the instantiation
    # without kf::load's general path per operand per element (a third of the SASS of level2/5's epilogue)
    all_channels = " && ".join(f"per_channel(o[{k}])" for k in others) or "true"
    loads_scalar = ", ".join(f"tile[i * P + p]" if k == source else f"v{k}" for k in range(n))
    per_channel = ("    // one value per channel (a bias): read at c, without kf::load's two divisions per element\n"
                   f"    {_per_channel_lambda('o')}") if others else ""
    host_per_channel = f"        {_per_channel_lambda('q')}" if others else ""  # (o: the launch's operand array)
    return f"""
template <typename index_t, bool GENERAL>
__global__ void {kernel.name}_from_channels_last({operands}, kf::Shape shape, float* __restrict__ out) {{
    __shared__ float tile[32][33];  // one padding column: the transposed reads hit 32 different banks
    const int64_t channels = shape.sizes[1], spatial = shape.numel / (shape.sizes[0] * channels);
    const int64_t s0 = (int64_t)blockIdx.x * 32, c0 = (int64_t)blockIdx.y * 32;
{per_channel}    for (int64_t n = blockIdx.z; n < shape.sizes[0]; n += gridDim.z) {{
        const float* src = o{source}.data + n * spatial * channels;
        // blocks of 32 x 8: four rows a thread, all four read before any is stored, so that their loads are in
        // flight together (a loop of load-then-store kept them one at a time)
        float v[4];
        #pragma unroll
        for (int k = 0; k < 4; ++k) {{
            const int64_t s = s0 + threadIdx.y + 8 * k, c = c0 + threadIdx.x;
            v[k] = s < spatial && c < channels ? src[s * channels + c] : 0.0f;
        }}
        #pragma unroll
        for (int k = 0; k < 4; ++k) tile[threadIdx.y + 8 * k][threadIdx.x] = v[k];
        __syncthreads();
        #pragma unroll
        for (int i = threadIdx.y; i < 32; i += 8) {{
            const int64_t c = c0 + i, s = s0 + threadIdx.x;
            if (s < spatial && c < channels) {{
                const index_t at = ((index_t)n * (index_t)channels + (index_t)c) * (index_t)spatial + (index_t)s;
{values}{offsets}                out[at] = {kernel.name}_op({loads});
            }}
        }}
        __syncthreads();
    }}
}}

// The same with 16-byte accesses on both sides (channels and positions multiples of 4, operands laid out like the
// result or per channel): 64 x 64 tiles (kf::fill_tile4), one a block, the results stored streaming.
template <typename index_t>
__global__ void {kernel.name}_from_channels_last4({operands}, kf::Shape shape, float* __restrict__ out) {{
    __shared__ float tile[64][64 + 1];  // [channel][position]
    const int64_t channels = shape.sizes[1], spatial = shape.numel / (shape.sizes[0] * channels);
    const int64_t stiles = (spatial + 63) / 64, per_image = stiles * ((channels + 63) / 64);
{per_channel}    for (int64_t u = blockIdx.x; u < shape.sizes[0] * per_image; u += gridDim.x) {{  // (u: a tile)
        const int64_t n = u / per_image, s0 = u % per_image % stiles * 64, c0 = u % per_image / stiles * 64;
        kf::fill_tile4(tile, o{source}.data + n * spatial * channels, spatial, channels, s0, c0);
        __syncthreads();
        #pragma unroll
        for (int j = 0; j < 4; ++j) {{
            int row, quad;
            kf::tile4_slot(j, row, quad);
            const int64_t c = c0 + row, s = s0 + 4 * quad;
            if (c < channels && s < spatial) {{
                const index_t at = ((index_t)n * (index_t)channels + (index_t)c) * (index_t)spatial + (index_t)s;
                const float* t = &tile[row][4 * quad];
{values4}                __stcs(reinterpret_cast<float4*>(out + at), make_float4(
{results4}));
            }}
        }}
        __syncthreads();
    }}
}}

// Positions not in fours (a 513 x 513 transposed convolution's result), channels in fours: 32 channels x 128
// positions a block, read 16 bytes at a time (four float4 a thread in flight), written back 4 bytes at a time, a
// warp's store 32 neighbouring positions of one channel and the block's 128 of a channel row back to back (fewer
// tile edges inside a row: the 32-byte sectors two blocks share). The tile's pitch keeps both passes free of bank
// conflicts. (H200, level2/5's epilogue alone: 1.22 ms where the 64 x 64 tile took 1.47 and torch.compile 1.12;
// scripts/bench/transpose_odd.py, results/transpose-odd-H200-2026-11-28/.) Six blocks an SM with 32-bit indexing:
// 38 registers, no spill, where the compiler's own choice took 64 and four blocks; 64-bit indexing keeps 64.
// CHANNELS: every other operand holds one value per channel (the launch asks), read at c alone.
template <typename index_t, bool CHANNELS>
__global__ void __launch_bounds__(256, sizeof(index_t) == 4 ? 6 : 3) {kernel.name}_from_channels_last4r({operands}, kf::Shape shape, float* __restrict__ out) {{
    constexpr int TC = 32, TS = 128, P = TS + 1;  // (a warp's loads: 4 positions x 8 quads, banks 4q + p apart)
    __shared__ float tile[TC * P];  // [channel][position]
    const int64_t channels = shape.sizes[1], spatial = shape.numel / (shape.sizes[0] * channels);
    const int64_t stiles = (spatial + TS - 1) / TS, per_image = stiles * ((channels + TC - 1) / TC);
{per_channel}{channel_rows}    const int p = threadIdx.x % TS;
    for (int64_t u = blockIdx.x; u < shape.sizes[0] * per_image; u += gridDim.x) {{  // (u: a tile)
        const int64_t n = u / per_image, s0 = u % per_image % stiles * TS, c0 = u % per_image / stiles * TC;
        const float* src = o{source}.data + n * spatial * channels;
        float4 v[4];
        #pragma unroll
        for (int j = 0; j < 4; ++j) {{  // quad q (four channels) of position t
            const int idx = threadIdx.x + 256 * j, t = idx / 8, q = idx % 8;
            const int64_t s = s0 + t, c = c0 + 4 * q;
            v[j] = s < spatial && c < channels ? *reinterpret_cast<const float4*>(src + s * channels + c)
                                               : make_float4(0, 0, 0, 0);
        }}
        #pragma unroll
        for (int j = 0; j < 4; ++j) {{
            const int idx = threadIdx.x + 256 * j, t = idx / 8, q = idx % 8;
            float* to = tile + 4 * q * P + t;
            to[0] = v[j].x; to[P] = v[j].y; to[2 * P] = v[j].z; to[3 * P] = v[j].w;
        }}
        __syncthreads();
        const int64_t s = s0 + p;
        #pragma unroll 4
        for (int i = threadIdx.x / TS; i < TC; i += 256 / TS) {{
            const int64_t c = c0 + i;
            if (c < channels && s < spatial) {{
                const index_t at = ((index_t)n * (index_t)channels + (index_t)c) * (index_t)spatial + (index_t)s;
{values_scalar}                out[at] = {kernel.name}_op({loads_scalar});
            }}
        }}
        __syncthreads();
    }}
}}

void {kernel.name}_launch_from_channels_last(const kf::Operand* o, const kf::Shape& shape, float* out,
                                             bool small_index, cudaStream_t stream) {{
    const int64_t channels = shape.sizes[1], spatial = shape.numel / (shape.sizes[0] * channels);
    const bool general = {general};
    const bool aligned = reinterpret_cast<uintptr_t>(o[{source}].data) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0;
    if (!general && aligned && channels % 4 == 0 && spatial % 4 == 0) {{
        const int64_t tiles = shape.sizes[0] * ((spatial + 63) / 64) * ((channels + 63) / 64);
        const unsigned blocks = (unsigned)std::min<int64_t>(tiles, INT32_MAX);
        if (small_index) {kernel.name}_from_channels_last4<int32_t><<<blocks, 256, 0, stream>>>({args}, shape, out);
        else {kernel.name}_from_channels_last4<int64_t><<<blocks, 256, 0, stream>>>({args}, shape, out);
        return;
    }}
    if (!general && reinterpret_cast<uintptr_t>(o[{source}].data) % 16 == 0 && channels % 4 == 0) {{
{host_per_channel}        const int64_t tiles = shape.sizes[0] * ((spatial + 127) / 128) * ((channels + 31) / 32);
        const unsigned blocks = (unsigned)std::min<int64_t>(tiles, INT32_MAX);
        if (small_index && {all_channels}) {kernel.name}_from_channels_last4r<int32_t, true><<<blocks, 256, 0, stream>>>({args}, shape, out);
        else if (small_index) {kernel.name}_from_channels_last4r<int32_t, false><<<blocks, 256, 0, stream>>>({args}, shape, out);
        else {kernel.name}_from_channels_last4r<int64_t, false><<<blocks, 256, 0, stream>>>({args}, shape, out);
        return;
    }}
    // about 16K blocks, each walking several images, where one tile a block would make millions of blocks, each
    // with its set-up for four elements a thread (a 513 x 513 transposed convolution's 32 x 64 x 263169 result)
    const dim3 threads(32, 8);
    const int64_t tiles = ((spatial + 31) / 32) * ((channels + 31) / 32);
    const dim3 blocks((unsigned)((spatial + 31) / 32), (unsigned)((channels + 31) / 32),
                      (unsigned)std::min<int64_t>(std::min<int64_t>(shape.sizes[0], 65535), (16384 + tiles - 1) / tiles));
    if (small_index && !general) {kernel.name}_from_channels_last<int32_t, false><<<blocks, threads, 0, stream>>>({args}, shape, out);
    else if (small_index) {kernel.name}_from_channels_last<int32_t, true><<<blocks, threads, 0, stream>>>({args}, shape, out);
    else if (!general) {kernel.name}_from_channels_last<int64_t, false><<<blocks, threads, 0, stream>>>({args}, shape, out);
    else {kernel.name}_from_channels_last<int64_t, true><<<blocks, threads, 0, stream>>>({args}, shape, out);
}}
"""


def _cpu_kernel(kernel: FusedKernel) -> str:
    n = len(kernel.inputs)
    dense_loads = ", ".join(f"kf::load(o[{k}], i)" for k in range(n))
    general_loads = ", ".join(f"o[{k}].data[off{k}]" for k in range(n))
    offsets = _offsets([f"o[{k}]" for k in range(n)], "i", "int64_t", indent=16, cuda=False)
    return f"""
void {kernel.name}_run(const kf::Operand* o, const kf::Shape& shape, float* out) {{
    bool dense = true;
    for (int k = 0; k < {n}; ++k) dense = dense && o[k].step >= 0;
    at::parallel_for(0, shape.numel, 1 << 14, [&](int64_t begin, int64_t end) {{
        if (dense) {{
            for (int64_t i = begin; i < end; ++i) out[i] = {kernel.name}_op({dense_loads});
        }} else {{
            for (int64_t i = begin; i < end; ++i) {{
{offsets}                out[i] = {kernel.name}_op({general_loads});
            }}
        }}
    }});
}}
"""


def _host_wrapper(kernel: FusedKernel, target: str) -> str:
    n = len(kernel.inputs)
    params = ", ".join(f"const at::Tensor& a{k}" for k in range(n))
    replaced = " -> ".join(short for short in (str(t) for t in kernel.ops))
    if target == "cuda":
        launch = (f"    {kernel.name}_launch(operands, shape, out.data_ptr<float>(), small_index, sms,\n"
                  f"                         c10::cuda::getCurrentCUDAStream());\n")
        if kernel.channels_last_input:
            source = f"a{kernel.inputs.index(kernel.channels_last_input)}"
            launch = (f"    const auto layout = {source}.dim() == 5 ? at::MemoryFormat::ChannelsLast3d"
                      f" : at::MemoryFormat::ChannelsLast;\n"
                      f"    if (({source}.dim() == 4 || {source}.dim() == 5) && {source}.is_contiguous(layout)\n"
                      f"        && {source}.sizes() == out.sizes() && shape.sizes[1] < 65535 * 32) {{\n"
                      f"        {kernel.name}_launch_from_channels_last(operands, shape, out.data_ptr<float>(), small_index,\n"
                      f"            c10::cuda::getCurrentCUDAStream());\n"
                      f"    }} else {{  // the library chose another layout: read it through its strides\n"
                      f"    " + launch.replace("\n    ", "\n        ") + "    }\n")
        run = (f"    const int sms = kf::sm_count(out.get_device());\n"
               f"    // a grid-stride index runs up to one grid (sms * 8 blocks of 256) past the end before it stops\n"
               f"    const int64_t overshoot = (int64_t)sms * 8 * 256;\n"
               f"    const bool small_index = shape.numel + overshoot < INT32_MAX && max_offset < INT32_MAX;\n"
               f"{launch}"
               f"    C10_CUDA_KERNEL_LAUNCH_CHECK();\n")
        offset_check = ("    int64_t max_offset = 0;  // 32-bit indexing only when every buffer fits\n"
                        f"    for (int k = 0; k < {n}; ++k)\n"
                        "        for (int d = 0; d < shape.ndim; ++d)\n"
                        "            max_offset += (shape.sizes[d] - 1) * operands[k].strides[d];\n")
    else:
        run = f"    {kernel.name}_run(operands, shape, out.data_ptr<float>());\n"
        offset_check = ""
    inputs = ", ".join(f"&a{k}" for k in range(n))
    return f"""
// {kernel.name}: {replaced}, reading each operand once and writing once
at::Tensor {kernel.name}({params}, const at::Tensor* into) {{
    kf::Operand operands[{n}];
    kf::Shape shape;
    const at::Tensor* inputs[{n}] = {{{inputs}}};
    at::Tensor out = kf::prepare(inputs, {n}, into, operands, shape);
    if (shape.numel == 0) return out;
{offset_check}{run}    return out;
}}
"""


def render_ivalue(a, names: dict[str, str], arg_type=None) -> str:
    """A C++ expression for one argument of a boxed ATen call; `arg_type` is the schema's type of the argument
    (a torch JIT type), which a list needs: its IValue must carry the element type the op unboxes."""
    if isinstance(a, (list, tuple)) and arg_type is not None:
        typed = _render_typed_list(a, names, arg_type)
        if typed is not None:
            return typed
    if isinstance(a, torch.fx.Node):
        return names[a.name]
    if a is None:
        return "c10::IValue()"
    if isinstance(a, bool):
        return "c10::IValue(true)" if a else "c10::IValue(false)"
    if isinstance(a, int):
        return f"c10::IValue(int64_t({a}))"
    if isinstance(a, float):
        return f"c10::IValue({float.__repr__(a) if a == a and abs(a) != float('inf') else _special(a)})"
    if isinstance(a, str):
        return f'c10::IValue(std::string("{a}"))'
    if isinstance(a, torch.dtype):
        return f"c10::IValue(int64_t(c10::ScalarType::{_scalar_type(a)}))"
    if isinstance(a, torch.device):  # captured on the meta device: the run's device is the inputs' device
        return f"c10::IValue({names['__device__']})"
    if isinstance(a, torch.layout):
        return "c10::IValue(int64_t(c10::Layout::Strided))" if a == torch.strided else _unsupported(a)
    if isinstance(a, torch.memory_format):
        fmt = {torch.contiguous_format: "Contiguous", torch.channels_last: "ChannelsLast",
               torch.preserve_format: "Preserve", torch.channels_last_3d: "ChannelsLast3d"}[a]
        return f"c10::IValue(int64_t(c10::MemoryFormat::{fmt}))"
    if isinstance(a, (list, tuple)):
        if all(isinstance(x, torch.fx.Node) for x in a) and a:
            return "c10::IValue(c10::List<at::Tensor>({" + ", ".join(names[x.name] for x in a) + "}))"
        if all(isinstance(x, bool) for x in a) and a:
            return "c10::IValue(std::vector<bool>{" + ", ".join("true" if x else "false" for x in a) + "})"
        if all(isinstance(x, int) and not isinstance(x, bool) for x in a):
            return "c10::IValue(std::vector<int64_t>{" + ", ".join(str(x) for x in a) + "})"
        if all(isinstance(x, (int, float)) for x in a):
            return "c10::IValue(std::vector<double>{" + ", ".join(repr(float(x)) for x in a) + "})"
    return _unsupported(a)


def _list_element_type(arg_type):
    """The element type of a schema list type (`Tensor?[]`, `int[]?`, ...), or None where it is not a list."""
    if isinstance(arg_type, torch.OptionalType):
        arg_type = arg_type.getElementType()
    return arg_type.getElementType() if isinstance(arg_type, torch.ListType) else None


def _render_typed_list(a, names: dict[str, str], arg_type) -> str | None:
    """A list argument made as the schema types it, or None to leave it to the untyped rules.

    A boxed call unboxes a list as exactly the element type its schema names: `Tensor?[]` (aten::index.Tensor's
    and index_put's indices, made by `t[idx]`, `t[:, idx]`, `t[idx] = v`) must be a List<optional<Tensor>>; a
    List<Tensor> passed there fails with "Tried to cast a List<Tensor> to a List<Tensor?>" (c10 retypes a list
    only when nothing else holds it, and kf::call's argument vector is a copy of the braced one: SwinTransformerV2's
    relative position bias, table[index.view(-1)], crashed so on an H200). `t[:, idx]`'s None entries are
    std::nullopt. An empty `Tensor[]` is a tensor list, not an empty int list; `float[]` is doubles even where the
    values were written as ints."""
    element = _list_element_type(arg_type)
    if element is None:
        return None
    items = list(a)
    if isinstance(element, torch.OptionalType) and isinstance(element.getElementType(), torch.TensorType):
        if not all(x is None or isinstance(x, torch.fx.Node) for x in items):
            return None
        return _tensor_list("std::optional<at::Tensor>", [
            "std::nullopt" if x is None else f"std::optional<at::Tensor>({names[x.name]})" for x in items])
    if isinstance(element, torch.TensorType):
        if not all(isinstance(x, torch.fx.Node) for x in items):
            return None
        return _tensor_list("at::Tensor", [names[x.name] for x in items])
    if isinstance(element, torch.FloatType) and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                    for x in items):
        return "c10::IValue(std::vector<double>{" + ", ".join(_double(float(x)) for x in items) + "})"
    return None


def _tensor_list(element: str, parts: list[str]) -> str:
    made = f"c10::List<{element}>({{{', '.join(parts)}}})" if parts else f"c10::List<{element}>()"
    return f"c10::IValue({made})"


def _double(x: float) -> str:
    return float.__repr__(x) if x == x and abs(x) != float("inf") else _special(x)


def _unsupported(a) -> str:
    raise NotImplementedError(f"argument {a!r} of type {type(a).__name__}")


def _scalar(value: bool | int | float) -> str:
    """A C++ at::Scalar for a Python number, keeping its kind (bool, int64 or double)."""
    if isinstance(value, bool):
        return f"at::Scalar({'true' if value else 'false'})"
    if isinstance(value, int):
        return f"at::Scalar(int64_t({value}))"
    literal = repr(value) if value == value and abs(value) != float("inf") else _special(value)
    return f"at::Scalar(double({literal}))"


def _special(a: float) -> str:
    if a != a:
        return "std::numeric_limits<double>::quiet_NaN()"
    return ("" if a > 0 else "-") + "std::numeric_limits<double>::infinity()"


def _scalar_type(dtype: torch.dtype) -> str:
    return {torch.float32: "Float", torch.float64: "Double", torch.float16: "Half", torch.bfloat16: "BFloat16",
            torch.int64: "Long", torch.int32: "Int", torch.int16: "Short", torch.int8: "Char",
            torch.uint8: "Byte", torch.bool: "Bool"}[dtype]


# A view needs its input laid out as the reference's was; a kfuse kernel may lay its result out otherwise (a
# transposed GEMM output, a channels-last one). reshape takes the same arguments and gives the same values, a copy
# only where the layout needs one.
_AS_RESHAPE = {("aten::view", ""), ("aten::_unsafe_view", "")}
# cuDNN's recurrent layers, called from the file, refused a strided initial state that eager's nn.LSTM call took
# ("rnn: hx is not contiguous", on an H200): the same values, made contiguous.
_CONTIGUOUS_STATE = {("aten::lstm", "hx"), ("aten::gru", "hx"), ("aten::rnn_tanh", "hx"), ("aten::rnn_relu", "hx")}


def _size_following(value, lines: dict, position: int, names: dict[str, str]) -> str | None:
    """The C++ of an argument some of whose numbers follow the inputs' sizes (sizes.SIZES): those read at run time
    from the tensors they describe, so that the file takes other sizes as the Model does; None: none do."""
    def number(item, v) -> str:
        expr = lines.get((position, item))
        if expr is None or any(name not in names for name, _ in expr.sizes):  # (a value no variable holds)
            return f"int64_t({v})"
        factors = [f"{names[name]}.size({dim})" for name, dim in expr.sizes]
        term = " * ".join(([str(expr.scale)] if expr.scale != 1 else []) + factors)
        return term if expr.offset == 0 else f"({term} {'+' if expr.offset > 0 else '-'} {abs(expr.offset)})"

    if not any(p == position for p, _ in lines):
        return None
    if isinstance(value, int):
        return f"c10::IValue({number(None, value)})"
    if isinstance(value, (list, tuple)) and all(type(v) is int for v in value):
        return "c10::IValue(std::vector<int64_t>{" + ", ".join(number(i, v) for i, v in enumerate(value)) + "})"
    return None


def _library_call(call: LibraryCall, names: dict[str, str], handles: list[str]) -> str:
    node = call.node
    schema = node.target._schema
    name, overload = schema.name, schema.overload_name
    if (name, overload) in _AS_RESHAPE:
        name, overload = "aten::reshape", ""
    # one handle per op and overload, shared by every call of it (a network calls the same op once per layer)
    handle = f"op_{name.split('::')[-1]}" + (f"_{overload}" if overload else "")
    declaration = f'    static const c10::OperatorHandle {handle} = kf::aten("{name}", "{overload}");'
    if declaration not in handles:
        handles.append(declaration)
    values = boxed_arguments(node)
    if call.bias_moved:  # the kernel that follows adds it, in the pass it makes anyway
        values[2] = None
    before, local = "", names
    if call.channels_last:  # input and weight channels-last: cuDNN's fast layout, and the output follows it
        local = dict(names)
        for role, value in zip(("input", "weight"), values[:2]):
            local[value.name] = f"{node.name}_{role}"
            before += f"    const at::Tensor {node.name}_{role} = kf::channels_last({names[value.name]});\n"
    rendered = []
    for arg, value in zip(schema.arguments, values):
        if (name, arg.name) in _CONTIGUOUS_STATE:
            states = value if isinstance(value, (list, tuple)) else [value]
            local = {**local, **{x.name: f"{local[x.name]}.contiguous()" for x in states
                                 if isinstance(x, torch.fx.Node)}}
        if isinstance(value, (int, float)) and str(arg.type).startswith("Tensor"):
            # A Python number where the op takes a Tensor: a wrapped number, as eager PyTorch passes it.
            rendered.append(f"kf::wrapped_number({_scalar(value)})")
        else:
            following = _size_following(value, node.meta.get(SIZES, {}), len(rendered), local)
            rendered.append(following or render_ivalue(value, local, arg.type))
    args = ", ".join(rendered)
    kind = "library call" if call.anchor else "ATen call, unfused"
    if call.channels_last:
        kind += ", channels-last"
    if call.bias_moved:
        kind += ", bias added by the next kernel"
    returns = schema.returns
    names[node.name] = node.name
    if len(returns) == 1 and str(returns[0].type) == "Tensor":
        return (f"{before}    at::Tensor {node.name} = kf::call({handle}, {{{args}}})[0].toTensor();"
                f"  // {kind}: {node.target}")
    return f"    std::vector<c10::IValue> {node.name} = kf::call({handle}, {{{args}}});  // {kind}: {node.target}"


def _tuple_item(item: TupleItem, names: dict[str, str], plan: Plan) -> str:
    source = next(s for s in plan.steps if isinstance(s, (LibraryCall, recurrent.RecurrentKernel))
                  and s.node.name == item.source)
    if isinstance(source, recurrent.RecurrentKernel):  # a std::vector<at::Tensor> of its results
        names[item.node.name] = item.node.name
        return f"    at::Tensor {item.node.name} = {item.source}[{item.index}];"
    returns = source.node.target._schema.returns
    names[item.node.name] = item.node.name
    if len(returns) == 1:  # a Tensor[] result
        return f"    at::Tensor {item.node.name} = {item.source}[0].toTensorVector()[{item.index}];"
    return f"    at::Tensor {item.node.name} = {item.source}[{item.index}].toTensor();"


# A forward with more tensors than this takes them as one list: pybind11 describes a bound function's signature at
# compile time, and with hundreds of parameters (DenseNet-201: 620) that exceeds g++'s constexpr limits.
PACKED_ARGUMENTS = 128


def packs_arguments(captured: Captured) -> bool:
    return len(_forward_tensors(captured)) > PACKED_ARGUMENTS


def _forward_tensors(captured: Captured) -> list:
    # Numbers among the user's inputs were folded into the graph at capture: they are not parameters here.
    return [i for i in captured.inputs if i.kind != "user" or i.dtype is not None]


def _forward(captured: Captured, plan: Plan, names: dict[str, str], target: str,
             shared: dict[str, str] | None = None) -> str:
    # Buffers the model updates (running statistics) come by value: the handle shares their storage.
    tensors = _forward_tensors(captured)
    declared = [f"at::Tensor {i.name}" if i.name in captured.buffer_updates else f"const at::Tensor& {i.name}"
                for i in tensors]
    handles: list[str] = []
    body = []
    unpacked = []
    if packs_arguments(captured):
        params = "const std::vector<at::Tensor>& kf_args"
        unpacked = [f"    {d} = kf_args[{j}];" for j, d in enumerate(declared)]
    else:
        params = ", ".join(declared)
    shared = shared or {}
    for step in plan.steps:
        start = len(body)
        if isinstance(step, LibraryCall):
            body.append(_library_call(step, names, handles))
        elif isinstance(step, TupleItem):
            body.append(_tuple_item(step, names, plan))
        elif isinstance(step, reductions.ReduceKernel):
            body.extend(reductions.forward_lines(step, names))
        elif isinstance(step, attention.AttentionKernel):
            body.append(attention.forward_line(step, names))
        elif isinstance(step, recurrent.RecurrentKernel):
            body.append(recurrent.forward_line(step, names))
        elif isinstance(step, counters.CounterStep):
            body.append(counters.forward_line(step, names))
        elif isinstance(step, windows.WindowKernel):
            body.extend(windows.forward_lines(step, names))
        elif isinstance(step, gemms.GemmStep):
            body.extend(gemms.forward_lines(step, names))
        elif isinstance(step, convolutions.ConvKernel):
            body.extend(convolutions.forward_lines(step, names))
        else:
            args = ", ".join(kernel_argument(step, i, names) for i in step.inputs)
            into = f"&{names[step.write_into]}" if step.write_into else "nullptr"
            note = f"  // in place into {step.write_into}" if step.write_into else ""
            body.append(f"    at::Tensor {step.result.name} = {step.name}({args}, {into});{note}")
            names[step.result.name] = step.result.name
        if not isinstance(step, (LibraryCall, TupleItem)) and step.name in shared:
            body[start:] = [_call_shared(line, step.name, shared) for line in body[start:]]
    for buffer, value in captured.buffer_updates.items():
        body.append(f"    {buffer}.copy_({names[value]});  // buffer update, as the model does")
    outputs = ", ".join(names[o] for o in captured.outputs)
    guards = ["    at::NoGradGuard no_grad;"]
    if target == "cuda" and tensors:  # kernels launch on the inputs' GPU, whichever is current
        guards.append(f"    const c10::cuda::CUDAGuard device_guard({tensors[0].name}.device());")
    lines = "\n".join(unpacked + guards + handles + body)
    if len(captured.outputs) == 1 and not captured.returns_tuple:  # a tensor back, not a list to index
        return f"at::Tensor forward({params}) {{\n{lines}\n    return {outputs};\n}}\n"
    return f"std::vector<at::Tensor> forward({params}) {{\n{lines}\n    return {{{outputs}}};\n}}\n"


def _owned_names(step) -> list[str]:
    """The names a step's printed code defines: its own, and those of a pointwise kernel fused into it."""
    return [step.name] + [v.name for v in vars(step).values() if isinstance(v, FusedKernel)]


def _canonical(text: str, owned: list[str]) -> str:
    """`text` with the step's own names, comments and local value names (v_<node>, numbered by first use) made
    neutral: two steps with the same canonical text differ only in names, so one's code serves both."""
    for j, name in enumerate(sorted(owned, key=len, reverse=True)):
        text = re.sub(rf"\b{re.escape(name)}(?=\b|_)", f"@{j}", text)
    text = re.sub(r"//[^\n]*", "", text)
    local: dict[str, str] = {}
    return re.sub(r"\bv_\w+", lambda m: local.setdefault(m.group(0), f"v{len(local)}"), text)


def _share_identical(steps: list, printed) -> tuple[list, dict[str, str]]:
    """Steps whose printed code is the same up to names (the BatchNorms of a network, its repeated blocks) share
    the first one's code: the file then grows with a network's distinct kernels, not with its layers.
    Returns the steps to print and, for each other step, the name of the one whose function it calls."""
    first: dict[str, object] = {}
    shared: dict[str, str] = {}
    for step in steps:
        key = _canonical(printed(step), _owned_names(step))
        if key in first:
            shared[step.name] = first[key].name
        else:
            first[key] = step
    return list(first.values()), shared


def _call_shared(line: str, step_name: str, shared: dict[str, str]) -> str:
    """A forward line that calls `step_name(...)`, calling the step whose code it shares instead."""
    return re.sub(rf"\b{re.escape(step_name)}\(", f"{shared[step_name]}(", line)


def _printed_text(sources) -> str:
    return "".join(v for v in vars(sources).values() if isinstance(v, str))


def generate(captured: Captured, plan: Plan, target: str) -> Sources:
    names = {i.name: i.name for i in captured.inputs}
    first_tensor = next((i.name for i in captured.inputs if i.dtype is not None), None)
    names["__device__"] = f"{first_tensor}.device()" if first_tensor else "at::Device(at::kCPU)"

    def pointwise_text(k: FusedKernel) -> str:
        device = (_cuda_kernels(k) + (_channels_last_kernel(k) if k.channels_last_input else "")
                  if target == "cuda" else _cpu_kernel(k))
        return op_function(k) + device + _host_wrapper(k, target)

    pointwise, shared = _share_identical(plan.kernels, pointwise_text)
    families = {}
    for module, steps in ((reductions, plan.reductions), (attention, plan.attentions), (windows, plan.windows),
                          (gemms, plan.gemms), (convolutions, plan.convolutions)):
        unique, same = _share_identical(steps, lambda step, m=module: _printed_text(m.render([step], target)))
        families[module] = module.render(unique, target)
        shared.update(same)
    red, att, win, gm, conv = (families[m] for m in (reductions, attention, windows, gemms, convolutions))
    rnn = recurrent.render(plan.recurrents, target)  # (one shared function for every layer: nothing to share)
    kernel_functions = "".join(op_function(k) for k in pointwise)
    host_wrappers = "".join(_host_wrapper(k, target) for k in pointwise)
    forward = _forward(captured, plan, names, target, shared)
    if target == "cuda":
        launches = "".join(f"void {k.name}_launch(const kf::Operand* o, const kf::Shape& shape, float* out, "
                           f"bool small_index, int sms, cudaStream_t stream);\n" for k in pointwise)
        launches += "".join(f"void {k.name}_launch_from_channels_last(const kf::Operand* o, const kf::Shape& shape, "
                            f"float* out, bool small_index, cudaStream_t stream);\n"
                            for k in pointwise if k.channels_last_input)
        channels_last = any(c.channels_last for c in plan.library_calls)
        device = (kernel_functions + conv.functions
                  + "".join(_cuda_kernels(k) + (_channels_last_kernel(k) if k.channels_last_input else "")
                            for k in pointwise)
                  + red.decls + red.helpers + red.device + att.decls + att.device
                  + win.decls + win.helpers + win.device + gm.decls + gm.device + conv.device + rnn.decls + rnn.device
                  + (CHANNELS_LAST_COPY_DEVICE if channels_last else "")
                  + (counters.CUDA_DEVICE if plan.counters else ""))
        cuda_body = (conv.common + (TILE_FILL if "kf::fill_tile4(" in device else "")
                     + prelude_for(kernel_functions + red.expressions + win.expressions + gm.expressions
                                   + conv.functions)
                     + device)
        cuda = "#include <cuda_runtime.h>\n#include <algorithm>\n" + common_for(cuda_body) + cuda_body
        host = ((CHANNELS_LAST_COPY_HOST if channels_last else "") + launches
                + host_wrappers + red.decls + red.host + att.decls + att.host + win.decls + win.host + gm.decls
                + gm.host + conv.host + rnn.decls + rnn.host + (counters.CUDA_HOST if plan.counters else "") + forward)
        cpp_body = (conv.common + _host_runtime(host) + (DISPATCH_RUNTIME if CALLS_ATEN in host else "")
                    + CUDA_HOST_RUNTIME + host)
        cpp = host_headers(host) + CUDA_HOST_HEADERS + common_for(cpp_body) + cpp_body
    else:
        cuda = None
        host = (kernel_functions + conv.functions + "".join(_cpu_kernel(k) for k in pointwise) + host_wrappers
                + red.decls + red.helpers + red.device + red.host + att.decls + att.host
                + win.decls + win.helpers + win.device + win.host + gm.decls + gm.device + gm.host + conv.device
                + conv.host + rnn.decls + rnn.host + (counters.CPU_HOST if plan.counters else "") + forward)
        cpp_body = (conv.common
                    + prelude_for(kernel_functions + red.expressions + win.expressions + gm.expressions
                                  + conv.functions)
                    + _host_runtime(host) + (DISPATCH_RUNTIME if CALLS_ATEN in host else "") + host)
        cpp = host_headers(host) + "#include <ATen/Parallel.h>\n" + common_for(cpp_body) + cpp_body
    kernels = [{"name": k.name, "fuses": k.ops, "in_place_into": k.write_into,
                "reads_channels_last": k.channels_last_input} for k in plan.kernels]
    kernels += [{"name": k.name, "fuses": k.ops, "in_place_into": None, "reads_channels_last": None}
                for k in plan.reductions + plan.attentions + plan.windows + plan.gemms + plan.convolutions
                + plan.recurrents]
    kernels += [{"name": k.name, "fuses": k.ops, "in_place_into": None, "reads_channels_last": None, "counters": True}
                for k in plan.counters]
    for k in plan.convolutions:
        if k.tf32 is not None:
            next(d for d in kernels if d["name"] == k.name)["tf32"] = k.tf32
    kernels.sort(key=lambda k: _step_index(plan, k["name"]))
    for k in kernels:
        if k["name"] in shared:
            k["shares_code_with"] = shared[k["name"]]
    library = [c.op for c in plan.library_calls]
    unfused = [{"op": c.op, "node": c.node.name,
                "reason": "anchor: runs on the vendor library, its epilogue fused after it" if c.anchor
                else _unfused_reason(c)}
               | ({"channels_last": c.channels_last} if "conv" in c.op else {})  # (a run records its layouts)
               for c in plan.library_calls]
    return Sources(cpp, cuda, kernels, library, unfused, sm90a=gm.sm90a, packed=packs_arguments(captured))


def _step_index(plan: Plan, name: str) -> int:
    return next(i for i, s in enumerate(plan.steps) if getattr(s, "name", None) == name)


def _unfused_reason(call: LibraryCall) -> str:
    if call.eager_bits:
        return ("kept as eager's own call: its value must be eager's to the bit (a TF32 call reads it, or the "
                "file keeps eager's rounding everywhere)")
    reason = (windows.unfused_reason(call.node) or reductions.unfused_reason(call.node)
              or attention.unfused_reason(call.node) or recurrent.unfused_reason(call.node))
    if reason is not None:
        return reason
    if ops.lookup(call.node.target) is not None:
        meta = tensor_meta(call.node)
        return f"pointwise, but on {meta.dtype if meta is not None else 'non-tensor'} values (fp32 kernels only)"
    return "no kfuse kernel for this op yet: kept as an ATen call"
