"""Why the judge times a power-hungry kernel slower than a short benchmark: the SM clock under sustained load.

    python scripts/bench/sustained_clocks.py PROBLEM.py CANDIDATE.py --out $OUT     (on the device)

Times the candidate and eager as the judge does (time_one_call: L2 flushed, CUDA events), alternating, for
--calls calls each, while `nvidia-smi` samples the SM clock and the power draw every 50 ms. Prints the median time
of the first 30 calls and of the last 300, with the clocks seen in those windows; writes OUT/sustained.json.
"""

from __future__ import annotations

import argparse
import json
import runpy
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from kfuse.problem import L2Flush, time_one_call  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("problem", type=Path)
    parser.add_argument("candidate", type=Path)
    parser.add_argument("--calls", type=int, default=800)
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args()
    ns, cand = runpy.run_path(str(args.problem)), runpy.run_path(str(args.candidate))
    init = ns["get_init_inputs"]()
    torch.manual_seed(0)
    ref = ns["Model"](*init).cuda().eval()
    new = cand["ModelNew"](*init).cuda().eval()
    new.load_state_dict(ref.state_dict())
    inputs = [x.cuda() for x in ns["get_inputs"]()]
    device, flush = torch.device("cuda"), L2Flush(torch.device("cuda"))
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw", "--format=csv,noheader,nounits",
                            "-lms", "50"], stdout=subprocess.PIPE, text=True)
    rows = []
    with torch.no_grad():
        for _ in range(3):
            new(*inputs), ref(*inputs)
        torch.cuda.synchronize()
        for i in range(args.calls):
            t_new = time_one_call(lambda: new(*inputs), device, flush)[0]
            t_ref = time_one_call(lambda: ref(*inputs), device, flush)[0]
            rows.append((time.time(), t_new, t_ref))
    time.sleep(0.2)
    smi.terminate()
    samples = []
    for line in smi.stdout.read().splitlines():
        parts = [p.strip() for p in line.split(",")]
        try:
            stamp = time.mktime(time.strptime(parts[0].split(".")[0], "%Y/%m/%d %H:%M:%S")) + float("0." + parts[0].split(".")[1])
            samples.append((stamp, float(parts[1]), float(parts[2])))
        except (ValueError, IndexError):
            continue

    def window(part):
        begin, end = part[0][0], part[-1][0]
        seen = [s for s in samples if begin - 0.05 <= s[0] <= end + 0.05]
        return {"candidate_ms": statistics.median(r[1] for r in part), "eager_ms": statistics.median(r[2] for r in part),
                "sm_mhz": statistics.median(s[1] for s in seen) if seen else None,
                "power_w": statistics.median(s[2] for s in seen) if seen else None, "calls": len(part)}

    result = {"gpu": torch.cuda.get_device_name(0), "first_30": window(rows[:30]), "last_300": window(rows[-300:]),
              "all": window(rows)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sustained.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
