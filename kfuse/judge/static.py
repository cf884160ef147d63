"""The static check: rules read off a candidate's source, with line numbers.

Errors make the verdict `rejected` before anything runs; warnings are reported and do not change the verdict.
The rules are DESIGN.md §4's: constructs that can hide a failing kernel or escape the timer, and the absence of a
custom kernel.
"""

from __future__ import annotations

import ast
import re
from dataclasses import asdict, dataclass

from kfuse.loader import top_level_names

FORBIDDEN_MODULES = {"threading", "_thread", "multiprocessing", "concurrent", "asyncio"}
# Reaching into the interpreter: a kernel never needs these, a candidate faking its timings does.
INTROSPECTION_MODULES = {"inspect", "gc", "ctypes", "importlib", "builtins", "__main__", "kfuse"}
INTROSPECTION_CALLS = {"exec", "eval", "compile", "__import__", "globals", "vars", "breakpoint"}
INTROSPECTION_ATTRS = re.compile(r"^sys\.(modules|_getframe|settrace|setprofile|meta_path|path_hooks)")
LOAD_INLINE = "torch.utils.cpp_extension.load_inline"
PATCHABLE_ROOTS = {"torch", "time"}

# Stream APIs in Python (dotted names) and in C++/CUDA source strings: work on a side stream escapes the
# judge's events on the current stream, and can race with the reference.
PY_STREAM_NAMES = re.compile(r"(^|\.)cuda\.(Stream|stream|set_stream|ExternalStream|StreamContext)$")
CXX_STREAM_APIS = re.compile(r"\b(getStreamFromPool|getStreamFromExternal|cudaStreamCreate\w*|setCurrentCUDAStream"
                             r"|cudaStreamPerThread|cudaStreamLegacy)\b")

# Calls a forward may make without computing anything itself: allocation, shape and dtype plumbing.
PLUMBING = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "tensor", "as_tensor", "Size", "device", "dtype", "is_tensor", "numel", "broadcast_shapes", "finfo", "iinfo",
}
# torch.ops namespaces of PyTorch's own kernels; any other namespace holds ops a load_inline library registered.
TORCH_OP_NAMESPACES = {"aten", "prims", "quantized", "_quantized", "quantized_decomposed", "mkldnn", "mkl", "_c10d_functional",
                       "c10d", "c10d_functional", "_inductor_test", "inductor", "higher_order", "profiler", "cuda",
                       "torchvision", "image", "fbgemm", "torchaudio", "xformers", "_C", "sparse", "onednn"}
TORCH_CONTAINERS = {"Parameter", "ParameterList", "ParameterDict", "ModuleList", "ModuleDict", "Identity"}
TENSOR_COMPUTE_METHODS = {
    "relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "abs", "clamp", "clamp_min", "clamp_max", "sum",
    "mean", "max", "min", "amax", "amin", "argmax", "argmin", "prod", "softmax", "log_softmax", "matmul", "mm",
    "bmm", "addmm", "pow", "mul", "add", "sub", "div", "norm", "var", "std", "cumsum", "logsumexp", "gelu",
    "leaky_relu", "conv2d", "linear", "maximum", "minimum", "where", "masked_fill", "tanh_", "relu_",
}


@dataclass(frozen=True)
class Finding:
    level: str  # "error" or "warning"
    rule: str
    line: int
    message: str

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


CXX_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def strip_cxx_comments(text: str) -> str:
    """C++ source without its comments, newlines kept so line numbers still count."""
    return CXX_COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def dotted_name(node: ast.AST) -> str | None:
    """'torch.cuda.Stream' for the expression torch.cuda.Stream; None for anything not a plain dotted name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def docstring_nodes(tree: ast.Module) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                ids.add(id(first.value))
    return ids


class _Checker(ast.NodeVisitor):
    def __init__(self, tree: ast.Module, target: str):
        self.tree = tree
        self.target = target
        self.findings: list[Finding] = []
        self.aliases: dict[str, str] = {}  # local name -> module it stands for
        self.calls_load_inline = False
        self.has_global_kernel = False
        self.docstrings = docstring_nodes(tree)
        self.globals = top_level_names(tree)

    def error(self, rule: str, node: ast.AST | int, message: str) -> None:
        line = node if isinstance(node, int) else getattr(node, "lineno", 0)
        self.findings.append(Finding("error", rule, line, message))

    def resolve(self, name: str | None) -> str | None:
        """A dotted name with its first part replaced by the module an import bound it to."""
        if name is None:
            return None
        head, _, rest = name.partition(".")
        real = self.aliases.get(head, head)
        return f"{real}.{rest}" if rest else real

    # -- rules -------------------------------------------------------------------------------------------
    def visit_Try(self, node: ast.AST) -> None:
        self.error("try-except", node, "try/except: a fallback can hide a failing kernel")
        self.generic_visit(node)

    visit_TryStar = visit_Try

    def visit_Pass(self, node: ast.Pass) -> None:
        self.error("pass", node, "`pass` statement (KernelBench's static checker rejects it)")

    def _check_module(self, module: str, node: ast.AST) -> None:
        root = module.split(".")[0]
        if root in FORBIDDEN_MODULES:
            self.error("concurrency", node, f"imports {module}: threads and processes are not allowed")
        if root in INTROSPECTION_MODULES:
            self.error("introspection", node, f"imports {module}: reaching into the interpreter is not allowed")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(alias.name, node)
            if alias.asname:
                self.aliases[alias.asname] = alias.name
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        self._check_module(module, node)
        for alias in node.names:
            self.aliases[alias.asname or alias.name] = f"{module}.{alias.name}" if module else alias.name
            if PY_STREAM_NAMES.search(f"{module}.{alias.name}"):
                self.error("side-stream", node, f"imports {module}.{alias.name}: CUDA streams other than the "
                                                f"current one are not allowed")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = self.resolve(dotted_name(node))
        if name and PY_STREAM_NAMES.search(name):
            self.error("side-stream", node, f"uses {name}: CUDA streams other than the current one are not allowed")
        if name and INTROSPECTION_ATTRS.match(name):
            self.error("introspection", node, f"uses {name}: reaching into the interpreter is not allowed")
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.aliases.pop(node.name, None)  # a local `def load_inline` is not torch's
        self.generic_visit(node)

    def _check_patch_target(self, target: ast.AST) -> None:
        if isinstance(target, ast.Attribute):
            name = self.resolve(dotted_name(target))
            if name and name.split(".")[0] in PATCHABLE_ROOTS:
                self.error("patching", target, f"assigns {name}: patching torch or time functions is not allowed")

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_patch_target(target)
            if isinstance(target, ast.Subscript):  # vars(torch)["randn"] = ..., torch.__dict__[...] = ...
                root = self.resolve(dotted_name(target.value)) or ""
                if root.split(".")[0] in PATCHABLE_ROOTS:
                    self.error("patching", target, f"assigns into {root}: patching torch or time is not allowed")
        # `F = torch.nn.functional` binds an alias just like an import does
        value = self.resolve(dotted_name(node.value))
        if value and value.split(".")[0] in ("torch", "time"):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.aliases[target.id] = value
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_patch_target(node.target)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = self.resolve(dotted_name(node.func)) or ""
        if name == LOAD_INLINE:
            self.calls_load_inline = True
        if isinstance(node.func, ast.Name) and node.func.id in INTROSPECTION_CALLS and node.func.id not in self.aliases:
            self.error("introspection", node, f"calls {node.func.id}(): running or inspecting code indirectly is "
                                              f"not allowed")
        if name in ("setattr", "builtins.setattr") and node.args:
            root = self.resolve(dotted_name(node.args[0])) or ""
            if root.split(".")[0] in PATCHABLE_ROOTS:
                self.error("patching", node, f"setattr on {root}: patching torch or time functions is not allowed")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and id(node) not in self.docstrings:
            text = strip_cxx_comments(node.value)
            if "__global__" in text:
                self.has_global_kernel = True
            for match in CXX_STREAM_APIS.finditer(text):
                line = node.lineno + text.count("\n", 0, match.start())
                self.error("side-stream", line, f"kernel source uses {match.group(1)}: CUDA streams other than "
                                                f"the current one are not allowed")

    # -- whole-file rules ----------------------------------------------------------------------------------
    def finish(self) -> None:
        if not self.calls_load_inline:
            self.error("no-custom-kernel", 1, "not a custom kernel: the file never calls torch's load_inline")
        elif self.target == "cuda" and not self.has_global_kernel:
            self.error("no-custom-kernel", 1, "not a custom kernel: no __global__ function in the CUDA sources")
        self.findings.extend(self._torch_ops_in_forward())

    def _torch_submodule_calls(self, forward: ast.FunctionDef) -> dict[str, int]:
        """Calls of self.X in forward where __init__ made X a torch module that computes (nn.LeakyReLU(), ...)."""
        init = find_method(self.tree, "ModelNew", "__init__")
        modules = {}
        for node in ast.walk(init) if init else []:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                made = self.resolve(dotted_name(node.value.func)) or ""
                if made.startswith("torch.nn.") and made.split(".")[-1] not in TORCH_CONTAINERS:
                    for target in node.targets:
                        if _self_attribute(target):
                            modules[_self_attribute(target)] = made
        found = {}
        for node in ast.walk(forward):
            if isinstance(node, ast.Call) and _self_attribute(node.func) in modules:
                found.setdefault(f"self.{node.func.attr} ({modules[node.func.attr]})", node.lineno)
        return found

    def _torch_ops_in_forward(self) -> list[Finding]:
        forward = find_method(self.tree, "ModelNew", "forward")
        if forward is None:
            return []
        used: dict[str, int] = {}
        for node in ast.walk(forward):
            op = None
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                op = "@ (matmul)"
            elif isinstance(node, ast.Call):
                name = self.resolve(dotted_name(node.func)) or ""
                short = name.split(".")[-1]
                if name.startswith("torch.") and short not in PLUMBING and not name.startswith("torch.cuda") \
                        and not _custom_op(name):
                    op = name
                elif isinstance(node.func, ast.Attribute) and node.func.attr in TENSOR_COMPUTE_METHODS \
                        and not name.startswith("torch.") and _receiver_root(node.func) not in self.globals:
                    op = f".{node.func.attr}()"  # a tensor method; calls on module-level extensions are not
            if op:
                used.setdefault(op, node.lineno)
        used.update(self._torch_submodule_calls(forward))
        if not used:
            return []
        listed = ", ".join(f"{op} (line {line})" for op, line in used.items())
        return [Finding("warning", "torch-ops-in-forward", forward.lineno,
                        f"forward calls torch compute ops: {listed}")]


def _custom_op(name: str) -> bool:
    """torch.ops.<namespace>.<op> where the namespace is not one of PyTorch's: an op the candidate compiled."""
    parts = name.split(".")
    return len(parts) >= 4 and parts[1] == "ops" and parts[2] not in TORCH_OP_NAMESPACES


def _self_attribute(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _receiver_root(func: ast.Attribute) -> str | None:
    node = func.value
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def find_method(tree: ast.Module, class_name: str, method: str) -> ast.FunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == method:
                    return item
    return None


def check_source(tree: ast.Module, target: str) -> list[Finding]:
    """All findings for a parsed candidate, errors and warnings, in line order."""
    checker = _Checker(tree, target)
    checker.visit(tree)
    checker.finish()
    return sorted(checker.findings, key=lambda f: (f.line, f.rule))
