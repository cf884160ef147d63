#!/usr/bin/env bash
# Judges kfuse's depthwise convolution kernel (kf::conv2d_depthwise) on irregular geometries, then the fallback:
# each case is a small problem file, optimized for CUDA and checked without timing (correctness + parity only).
#
#   scripts/gpu_depthwise_check.sh OUT_DIR      (on the device, from the repo root)
set -uo pipefail
out=$1
mkdir -p "$out"
export PYTHONPATH=$PWD TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-/tmp/kfuse-ext}
work=$(mktemp -d)
case_file() {  # NAME CONV SHAPE EPILOGUE
    cat > "$work/$1.py" <<PY
import torch
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.$2
    def forward(self, x):
        return $4
def get_inputs():
    return [torch.randn$3]
def get_init_inputs():
    return []
PY
}
case_file plain "Conv2d(13, 13, 3, padding=1, groups=13)" "(3, 13, 37, 71)" "self.conv(x)"
case_file multiplier "Conv2d(6, 18, (5, 3), stride=(2, 1), padding=(2, 1), dilation=(1, 2), groups=6)" "(2, 6, 45, 133)" \
    "torch.tanh(self.conv(x)) * 2.0"
case_file no_bias "Conv2d(5, 5, (1, 4), stride=(3, 2), groups=5, bias=False)" "(4, 5, 29, 300)" "torch.relu(self.conv(x))"
case_file fallback "Conv2d(7, 7, 7, stride=3, groups=7)" "(2, 7, 200, 260)" "self.conv(x)"  # patch over 48 KB
for name in plain multiplier no_bias fallback; do
    ( python3 -m kfuse optimize "$work/$name.py" -o "$work/${name}_new.py" --device cuda --no-check > "$out/$name.log" 2>&1 \
      && python3 -m kfuse check "$work/$name.py" "$work/${name}_new.py" --device cuda --no-timing \
           --json "$out/$name.json" >> "$out/$name.log" 2>&1; echo "$name: exit $?" >> "$out/$name.log" ) &
done
wait
tail -n 4 "$out"/*.log
