#!/usr/bin/env bash
# One `kfuse bench` run longer than a device call, in one piece: `start` launches it in a session of its own (on a
# warm machine it outlives the call that started it), `wait` follows it from later calls on the same machine. Each
# call waits up to SECONDS, prints the log's end, and copies results.json, the log and the emitted files
# (candidates.tgz) to $OUT once the run has finished. The
# next call must come within the machine's warm window (30 s), or the machine and the run are gone.
#
#   scripts/gpu_bench_detached.sh start STATE SECONDS BENCH_ARGS...   (on the device, from the repo root)
#   scripts/gpu_bench_detached.sh wait STATE SECONDS
#
# STATE (a git-ignored folder, e.g. bench-out/run) holds the bench's --out, its log and its process id.
# `start` copies the checkout (carried folders included) to FROZEN and runs there: each device call copies the
# working tree again, and a bench must not import changed sources halfway through. STATE and the bench's paths are
# relative to that copy.
set -uo pipefail
mode=$1 state=$2 seconds=$3
shift 3
frozen=${FROZEN:-/tmp/kfuse-frozen}
if [ "$mode" = start ]; then
    rm -rf "$frozen" && cp -a . "$frozen"
fi
cd "$frozen" || exit 1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
if [ "$mode" = start ]; then
    mkdir -p "$state"
    setsid nohup python3 -m kfuse bench "$@" --out "$state/out" >"$state/log" 2>&1 </dev/null &
    echo $! >"$state/pid"
    # The GPU's memory in use, twice a second while the bench runs (seconds since its start, MiB): what the judges
    # really held beside what LocalRunner's ledger reserved for them.
    setsid nohup bash -c 'began=$SECONDS; while kill -0 '"$!"' 2>/dev/null; do
        echo "$((SECONDS - began)) $(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)"
        sleep 0.5; done' >"$state/gpumem.txt" 2>/dev/null </dev/null &
fi
pid=$(cat "$state/pid")
end=$((SECONDS + seconds))
while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 5; done
tail -n 30 "$state/log"
if kill -0 "$pid" 2>/dev/null; then
    echo "bench still running (pid $pid)"
else
    echo "bench finished"
    cp "$state/out/results.json" "${OUT:-/tmp}/" 2>/dev/null
    cp "$state/log" "${OUT:-/tmp}/bench.log"
    cp "$state/gpumem.txt" "${OUT:-/tmp}/" 2>/dev/null
    # the emitted files, for KernelBench's judge in a later call (carried back as a folder of the checkout)
    tar -czf "${OUT:-/tmp}/candidates.tgz" -C "$state/out" candidates 2>/dev/null
fi
