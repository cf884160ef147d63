#!/usr/bin/env bash
# A generality sweep on this machine (no GPU): every problem of a folder through kfuse, two at a time, one line each.
#
#   scripts/cpu_sweep.sh emit  PROBLEMS_DIR OUT   # `optimize --device cuda --no-check`: capture, plan and emit the
#                                                 # CUDA file (the GPU's probes unasked: fp32 policy, NCHW)
#   scripts/cpu_sweep.sh judge PROBLEMS_DIR OUT   # `optimize --device cpu --no-timing`: the C++ target built and
#                                                 # judged (shrink the sizes first: scripts/shrink_sizes.py)
#
# Each line: the exit status, the problem, and the verdict or the error's last line; logs in OUT/<problem>.log.
# KernelBench's static checker on the emitted CUDA files: ../shared/kernelbench/harness/kb_check.py --static-only.
set -uo pipefail
mode=$1 src=$2 out=$3
case $mode in
    emit) flags="--device cuda --no-check" ;;
    judge) flags="--device cpu --no-timing" ;;
    *) echo "cpu_sweep.sh: the mode is emit or judge, not $mode" >&2; exit 2 ;;
esac
mkdir -p "$out"
ls "$src"/*.py | xargs -P 2 -I{} sh -c '
    problem="{}" stem=$(basename "{}" .py)
    timeout 600 python3 -m kfuse optimize "$problem" $2 -o "$1/${stem}_new.py" >"$1/$stem.log" 2>&1
    status=$?
    echo "$status $stem: $(grep -m1 "verdict:" "$1/$stem.log" || grep -v "^ " "$1/$stem.log" | tail -1)"' _ "$out" "$flags"
