#!/usr/bin/env bash
# ncu on one kernel of an emitted ModelNew: speed of light, compute pipes, and the tensor pipes' activity.
#
#   [PRECISION=tf32] scripts/gpu_ncu.sh PROBLEM.py KERNEL_REGEX OUT.txt      (on the device, from the repo root)
#
# Optimizes PROBLEM for CUDA, runs ModelNew three times on get_inputs() and profiles the third launch of the
# kernels whose name matches KERNEL_REGEX. Two passes: the sections, then the tensor-pipe metrics by pattern
# (their names differ between GPU generations: the list this ncu knows is appended).
set -uo pipefail
problem=$1 kernel=$2 out=$3
export PYTHONPATH=$PWD
work=$(mktemp -d)
python3 -m kfuse optimize "$problem" -o "$work/model_new.py" --device cuda --precision "${PRECISION:-fp32}" --no-check > "$work/optimize.log" 2>&1 \
    || { cat "$work/optimize.log"; exit 1; }
cat > "$work/drive.py" <<'PY'
import runpy, sys
import torch
ns = runpy.run_path(sys.argv[1])
torch.manual_seed(0)
model = ns["ModelNew"](*ns["get_init_inputs"]()).cuda()
inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ns["get_inputs"]()]
with torch.no_grad():
    for _ in range(3):
        model(*inputs)
torch.cuda.synchronize()
PY
python3 "$work/drive.py" "$work/model_new.py" > /dev/null  # build the extension outside the profiler
{
    echo "# $problem, kernels matching '$kernel' (third launch); $(nvidia-smi --query-gpu=name --format=csv,noheader)"
    ncu --kernel-name "regex:$kernel" --launch-skip 2 --launch-count 1 --section SpeedOfLight \
        --section ComputeWorkloadAnalysis --section Occupancy python3 "$work/drive.py" "$work/model_new.py"
    ncu --kernel-name "regex:$kernel" --launch-skip 2 --launch-count 1 \
        --metrics "regex:sm__pipe_tensor.*cycles_active.*pct_of_peak_sustained_active$,regex:sm__inst_executed_pipe_tensor.*\.sum$,gpu__time_duration.sum" \
        python3 "$work/drive.py" "$work/model_new.py"
    echo "## tensor metrics this ncu knows"
    ncu --query-metrics 2>/dev/null | grep -i "pipe_tensor" | head -40
} > "$out" 2>&1
tail -n 60 "$out"
