#!/usr/bin/env bash
# `kfuse tune` over several problems on one GPU in one device call: JOBS tunes at a time, their builds and
# correctness trials overlapping, their timed rounds one at a time (kfuse.gpulock, as `kfuse bench --per-gpu`).
#
#   scripts/gpu_tune.sh JOBS PROBLEM.py [PROBLEM.py ...]     (on the device, from the repo root)
#
# Writes $OUT/tune/<problem>_new.py (the chosen file, its tuning table in the docstring) and <problem>.json (every
# variant's verdict and time) for each problem, and $OUT/tune/summary.txt.
set -uo pipefail
jobs=$1
shift
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-/tmp/kfuse-ext}
export KFUSE_GPU_LOCK=/tmp/kfuse-tune-gpu.lock KFUSE_GPU_SHARERS=$jobs
out=${OUT:-/tmp}/tune
mkdir -p "$out"
printf '%s\n' "$@" | xargs -P "$jobs" -I{} sh -c '
  name=$(basename "{}" .py)
  python3 -m kfuse tune "{}" -o "'"$out"'/${name}_new.py" --device cuda --json "'"$out"'/${name}.json" \
      > "'"$out"'/${name}.log" 2>&1 || echo "tune failed: {}"'
for log in "$out"/*.log; do echo "== $(basename "$log" .log)"; cat "$log"; done | tee "$out/summary.txt"
