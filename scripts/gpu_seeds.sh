#!/usr/bin/env bash
# Issue 3's numbers in one device call: the four seed problems judged one at a time from a fresh extension folder
# (cold builds with nothing building beside them: the verdicts' build_s), then a + b's host path three ways
# (scripts/gpu_host_variants.py: kfuse's pybind11 binding, the torch.ops one it replaced, eager).
#
#   scripts/gpu_seeds.sh        (on the device, from the repo root; everything packed into $OUT/seeds-host.tgz,
#                                the two summaries also as $OUT/*.txt)
set -uo pipefail
out=/tmp/kfuse-seeds
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=$(mktemp -d)
python3 -m kfuse bench suite/seeds --out "$out/seeds" --per-gpu 1 --timeout 600 2>&1 | tail -n 60
python3 scripts/gpu_host_variants.py --out "$out/host" --rounds 400 --check 2>&1 | tail -n 60
python3 - "$out/seeds/results.json" > "$out/seeds.txt" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["problems"]:
    print(r["id"], r["status"], "build_s", r["build_s"], "times_ms", json.dumps(r["times_ms"]), "speedups", json.dumps(r["speedups"]))
PY
dest=${OUT:-/tmp}
cp "$out/seeds.txt" "$out/host/host-variants.txt" "$dest/" 2>/dev/null
tar czf "$dest/seeds-host.tgz" -C "$out" --exclude=locks .
