#!/usr/bin/env bash
# Issue 29's eight (model, batch) pairs against torch.compile's max-autotune-no-cudagraphs, on a machine of several
# GPUs (nvidia-h100-x8): its compile takes minutes per pair (ResNet-50 at batch 1: 479 s), more than one device call
# holds for eight pairs.
#
#   1. One pair per GPU at once, max-autotune-no-cudagraphs alone (scripts/gpu_models.py): each compile, and so
#      Inductor's on-disk caches (FX graphs, autotuning) filled. These processes' times are not used: eight
#      processes autotuning share the host's CPUs, and launch-bound times follow the host.
#   2. Then, on GPU 0 alone, every pair with eager, Inductor's default mode, max-autotune-no-cudagraphs (its compile
#      now from the caches) and kfuse, timed one after another as scripts/gpu_models.py always does.
#
# Writes OUT/compile/*.jsonl (step 1: the real max-autotune compile seconds) and OUT/models.jsonl (step 2). Like
# gpu_bench_detached.sh it runs detached from a frozen copy of the checkout and is followed across device calls:
#
#   scripts/gpu_models_autotune.sh start STATE SECONDS     (STATE: a git-ignored folder, e.g. bench-out/models)
#   scripts/gpu_models_autotune.sh wait STATE SECONDS
set -uo pipefail
mode=$1 state=$2 seconds=$3
frozen=${FROZEN:-/tmp/kfuse-frozen-models}
if [ "$mode" = start ]; then
    rm -rf "$frozen" && cp -a . "$frozen"
fi
cd "$frozen" || exit 1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
if [ "$mode" = start ]; then
    mkdir -p "$state/compile"
    cat >"$state/run.sh" <<EOF
gpus=\$(nvidia-smi -L | wc -l)
i=0
for pair in resnet50:1 resnet50:32 mobilenet_v3_large:1 mobilenet_v3_large:32 vit_b_16:1 vit_b_16:32 gpt2:1 gpt2:32; do
    model=\${pair%:*} batch=\${pair#*:}
    CUDA_VISIBLE_DEVICES=\$((i % gpus)) python3 scripts/gpu_models.py --out "$state/compile/\$model-\$batch" \\
        --models \$model --batches \$batch --backends max-autotune-no-cudagraphs >"$state/compile/\$model-\$batch.log" 2>&1 &
    i=\$((i + 1))
    [ \$((i % gpus)) -eq 0 ] && wait
done
wait
echo "step 1 done"
CUDA_VISIBLE_DEVICES=0 python3 scripts/gpu_models.py --out "$state" \\
    --backends inductor,max-autotune-no-cudagraphs,kfuse
echo "step 2 done"
EOF
    setsid nohup bash "$state/run.sh" >"$state/log" 2>&1 </dev/null &
    echo $! >"$state/pid"
fi
pid=$(cat "$state/pid")
end=$((SECONDS + seconds))
while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 5; done
tail -n 20 "$state/log"
if kill -0 "$pid" 2>/dev/null; then
    echo "still running (pid $pid)"
else
    echo "finished"
    mkdir -p "${OUT:-/tmp}/models"
    cp "$state/models.jsonl" "$state/log" "${OUT:-/tmp}/models/" 2>/dev/null
    for f in "$state"/compile/*/models.jsonl; do
        cp "$f" "${OUT:-/tmp}/models/compile-$(basename "$(dirname "$f")").jsonl"
    done
fi
