"""Recurrent layers as kfuse kernels: nn.GRU (any number of layers, one or two directions, batch_first, with or
without biases), fp32.

Per layer, the input's part of every gate for every step is one GEMM, both directions at once
(x W_ih^T + b_ih: (T*B, I) x (I, dirs*3H), through ATen's matmul, fp32 as eager's matmul); what cannot be batched
over time, the hidden state's part and the gates, runs in one kernel launch for all T steps:

CUDA: a cooperative launch of gru_recurrence, blockIdx.y the direction, each block owning `units` hidden units of
it. Per step, a warp takes one (batch row, hidden unit) pair: its three dot products with W_hh's rows r, z, n
(lanes along the hidden state, a shuffle reduction), then lane 0 applies the gates and stores h_t straight into
the layer's output, which is where the next step reads h_{t-1} from (through L2, __ldcg: other blocks wrote it
during this launch). A grid-wide barrier separates the steps. W_hh is read through the read-only cache: each row
serves every batch row of the block. eager (cuDNN) takes one or more kernel launches per step.
CPU: the same order of operations in loops, batch rows in parallel.

Gates (PyTorch's): r = sigmoid(gi_r + W_hr h + b_hr), z = sigmoid(gi_z + W_hz h + b_hz),
n = tanh(gi_n + r * (W_hn h + b_hn)), h' = (1 - z) * n + z * h.

Precision: fp32 throughout. cuDNN's own GRU may run its products in TF32 (PyTorch allows it for cuDNN): on an
H100 the development set's GRUs came out 1.4-2.3e-4 from fp32 accuracy, so this kernel is closer to the float64
truth than eager there, and no closer to eager than that.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kfuse.kernels.steps import replace_library_calls, tensor_meta

GRU = "aten.gru.input"


class Unsupported(Exception):
    """This recurrent call stays an ATen call; the message says why."""


@dataclass
class RecurrentKernel:
    name: str
    node: torch.fx.Node
    layers: int
    bidirectional: bool
    batch_first: bool
    has_biases: bool

    @property
    def ops(self) -> list[str]:
        return [GRU]

    @property
    def inputs(self) -> list[str]:
        return [self.node.args[0].name, self.node.args[1].name] + [p.name for p in self.node.args[2]]


def spec_for(node: torch.fx.Node) -> RecurrentKernel:
    x, hx, params, has_biases, layers, dropout, train, bidirectional, batch_first = node.args[:9]
    tensors = [x, hx, *params]
    if not all(isinstance(t, torch.fx.Node) for t in tensors):
        raise Unsupported("with a constant operand")
    metas = [tensor_meta(t) for t in tensors]
    if any(m is None or m.dtype != torch.float32 for m in metas):
        raise Unsupported("on non-fp32 tensors (fp32 kernels only)")
    if metas[0].dim() != 3:
        raise Unsupported("on an unbatched input")
    if dropout and train and layers > 1:
        raise Unsupported("with dropout between layers in training mode")
    per_layer = (4 if has_biases else 2) * (2 if bidirectional else 1)
    if len(params) != per_layer * layers:
        raise Unsupported("with projections or an unexpected parameter list")
    return RecurrentKernel("", node, int(layers), bool(bidirectional), bool(batch_first), bool(has_biases))


def unfused_reason(node: torch.fx.Node) -> str | None:
    if str(node.target) != GRU:
        return None
    try:
        spec_for(node)
    except Unsupported as err:
        return f"GRU {err}: kept as an ATen call"
    return None


def fuse_recurrent(steps: list) -> list:
    """Replace supported GRU calls by RecurrentKernel steps."""
    return replace_library_calls(steps, GRU, spec_for, Unsupported)


# --------------------------------------------------------------------------------------------------------------
# Printing

# One direction of one layer, as the kernel reads it.
RECURRENT_DECLS = r"""
namespace kf {
struct GruDirection {
    const float* w_hh;   // (3H, H): rows r, z, n
    const float* b_hh;   // (3H) or nullptr
    const float* h0;     // (B, H)
    float* hn;           // (B, H)
};
}  // namespace kf
"""

RECURRENT_CUDA = r"""
#include <cooperative_groups.h>
namespace kf {
__device__ __forceinline__ float gru_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// gi: (T, B, dirs, 3H), the input's part of the gates with b_ih; out: (T, B, dirs * H).
__global__ void __launch_bounds__(256) gru_recurrence(const float* __restrict__ gi, GruDirection forward_dir,
                                                      GruDirection backward_dir, float* out, int T, int B, int H,
                                                      int dirs, int units) {
    const int d = blockIdx.y;
    const GruDirection D = d == 0 ? forward_dir : backward_dir;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
    const int j0 = blockIdx.x * units;
    const int64_t row = (int64_t)dirs * H, gates = 3 * (int64_t)H;
    cooperative_groups::grid_group grid = cooperative_groups::this_grid();
    for (int s = 0; s < T; ++s) {
        const int t = d == 0 ? s : T - 1 - s;
        const int previous = d == 0 ? t - 1 : t + 1;
        for (int item = warp; item < B * units; item += warps) {
            const int b = item / units, j = j0 + item % units;
            if (j >= H) continue;
            const float* h = s == 0 ? D.h0 + (int64_t)b * H : out + ((int64_t)previous * B + b) * row + (int64_t)d * H;
            const float* wr = D.w_hh + (int64_t)j * H;
            const float* wz = wr + (int64_t)H * H;
            const float* wn = wz + (int64_t)H * H;
            float ar = 0.0f, az = 0.0f, an = 0.0f;
            for (int k = lane; k < H; k += 32) {
                const float hk = __ldcg(h + k);
                ar = fmaf(__ldg(wr + k), hk, ar);
                az = fmaf(__ldg(wz + k), hk, az);
                an = fmaf(__ldg(wn + k), hk, an);
            }
            for (int offset = 16; offset > 0; offset >>= 1) {
                ar += __shfl_xor_sync(0xffffffffu, ar, offset);
                az += __shfl_xor_sync(0xffffffffu, az, offset);
                an += __shfl_xor_sync(0xffffffffu, an, offset);
            }
            if (lane == 0) {
                const float* g = gi + ((int64_t)t * B + b) * dirs * gates + d * gates;
                if (D.b_hh != nullptr) {
                    ar += D.b_hh[j];
                    az += D.b_hh[H + j];
                    an += D.b_hh[2 * H + j];
                }
                const float r = gru_sigmoid(g[j] + ar);
                const float z = gru_sigmoid(g[H + j] + az);
                const float n = tanhf(g[2 * H + j] + r * an);
                const float value = (1.0f - z) * n + z * __ldcg(h + j);
                out[((int64_t)t * B + b) * row + (int64_t)d * H + j] = value;
                if (s == T - 1) D.hn[(int64_t)b * H + j] = value;
            }
        }
        grid.sync();
    }
}
}  // namespace kf
"""

# The recurrence's launch: as many blocks per direction as run at once (a grid barrier needs every block resident),
# at most one per hidden unit.
RECURRENT_CUDA_HOST = r"""
namespace kf {
cudaError_t gru_recurrence_launch(const float* gi, GruDirection forward_dir, GruDirection backward_dir, float* out,
                                  int T, int B, int H, int dirs, int device, cudaStream_t stream);
}  // namespace kf
"""

RECURRENT_CUDA_LAUNCH = r"""
namespace kf {
cudaError_t gru_recurrence_launch(const float* gi, GruDirection forward_dir, GruDirection backward_dir, float* out,
                                  int T, int B, int H, int dirs, int device, cudaStream_t stream) {
    static int resident[256] = {0};  // blocks of 256 threads resident at once, per device
    if (resident[device] == 0) {
        int cooperative = 0, sms = 0, per_sm = 0;
        cudaError_t err = cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device);
        if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
        if (err == cudaSuccess) err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gru_recurrence, 256, 0);
        if (err != cudaSuccess) return err;
        if (!cooperative || per_sm == 0) return cudaErrorNotSupported;
        resident[device] = sms * std::min(per_sm, 2);
    }
    const int per_direction = std::max(1, std::min(H, resident[device] / dirs));
    int units = (H + per_direction - 1) / per_direction;
    const dim3 grid((unsigned)((H + units - 1) / units), (unsigned)dirs);
    void* args[] = {(void*)&gi, &forward_dir, &backward_dir, &out, &T, &B, &H, &dirs, &units};
    return cudaLaunchCooperativeKernel((const void*)gru_recurrence, grid, dim3(256), args, 0, stream);
}
}  // namespace kf
"""

RECURRENT_CPU = r"""
namespace kf {
void gru_recurrence_cpu(const float* gi, const GruDirection* directions, float* out, int64_t T, int64_t B,
                        int64_t H, int64_t dirs) {
    const int64_t row = dirs * H, gates = 3 * H;
    for (int64_t d = 0; d < dirs; ++d) {
        const GruDirection& D = directions[d];
        for (int64_t s = 0; s < T; ++s) {
            const int64_t t = d == 0 ? s : T - 1 - s, previous = d == 0 ? t - 1 : t + 1;
            at::parallel_for(0, B, 1, [&](int64_t begin, int64_t end) {
                for (int64_t b = begin; b < end; ++b) {
                    const float* h = s == 0 ? D.h0 + b * H : out + (previous * B + b) * row + d * H;
                    const float* g = gi + (t * B + b) * dirs * gates + d * gates;
                    for (int64_t j = 0; j < H; ++j) {
                        const float* wr = D.w_hh + j * H;
                        float ar = 0.0f, az = 0.0f, an = 0.0f;
                        for (int64_t k = 0; k < H; ++k) {
                            ar += wr[k] * h[k];
                            az += wr[H * H + k] * h[k];
                            an += wr[2 * H * H + k] * h[k];
                        }
                        if (D.b_hh != nullptr) {
                            ar += D.b_hh[j];
                            az += D.b_hh[H + j];
                            an += D.b_hh[2 * H + j];
                        }
                        const float r = 1.0f / (1.0f + std::exp(-(g[j] + ar)));
                        const float z = 1.0f / (1.0f + std::exp(-(g[H + j] + az)));
                        const float n = std::tanh(g[2 * H + j] + r * an);
                        const float value = (1.0f - z) * n + z * h[j];
                        out[(t * B + b) * row + d * H + j] = value;
                        if (s == T - 1) D.hn[b * H + j] = value;
                    }
                }
            });
        }
    }
}
}  // namespace kf
"""

# The layer loop, shared by both targets: the input projection GEMM, then the recurrence.
RECURRENT_HOST = r"""
namespace kf {
// nn.GRU's forward: (output, h_n). params per layer and direction: w_ih, w_hh[, b_ih, b_hh].
std::vector<at::Tensor> gru(const at::Tensor& input, const at::Tensor& hx, const std::vector<at::Tensor>& params,
                            int64_t layers, bool bidirectional, bool batch_first, bool has_biases) {
    const int64_t dirs = bidirectional ? 2 : 1, per = has_biases ? 4 : 2;
    at::Tensor x = (batch_first ? input.transpose(0, 1) : input).contiguous();  // (T, B, I)
    const at::Tensor h0 = hx.contiguous();
    const int64_t T = x.size(0), B = x.size(1), H = h0.size(2);
    at::Tensor hn = at::empty_like(h0);
    if (T == 0) hn.copy_(h0);
    for (int64_t l = 0; l < layers && T > 0; ++l) {
        std::vector<at::Tensor> w_ih, b_ih, recurrent;  // (recurrent keeps the contiguous W_hh, b_hh alive)
        GruDirection directions[2] = {};
        for (int64_t d = 0; d < dirs; ++d) {
            const int64_t p = (l * dirs + d) * per;
            w_ih.push_back(params[p]);
            recurrent.push_back(params[p + 1].contiguous());
            if (has_biases) {
                b_ih.push_back(params[p + 2]);
                recurrent.push_back(params[p + 3].contiguous());
            }
            directions[d] = {recurrent[has_biases ? 2 * d : d].data_ptr<float>(),
                             has_biases ? recurrent[2 * d + 1].data_ptr<float>() : nullptr,
                             h0[l * dirs + d].data_ptr<float>(), hn[l * dirs + d].data_ptr<float>()};
        }
        // Every step's input part of the gates, both directions at once: (T*B, I) x (I, dirs*3H).
        const at::Tensor weights = dirs == 1 ? w_ih[0] : at::cat(w_ih, 0);
        const at::Tensor flat = x.view({T * B, x.size(2)});
        const at::Tensor gi = has_biases ? at::addmm(dirs == 1 ? b_ih[0] : at::cat(b_ih, 0), flat, weights.t())
                                         : at::mm(flat, weights.t());
        at::Tensor out = kf::empty({T, B, dirs * H}, x.options());
{run}        x = out;
    }
    return {batch_first ? x.transpose(0, 1) : x, hn};
}
}  // namespace kf
"""

_RUN_CUDA = """        C10_CUDA_CHECK(gru_recurrence_launch(gi.data_ptr<float>(), directions[0], directions[1],
                                             out.data_ptr<float>(), (int)T, (int)B, (int)H, (int)dirs,
                                             x.get_device(), c10::cuda::getCurrentCUDAStream()));
"""
_RUN_CPU = """        gru_recurrence_cpu(gi.data_ptr<float>(), directions, out.data_ptr<float>(), T, B, H, dirs);
"""


@dataclass
class RecurrentSources:
    decls: str
    device: str     # CUDA kernels (or "" on the CPU target)
    host: str


def render(kernels: list[RecurrentKernel], target: str) -> RecurrentSources:
    if not kernels:
        return RecurrentSources("", "", "")
    if target == "cuda":
        host = RECURRENT_CUDA_HOST + RECURRENT_HOST.replace("{run}", _RUN_CUDA)
        return RecurrentSources(RECURRENT_DECLS, RECURRENT_CUDA + RECURRENT_CUDA_LAUNCH, host)
    return RecurrentSources(RECURRENT_DECLS, "", RECURRENT_CPU + RECURRENT_HOST.replace("{run}", _RUN_CPU))


def forward_line(kernel: RecurrentKernel, names: dict[str, str]) -> str:
    x, hx, *params = (names[a] for a in kernel.inputs)
    flags = ", ".join("true" if f else "false" for f in (kernel.bidirectional, kernel.batch_first, kernel.has_biases))
    names[kernel.node.name] = kernel.node.name
    return (f"    std::vector<at::Tensor> {kernel.node.name} = kf::gru({x}, {hx}, {{{', '.join(params)}}}, "
            f"{kernel.layers}, {flags});  // {kernel.name}: nn.GRU, {kernel.layers} layers")
