"""Several problem files composed into one, so that their kernels are built and judged once: one C++ extension and
one judgement instead of one per problem. Each costs about 10 s of a 2-core machine whatever it holds (g++
instantiating torch's and pybind11's headers, the judge's processes starting), most of a cold test run.

Each part keeps its Model, get_inputs, get_init_inputs and whatever else it defines at module level (classes,
functions, constants), each renamed with the part's name; the composed Model holds one of each part's models and
returns their outputs as a tuple, in order. Only for problems whose module level is imports, a docstring,
definitions and assignments to plain names (`composable`).
"""

import ast
import importlib.util
from pathlib import Path


def composable(path: Path) -> bool:
    return all(_defined(node) is not None or isinstance(node, (ast.Import, ast.ImportFrom))
               or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
               for node in ast.parse(path.read_text()).body)


def _defined(node: ast.stmt) -> list[str] | None:
    """The names a module-level statement defines, or None where it is not a definition compose can rename."""
    if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
        return [node.name]
    if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
        return [t.id for t in node.targets]
    return None


class _Rename(ast.NodeTransformer):
    def __init__(self, names: dict[str, str]):
        self.names = names

    def visit_Name(self, node):
        node.id = self.names.get(node.id, node.id)
        return node

    def visit_arg(self, node):  # a parameter named as a module-level constant is renamed with its uses
        node.arg = self.names.get(node.arg, node.arg)
        return node

    def visit_ClassDef(self, node):
        node.name = self.names.get(node.name, node.name)
        return self.generic_visit(node)

    def visit_FunctionDef(self, node):
        node.name = self.names.get(node.name, node.name)
        return self.generic_visit(node)


def input_count(path: Path) -> int:
    spec = importlib.util.spec_from_file_location(f"composed_part_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return len(module.get_inputs())


def compose(paths: list[Path], out: Path) -> Path:
    """Write the composed problem of `paths` (in order) to `out`."""
    imports, parts, fields, arguments, calls = [], [], [], [], []
    for path in paths:
        assert composable(path), f"{path.name} has a module-level statement compose cannot rename"
        part = path.stem
        body = ast.parse(path.read_text()).body
        names = {name: f"{part}_{name}" for node in body for name in _defined(node) or []}
        names.update(Model=f"Part_{part}", get_inputs=f"{part}_inputs", get_init_inputs=f"{part}_init_inputs")
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                text = ast.unparse(node)
                if text not in imports:
                    imports.append(text)
            elif not isinstance(node, ast.Expr):
                parts.append(ast.unparse(_Rename(names).visit(node)))
        fields.append(f"        self.{part} = Part_{part}(*{part}_init_inputs())")
        args = [f"{part}_{k}" for k in range(input_count(path))]
        arguments += args
        calls.append(f"self.{part}({', '.join(args)})")
    composed = [
        f'"""{", ".join(p.stem for p in paths)}: composed (tests/composed.py)."""',
        *imports,
        *parts,
        "class Model(torch.nn.Module):",
        "    def __init__(self):",
        "        super().__init__()",
        *fields,
        "",
        f"    def forward(self, {', '.join(arguments)}):",
        f"        return ({', '.join(calls)},)",
        "def get_inputs():",
        f"    return [{', '.join(f'*{p.stem}_inputs()' for p in paths)}]",
        "def get_init_inputs():",
        "    return []",
    ]
    if "import torch" not in imports:
        composed.insert(1, "import torch")
    out.write_text("\n\n".join(composed) + "\n")
    return out
