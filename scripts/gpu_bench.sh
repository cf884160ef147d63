#!/usr/bin/env bash
# One device call's share of a long `kfuse bench` run: bench until SECONDS are up (then Ctrl-C: what finished stays
# in the cache), and pack the state so the next call, on this machine or a fresh one, goes on from there.
#
#   scripts/gpu_bench.sh STATE SECONDS PER_GPU [PATHS...]     (on the device, from the repo root)
#
# STATE/out is the bench's --out folder. On a warm machine the next call finds it as it was (keep STATE in a
# git-ignored folder of the checkout, e.g. bench-out/); on a fresh one, carry STATE, unpacked from $OUT/state.tgz.
# The packed copy leaves out the build caches (STATE/out/extensions, STATE/out/inductor: large, and rebuilt on a
# fresh machine anyway). The report files are also copied to $OUT/. MIN_SECONDS (default 1.0) is --min-seconds.
# Leave ~60 s of the call's limit beyond SECONDS for the interrupted judges to stop and the state to be packed.
# Extra bench options go after PATHS (e.g. --timeout 600). Keep options and MIN_SECONDS the same across the calls of
# one run: they are part of every cache key, so a change judges everything again. The development-set runs of
# 2026-11-25 (results/pipeline-time-2026-11-25/) used MIN_SECONDS=0.1, PER_GPU 8 and --timeout 600.
set -uo pipefail
state=$1 seconds=$2 per_gpu=$3
shift 3
[ $# -gt 0 ] || set -- suite/level1 suite/level2
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
mkdir -p "$state"
pack() {
    tar czf "${OUT:-/tmp}/state.tgz.part" --exclude=locks --exclude=extensions --exclude=inductor "$state" &&
        mv "${OUT:-/tmp}/state.tgz.part" "${OUT:-/tmp}/state.tgz"
}
# Packed every minute as well: a call cut short by the device's own limit still brings back what finished.
(while sleep 60; do pack; done) &
packer=$!
timeout -s INT -k 20 "$seconds" python3 -m kfuse bench "$@" --out "$state/out" \
    --per-gpu "$per_gpu" --min-seconds "${MIN_SECONDS:-1.0}" 2>&1 | tail -n 150
status=${PIPESTATUS[0]}
kill $packer 2>/dev/null; wait $packer 2>/dev/null
rm -rf "$state/out/locks"
pack
cp "$state"/out/{results.json,report.html} "${OUT:-/tmp}/" 2>/dev/null
echo "bench exit $status; state packed ($(du -sh "${OUT:-/tmp}/state.tgz" | cut -f1))"
