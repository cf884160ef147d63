#!/usr/bin/env bash
# KernelBench's own judge (kb_check.py from ../shared/kernelbench/harness, carried as .devset/harness) on the files
# a `kfuse bench` run emitted: every pair whose problem id matches one of the patterns, PARALLEL pairs at a time
# (correctness only is comparable then: timings of pairs judged side by side are not), then those that ran out of
# GPU memory beside the others one at a time. Writes KB_JSONL, one line per pair: {"problem", "candidate",
# ...kb_check's fields}.
#
#   scripts/gpu_kb_check.sh BENCH_OUT LEVELS_DIR KB_JSONL PARALLEL PATTERN...
#   e.g. scripts/gpu_kb_check.sh bench-out/run/out .devset $OUT/kb.jsonl 8 'level3/*' 'level2/1[0-9]_*'
#
# KernelBench's package imports pydantic, which the GPU machine lacks and cannot download: put its wheels (for
# Python 3.12) in LEVELS_DIR/wheels first, e.g. `pip download --python-version 3.12 --only-binary=:all:
# --platform manylinux2014_x86_64 -d .devset/wheels pydantic requests`. 14 pairs at once ran out of GPU memory on
# an H200 where problems have 6-8 GB inputs; 3 at once did not. The pairs are spread over the machine's GPUs (job
# slot i on GPU i mod count: KernelBench's harness judges on device 0 of those it sees), so PARALLEL = 3 x GPUs;
# before, every pair went to the first GPU (2 x H200, 6 at once: 7 of 58 out of memory, 2026-11-28).
set -uo pipefail
out=$1 levels=$2 jsonl=$3 parallel=$4
shift 4
if [ -d "$levels/wheels" ]; then
    python3 -m pip install -q --no-index --find-links "$levels/wheels" pydantic requests 2>&1 | grep -v WARNING
fi
# (2026-11-28: a wheels folder added to .devset after a machine's first call did not reach it with the carried
# folder; put it there before the first call, or pass a LEVELS_DIR that has it.)
if ! python3 -c "import pydantic" 2>/dev/null; then
    echo "kb_check: pydantic is not installed and $levels/wheels has no wheel for it: KernelBench's harness cannot run" >&2
    exit 2
fi
pairs=()
for pattern in "$@"; do
    for problem in "$levels"/$pattern.py; do
        candidate="$out/candidates/$(basename "$problem" .py)_new.py"
        [ -f "$candidate" ] && pairs+=("$problem" "$candidate")
    done
done
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
[ "${gpus:-0}" -ge 1 ] || gpus=1
echo "kb_check: $(( ${#pairs[@]} / 2 )) pairs, $parallel at a time over $gpus GPU(s)"
tmp=$(mktemp -d)
: >"$jsonl"
# Each pair's line is appended to KB_JSONL as soon as it is judged: a call stopped at its time limit keeps those done.
for ((i = 0; i < ${#pairs[@]}; i += 2)); do
    echo "${pairs[i]} ${pairs[i+1]}"
done | xargs -P "$parallel" --process-slot-var=KB_SLOT -L 1 sh -c '
    name=$(basename "$1" .py)
    CUDA_VISIBLE_DEVICES=$((KB_SLOT % '"$gpus"')) python3 '"$levels"'/harness/kb_check.py --json '"$tmp"'/$name.json "$1" "$2" >'"$tmp"'/$name.log 2>&1
    tail -n 2 '"$tmp"'/$name.log
    python3 -c "
import json, sys
from pathlib import Path
path = Path(sys.argv[1])
rows = [{\"problem\": path.stem, \"candidate\": c, **r} for c, r in json.loads(path.read_text()).items()] \
    if path.exists() else [{\"problem\": path.stem, \"error\": Path(sys.argv[3]).read_text()[-800:]}]
with open(sys.argv[2], \"a\") as out:
    out.write(\"\".join(json.dumps(r) + \"\\n\" for r in rows))
" '"$tmp"'/$name.json '"$jsonl"' '"$tmp"'/$name.log' _
# Pairs judged side by side can run the GPU out of memory (KernelBench's harness holds several copies of a 4-8 GB
# problem): those that failed for memory are judged again one at a time, their lines replaced.
retry=$(python3 - "$jsonl" <<'PY'
import json, sys
from pathlib import Path
for line in Path(sys.argv[1]).read_text().splitlines():
    row = json.loads(line)
    text = (row.get("error") or "") + json.dumps(row.get("metadata") or {})
    # (the error's last 800 characters may have cut "CUDA out of memory" off, leaving the process list after it)
    memory = any(mark in text for mark in ("out of memory", "OutOfMemoryError", "memory in use"))
    if not row.get("correct") and (memory or "no answer" in text):
        print(row["problem"])
PY
)
for name in $retry; do
    for ((i = 0; i < ${#pairs[@]}; i += 2)); do
        [ "$(basename "${pairs[i]}" .py)" = "$name" ] || continue
        echo "judged again alone (out of GPU memory beside others): $name"
        python3 "$levels/harness/kb_check.py" --json "$tmp/$name.json" "${pairs[i]}" "${pairs[i+1]}" >"$tmp/$name.log" 2>&1
        tail -n 2 "$tmp/$name.log"
        python3 - "$tmp/$name.json" "$jsonl" "$name" <<'PY'
import json, sys
from pathlib import Path
path, jsonl, name = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
if path.exists():
    new = [{"problem": name, "candidate": c, **r} for c, r in json.loads(path.read_text()).items()]
    rows = [line for line in jsonl.read_text().splitlines() if json.loads(line)["problem"] != name]
    jsonl.write_text("".join(line + "\n" for line in rows) + "".join(json.dumps(r) + "\n" for r in new))
PY
    done
done
python3 - "$jsonl" <<'PY'
import json, sys
from pathlib import Path
rows = [json.loads(line) for line in Path(sys.argv[1]).read_text().splitlines()]
print(f"{sum(bool(r.get('correct')) for r in rows)}/{len(rows)} correct by KernelBench's judge; "
      f"{sum(bool(r.get('static_valid')) for r in rows)}/{len(rows)} statically valid")
PY
