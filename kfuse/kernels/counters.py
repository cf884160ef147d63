"""Batch counters: a training-mode BatchNorm's `num_batches_tracked += 1`, every one of a forward in one launch.

Each nn.BatchNorm in training mode adds one to its int64 counter on every call, an ATen add_ of its own: a network
with 103 BatchNorms (DenseNet-201) made 103 one-element launches per forward for them, a fifth of its launches, and
as many boxed dispatches on the host where the forward is not a CUDA graph. Here they are one kernel, a thread per
counter, launched where the first add_ was. Moving the later ones there changes nothing: the counters are buffers
that no op of the forward reads (a counter read anywhere else, or bumped twice, keeps its own add_). The sum is
exact (an integer), so eager's rounding rule (kfuse.kernels.eager_precision) has nothing to keep.

A file whose only kernel this would be stays refused (plan.Plan.has_kernels does not count it): bookkeeping is not
a custom kernel for the model's computation.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kfuse.kernels.steps import LibraryCall, tensor_meta

ADD_ = "aten.add_.Tensor"
NAME = "kf_count_batches"


@dataclass
class CounterStep:
    name: str
    nodes: list[torch.fx.Node]     # the add_ nodes, in graph order

    @property
    def ops(self) -> list[str]:
        return [ADD_] * len(self.nodes)

    @property
    def inputs(self) -> list[str]:
        return [n.args[0].name for n in self.nodes]


def is_counter_bump(node: torch.fx.Node) -> bool:
    """An in-place `+= 1` on a one-element int64 graph input (a buffer) that nothing else reads, whose result is
    unused."""
    if str(node.target) != ADD_ or node.users or len(node.args) != 2 or node.kwargs.get("alpha", 1) != 1:
        return False
    counter, step = node.args
    if not isinstance(counter, torch.fx.Node) or counter.op != "placeholder" or type(step) is not int or step != 1:
        return False
    meta = tensor_meta(counter)
    return meta is not None and meta.dtype == torch.int64 and meta.numel() == 1 and list(counter.users) == [node]


def fuse_counters(steps: list) -> list:
    """The library calls that bump a batch counter, replaced by one CounterStep at the first one's place."""
    bumps = [s for s in steps if isinstance(s, LibraryCall) and is_counter_bump(s.node)]
    if not bumps:
        return steps
    step = CounterStep(NAME, [s.node for s in bumps])
    later = {id(s) for s in bumps[1:]}
    return [step if s is bumps[0] else s for s in steps if id(s) not in later]


# CUDA: a launch per 64 counters (their addresses passed by value in the kernel's parameters), so no copy to the GPU
CUDA_DEVICE = r"""
struct KfCounters { int64_t* at[64]; };
// one thread per batch counter (kfuse/kernels/counters.py)
__global__ void kf_count_batches(KfCounters counters, int count) {
    if ((int)threadIdx.x < count) *counters.at[threadIdx.x] += 1;
}
void kf_count_batches_launch(int64_t* const* counters, int count, cudaStream_t stream) {
    for (int first = 0; first < count; first += 64) {
        KfCounters part;
        const int n = std::min(64, count - first);
        for (int j = 0; j < n; ++j) part.at[j] = counters[first + j];
        kf_count_batches<<<1, 64, 0, stream>>>(part, n);
    }
}
"""

CUDA_HOST = r"""
void kf_count_batches_launch(int64_t* const* counters, int count, cudaStream_t stream);
namespace kf {
// The forward's batch counters (one-element int64 tensors on the GPU), each bumped by one, in one launch.
inline void count_batches(std::initializer_list<at::Tensor> counters) {
    c10::SmallVector<int64_t*, 128> addresses;
    for (const at::Tensor& c : counters) {
        TORCH_CHECK(c.is_cuda() && c.scalar_type() == at::kLong && c.numel() == 1, "kfuse: a batch counter is a "
                    "one-element int64 tensor on the GPU");
        addresses.push_back(c.data_ptr<int64_t>());
    }
    kf_count_batches_launch(addresses.data(), (int)addresses.size(), c10::cuda::getCurrentCUDAStream());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
}  // namespace kf
"""

CPU_HOST = r"""
namespace kf {
// The forward's batch counters (one-element int64 tensors), each bumped by one.
inline void count_batches(std::initializer_list<at::Tensor> counters) {
    for (const at::Tensor& c : counters) {
        TORCH_CHECK(c.scalar_type() == at::kLong && c.numel() == 1, "kfuse: a batch counter is a one-element "
                    "int64 tensor");
        *c.data_ptr<int64_t>() += 1;
    }
}
}  // namespace kf
"""


def forward_line(step: CounterStep, names: dict[str, str]) -> str:
    counters = ", ".join(names[i] for i in step.inputs)
    return f"    kf::count_batches({{{counters}}});  // batch counters += 1: {ADD_} x{len(step.nodes)}"
