"""Write a control candidate for a problem: ModelNew is the problem's own Model, so an unbiased judge must time
it at 1.0x eager (within noise). It builds one empty extension so that the static rules (a custom kernel) pass.

    python scripts/reference_as_candidate.py PROBLEM.py OUT.py
"""

import sys
from pathlib import Path

CONTROL = '''

# --- control candidate written by scripts/reference_as_candidate.py: the reference itself --------------------
from torch.utils.cpp_extension import load_inline as _load_inline

_light = {{"no_implicit_headers": True}} if "no_implicit_headers" in _load_inline.__code__.co_varnames else {{}}
_load_inline(name="kfuse_control_{tag}", cpp_sources="", cuda_sources="__global__ void kfuse_control_unused() {{}}",
             is_python_module=False, verbose=False, **_light)


class ModelNew(Model):
    """The problem's Model, unchanged."""
'''


def main() -> None:
    problem, out = Path(sys.argv[1]), Path(sys.argv[2])
    tag = "".join(c if c.isalnum() else "_" for c in problem.stem)
    out.write_text(problem.read_text() + CONTROL.format(tag=tag))


if __name__ == "__main__":
    main()
