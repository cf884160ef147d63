"""One suite report from several partial `kfuse bench` runs (device calls cut at their time limit).

    PYTHONPATH=. python3 scripts/assemble_report.py OUT RESULTS.json [RESULTS.json ...] --suite suite/level1 suite/level2

Each problem's record is taken from the last results.json that has it (give them oldest first), so every record is
a judge's verdict from a device run; problems of the suite that no run finished are listed as missing, not
invented. The report (results.json, report.html, PNGs) is written by kfuse.bench.report, as `kfuse bench` does,
with `assembled_from` naming the runs.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kfuse.bench import report as bench_report
from kfuse.bench.runner import discover



def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--suite", nargs="+", type=Path, required=True, help="folders of the suite's problems")
    args = parser.parse_args()
    records, metas = {}, []
    for run in args.runs:
        data = json.loads(run.read_text())
        metas.append({"file": str(run), "written": data.get("written"), "judged": data.get("judged")})
        for record in data["problems"]:
            records[record["id"]] = record
    order = [problem.id for problem in discover(args.suite)]  # the bench's own order and names
    missing = [name for name in order if name not in records]
    ordered = [records[name] for name in order if name in records]
    last = json.loads(args.runs[-1].read_text())
    baselines = last["summary"]["baselines"]
    summary = bench_report.summarize(ordered, baselines, total=len(order))
    meta = {k: last[k] for k in ("schema", "kfuse_version", "torch", "device", "mode", "candidates", "options",
                                 "environment") if k in last}
    meta.update(paths=[str(f) for f in args.suite], problems=len(order), judged=sum(m["judged"] or 0 for m in metas),
                cached=0, interrupted=bool(missing), written=last.get("written"), assembled_from=metas,
                missing=missing)
    files = bench_report.write_report(args.out, ordered, summary, meta)
    print(f"{len(ordered)} of {len(order)} problems from {len(metas)} runs; missing: {missing or 'none'}")
    print(json.dumps({k: summary[k] for k in ("correct_fraction", "fast_1", "geomean")}, indent=1))
    print("wrote", ", ".join(str(f) for f in files.values()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
