"""Reductions over short rows (kfuse/reduce.py: groups of 4-16 lanes per row, warp-uniform loops) on a GPU.

    PYTHONPATH=. python3 scripts/gpu_short_rows_check.py [--out DIR]

Rows of 7 to 64 elements, so each group width runs (4, 8, 16, and 32 for comparison); row counts that leave the
last warp partly empty; misaligned and strided rows (the scalar path); a two-dim reduced range; Welford, online
softmax, arg-extreme and plain states. Each problem is emitted for CUDA and judged (`kfuse check`: 5 trials on
fresh random inputs, float64 parity, no timing).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_transpose_check import judge_all, write_rows  # noqa: E402
from kfuse.judge import CheckOptions  # noqa: E402
from kfuse.optimize import optimize  # noqa: E402

HEADER = "import torch\nimport torch.nn as nn\n\n\n"

# name: (module body, input shapes): rows x row length in the comment
PROBLEMS = {
    "layer_norm_64": ("""class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(64)

    def forward(self, x):
        return torch.relu(self.norm(x * 1.5))
""", [(37, 5, 64)]),            # 185 x 64: groups of 16, the last warp half empty
    "layer_norm_16": ("""class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(16)

    def forward(self, x):
        return self.norm(x)
""", [(1001, 16)]),             # 1001 x 16: groups of 4
    "softmax_13": ("""class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)
""", [(1001, 13)]),             # rows misaligned for float4: the scalar path, groups of 4
    "sum_7": ("""class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x.sum(dim=-1, keepdim=True)) * x
""", [(333, 7)]),               # a full-shape output after the sum, groups of 4
    "argmax_33": ("""class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.argmax(x, dim=-1)
""", [(517, 33)]),              # groups of 16 (a float4 per lane plus one element)
    "logsumexp_strided": ("""class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.logsumexp(x.transpose(1, 2), dim=-1)
""", [(3, 64, 40)]),            # 120 rows of 64, stride 40 between elements
    "mean_two_dims": ("""class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.mean(dim=(-2, -1)) - x.amax(dim=(-2, -1))
""", [(9, 11, 5, 7)]),          # 99 rows of 35 over two dims: groups of 16
    "layer_norm_100": ("""class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(100)

    def forward(self, x):
        return self.norm(x)
""", [(77, 100)]),              # a warp per row, as before
}


def write_problem(folder: Path, name: str) -> Path:
    body, shapes = PROBLEMS[name]
    inputs = ", ".join(f"torch.randn{shape}" for shape in shapes)
    path = folder / f"{name}.py"
    path.write_text(HEADER + body + f"\n\ndef get_inputs():\n    return [{inputs}]\n\n\n"
                    "def get_init_inputs():\n    return []\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="kfuse-short-rows-"))
    emitted = {}
    for name in PROBLEMS:
        problem = write_problem(folder, name)
        emitted[name] = (problem, optimize(problem, folder / f"{name}_new.py", "cuda", "fp32").path)
    options = CheckOptions(device="cuda", time=False, compile_modes=[], timeout=400)
    verdicts = judge_all(emitted, options, jobs=4)
    rows = []
    for name, verdict in verdicts.items():
        rows.append({"problem": name, "status": verdict["status"], "reasons": verdict["reasons"]})
        print(f"{name:20s} {verdict['status']:10s} {verdict['reasons'][:1]}", flush=True)
    write_rows(args.out, "short-rows-check.json", rows)


if __name__ == "__main__":
    main()
