"""kfuse/compiler/capture.py: what the captured graph keeps of a forward."""

import inspect

import torch
import torch.nn as nn
import torch.nn.functional as F

from kfuse.compiler.capture import capture
from kfuse.compiler.sizes import SIZES, SizeExpr, SizeMove, mark_sizes


class Discards(nn.Module):
    """Computes results it never returns: a pure chain, attention weights, a dropout's draw."""

    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2)

    def forward(self, x):
        unused = torch.exp(x.sum(-1))  # noqa: F841 (pure: dropped)
        out, weights = self.attn(x, x, x)  # the weights, averaged over the heads: dropped
        F.dropout(x, 0.5, training=True)  # draws random numbers: kept, eager's generator advances for it
        return out * 2.0


def ops(graph) -> list[str]:
    return [str(n.target) for n in graph.nodes if n.op == "call_function"]


def test_results_nothing_reads_are_dropped_except_random_draws():
    meta = torch.device("meta")
    captured = capture(Discards().to(meta), [torch.randn(5, 3, 8, device=meta)])
    kept = ops(captured.graph)
    assert "aten.exp.default" not in kept and "aten.sum.dim_IntList" not in kept
    assert "aten.mean.dim" not in kept           # MultiheadAttention's averaged weights
    assert "aten.scaled_dot_product_attention.default" in kept  # the probabilities the output needs, in one call
    assert any("dropout" in op or "bernoulli" in op for op in kept)
    assert {"aten.exp.default", "aten.mean.dim"} <= set(captured.dropped)
    # what is left still computes the model's output
    model = Discards()
    x = torch.randn(5, 3, 8)
    values = [model.get_parameter(i.target) if i.kind == "param" else x for i in captured.inputs]
    torch.manual_seed(3)
    got = torch.fx.GraphModule(model, captured.graph)(*values)
    torch.manual_seed(3)
    want = model(x)
    torch.testing.assert_close(got[0] if isinstance(got, (tuple, list)) else got, want)


def test_unused_results_stay_where_dropping_them_leaves_no_kernel(tmp_path):
    """36_LSTMHn's case: the only op kfuse has a kernel for computes a result the model never returns. Dropped, the
    file would be eager's calls alone; it computes it as the model does instead, and its docstring says so."""
    from kfuse.compiler.optimize import optimize
    problem = tmp_path / "unused.py"
    problem.write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
        "        unused = torch.relu(x) * 3.0\n        return torch.sort(x, -1)[0]\n"
        "def get_inputs():\n    return [torch.rand(3, 4)]\ndef get_init_inputs():\n    return []\n")
    done = optimize(problem, tmp_path / "unused_new.py", "cpu")
    assert [k["fuses"] for k in done.kernels] == [["aten.relu.default", "aten.mul.Tensor"]]
    text = (tmp_path / "unused_new.py").read_text()
    assert "computed but never returned" in text and "aten.relu.default, aten.mul.Tensor" in text


class Heads(nn.Module):
    """Sizes export writes as numbers: the batch (4), the head count (also 4) and the batch times the heads."""

    def forward(self, x):
        b, t, c = x.shape
        heads = x.reshape(b, t, 4, c // 4).transpose(1, 2).reshape(b * 4, t, c // 4)
        return heads.sum(dim=1).reshape(b, 4 * (c // 4))


def test_the_sizes_that_follow_the_batch_are_those_a_second_capture_moves():
    meta = torch.device("meta")
    first = capture(Heads(), [torch.empty(4, 6, 8, device=meta)])
    again = capture(Heads(), [torch.empty(3, 6, 8, device=meta)])
    assert mark_sizes(first, [SizeMove(("x", 0), 4, 3, again)]) == {("x", 0)}
    marked = {n.name: n.meta[SIZES] for n in first.graph.nodes if SIZES in n.meta}
    # the head count equals the batch here, and stays a number: only what moved with it follows it. b * 4 is read
    # from the operand it merges (transpose's first two dims); reshape_2's b is no run of its operand's dims
    # (b * 4, c // 4): it is read from the input
    batch = (("x", 0),)
    assert marked == {"reshape": {(1, 0): SizeExpr(1, batch)},
                      "reshape_1": {(1, 0): SizeExpr(1, (("transpose", 0), ("transpose", 1)))},
                      "reshape_2": {(1, 0): SizeExpr(1, batch)}}
    different = capture(nn.Flatten(), [torch.empty(4, 6, 8, device=meta)])
    fresh = capture(Heads(), [torch.empty(4, 6, 8, device=meta)])
    assert mark_sizes(fresh, [SizeMove(("x", 0), 4, 3, different)]) == set()  # other ops: nothing is marked


class Masked(nn.Module):
    """A causal mask made for the longest sequence and sliced to this one's length (MinGPT's attention)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mask", torch.tril(torch.ones(16, 16)).view(1, 1, 16, 16))

    def forward(self, x):
        b, t, c = x.shape
        scores = x.view(b, t, 2, c // 2).transpose(1, 2) @ x.view(b, t, 2, c // 2).permute(0, 2, 3, 1)
        scores = scores.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        return scores.softmax(-1).reshape(b * t, 2 * t)


def test_sizes_other_than_the_batch_follow_the_captures_that_move_them():
    meta = torch.device("meta")
    first = capture(Masked().to(meta), [torch.empty(4, 6, 8, device=meta)])
    moves = [SizeMove(("x", 0), 4, 3, capture(Masked().to(meta), [torch.empty(3, 6, 8, device=meta)])),
             SizeMove(("x", 1), 6, 4, capture(Masked().to(meta), [torch.empty(4, 4, 8, device=meta)]))]
    assert mark_sizes(first, moves) == {("x", 0), ("x", 1)}
    marked = {n.name: set(n.meta[SIZES].values()) for n in first.graph.nodes if SIZES in n.meta}
    b, t = ("x", 0), ("x", 1)
    # view(b, t, ...); the mask sliced to t, its second slice to the first's length; reshape(b * t, 2 * t): b * t a
    # product of the inputs' sizes (no run of its operand's dims), 2 * t its operand's heads times length
    assert marked == {"view": {SizeExpr(1, (b,)), SizeExpr(1, (t,))}, "view_1": {SizeExpr(1, (b,)), SizeExpr(1, (t,))},
                      "slice_1": {SizeExpr(1, (t,))}, "slice_2": {SizeExpr(1, (("slice_1", 2),))},
                      "reshape": {SizeExpr(1, (b, t)), SizeExpr(1, (("softmax", 1), ("softmax", 2)))}}


def problem_of(module: type, inputs: str, path):
    """A problem file at `path` whose Model is `module`'s source and whose get_inputs returns [`inputs`]."""
    path.write_text("import torch\nimport torch.nn as nn\n\n\n" + inspect.getsource(module).replace(
        f"class {module.__name__}", "class Model") + f"\n\ndef get_inputs():\n    return [{inputs}]\n\n\n"
        "def get_init_inputs():\n    return []\n")
    return path


class Shuffle(nn.Module):
    """ShuffleNet's channel shuffle after a pooling (its sides a floor division of the input's, no line through
    them): a view through (b, groups, c / groups, h, w), then a ReLU."""

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(x, 2)
        b, c, h, w = x.size()
        return torch.relu(x.view(b, 2, c // 2, h, w).transpose(1, 2).contiguous().view(b, -1, h, w))


def test_a_square_image_s_sides_each_follow_their_own_dim(tmp_path):
    # optimize cuts each dim of one length alone first: height and width are told apart on a square input
    from kfuse.compiler.optimize import optimize

    problem = problem_of(Shuffle, "torch.rand(2, 4, 14, 14)", tmp_path / "shuffle.py")
    text = optimize(problem, tmp_path / "shuffle_new.py", "cpu").path.read_text()
    # (14 -> 7 pooled, 8 -> 4: no line through the input's sides; each read from the viewed tensor)
    assert "{max_pool2d.size(0), int64_t(2), int64_t(2), max_pool2d.size(2), max_pool2d.size(3)}" in text
    assert "{contiguous.size(0), int64_t(-1), contiguous.size(3), contiguous.size(4)}" in text


class Writes(nn.Module):
    def forward(self, x):
        y = x * 2
        y.relu_()           # a computed value: read as relu by what comes after
        z = y + 1
        w = y * 3
        seen = w.view(-1)
        w.add_(1)           # a view reads w: stays in place
        x.mul_(0.5)         # the caller's input: stays in place
        return z, seen, x


def test_in_place_ops_on_computed_values_read_as_out_of_place():
    graph = capture(Writes(), [torch.randn(3, 4)]).graph
    targets = [str(n.target) for n in graph.nodes if n.op == "call_function"]
    assert "aten.relu_.default" not in targets and "aten.relu.default" in targets
    assert "aten.add_.Tensor" in targets and "aten.mul_.Tensor" in targets
    relu = next(n for n in graph.nodes if str(n.target) == "aten.relu.default")
    assert {str(u.target) for u in relu.users} == {"aten.add.Tensor", "aten.mul.Tensor"}



def test_a_mask_sliced_to_its_whole_length_follows_the_length_too():
    # at t = 16, the mask's own length, export writes mask[:, :, :t, :t] as an alias: a capture at another length has
    # the slices, which the alias becomes (each to the whole dim here) so that their ends follow t
    from kfuse.compiler.sizes import restore_full_slices

    meta = torch.device("meta")
    first = capture(Masked().to(meta), [torch.empty(4, 16, 8, device=meta)])
    assert "aten.alias.default" in {str(n.target) for n in first.graph.nodes}
    shorter = capture(Masked().to(meta), [torch.empty(4, 9, 8, device=meta)])
    assert restore_full_slices(first, shorter)
    slices = [n for n in first.graph.nodes if str(n.target) == "aten.slice.Tensor"]
    assert [n.args[1:4] for n in slices] == [(2, 0, 16), (3, 0, 16)]
    mark_sizes(first, [SizeMove(("x", 1), 16, 9, shorter)])
    assert [set(n.meta[SIZES].values()) for n in slices] == [{SizeExpr(1, (("x", 1),))},
                                                            {SizeExpr(1, ((slices[0].name, 2),))}]
    # graphs that differ otherwise are left as they were
    other = capture(nn.Flatten(), [torch.empty(4, 16, 8, device=meta)])
    again = capture(Masked().to(meta), [torch.empty(4, 16, 8, device=meta)])
    assert not restore_full_slices(again, other) and "aten.alias.default" in {str(n.target) for n in again.graph.nodes}


def test_every_op_kfuse_decomposes_has_a_decomposition_in_this_torch():
    """capture.DECOMPOSED names ops by string: each must find PyTorch's decomposition (a torch release that moved one
    would otherwise leave it an ATen call without a word)."""
    from kfuse.compiler.capture import DECOMPOSED, _decomposition_table

    assert {str(op) for op in _decomposition_table()} == DECOMPOSED


class ElmanGivenState(nn.Module):
    """An Elman cell whose plain tensor attribute holds the state: an optional input is written into it in place,
    then the attribute is replaced by the new state (the pattern of KernelBench's newer VanillaRNN)."""

    def __init__(self):
        super().__init__()
        self.hidden = torch.randn(4, 6)  # plain attribute: Module.to leaves it on the CPU
        self.i2h = nn.Linear(5 + 6, 6)
        self.h2o = nn.Linear(6, 3)

    def forward(self, x, initial_hidden=None):
        if initial_hidden is not None:
            self.hidden.copy_(initial_hidden)
        self.hidden = self.hidden.to(x.device)
        self.hidden = torch.tanh(self.i2h(torch.cat((x, self.hidden), dim=1)))
        return self.h2o(self.hidden)


def test_an_input_written_into_a_plain_attribute_captures_on_meta():
    """On meta inputs the attribute goes to meta as well: a CPU attribute could not take a copy of a meta input
    ("Cannot copy out of meta tensor"), and the problem was refused. The write and the new state are both kept."""
    meta = torch.device("meta")
    captured = capture(ElmanGivenState().to(meta), [torch.randn(4, 5, device=meta), torch.randn(4, 6, device=meta)])
    assert [i.target for i in captured.inputs if i.kind == "attribute"] == ["hidden"]
    assert ops(captured.graph).count("aten.copy_.default") == 2  # the input into it, then the new state


class SoftmaxOverPositions(nn.Module):
    """A softmax over the positions of a pooled 3D volume, viewed back to five dims: d, h and w of that view are no
    dims of its operand (the softmax's (b, c, d * h * w)); they are the first view's operand's."""

    def forward(self, x):
        x = torch.nn.functional.avg_pool3d(x, 2)
        b, c, d, h, w = x.shape
        return torch.softmax(x.view(b, c, -1), dim=2).view(b, c, d, h, w) * 2.0


def test_a_view_s_sizes_merged_before_are_read_from_the_earlier_view_s_operand(tmp_path):
    from kfuse.compiler.optimize import optimize

    problem = problem_of(SoftmaxOverPositions, "torch.rand(2, 3, 8, 10, 12)", tmp_path / "positions.py")
    text = optimize(problem, tmp_path / "positions_new.py", "cpu").path.read_text()
    # (8, 10, 12 -> 4, 5, 6 pooled: no line through the input's sides; each read from the pooled tensor)
    assert "avg_pool3d.size(2), avg_pool3d.size(3), avg_pool3d.size(4)}" in text
