"""Shared fixtures: the corpus's C++ extensions are built once, two at a time, before the tests that judge them.

The tests run in parallel processes (pytest-xdist, `-n auto` in pyproject.toml): work that several of them need is
done once, by whichever gets there first (`once`), and every build goes to one torch extension folder, so no
extension is built twice in a run, nor in the next run; g++ reads torch's headers precompiled (tests/pch_cxx.py).
"""

import fcntl
import os
import pickle
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

CORPUS = Path(__file__).parent / "corpus"
PROBLEMS = CORPUS / "problems"


def _shared_build_folders() -> None:
    """One extension folder and one Inductor cache for every process of the run (kfuse bench would otherwise put
    its builds under each test's --out, and build them again there)."""
    if "TORCH_EXTENSIONS_DIR" not in os.environ:
        from torch.utils.cpp_extension import get_default_build_root

        os.environ["TORCH_EXTENSIONS_DIR"] = get_default_build_root()
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(Path(tempfile.gettempdir()) / "torchinductor_kfuse_tests"))
    # g++ with torch's common headers precompiled (tests/pch_cxx.py): half of each C++ extension's build
    if "CXX" not in os.environ:
        os.environ["CXX"] = str(Path(__file__).parent / "pch_cxx.py")
        os.environ.setdefault("KFUSE_TEST_PCH_DIR", str(Path(tempfile.gettempdir()) / "kfuse-test-pch"))
        os.environ.setdefault("KFUSE_TEST_OPT", "-O1")  # (tests/pch_cxx.py: what is computed, not how fast)


_shared_build_folders()


def pytest_configure(config):
    """Each test process's judgements fork their workers from one zygote (kfuse.judge.zygote) that imported torch
    once, instead of importing it again in each of about a hundred workers. Not in xdist's controller, which
    judges nothing."""
    if getattr(config, "workerinput", None) is None and getattr(config.option, "numprocesses", None):
        return
    from kfuse.judge.zygote import serving

    config._kfuse_zygote = serving()
    config._kfuse_zygote.__enter__()


def pytest_unconfigure(config):
    if hasattr(config, "_kfuse_zygote"):
        config._kfuse_zygote.__exit__(None, None, None)


def shared_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.getbasetemp()
    return root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root  # shared by the workers of this run


def once(root: Path, name: str, compute):
    """compute(folder) in one process of the run; the others wait for it and read its (pickled) result."""
    done, lock = root / f"{name}.pickle", root / f"{name}.lock"
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if done.exists():
            return pickle.loads(done.read_bytes())
        value = compute(root / name)
        done.write_bytes(pickle.dumps(value))
        return value


def build_extension(path: Path) -> tuple[Path, int, str]:
    """Import the candidate file in a process of its own (forked by this test process's zygote): its module-level
    load_inline builds into the shared cache."""
    from kfuse.judge import zygote

    code = "import runpy, sys; runpy.run_path(sys.argv[1])"
    with tempfile.TemporaryFile("w+") as errors:
        process = zygote.popen(["-c", code, str(path)], env=dict(os.environ, MAX_JOBS="1"),
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errors)
        try:
            returncode = process.wait(timeout=900)
        except subprocess.TimeoutExpired:
            process.kill()
            returncode = process.wait()
        errors.seek(0)
        return path, returncode, errors.read()[-2000:]


@pytest.fixture(scope="session")
def built_cpu_corpus(tmp_path_factory):
    """Build every CPU corpus extension (about 10 s each on 2 cores; cached by torch across runs)."""
    def build(_folder):
        files = [p for p in sorted((CORPUS / "cpu").glob("*.py")) if "load_inline(" in p.read_text()]
        with ThreadPoolExecutor(max_workers=max(2, min(4, os.cpu_count() or 2))) as pool:
            results = list(pool.map(build_extension, files))
        return [f"{p.name}: {err}" for p, code, err in results if code != 0]

    failed = once(shared_root(tmp_path_factory), "cpu_corpus", build)
    assert not failed, "corpus extensions failed to build:\n" + "\n".join(failed)
    return CORPUS / "cpu"

