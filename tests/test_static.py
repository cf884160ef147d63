"""The static rules, on small sources: each rule fires on its construct, with the right line, and only there."""

import ast
import textwrap

import pytest

from kfuse.judge.static import check_source

HEADER = """\
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
ext = load_inline("k", cpp_sources="torch::Tensor f(torch::Tensor x) { return x; }", functions=["f"])
"""


def findings(body: str, target: str = "cpu", header: str = HEADER):
    return check_source(ast.parse(header + textwrap.dedent(body)), target)


def rules(body: str, target: str = "cpu", level: str = "error", **kw) -> list[tuple[str, int]]:
    return [(f.rule, f.line) for f in findings(body, target, **kw) if f.level == level]


HONEST = """
class ModelNew(nn.Module):
    def forward(self, x):
        return ext.f(x.contiguous())
"""


def test_honest_source_has_no_findings():
    assert findings(HONEST) == []


@pytest.mark.parametrize("body, rule, line", [
    ("try:\n    y = 1\nexcept Exception:\n    y = 2\n", "try-except", 5),
    ("def f():\n    pass\n", "pass", 6),
    ("import threading\n", "concurrency", 5),
    ("from concurrent.futures import ThreadPoolExecutor\n", "concurrency", 5),
    ("import multiprocessing as mp\n", "concurrency", 5),
    ("s = torch.cuda.Stream()\n", "side-stream", 5),
    ("with torch.cuda.stream(None):\n    y = 1\n", "side-stream", 5),
    ("torch.allclose = lambda *a, **k: True\n", "patching", 5),
    ("import time\ntime.perf_counter = lambda: 0.0\n", "patching", 6),
    ("import torch as T\nT.cuda.Event.elapsed_time = None\n", "patching", 6),
    ("setattr(torch, 'equal', None)\n", "patching", 5),
    ("src = '''\nauto s = at::cuda::getStreamFromPool();\n'''\n", "side-stream", 6),
])
def test_each_rule_fires_with_its_line(body, rule, line):
    assert (rule, line) in rules(body)


def test_a_docstring_may_mention_streams():
    body = HONEST.replace("nn.Module):", 'nn.Module):\n    """Avoids getStreamFromPool and threading."""')
    assert rules(body) == []


def test_no_load_inline_is_not_a_custom_kernel():
    body = "class ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
    assert ("no-custom-kernel", 1) in rules(body, header="import torch\nimport torch.nn as nn\n")


def test_cuda_target_needs_a_global_function():
    assert ("no-custom-kernel", 1) in rules(HONEST, target="cuda")
    cuda_header = HEADER.replace('cpp_sources="', 'cuda_sources="__global__ void k() {} ')
    assert rules(HONEST, target="cuda", header=cuda_header) == []


def test_torch_compute_in_forward_is_a_warning_listing_the_ops():
    body = """
import torch.nn.functional as F
class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        z = F.gelu(x) @ x
        return ext.f(y + z.sum())
"""
    found = findings(body)
    assert [f.level for f in found] == ["warning"]
    message = found[0].message
    assert "torch.nn.functional.gelu" in message and "@ (matmul)" in message and ".sum()" in message
    assert "empty_like" not in message and "ext" not in message


def test_ops_a_library_registered_are_custom_but_aten_ops_are_torch_compute():
    body = """
kernels = torch.ops.kfuse_model_1234
class ModelNew(nn.Module):
    def forward(self, x):
        return kernels.forward(torch.ops.aten.relu(x))[0]
"""
    found = findings(body)
    assert [f.level for f in found] == ["warning"]
    assert "torch.ops.aten.relu" in found[0].message and "kfuse_model" not in found[0].message
