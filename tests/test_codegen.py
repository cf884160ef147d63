"""Code generation details that need no compiler: which helpers a kernel pulls in, how arguments are printed."""

import torch

from kfuse.compiler.codegen import _scalar, prelude_for, render_ivalue


def test_prelude_keeps_only_the_helpers_used_and_their_dependencies():
    text = prelude_for("const float t0 = kf_hardswish(a0);")
    assert "kf_hardswish" in text and "kf_clamp(" in text  # hardswish clamps
    assert "kf_gelu_erf" not in text and "kf_softplus" not in text
    assert text.count("#if") == text.count("#endif")


def test_prelude_for_plain_arithmetic_is_just_the_header():
    text = prelude_for("const float t0 = (a0 * 2.0f);")
    assert "kf_" not in text and "KF_INLINE" in text


def test_arguments_print_as_ivalues():
    assert render_ivalue(None, {}) == "c10::IValue()"
    assert render_ivalue(True, {}) == "c10::IValue(true)"
    assert render_ivalue([1, -2], {}) == "c10::IValue(std::vector<int64_t>{1, -2})"
    assert render_ivalue(torch.float16, {}) == "c10::IValue(int64_t(c10::ScalarType::Half))"
    assert "infinity" in render_ivalue(float("-inf"), {})


def test_list_arguments_carry_the_element_type_their_schema_names():
    # a boxed call unboxes `Tensor?[]` only from a List<optional<Tensor>>: a List<Tensor> there raised "Tried to cast
    # a List<Tensor> to a List<Tensor?>" (aten::index.Tensor, index_put_)
    graph = torch.fx.Graph()
    a, b = graph.placeholder("a"), graph.placeholder("b")
    names = {"a": "a", "b": "b"}
    index = torch.ops.aten.index.Tensor._schema.arguments[1].type
    assert render_ivalue([a], names, index) == (
        "c10::IValue(c10::List<std::optional<at::Tensor>>({std::optional<at::Tensor>(a)}))")
    assert render_ivalue([None, b], names, index) == (
        "c10::IValue(c10::List<std::optional<at::Tensor>>({std::nullopt, std::optional<at::Tensor>(b)}))")
    tensors = torch.ops.aten.cat.default._schema.arguments[0].type
    assert render_ivalue([a, b], names, tensors) == "c10::IValue(c10::List<at::Tensor>({a, b}))"
    assert render_ivalue([], names, tensors) == "c10::IValue(c10::List<at::Tensor>())"
    scales = torch.ops.aten.upsample_nearest2d.vec._schema.arguments[2].type  # float[]?
    assert render_ivalue([2, 3], names, scales) == "c10::IValue(std::vector<double>{2.0, 3.0})"
    sizes = torch.ops.aten.upsample_nearest2d.vec._schema.arguments[1].type  # SymInt[]?
    assert render_ivalue([4, 6], names, sizes) == "c10::IValue(std::vector<int64_t>{4, 6})"


def test_numbers_passed_as_tensors_keep_their_kind():
    assert _scalar(True) == "at::Scalar(true)"
    assert _scalar(3) == "at::Scalar(int64_t(3))"
    assert _scalar(0.5) == "at::Scalar(double(0.5))"
    assert "quiet_NaN" in _scalar(float("nan"))


# -- the CUDA printer compiles (no GPU needed: the .cu file includes only cuda_runtime.h) ------------------------

import shutil  # noqa: E402
import subprocess  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

PROBLEMS = Path(__file__).parent / "optimize"
# Reductions: arg-extremes in the default run (rows and norms compile in test_cuda_codegen's conv_reductions and
# losses_rowwise, columns in its register check); the other variants on demand.
CUDA_PROBLEMS = ["arg_extremes_special"] + [
    pytest.param(name, marks=pytest.mark.exhaustive) for name in (
        "column_reductions", "sum_middle_dim_tanh", "batchnorm_relu", "softmax_dim1_4d", "max_dim_values_indices", "l2_normalize", "group_norm_relu", "rms_norm",
        "bmm_residual_softmax", "l1_norm_prod", "log_softmax_transposed", "batchnorm_eval_functional",
        "var_std_argmin", "native_norms")]


def cuda_sources(name: str):
    from kfuse.compiler.capture import capture
    from kfuse.compiler.codegen import generate
    from kfuse.compiler.plan import plan
    from kfuse.problem import build_reference, load_problem, make_inputs

    problem, init_inputs = load_problem(str(PROBLEMS / f"{name}.py"))
    meta = torch.device("meta")
    model = build_reference(problem, init_inputs, seed=0, device=meta)
    captured = capture(model, make_inputs(problem, seed=0, device=meta))
    return generate(captured, plan(captured.graph), "cuda")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
@pytest.mark.parametrize("name", CUDA_PROBLEMS)
def test_generated_cuda_compiles(name, tmp_path):
    sources = cuda_sources(name)
    assert sources.cuda is not None and "__global__" in sources.cuda
    assert "C10_CUDA_KERNEL_LAUNCH_CHECK" in sources.cpp
    cu = tmp_path / f"{name}.cu"
    cu.write_text(sources.cuda)
    done = subprocess.run(["nvcc", "-arch=sm_90", "-std=c++17", "-O3", "-c", str(cu), "-o", str(tmp_path / "k.o")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "warning" not in done.stderr.lower(), done.stderr[-4000:]


def test_a_file_grows_with_its_distinct_calls_not_with_its_layers(tmp_path):
    """A loop of six identical steps: each library op has one operator handle, shared by its six calls, and the
    docstring lists each fused chain and each unfused op once, with its count."""
    from kfuse.compiler.optimize import optimize

    problem = tmp_path / "repeated.py"
    problem.write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        for _ in range(6):\n"
        "            x = torch.relu(torch.cat([x, x * 2], 1)[:, :16]) + 1\n        return x\n"
        "def get_inputs():\n    return [torch.randn(4, 16)]\ndef get_init_inputs():\n    return []\n")
    result = optimize(problem, tmp_path / "repeated_new.py", "cpu")
    text = result.path.read_text()
    assert len(result.kernels) == 12 and text.count("kf::call(op_cat,") == 6
    assert text.count('kf::aten("aten::cat"') == 1 and text.count('kf::aten("aten::slice"') == 1
    docstring = text[:text.index('"""', 3)]
    assert "fused_relu_add (6 calls): aten.relu.default -> aten.add.Tensor" in docstring
    assert "aten.cat.default x6, aten.slice.Tensor x6" in docstring and "fused_relu_add_2" not in docstring


def test_model_new_refuses_constructor_numbers_other_than_those_compiled_in(tmp_path):
    """emit._with_constructor_guard: the numbers a Model is built with are folded into the kernels (a scale, an
    epsilon, the planned sizes), so ModelNew's __init__ raises for other values instead of computing with the old
    ones; get_init_inputs' values and the literal defaults pass, and arguments that are not numbers are not checked."""
    import re

    from kfuse.compiler.optimize import optimize

    problem = tmp_path / "scaled.py"
    problem.write_text(
        "import torch\nclass Model(torch.nn.Module):\n"
        "    def __init__(self, features, scale, name, eps=1e-5, sizes=(2, 3)):\n"
        "        super().__init__()\n        self.linear = torch.nn.Linear(features, features)\n"
        "        self.scale, self.eps = scale, eps\n"
        "    def forward(self, x):\n        return torch.relu(self.linear(x)) * self.scale + self.eps\n"
        "def get_inputs():\n    return [torch.randn(4, 16)]\n"
        "def get_init_inputs():\n    return [16, 0.5, 'layer']\n")
    text = optimize(problem, tmp_path / "scaled_new.py", "cpu").path.read_text()
    assert "compiled_for = dict(features=16, scale=0.5, eps=1e-05, sizes=(2, 3))" in text
    namespace = {}
    exec(re.sub(r"kernels = load_inline\(.*?\n\)\n", "kernels = None\n", text, flags=re.S), namespace)
    model_new = namespace["ModelNew"]
    model_new(16, 0.5, "another name")  # the values it was compiled for (the name is no number: not checked)
    with pytest.raises(ValueError, match="compiled for .*scale.: 0.5"):
        model_new(16, 0.25, "layer")
    with pytest.raises(ValueError, match="run kfuse again"):
        model_new(16, 0.5, "layer", eps=1e-3)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not on PATH")
def test_div32_divides_exactly_by_multiplication(tmp_path):
    """kf::div32 (32-bit index division by a magic number and a shift, kf::set_divisor: the strided kernels' dims and
    kf::load's per-channel operands) equals the division for every divisor shape it meets: 1, powers of two and their
    neighbours, primes, 2^31 - 1, against dividends from 0 to 2^31 - 1; and kf::load with 32-bit indices reads what
    it reads with 64-bit ones."""
    from kfuse.compiler.codegen import COMMON

    program = tmp_path / "div32.cpp"
    program.write_text(COMMON + r"""
#include <cstdio>
#include <random>
#include <vector>
int main() {
    std::mt19937_64 random(7);
    std::vector<int64_t> divisors = {1, 2, 3, 5, 7, 31, 64, 65, 127, 1000, 4095, 65537, 1000003, 2147483647};
    for (int b = 1; b < 31; ++b) for (int64_t e : {-1, 0, 1}) divisors.push_back((int64_t(1) << b) + e);
    for (int k = 0; k < 2000; ++k) divisors.push_back(1 + (int64_t)(random() % 2147483646));
    long bad = 0;
    for (int64_t size : divisors) {
        uint32_t magic, shift;
        kf::set_divisor(size, magic, shift);
        std::vector<uint32_t> ns = {0, 1, (uint32_t)size - 1, (uint32_t)size, 2147483647u, 2147483646u};
        for (int k = 0; k < 2000; ++k) ns.push_back((uint32_t)(random() % 2147483648u));
        for (uint32_t n : ns)
            if (n <= 2147483647u && kf::div32(n, magic, shift) != n / (uint64_t)size) ++bad;
    }
    // a per-channel operand (step 2) of a (4, 37, 5, 3) output, value c at channel c
    std::vector<float> channel(37);
    for (int c = 0; c < 37; ++c) channel[c] = (float)c;
    kf::Operand o{};
    o.data = channel.data(); o.step = 2; o.inner = 15; o.count = 37; o.stride = 1;
    kf::set_divisor(o.inner, o.inner_magic, o.inner_shift);
    kf::set_divisor(o.count, o.count_magic, o.count_shift);
    for (int32_t i = 0; i < 4 * 37 * 15; ++i)
        if (kf::load<int32_t>(o, i) != kf::load<int64_t>(o, i) || kf::load<int32_t>(o, i) != (float)(i / 15 % 37)) ++bad;
    std::printf("%ld\n", bad);
    return bad != 0;
}
""")
    binary = tmp_path / "div32"
    built = subprocess.run(["g++", "-O1", "-std=c++17", str(program), "-o", str(binary)],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-2000:]
    ran = subprocess.run([str(binary)], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0 and ran.stdout.strip() == "0", ran.stdout + ran.stderr
