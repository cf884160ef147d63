"""The CUDA-graph forward (kfuse/compiler/graphed.py) on the CPU: torch's graph API replaced by a stand-in that
records the forward's work at capture and does it again at each replay, on the same tensors, as a real graph does."""

import ast
import json
import re
import contextlib
import textwrap

import pytest
import torch

from kfuse.compiler import graphed
from kfuse.compiler.graphed import GraphedForward
from kfuse.compiler.optimize import optimize
from kfuse.judge.static import check_source
from kfuse.kernels import choices


class StandInGraph:
    capturing = None  # the graph being captured

    def __init__(self):
        self.work = []
        self.replays = 0

    def replay(self):
        self.replays += 1
        for step in self.work:
            step()


@contextlib.contextmanager
def stand_in_capture(graph):
    StandInGraph.capturing = graph
    try:
        yield
    finally:
        StandInGraph.capturing = None


def scale(weight, x):
    """x * weight, recorded as a graph's step when captured (its output and operands then fixed)."""
    weight = weight.detach()  # (a view of the storage it has now, as a graph holds its address)
    out = x * weight
    if StandInGraph.capturing is not None:
        StandInGraph.capturing.work.append(lambda: torch.mul(x, weight, out=out))
    return out


@pytest.fixture
def stand_in(monkeypatch):
    monkeypatch.setattr(torch.cuda, "CUDAGraph", StandInGraph)
    monkeypatch.setattr(torch.cuda, "graph", stand_in_capture)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    monkeypatch.setattr(GraphedForward, "DEVICE", "cpu")


def test_the_second_call_captures_and_every_later_one_replays_on_its_own_inputs(stand_in):
    forward = GraphedForward(scale, copied=[1])
    weight = torch.randn(5)
    results = []
    for _ in range(4):
        x = torch.randn(3, 5)
        results.append((x, forward(weight, x)))
    graph, inputs, outputs = next(iter(forward.graphs.values()))
    assert graph.replays == 3  # (the first call ran as it is; the second captured, then replayed)
    for x, out in results:  # each result is its own input's, and stayed so after later calls
        torch.testing.assert_close(out, x * weight, rtol=0, atol=0)
    assert all(out.data_ptr() != outputs.data_ptr() for _, out in results)


def test_parameters_are_read_in_place_and_new_storage_is_captured_again(stand_in):
    forward = GraphedForward(scale, copied=[1])
    weight = torch.nn.Parameter(torch.randn(5))
    x = torch.randn(2, 5)
    forward(weight, x), forward(weight, x)
    with torch.no_grad():
        weight.mul_(2)  # in place: the graph reads it where it is
    torch.testing.assert_close(forward(weight, x), x * weight, rtol=0, atol=0)
    weight.data = torch.randn(5)  # new storage (a module moved or reloaded)
    torch.testing.assert_close(forward(weight, x), x * weight, rtol=0, atol=0)
    torch.testing.assert_close(forward(weight, x), x * weight, rtol=0, atol=0)
    assert len(forward.graphs) == 2


def test_another_batch_size_gets_its_own_graph_and_old_graphs_go(stand_in):
    forward = GraphedForward(scale, copied=[1])
    weight = torch.randn(4)
    for rows in (2, 3, 5, 2):
        for _ in range(2):
            x = torch.randn(rows, 4)
            torch.testing.assert_close(forward(weight, x), x * weight, rtol=0, atol=0)
    assert len(forward.graphs) == GraphedForward.HELD
    assert [key[0][0] for key in forward.graphs] == [torch.Size([5, 4]), torch.Size([2, 4])]


def test_a_failed_capture_is_torch_s_error_and_nothing_is_kept(stand_in, monkeypatch):
    @contextlib.contextmanager
    def refuses(graph):
        raise RuntimeError("operation not permitted when stream is capturing")
        yield

    monkeypatch.setattr(torch.cuda, "graph", refuses)
    forward = GraphedForward(scale, copied=[1])
    weight, x = torch.randn(4), torch.randn(2, 4)
    torch.testing.assert_close(forward(weight, x), x * weight, rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="not permitted when stream is capturing"):
        forward(weight, x)
    assert not forward.graphs


def test_tensors_off_the_graph_s_device_and_outer_captures_run_as_they_are(stand_in, monkeypatch):
    monkeypatch.setattr(GraphedForward, "DEVICE", "cuda")
    forward = GraphedForward(scale, copied=[1])
    weight, x = torch.randn(4), torch.randn(2, 4)
    for _ in range(3):
        torch.testing.assert_close(forward(weight, x), x * weight, rtol=0, atol=0)
    assert list(forward.graphs.values()) == [None]
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    inner = GraphedForward(scale, copied=[1])
    for _ in range(3):
        inner(weight, x)
    assert not inner.graphs and not inner.warmed


def test_several_outputs_are_each_copied_out(stand_in):
    def two(weight, x):
        return [scale(weight, x), scale(weight + 1, x)]  # (weight + 1: fixed once captured)

    forward = GraphedForward(two, copied=[1])
    weight = torch.randn(3)
    first = None
    for _ in range(3):
        x = torch.randn(3)
        a, b = forward(weight, x)
        torch.testing.assert_close(a, x * weight, rtol=0, atol=0)
        torch.testing.assert_close(b, x * (weight + 1), rtol=0, atol=0)
        first = first or (x, a)
    torch.testing.assert_close(first[1], first[0] * weight, rtol=0, atol=0)


class Dropout(torch.nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        return torch.nn.functional.dropout(x, self.p, training=True)


@pytest.mark.parametrize("p, draws", [(0.0, False), (0.5, True)])
def test_random_draws_keep_the_forward_out_of_a_graph(p, draws):
    exported = torch.export.export(Dropout(p), (torch.randn(4),))
    assert graphed.draws_random_numbers(exported.graph) is draws


class Masked(torch.nn.Module):
    def forward(self, x):
        return x[x > 0].sum() + x.cpu().sum().to(x.device) if self.training else x.nonzero().sum()


def test_forwards_that_read_results_on_the_host_stay_out_of_a_graph():
    model = Masked()
    for training in (True, False):
        exported = torch.export.export(model.train(training), (torch.randn(4),))
        assert graphed.waits_on_host(exported.graph)
    assert not graphed.waits_on_host(torch.export.export(Dropout(0.0), (torch.randn(4),)).graph)


class Sources:
    def __init__(self, kernels, unfused):
        self.kernels = [{}] * kernels
        self.unfused = [{"op": op} for op in unfused]


def test_the_rule_counts_launches_not_views_and_weighs_the_copies():
    empty = torch.fx.Graph()
    many = graphed.launches_per_forward(Sources(50, ["aten.view.default"] * 20 + ["aten.cat.default"] * 10))
    assert many == 60
    assert not graphed.use_graph("auto", "cuda", empty, many, copied_bytes=0)
    enough = graphed.launches_per_forward(Sources(50, ["aten.cat.default"] * 14))
    assert graphed.use_graph("auto", "cuda", empty, enough, copied_bytes=10 << 20)
    assert not graphed.use_graph("auto", "cuda", empty, enough, copied_bytes=1 << 30)  # 1 GB in and out
    assert graphed.use_graph("on", "cuda", empty, 1, copied_bytes=1 << 30)
    assert not graphed.use_graph("on", "cpu", empty, 99, copied_bytes=0)
    assert not graphed.use_graph("off", "cuda", empty, 99, copied_bytes=0)
    with pytest.raises(ValueError, match="one of auto, on, off"):
        graphed.use_graph("always", "cuda", empty, many, copied_bytes=0)


LAYERS = textwrap.dedent("""
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(3)])

        def forward(self, x, y):
            for layer in self.layers:
                x = torch.relu(layer(x)) * y
            return x

    def get_inputs():
        return [torch.randn(4, 16), torch.randn(4, 16)]

    def get_init_inputs():
        return [16]
""")


def test_the_emitted_forward_copies_exactly_the_caller_s_inputs(tmp_path):
    problem = tmp_path / "layers.py"
    problem.write_text(LAYERS)
    with choices.using(choices.Choices(cuda_graph="on")):
        result = optimize(problem, tmp_path / "layers_new.py", "cuda")
    text = result.path.read_text()
    tree = ast.parse(text)
    made = next(n.value for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "forward_graph")
    copied = ast.literal_eval(next(k.value for k in made.keywords if k.arg == "copied"))
    forward = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "forward")
    call = next(n for n in ast.walk(forward) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "forward_graph")
    passed = [ast.unparse(a) for a in call.args]
    assert [passed[i] for i in copied] == ["x", "y"] and len(passed) == 8
    assert "class GraphedForward" in text and "launches per forward" in text
    # the judge's static rules (side streams, fallbacks) accept it: the capture's stream is torch.cuda.graph's own
    assert check_source(tree, "cuda") == []
    graphed = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "GraphedForward")
    assert not re.search(r"\b(try|except|pass)\b", ast.get_source_segment(text, graphed))  # (KernelBench's checker)
    with choices.using(choices.Choices(cuda_graph="off")):
        plain = optimize(problem, tmp_path / "plain_new.py", "cuda").path.read_text()
    assert "GraphedForward" not in plain and "import collections" not in plain


def test_optimize_plans_again_without_the_graph_when_the_judge_fails_the_graphed_file(tmp_path, monkeypatch):
    from click.testing import CliRunner

    import kfuse.cli
    import kfuse.compiler.optimize

    problem = tmp_path / "layers.py"
    problem.write_text(LAYERS)
    monkeypatch.setattr(kfuse.compiler.optimize, "use_graph", lambda choice, *rest: choice != "off")
    judged = []

    def judge(problem, candidate, options):
        judged.append("GraphedForward" in candidate.read_text())
        return {"status": "crashed" if judged[-1] else "correct", "reasons": []}

    monkeypatch.setattr(kfuse.cli, "judge_with_progress", judge)
    report = tmp_path / "report.json"
    done = CliRunner().invoke(kfuse.cli.main, ["optimize", str(problem), "-o", str(tmp_path / "new.py"),
                                               "--device", "cpu", "--json", str(report)])
    assert done.exit_code == 0, done.output
    assert judged == [True, False]
    assert "GraphedForward" not in (tmp_path / "new.py").read_text()
    written = json.loads(report.read_text())
    assert written["ungraphed_fallback"] and not written["cuda_graph"] and written["status"] == "correct"


def test_the_graph_choice_is_set_by_its_flag_or_by_choice(tmp_path, monkeypatch):
    from click.testing import CliRunner

    import kfuse.cli
    import kfuse.compiler.optimize

    problem = tmp_path / "layers.py"
    problem.write_text(LAYERS)
    monkeypatch.setattr(kfuse.compiler.optimize, "use_graph", lambda choice, *rest: choice != "off")
    for flags, expected in ([], True), (["--choice", "cuda_graph=off"], False), (["--cuda-graph", "off"], False):
        out = tmp_path / f"new_{len(flags)}_{expected}.py"
        done = CliRunner().invoke(kfuse.cli.main, ["optimize", str(problem), "-o", str(out), "--device", "cpu",
                                                   "--no-check", *flags])
        assert done.exit_code == 0, done.output
        assert ("GraphedForward" in out.read_text()) == expected, flags
