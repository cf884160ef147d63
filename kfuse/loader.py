"""Read and import KernelBench-format files: the problem (`Model`) and the candidate (`ModelNew`).

The parent process only parses files (cheap, safe); importing runs user code and happens in the worker.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from kfuse.errors import UsageError

PROBLEM_NAMES = ("Model", "get_inputs", "get_init_inputs")


def read_text(path: str | Path, what: str) -> str:
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{what} file not found: {path}")
    if not path.is_file():
        raise UsageError(f"{what} is not a file: {path}")
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise UsageError(f"{what} file is not UTF-8 text: {path}") from None


def parse_python(source: str, filename: str) -> ast.Module:
    """Parse, turning a SyntaxError into a one-line message (raised as SyntaxError with that text)."""
    try:
        return ast.parse(source, filename=filename)
    except SyntaxError as err:
        raise SyntaxError(f"{filename}:{err.lineno}: syntax error: {err.msg}") from None


def top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def check_problem_source(path: str | Path) -> None:
    """Check that the problem file parses and defines what the format asks for (UsageError if not)."""
    source = read_text(path, "problem")
    try:
        tree = parse_python(source, str(path))
    except SyntaxError as err:
        raise UsageError(f"problem {err.msg}") from None
    missing = [n for n in PROBLEM_NAMES if n not in top_level_names(tree)]
    if missing:
        raise UsageError(f"problem {path} does not define {', '.join(missing)} (KernelBench format)")


@dataclass(frozen=True)
class CandidateSource:
    """A candidate's Python code, and where it came from when it was extracted from an answer text."""

    code: str
    path: Path
    extraction: dict | None = None


ANSWER_SUFFIXES = (".txt", ".md", ".markdown")


def read_candidate(path: str | Path) -> CandidateSource:
    """The candidate's code: the file itself, or the final complete code block of an answer text."""
    from kfuse.extract import extract_code  # answer texts only

    path = Path(path)
    text = read_text(path, "candidate")
    if path.suffix.lower() in ANSWER_SUFFIXES:
        found = extract_code(text)  # ExtractionError is a verdict (compile_error), not a usage error
        info = {"block": found.block, "blocks": found.blocks, "lines": [found.first_line, found.last_line],
                "why": found.why}
        return CandidateSource(found.code, path, info)
    return CandidateSource(text, path)


def import_from_source(source: str, filename: str, module_name: str) -> ModuleType:
    """Execute `source` as a module named `module_name`, as if `filename` were imported.

    The file's folder goes on sys.path first, as when it is run as a script.
    """
    folder = str(Path(filename).resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_loader(module_name, loader=None, origin=filename)
    module = importlib.util.module_from_spec(spec)
    module.__file__ = filename
    sys.modules[module_name] = module
    code = compile(source, filename, "exec")
    exec(code, module.__dict__)  # noqa: S102 - running the user's model is the point
    return module
