#!/usr/bin/env bash
# ncu on one variant of scripts/bench/gemm_wgmma.py, on the seed's shape (1024 x 8192 x 8192 + its epilogue).
#
#   scripts/bench/gemm_wgmma_ncu.sh VARIANT OUT.txt      (on the device, from the repo root, after gemm_wgmma.py
#                                                        built the variant in the same TORCH_EXTENSIONS_DIR)
# Profiles the third launch of the GEMM kernel: speed of light, compute and memory workload (shared-memory table
# included), warp states, then the tensor-pipe metrics.
set -uo pipefail
variant=$1 out=$2
export PYTHONPATH=$PWD
drive=$(mktemp --suffix .py)
cat > "$drive" <<PY
import sys
sys.path.insert(0, "scripts/bench")
import torch
import gemm_wgmma
mod = gemm_wgmma.load_variant("$variant")
seed = gemm_wgmma.Seed(torch.device("cuda"))
for _ in range(3):
    mod.gemm(seed.x.unsqueeze(0), seed.w.unsqueeze(0), seed.bias, 1, 2.0, 0.1)
torch.cuda.synchronize()
PY
python3 "$drive" > /dev/null
kernel="regex:gemm_3xtf32"
{
    echo "# $variant on the seed shape; $(nvidia-smi --query-gpu=name --format=csv,noheader)"
    ncu --kernel-name "$kernel" --launch-skip 2 --launch-count 1 --section SpeedOfLight \
        --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
        --section WarpStateStats --section SchedulerStats python3 "$drive"
    ncu --kernel-name "$kernel" --launch-skip 2 --launch-count 1 \
        --metrics "regex:sm__pipe_tensor.*cycles_active.*pct_of_peak_sustained_active$,regex:sm__inst_executed_pipe_tensor.*\.sum$,gpu__time_duration.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__inst_executed.sum" \
        python3 "$drive"
} > "$out" 2>&1
grep -E "Duration|Throughput|pct_of_peak|Stall|stall|Bank|bank|Shared|Issue|Eligible|Active Warps|wavefronts|pipe_tensor" "$out" | head -80
