"""The batch counters (kfuse/kernels/counters.py): every training BatchNorm's num_batches_tracked += 1 in one launch,
and only those."""

import torch
import torch.nn as nn

from kfuse.compiler.capture import capture
from kfuse.compiler.codegen import generate
from kfuse.compiler.plan import Plan, plan
from kfuse.kernels.counters import CounterStep
from tests.test_reduce import Fn


def planned(fn, *shapes, target="cpu", **modules):
    meta = torch.device("meta")
    model = Fn(fn, **modules).to(meta).train()
    captured = capture(model, [torch.randn(*s, device=meta) for s in shapes])
    steps = plan(captured.graph, target)
    return steps, generate(captured, steps, target)


def three_norms(m, x):
    y = torch.relu(m.bn1(x))
    y = m.bn2(y) + m.bn3(x)
    return y


NORMS = dict(bn1=nn.BatchNorm1d(6), bn2=nn.BatchNorm1d(6), bn3=nn.BatchNorm1d(6))


def test_a_forward_s_batch_counters_are_one_step_where_the_first_was():
    steps, sources = planned(three_norms, (5, 6), **NORMS)
    counters = [s for s in steps.steps if isinstance(s, CounterStep)]
    assert len(counters) == 1 and counters[0].inputs == [f"b_bn{k}_num_batches_tracked" for k in (1, 2, 3)]
    assert not [u for u in sources.unfused if u["op"] == "aten.add_.Tensor"]
    first_norm = next(i for i, s in enumerate(steps.steps) if "batch_norm" in " ".join(getattr(s, "ops", [])))
    assert steps.steps.index(counters[0]) < first_norm  # bumped before any norm runs, as eager does
    line = next(line for line in sources.cpp.splitlines() if "kf::count_batches(" in line)
    assert "b_bn1_num_batches_tracked, b_bn2_num_batches_tracked, b_bn3_num_batches_tracked" in line


def test_the_cuda_file_launches_one_kernel_for_them():
    _, sources = planned(three_norms, (5, 6), target="cuda", **NORMS)
    assert "__global__ void kf_count_batches(" in sources.cuda and sources.cpp.count("kf::count_batches({") == 1
    entry = next(k for k in sources.kernels if k.get("counters"))
    assert entry["fuses"] == ["aten.add_.Tensor"] * 3


def test_other_in_place_adds_keep_their_own_calls():
    # a float buffer's add_ is the model's computation, not a counter; a counter read by the forward keeps its add_
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm1d(6)
            self.register_buffer("total", torch.zeros(6))
            self.register_buffer("calls", torch.zeros((), dtype=torch.int64))

        def forward(self, x):
            self.total.add_(x.sum(0))
            self.calls.add_(1)
            return self.bn(x) * self.calls.float()

    meta = torch.device("meta")
    captured = capture(Model().to(meta).train(), [torch.randn(5, 6, device=meta)])
    steps = plan(captured.graph)
    counters = [s for s in steps.steps if isinstance(s, CounterStep)]
    assert len(counters) == 1 and counters[0].inputs == ["b_bn_num_batches_tracked"]
    assert [c.node.args[0].name for c in steps.library_calls if str(c.node.target) == "aten.add_.Tensor"] == \
           ["b_total", "b_calls"]


def test_a_file_of_counters_alone_has_no_kernel():
    # (bookkeeping is not a custom kernel: kfuse optimize refuses such a file as it refuses one of library calls)
    assert not Plan([CounterStep("kf_count_batches", [])]).has_kernels
