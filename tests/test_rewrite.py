"""kfuse/compiler/rewrite.py: a matrix product summed over its output features becomes a column sum and a dot product.

The rewritten graph is run in float64 against the model in float64 (the algebra must be exact, not just close),
the forms it must leave alone keep their product, and the optimized problem matches float64 within fp32 rounding.
"""

import runpy
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from kfuse.compiler.capture import capture
from kfuse.compiler.optimize import optimize
from tests.conftest import build_extension

PROBLEMS = Path(__file__).parent / "optimize"
PRODUCTS = {"aten.linear.default", "aten.matmul.default", "aten.mm.default", "aten.addmm.default"}
K, N, M = 31, 17, 5


class Forms(nn.Module):
    def __init__(self, forward):
        super().__init__()
        torch.manual_seed(0)
        self.w = nn.Parameter(torch.randn(N, K))       # (N, K): read transposed
        self.w_kn = nn.Parameter(torch.randn(K, N))    # (K, N): read as it is
        self.b = nn.Parameter(torch.randn(N))
        self.linear = nn.Linear(K, N)
        self.linear_nobias = nn.Linear(K, N, bias=False)
        self.body = forward

    def forward(self, *inputs):
        return self.body(self, *inputs)


def x2():
    return torch.randn(M, K)


def x3():
    return torch.randn(3, M, K)


def x1():
    return torch.randn(K)


# name: (forward, inputs); every one is rewritten
REWRITTEN = {
    "matmul_numpy_T_keepdim": (lambda m, x: torch.sum(torch.matmul(x, m.w.T) / 2, dim=1, keepdim=True) * 1.5, x2),
    "mm_t": (lambda m, x: torch.mm(x, m.w.t()).sum(1), x2),
    "transpose_batched": (lambda m, x: torch.matmul(x, m.w.transpose(0, 1)).sum(2), x3),
    "permute_vector": (lambda m, x: torch.matmul(x, m.w.permute(1, 0)).sum(-1, keepdim=True), x1),
    "linear_bias_scaled": (lambda m, x: (m.linear(x) * 0.25).sum(-1), x3),
    "linear_no_bias_divided_twice": (lambda m, x: (m.linear_nobias(x) / 3 / -7).sum(-1) * 2, x2),
    "addmm_number_first": (lambda m, x: (3 * torch.addmm(m.b, x, m.w_kn)).sum(-1, keepdim=True), x2),
    "matmul_plain_weight": (lambda m, x: torch.matmul(x, m.w_kn).div(5).sum(-1), x3),
}

# name: (forward, inputs, why it must stay a product)
KEPT = {
    "relu_between": (lambda m, x: torch.relu(m.linear(x)).sum(-1), x2, "not linear"),
    "product_returned": (lambda m, x: (lambda y: (y.sum(-1), y))(m.linear(x)), x2, "the product is needed"),
    "scaled_used_twice": (lambda m, x: (lambda y: y.sum(-1) + y.amax(-1))(m.linear(x) * 2), x2, "read twice"),
    "sum_over_all_dims": (lambda m, x: torch.matmul(x, m.w.T).sum(dim=(0, 1)), x2, "rows summed too"),
    "sum_over_rows": (lambda m, x: torch.matmul(x, m.w.T).sum(0), x2, "not the feature dim"),
    "tensor_scale": (lambda m, x, s: (m.linear(x) * s).sum(-1), lambda: (x2(), torch.randn(N)), "not a number"),
    "number_over_product": (lambda m, x: (2 / m.linear(x)).sum(-1), x2, "not linear"),
    "infinite_scale": (lambda m, x: (m.linear(x) * float("inf")).sum(-1), x2, "0 * inf is NaN before the sum"),
    "divided_by_zero": (lambda m, x: (m.linear(x) / 0.0).sum(-1), x2, "the same"),
    "addmm_beta": (lambda m, x: torch.addmm(m.b, x, m.w_kn, beta=0.5).sum(-1), x2, "beta"),
    "batched_weight": (lambda m, x, w: torch.matmul(x, w).sum(-1), lambda: (x3(), torch.randn(3, K, N)), "3-D w"),
    "sum_in_float64": (lambda m, x: m.linear(x).sum(-1, dtype=torch.float64), x2, "another dtype"),
}


def inputs_of(make) -> list[torch.Tensor]:
    made = make()
    return list(made) if isinstance(made, tuple) else [made]


def products(graph: torch.fx.Graph) -> list[str]:
    return [str(n.target) for n in graph.nodes if n.op == "call_function" and str(n.target) in PRODUCTS]


def run_captured(captured, model: nn.Module, inputs: list[torch.Tensor]):
    """The captured (rewritten) graph itself, run on the model's parameters and the inputs."""
    values = [model.get_parameter(i.target) if i.kind == "param" else model.get_buffer(i.target)
              if i.kind == "buffer" else inputs[i.target] for i in captured.inputs]
    out = torch.fx.GraphModule(nn.Module(), captured.graph)(*values)
    return out if isinstance(out, (tuple, list)) else (out,)


@pytest.mark.parametrize("name", sorted(REWRITTEN))
def test_summed_products_become_exact_dot_products(name):
    forward, make = REWRITTEN[name]
    model, inputs = Forms(forward), inputs_of(make)
    captured = capture(model, inputs)
    assert products(captured.graph) == []
    ops = [str(n.target) for n in captured.graph.nodes if n.op == "call_function"]
    assert ops.count("aten.sum.dim_IntList") == 2 and "aten.mul.Tensor" in ops  # colsum(W), sum(x * colsum)
    assert not any(op in ops for op in ("aten.t.default", "aten.numpy_T.default", "aten.permute.default",
                                        "aten.transpose.int"))  # the column sum reads W as it is
    # run in float64: the rewrite is algebra, so it agrees with the product to float64 rounding
    model64, inputs64 = model.double(), [i.double() for i in inputs]
    with torch.no_grad():
        (got,), want = run_captured(captured, model64, inputs64), model64(*inputs64)
    assert got.dtype == torch.float64 and got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(KEPT))
def test_sums_that_are_not_dot_products_keep_the_product(name):
    forward, make, _why = KEPT[name]
    captured = capture(Forms(forward), inputs_of(make))
    assert len(products(captured.graph)) == 1


def test_a_float64_model_is_left_to_aten():
    forward, make = REWRITTEN["linear_bias_scaled"]
    captured = capture(Forms(forward).double(), [i.double() for i in inputs_of(make)])
    assert products(captured.graph) == ["aten.linear.default"]


def test_a_shared_transpose_stays_for_its_other_product():
    def forward(m, x):
        t = m.w.T
        return torch.matmul(x, t).sum(-1), torch.matmul(x, t)
    captured = capture(Forms(forward), [x2()])
    assert products(captured.graph) == ["aten.matmul.default"]
    targets = [str(n.target) for n in captured.graph.nodes if n.op == "call_function"]
    assert targets.count("aten.numpy_T.default") == 1


@pytest.fixture(scope="module")
def gemm_sums(tmp_path_factory):
    out = tmp_path_factory.mktemp("gemm_sums")
    result = optimize(PROBLEMS / "gemm_sums.py", out / "gemm_sums_new.py", "cpu")
    path, code, err = build_extension(result.path)
    assert code == 0, err
    return result


def test_the_planned_kernels_are_reductions(gemm_sums, tmp_path):
    names = [k["name"] for k in gemm_sums.kernels]
    assert not any("gemm" in n for n in names) and gemm_sums.library_calls == []
    assert [k["fuses"][-1] for k in gemm_sums.kernels if len(k["fuses"]) > 1] == [
        "aten.mul.Tensor", "aten.mul.Tensor", "aten.div.Tensor"]  # the scalings after each row's sum, in order
    cuda = optimize(PROBLEMS / "gemm_sums.py", tmp_path / "gemm_sums_cuda.py", "cuda")
    assert [k["name"] for k in cuda.kernels] == names and cuda.library_calls == []


def test_the_optimized_problem_matches_float64_within_fp32_rounding(gemm_sums):
    problem, candidate = runpy.run_path(str(PROBLEMS / "gemm_sums.py")), runpy.run_path(str(gemm_sums.path))
    torch.manual_seed(3)
    reference = problem["Model"](*problem["get_init_inputs"]())
    new = candidate["ModelNew"](*problem["get_init_inputs"]())
    new.load_state_dict(reference.state_dict())
    inputs = problem["get_inputs"]()
    with torch.no_grad():
        got = new(*inputs)
        exact = reference.double()(*[i.double() for i in inputs])
    # fp32 rounding, worst case: colsum_k and x_k * colsum_k are each rounded once (half a unit each of
    # |x_k * colsum_k|; the CPU kernels add in double), the sum, the bias add and the scalings after it half a unit
    # of the result each (four at most). Measured: ~0.08 of this bound (the fp32 GEMM path: ~0.4); an algebra
    # mistake is O(1).
    eps = torch.finfo(torch.float32).eps
    x, y = (i.double() for i in inputs)
    r = reference.double()
    scale = 1.5
    terms = [
        (x.abs() @ r.weight.sum(0).abs()).unsqueeze(-1) / 2 * scale,
        ((y.abs() @ r.linear.weight.sum(0).abs()) + r.linear.bias.sum().abs()) * scale,
        ((x.abs() @ r.weight_kn.sum(1).abs()) + r.bias.sum().abs()) * 3 / 7,
    ]
    for out, want, term in zip(got, exact, terms):
        assert out.dtype == torch.float32 and out.shape == want.shape
        bound = eps * (term + 2 * want.abs())
        assert ((out.double() - want).abs() <= bound).all(), ((out.double() - want).abs() / bound).max()


# softmax(scale * Q @ K^T) @ V as one attention call (rewrite.products_with_softmax_as_attention)
L, S, E, EV = 7, 9, 6, 5


def qkv(batch=(4,)):
    return torch.randn(*batch, L, E), torch.randn(*batch, S, E), torch.randn(*batch, S, EV)


ATTENTION = {  # name: (forward, inputs, the scale the attention call gets)
    "bmm_plain": (lambda m, q, k, v: torch.bmm(torch.softmax(torch.bmm(q, k.transpose(1, 2)), -1), v), qkv, 1.0),
    "query_scaled_first": (lambda m, q, k, v: torch.bmm(torch.softmax(torch.bmm(q * 0.5, k.transpose(-2, -1)), dim=-1),
                                                       v), qkv, 0.5),
    "scores_divided": (lambda m, q, k, v: torch.softmax(torch.bmm(q, k.transpose(2, 1)) / 4.0, 2).bmm(v), qkv, 0.25),
    "multihead_attention": (lambda m, x: m.attention(x, x, x)[0], lambda: (torch.randn(L, 3, 8),), None),
    # a causal GPT's mask (minGPT): attn_mask = tril != 0, 4-D matmuls
    "causal_masked_fill": (lambda m, q, k, v: torch.softmax((q @ k.transpose(-2, -1) * 0.5).masked_fill(
        m.tril[:, :, :L, :S] == 0, float("-inf")), dim=-1) @ v, lambda: qkv((2, 3)), 0.5),
}


class Attentions(nn.Module):
    def __init__(self, forward):
        super().__init__()
        torch.manual_seed(0)
        self.attention = nn.MultiheadAttention(8, 2)  # need_weights=True: eager multiplies the products out
        self.register_buffer("tril", torch.tril(torch.ones(S, S)).view(1, 1, S, S))
        self.body = forward

    def forward(self, *inputs):
        return self.body(self, *inputs)


def attention_calls(graph: torch.fx.Graph) -> list[torch.fx.Node]:
    return [n for n in graph.nodes if str(n.target) == "aten.scaled_dot_product_attention.default"]


@pytest.mark.parametrize("name", sorted(ATTENTION))
def test_products_with_a_softmax_between_become_one_attention_call(name):
    forward, make, scale = ATTENTION[name]
    model, inputs = Attentions(forward), inputs_of(make)
    captured = capture(model, inputs)
    calls = attention_calls(captured.graph)
    assert len(calls) == 1 and not [n for n in captured.graph.nodes if "softmax" in str(n.target)]
    assert products(captured.graph) == [] or name == "multihead_attention"  # (its projections are linears)
    if scale is not None:
        assert calls[0].kwargs["scale"] == pytest.approx(scale)
    mask = calls[0].kwargs.get("attn_mask")
    assert (mask is not None) == (name == "causal_masked_fill")
    assert mask is None or str(mask.target) == "aten.ne.Scalar"  # `tril == 0` dropped keys: `tril != 0` kept ones
    with torch.no_grad():
        got, want = run_captured(captured, model, inputs), model(*inputs)
    torch.testing.assert_close(got[0], want if isinstance(want, torch.Tensor) else want[0], rtol=1e-5, atol=1e-5)


KEPT_ATTENTION = {  # name: (forward, inputs, why the products stay)
    "probabilities_returned": (lambda m, q, k, v: (lambda p: (p @ v, p))(torch.softmax(torch.bmm(q, k.transpose(1, 2)),
                                                                                        -1)), qkv, "read twice"),
    "softmax_over_queries": (lambda m, q, k, v: torch.bmm(torch.softmax(torch.bmm(q, k.transpose(1, 2)), 1)
                                                          .transpose(1, 2), q[:, :S, :]), qkv, "not the last dim"),
    "keys_not_transposed": (lambda m, q, kt, v: torch.bmm(torch.softmax(torch.bmm(q, kt), -1), v),
                            lambda: (torch.randn(4, L, E), torch.randn(4, E, S), torch.randn(4, S, EV)), "K^T given"),
    "tensor_scale": (lambda m, q, k, v, s: torch.bmm(torch.softmax(torch.bmm(q, k.transpose(1, 2)) * s, -1), v),
                     lambda: (*qkv(), torch.randn(L, S)), "not a number"),
    "weights_returned": (lambda m, x: m.attention(x, x, x), lambda: (torch.randn(L, 3, 8),), "the weights read them"),
    "filled_with_a_number": (lambda m, q, k, v: torch.softmax(torch.bmm(q, k.transpose(1, 2)).masked_fill(
        m.tril[0, 0, :L, :S] == 0, -1e9), -1) @ v, qkv, "a row of fills is uniform, not NaN: not a mask"),
}


@pytest.mark.parametrize("name", sorted(KEPT_ATTENTION))
def test_attention_forms_with_another_reader_or_shape_keep_their_products(name):
    forward, make, _why = KEPT_ATTENTION[name]
    captured = capture(Attentions(forward), inputs_of(make))
    assert attention_calls(captured.graph) == []


class ViewedSoftmax(nn.Module):
    """softmax over a view of (b, c, d, h, w) flattened to (b, c, d*h*w), viewed back, then pointwise ops whose other
    operands line up with the view (a per-channel scale, a number, a 0-dim tensor) or do not (`depth`: varies along
    d, which the view merged with h and w; `full`: as large as the view; `windows`: Swin's mask over windows that a
    batch of 1 lines up with the source's first dim by chance)."""

    def __init__(self, tail: str):
        super().__init__()
        torch.manual_seed(0)
        self.scale = nn.Parameter(torch.randn(1, 4, 1, 1, 1))
        self.depth = nn.Parameter(torch.randn(1, 1, 3, 1, 1))
        self.tail = tail

    def forward(self, x, full):
        b, c, d, h, w = x.shape
        y = torch.softmax(x.view(b, c, -1), dim=2).view(b, c, d, h, w)
        if self.tail == "lined_up":
            return torch.sigmoid(y * self.scale + 0.5) - torch.tensor(0.25)
        if self.tail == "windows":  # (b * c, d, h, w) viewed (b, c, d, h, w) plus a mask per window c
            return torch.softmax(x.view(b * c, d, h, w), -1).view(b, c, d, h, w) + full[:1, :, :1]
        return y * (self.depth if self.tail == "depth" else full)


def test_a_view_moves_after_the_pointwise_ops_that_read_it_the_same_bits():
    inputs = [torch.randn(2, 4, 3, 5, 6), torch.randn(2, 4, 3, 5, 6)]
    model = ViewedSoftmax("lined_up")
    captured = capture(model, inputs)
    ops = [str(n.target) for n in captured.graph.nodes if n.op == "call_function"]
    # the softmax's readers are the pointwise ops now, the view back to five dims comes last
    softmax = next(n for n in captured.graph.nodes if str(n.target) == "aten.softmax.int")
    assert [str(u.target) for u in softmax.users] == ["aten.mul.Tensor"]
    assert ops[-1] == "aten.view.default" and ops.count("aten.view.default") == 3  # x's, the scale's, the result's
    with torch.no_grad():
        (got,), want = run_captured(captured, model, inputs), model(*inputs)
    assert got.shape == want.shape and torch.equal(got, want)


@pytest.mark.parametrize("tail", ["depth", "full", "windows"])
def test_a_view_stays_where_an_operand_does_not_line_up_with_it(tail):
    shape = (1, 4, 3, 5, 6) if tail == "windows" else (2, 4, 3, 5, 6)
    captured = capture(ViewedSoftmax(tail), [torch.randn(shape), torch.randn(shape)])
    reader = next(n for n in captured.graph.nodes if str(n.target) in ("aten.mul.Tensor", "aten.add.Tensor"))
    assert str(reader.args[0].target) == "aten.view.default"


def test_the_moved_product_joins_the_softmax_s_kernel(tmp_path):
    problem = tmp_path / "viewed_softmax.py"
    problem.write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.scale = torch.nn.Parameter(torch.randn(1, 4, 1, 1, 1))\n"
        "    def forward(self, x):\n        b, c, d, h, w = x.shape\n"
        "        return torch.softmax(x.view(b, c, -1), dim=2).view(b, c, d, h, w) * self.scale\n"
        "def get_inputs():\n    return [torch.randn(2, 4, 3, 5, 6)]\ndef get_init_inputs():\n    return []\n")
    result = optimize(problem, tmp_path / "viewed_softmax_new.py", "cuda")
    assert [k["fuses"] for k in result.kernels] == [["aten.softmax.int", "aten.mul.Tensor"]]
