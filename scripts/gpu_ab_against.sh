#!/usr/bin/env bash
# A/B of this checkout's files against an earlier commit's, on the GPU, in one process (scripts/gpu_ab.py): both
# sides emitted on the GPU (the plan asks it), built, compared with the reference and timed in interleaved rounds.
#
#   here:    git worktree add --detach .devset/base COMMIT        (carry .devset/base and the problems' folder)
#   device:  scripts/gpu_ab_against.sh .devset/base OUT [--also LABEL=WORKTREE ...] [gpu_ab.py options] PROBLEM.py ...
#   here:    git worktree remove --force .devset/base
#
# The base side's files go to OUT/base (`kfuse optimize --no-check` with the worktree's kfuse), each --also
# worktree's (another branch) to OUT/LABEL, this side's to OUT/new (gpu_ab.py --emit new=...; `--emit-flags
# "new=--cuda-graph off"` and the like pass through). All in one process, so every column is comparable.
set -euo pipefail
out=$2
sides=("base=$(cd "$1" && pwd)")
shift 2
options=() problems=()
while [ $# -gt 0 ]; do
    case $1 in
        --also) sides+=("${2%%=*}=$(cd "${2#*=}" && pwd)"); shift 2 ;;
        --*) options+=("$1" "$2"); shift 2 ;;
        *) problems+=("$1"); shift ;;
    esac
done
mkdir -p "$out"
out_abs=$(cd "$out" && pwd)
variants=()
for side in "${sides[@]}"; do
    label=${side%%=*} tree=${side#*=}
    mkdir -p "$out_abs/$label"
    # run from the worktree: `python3 -m` puts the working directory first on sys.path, ahead of PYTHONPATH, so from
    # this checkout's root the other side would import this checkout's kfuse
    printf '%s\n' "${problems[@]}" | xargs -P 8 -I{} sh -c \
        'problem=$(realpath "{}"); cd "$0" && python3 -m kfuse optimize "$problem" \
         -o "$1/$(basename "{}" .py)_new.py" --device cuda --no-check >/dev/null 2>&1 || echo "$2: could not emit {}"' \
        "$tree" "$out_abs/$label" "$label"
    variants+=(--variant "$label=$out/$label")
done
PYTHONPATH=$PWD python3 scripts/gpu_ab.py --out "$out" "${variants[@]}" --emit "new=$out/new" \
    "${options[@]}" "${problems[@]}"
