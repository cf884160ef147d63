"""Issue 5's table: the GEMM and convolution problems of a `kfuse bench` run against torch.compile
max-autotune-no-cudagraphs (and eager), same-run ratios, with geomeans per family.

    PYTHONPATH=. python3 scripts/max_autotune_table.py RESULTS.json [--earlier SUITE_RESULTS.json]

--earlier: a suite report judged against torch.compile's default mode, whose kfuse times are printed beside
(kfuse files that changed between the two runs show it). Prints markdown.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path

MODE = "compile:max-autotune-no-cudagraphs"
GEMM = re.compile(r"(?i)matmul|gemm|bmm|linear|matrix")
CONV = re.compile(r"(?i)conv")


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("results", type=Path)
    parser.add_argument("--earlier", type=Path)
    args = parser.parse_args()
    records = json.loads(args.results.read_text())["problems"]
    earlier = {}
    if args.earlier:
        earlier = {r["id"]: r for r in json.loads(args.earlier.read_text())["problems"]}
    rows, ratios = [], {"GEMM": [], "convolution": []}
    for r in records:
        family = "GEMM" if GEMM.search(r["id"]) and not CONV.search(r["id"]) else "convolution"
        times = r.get("times_ms") or {}
        if r["status"] != "correct" or MODE not in times:
            rows.append(f"| {r['id']} | {family} | {r['status']} | | | | | |")
            continue
        vs_eager, vs_mode = times["eager"] / times["candidate"], times[MODE] / times["candidate"]
        ratios[family].append(vs_mode)
        before = earlier.get(r["id"], {}).get("times_ms", {}).get("candidate")
        rows.append(f"| {r['id']} | {family} | correct | {times['candidate']:.3f} | {times['eager']:.3f} | "
                    f"{times[MODE]:.3f} | {vs_eager:.2f}× | **{vs_mode:.2f}×** |"
                    + (f" {before:.3f} |" if before else " |"))
    print("| problem | family | status | kfuse ms | eager ms | max-autotune ms | vs eager | vs max-autotune | "
          "kfuse ms, default-mode suite |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    every = ratios["GEMM"] + ratios["convolution"]
    print()
    for name, values in (("GEMM", ratios["GEMM"]), ("convolution", ratios["convolution"]), ("all", every)):
        slower = sum(v < 1 for v in values)
        print(f"- {name}: {len(values)} timed, geomean **{geomean(values):.2f}×** torch.compile max-autotune-no-cudagraphs"
              f", {slower} slower than it")


if __name__ == "__main__":
    main()
