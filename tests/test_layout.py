"""The package layout: kfuse's modules import one way, with no cycles and no private names across modules, and each
layer imports only itself and the layers below it (docs/development.md, "Layout").

Imports are read from the source (every import statement, those inside functions too), nothing is imported.
"""

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "kfuse"

# Each layer, with the layers it may import (besides itself). The top (cli, tune, backend, __main__) may import anything.
BASE = {"kfuse", "kfuse.errors", "kfuse.extract", "kfuse.gpulock", "kfuse.loader", "kfuse.problem"}  # what every layer reads
TOP = {"kfuse.__main__", "kfuse.backend", "kfuse.cli", "kfuse.tune"}
MAY_IMPORT = {
    "base": {"base"},
    "kernels": {"base"},
    "compiler": {"kernels", "base"},
    "judge": {"base"},
    "bench": {"judge", "base"},
    "top": {"bench", "judge", "compiler", "kernels", "base"},
}


def layer(module: str) -> str:
    if module in BASE:
        return "base"
    if module in TOP:
        return "top"
    parts = module.split(".")
    if len(parts) >= 2 and parts[1] in MAY_IMPORT and parts[1] not in ("base", "top"):
        return parts[1]
    raise AssertionError(f"{module} is in no layer: put it in a subpackage, or add it to BASE or TOP here")


def module_names(root: Path = PACKAGE) -> dict[str, Path]:
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = ("kfuse",) + path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def imports(modules: dict[str, Path]) -> tuple[dict[str, set[str]], list[str]]:
    """Each module's kfuse imports (module -> modules it imports), and the private names taken across modules."""
    graph: dict[str, set[str]] = {m: set() for m in modules}
    private: list[str] = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        aliases: dict[str, str] = {}  # local names bound to kfuse modules
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "kfuse":
                        assert alias.name in modules, f"{path}:{node.lineno}: no module {alias.name}"
                        graph[name].add(alias.name)
                        if alias.asname:
                            aliases[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom):
                source = node.module or ""
                if node.level:  # relative: resolved against this module's package
                    base = package.split(".")[:len(package.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                if source.split(".")[0] != "kfuse":
                    continue
                assert source in modules, f"{path}:{node.lineno}: no module {source}"
                graph[name].add(source)
                for alias in node.names:
                    sub = f"{source}.{alias.name}"
                    if sub in modules:  # a module of a package
                        graph[name].add(sub)
                        aliases[alias.asname or alias.name] = sub
                    elif is_private(alias.name):
                        private.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {source}.{alias.name}")
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and is_private(node.attr)):
                private.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: "
                               f"{aliases[node.value.id]}.{node.attr}")
        graph[name].discard(name)
    return graph, private


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (a list of modules, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


@pytest.fixture(scope="module")
def graph_and_private():
    return imports(module_names())


def test_the_cycle_finder_finds_cycles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_no_import_cycles(graph_and_private):
    graph, _ = graph_and_private
    assert len(graph) > 30 and graph["kfuse.compiler.plan"]  # the walk found the modules and their imports
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_private_names_across_modules(graph_and_private):
    _, private = graph_and_private
    assert not private, "private names used from another module:\n" + "\n".join(private)


def test_each_layer_imports_only_the_layers_below_it(graph_and_private):
    graph, _ = graph_and_private
    wrong = [f"{m} ({layer(m)}) imports {t} ({layer(t)})" for m, targets in sorted(graph.items())
             for t in sorted(targets) if layer(t) != layer(m) and layer(t) not in MAY_IMPORT[layer(m)]]
    assert not wrong, "\n".join(wrong)


def test_subprocess_entry_points_exist():
    """`python -m kfuse.X` in kfuse's own commands names a module that runs as __main__."""
    modules = module_names()
    found = set()
    for path in modules.values():
        for target in re.findall(r'"-m",\s*"(kfuse[\w.]*)"', path.read_text()):
            found.add(target)
            source = modules.get(target)
            if source is not None and source.name == "__init__.py":
                source = source.parent / "__main__.py"
            assert source is not None and source.exists(), f"{path}: python -m {target}: no such module"
            assert re.search(r'__name__ == "__main__"', source.read_text()) or source.name == "__main__.py", target
    assert {"kfuse.judge.launch", "kfuse.bench.runner", "kfuse"} <= found
