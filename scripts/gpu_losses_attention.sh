#!/bin/bash
# One GPU session for the losses and attention kernels (run from the worktree root, PYTHONPATH set):
# 1. optimize suite/level1 67-73 and three small irregular test problems for CUDA, build every extension in
#    parallel; 2. correctness (no timing) of the small problems; 3. `kfuse check` with timing of each suite problem,
#    one at a time (SDPA and cross-entropy first), its JSON kept as soon as it exists.
set -u
OUT=${OUT:-/tmp/out}
W=$OUT/work; mkdir -p $W/json
export MAX_JOBS=4
nvidia-smi --query-gpu=name --format=csv,noheader > $W/device.txt
SUITE="73_ScaledDotProductAttention 67_CrossEntropyLoss 71_CosineSimilarityLoss 72_TripletMarginLoss 68_HuberLoss 69_KLDivLoss 70_HingeLoss"
SMALL="attention_odd_sizes losses_rowwise losses_pointwise"
for p in $SUITE; do python3 -m kfuse optimize suite/level1/$p.py -o $W/${p}_new.py --device cuda --no-check > $W/$p.optimize.log 2>&1 & done
for p in $SMALL; do python3 -m kfuse optimize tests/optimize/$p.py -o $W/${p}_new.py --device cuda --no-check > $W/$p.optimize.log 2>&1 & done
wait
for f in $W/*_new.py; do (python3 -c "import runpy,sys; runpy.run_path(sys.argv[1])" $f > $f.build.log 2>&1; echo "$f build rc=$?" >> $W/builds.txt) & done
wait
pack() { tar czf $OUT/results.tgz -C $W . ; }
# most important first: what is left when the time runs out is the least important
ORDER="suite:73_ScaledDotProductAttention small:attention_odd_sizes suite:67_CrossEntropyLoss small:losses_rowwise
       suite:71_CosineSimilarityLoss suite:72_TripletMarginLoss small:losses_pointwise suite:68_HuberLoss
       suite:69_KLDivLoss suite:70_HingeLoss"
for item in $ORDER; do
  kind=${item%%:*}; p=${item#*:}
  if [ $kind = small ]; then
    timeout 100 python3 -m kfuse check tests/optimize/$p.py $W/${p}_new.py --no-timing --json $W/json/$p.json > $W/$p.check.log 2>&1
  else
    timeout 150 python3 -m kfuse check suite/level1/$p.py $W/${p}_new.py --json $W/json/$p.json --timeout 140 > $W/$p.check.log 2>&1
  fi
  echo "$p rc=$?" >> $W/checks.txt
  pack
done
cat $W/builds.txt $W/checks.txt
for p in $SUITE $SMALL; do echo "== $p"; grep -E "verdict|precision|candidate|eager|compile:" $W/$p.check.log | head -6; done
