"""Every problem under suite/ imports, builds and runs forward on the meta device (shapes only, no memory).

Per file: run it in a fresh namespace (runpy), check Model / get_inputs / get_init_inputs, build the model and make
the inputs under torch.device("meta") (get_inputs uses the default device, so nothing is allocated), run forward under
no_grad as KernelBench's eval does, and estimate the peak of live tensor bytes while it runs: that peak times two (the
judge's float64 ground truth) must stay under ~12 GB. Per level: the minimum file count, `<n>_<Name>.py` names, and
unique numbers and names.
"""

import re
import runpy
import weakref
from pathlib import Path

import pytest
import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

SUITE = Path(__file__).resolve().parent.parent / "suite"
FILES = sorted(SUITE.rglob("*.py"))
LEVELS = {"level1": 42, "level2": 22}
NAME = re.compile(r"^(\d+)_([A-Za-z0-9_]+)\.py$")
SEED_SOURCES = {p.read_text() for p in (SUITE / "seeds").glob("*.py")}
FLOAT64_LIMIT = 12e9
# The seed LeakyReLU is 6.4 GB in and 6.4 GB out by design (byte offsets past 2^31); it is the one exception.
OVER_LIMIT_OK = {"leaky_relu_4096x393216.py", "75_leaky_relu_4096x393216.py"}
# Files whose forward cannot run on meta: name -> a callable(namespace) returning (model, inputs) built for real on
# small CPU tensors. Empty: every problem in the suite uses ops with meta kernels.
REAL_FALLBACK = {}


class LiveBytes(TorchDispatchMode):
    """Tracks the bytes of tensors created by the ops it sees, freed when they die; records the peak."""

    def __init__(self, start: int):
        super().__init__()
        self.live = start
        self.peak = start

    def _free(self, n: int):
        self.live -= n

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        seen = {id(t) for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        for t in pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor) and id(t) not in seen and not t._is_view():
                n = t.untyped_storage().nbytes()
                self.live += n
                self.peak = max(self.peak, self.live)
                weakref.finalize(t, self._free, n)
        return out


def rel(p: Path) -> str:
    return str(p.relative_to(SUITE))


@pytest.mark.parametrize("path", FILES, ids=rel)
def test_problem_runs_on_meta(path):
    ns = runpy.run_path(str(path), run_name="suite_problem")
    for name in ("Model", "get_inputs", "get_init_inputs"):
        assert name in ns, f"{rel(path)} lacks {name}"
    assert issubclass(ns["Model"], torch.nn.Module)
    assert (ns["Model"].__doc__ or "").strip(), "Model needs a one-line docstring"
    source = path.read_text()
    if source not in SEED_SOURCES:
        assert "# est. H100 eager: ~" in source, "missing the '# est. H100 eager: ~X ms (why)' line"
        assert "Dropout" not in source and "dropout" not in source, "dropout is random: not allowed in the suite"
        assert ".eval()" not in source
    if path.name in REAL_FALLBACK:
        model, inputs = REAL_FALLBACK[path.name](ns)
        with torch.no_grad():
            model(*inputs)
        return
    with torch.device("meta"):
        init = ns["get_init_inputs"]()
        model = ns["Model"](*init)
        inputs = ns["get_inputs"]()
    assert isinstance(inputs, (list, tuple)) and inputs, "get_inputs must return a non-empty list"
    for t in inputs:
        assert isinstance(t, torch.Tensor), "get_inputs must return tensors"
        assert t.device.type == "meta", "inputs must follow the default device (no explicit device=)"
        assert t.dtype in (torch.float32, torch.int64, torch.bool), f"unexpected input dtype {t.dtype}"
    for p in list(model.parameters()) + list(model.buffers()):
        assert p.device.type == "meta"
        assert p.dtype in (torch.float32, torch.int64), f"unexpected parameter dtype {p.dtype}"
    start = sum(t.untyped_storage().nbytes() for t in inputs)
    start += sum(t.untyped_storage().nbytes() for t in list(model.parameters()) + list(model.buffers()))
    tracker = LiveBytes(start)
    with torch.no_grad(), tracker:
        out = model(*inputs)
    outs = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
    assert outs, "forward must return a tensor"
    for t in outs:
        assert t.device.type == "meta"
        assert t.numel() > 0
    if path.name not in OVER_LIMIT_OK:
        assert 2 * tracker.peak <= FLOAT64_LIMIT, (
            f"peak live memory {tracker.peak / 1e9:.2f} GB in fp32, {2 * tracker.peak / 1e9:.2f} GB in float64: "
            f"over {FLOAT64_LIMIT / 1e9:.0f} GB")


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_level_count_and_names(level):
    files = sorted((SUITE / level).glob("*.py"))
    assert len(files) >= LEVELS[level], f"{level} has {len(files)} problems, needs {LEVELS[level]}"
    numbers, names = [], []
    for p in files:
        m = NAME.match(p.name)
        assert m, f"{level}/{p.name} is not named <n>_<Name>.py"
        numbers.append(int(m.group(1)))
        names.append(m.group(2).lower())
    dup_n = sorted({n for n in numbers if numbers.count(n) > 1})
    dup_name = sorted({n for n in names if names.count(n) > 1})
    assert not dup_n, f"{level}: numbers used twice: {dup_n}"
    assert not dup_name, f"{level}: names used twice: {dup_name}"


def test_seeds_copied_into_levels():
    level_sources = {p.read_text() for lv in LEVELS for p in (SUITE / lv).glob("*.py")}
    missing = [p.name for p in (SUITE / "seeds").glob("*.py") if p.read_text() not in level_sources]
    assert not missing, f"seeds not copied into a level: {missing}"
