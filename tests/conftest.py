"""Shared fixtures: the corpus's C++ extensions are built once, two at a time, before the tests that judge them."""

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

CORPUS = Path(__file__).parent / "corpus"
PROBLEMS = CORPUS / "problems"


def build_extension(path: Path) -> tuple[Path, int, str]:
    """Import the candidate file in a fresh process: its module-level load_inline builds into the shared cache."""
    code = "import runpy, sys; runpy.run_path(sys.argv[1])"
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                          env=dict(os.environ, MAX_JOBS="1"), timeout=900)
    return path, done.returncode, done.stderr[-2000:]


@pytest.fixture(scope="session")
def built_cpu_corpus():
    """Build every CPU corpus extension (about 30 s each on 2 cores; cached by torch across runs)."""
    files = [p for p in sorted((CORPUS / "cpu").glob("*.py")) if "load_inline(" in p.read_text()]
    with ThreadPoolExecutor(max_workers=max(2, min(4, os.cpu_count() or 2))) as pool:
        results = list(pool.map(build_extension, files))
    failed = [f"{p.name}: {err}" for p, code, err in results if code != 0]
    assert not failed, "corpus extensions failed to build:\n" + "\n".join(failed)
    return CORPUS / "cpu"
