"""torch.compile(model, backend="kfuse") on the CPU target: found through the entry point, kfuse's kernels for the
graph it can compile, the default backend (here eager, KFUSE_BACKEND_FALLBACK) with the reason for one it cannot,
and a clear error where gradients are wanted."""

import logging

import pytest
import torch


class LinearNormGelu(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(24, 40)
        self.norm = torch.nn.BatchNorm1d(40)

    def forward(self, x):
        # (.to(x.device): Dynamo's graph names the device as a constant, which kfuse's meta capture must move)
        return torch.nn.functional.gelu(self.norm(self.linear(x)).to(x.device)) * 2.0


def make_model():
    torch.manual_seed(0)
    model = LinearNormGelu().eval()
    with torch.no_grad():  # running statistics that are not the identity
        model.norm.running_mean.uniform_(-0.5, 0.5)
        model.norm.running_var.uniform_(0.5, 2.0)
    return model


def test_the_backend_is_registered_by_installing_kfuse():
    from torch._dynamo import list_backends

    assert "kfuse" in list_backends(exclude_tags=())


# Parameters as the graph's inputs (PyTorch 2.5 and later) or, on demand, as its attributes (2.4, and this option
# off: a build of its own)
@pytest.mark.parametrize("inline_modules", [True, pytest.param(False, marks=pytest.mark.exhaustive)])
def test_a_model_compiled_with_kfuse_runs_kfuse_s_kernels_and_matches_eager(caplog, inline_modules):
    torch._dynamo.reset()
    model = make_model()
    compiled = torch.compile(model, backend="kfuse")
    with caplog.at_level(logging.INFO, logger="kfuse.backend"), torch.no_grad(), \
            torch._dynamo.config.patch(inline_inbuilt_nn_modules=inline_modules):
        for rows in (7, 7):  # (the second call reuses the compiled graph)
            x = torch.randn(rows, 24)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
        model.linear.weight.mul_(2.0)  # changed in place after compiling: the compiled graph reads the new values
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
    compiled_logs = [r.getMessage() for r in caplog.records if "compiled into" in r.getMessage()]
    assert compiled_logs == ["kfuse: graph of 13 nodes compiled into 2 kernels (gemm_linear, fused_batch_norm_gelu_mul)"]


def test_a_graph_without_a_kfuse_kernel_runs_with_the_fallback_and_says_why(caplog, monkeypatch):
    torch._dynamo.reset()
    monkeypatch.setenv("KFUSE_BACKEND_FALLBACK", "eager")

    def reshaped(x):
        return x.reshape(6, 4).t()

    compiled = torch.compile(reshaped, backend="kfuse")
    x = torch.randn(4, 6)
    with caplog.at_level(logging.WARNING, logger="kfuse.backend"), torch.no_grad():
        assert torch.equal(compiled(x), reshaped(x))
    assert any("left to eager: kfuse has no kernel for it yet" in r.getMessage() for r in caplog.records)


def test_gradients_are_refused_with_a_clear_error():
    torch._dynamo.reset()
    compiled = torch.compile(make_model(), backend="kfuse")
    with pytest.raises(Exception, match="compiles inference only"):
        compiled(torch.randn(5, 24)).sum().backward()


def test_a_failure_inside_kfuse_falls_back_and_says_so(caplog, monkeypatch):
    """A gap in kfuse itself (here codegen raising) must not stop the user's model: the fallback runs it."""
    from kfuse import backend

    def broken(*args):
        raise KeyError("some op")

    torch._dynamo.reset()
    monkeypatch.setenv("KFUSE_BACKEND_FALLBACK", "eager")
    monkeypatch.setattr(backend, "generate", broken)
    model = make_model()
    compiled = torch.compile(model, backend="kfuse")
    x = torch.randn(3, 24)
    with caplog.at_level(logging.WARNING, logger="kfuse.backend"), torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
    assert any("kfuse failed (KeyError: 'some op'); please report it" in r.getMessage() for r in caplog.records)


def test_graph_replay_reads_parameters_in_place_copies_inputs_and_returns_fresh_outputs(monkeypatch):
    """kfuse.backend.GraphReplay's bookkeeping, with a stand-in for the CUDA graph (no GPU here): arguments with
    the same storage in both warm-up calls are read in place, the others copied into buffers of the replay's own;
    each output is the caller's own; an in-place argument that moves is given a buffer and captured again."""
    from kfuse.backend import GraphReplay

    class Recorded:  # replays the forward on the static arguments into the static outputs, as the graph would
        def __init__(self, owner):
            self.owner = owner
            owner.static_out = (torch.empty(3),)

        def replay(self):
            for out, value in zip(self.owner.static_out, self.owner.forward(*self.owner.static_args)):
                out.copy_(value)

    recorded = []
    monkeypatch.setattr(GraphReplay, "record", lambda self: recorded.append(Recorded(self)) or recorded[-1])
    replay = GraphReplay(lambda w, x: (w * x,))
    weight = torch.tensor([1.0, 2.0, 3.0])
    inputs = [torch.randn(3) for _ in range(6)]
    results = [replay(weight, x)[0] for x in inputs[:4]]
    assert len(recorded) == 1 and replay.in_place == [True, False]
    assert replay.static_args[0] is weight and replay.static_args[1] is not inputs[2]
    weight.mul_(2.0)  # read in place: the next replay sees it
    results.append(replay(weight, inputs[4])[0])
    for result, x, scale in zip(results, inputs, (1, 1, 1, 1, 2)):
        torch.testing.assert_close(result, torch.tensor([1.0, 2.0, 3.0]) * scale * x)  # none overwritten later
    moved = weight.clone()
    torch.testing.assert_close(replay(moved, inputs[5])[0], moved * inputs[5])
    assert len(recorded) == 2 and replay.in_place == [False, False]
