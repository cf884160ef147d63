"""Is a cuDNN convolution's time address-dependent? 77_ConvTranspose3d_Scale_BatchNorm_GlobalAvgPool's channels-last
ConvTranspose3d (16x64x16x32x32 input, 64x128x5x5x5 weight) timed with its weight, then its input, placed at several
byte offsets inside a larger buffer, then with fresh allocations. Results: results/probes-H100-2026-11-26-conv-address.md.

    python3 scripts/gpu_conv_address_probe.py
"""

import torch
import torch.nn.functional as F


def time_ms(fn, iters: int = 10) -> float:
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return round(start.elapsed_time(end) / iters, 2)


def placed(t: torch.Tensor, offset_bytes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A copy of t (same strides) starting offset_bytes into a fresh buffer; the buffer too, to keep it alive."""
    buffer = torch.empty(t.numel() * 4 + offset_bytes + 4096, dtype=torch.uint8, device="cuda")
    view = buffer[offset_bytes:offset_bytes + t.numel() * 4].view(torch.float32).as_strided(t.shape, t.stride())
    view.copy_(t)
    return view, buffer


def main() -> None:
    torch.manual_seed(0)
    layout = torch.channels_last_3d
    x = torch.rand(16, 64, 16, 32, 32, device="cuda").contiguous(memory_format=layout)
    w = ((torch.rand(64, 128, 5, 5, 5, device="cuda") - 0.5) * 0.02).contiguous(memory_format=layout)
    with torch.no_grad():
        print("weight at offset (bytes), its address mod 2 MiB, ms")
        for offset in [0, 16, 128, 256, 512, 1024, 4096, 65536, 1 << 20, 3 << 19, 2 << 20]:
            view, _ = placed(w, offset)
            print(" ", offset, view.data_ptr() % (1 << 21), time_ms(lambda: F.conv_transpose3d(x, view)), flush=True)
        print("input at offset (bytes), its address mod 2 MiB, ms")
        for offset in [0, 512, 4096, 65536, 1 << 20, 2 << 20]:
            view, _ = placed(x, offset)
            print(" ", offset, view.data_ptr() % (1 << 21), time_ms(lambda: F.conv_transpose3d(view, w)), flush=True)
        print("fresh weight copies (address mod 2 MiB, ms), other allocations moved between them")
        seen, kept = [], []
        for i in range(12):
            copy = w.clone(memory_format=layout)
            seen.append((copy.data_ptr() % (1 << 21), time_ms(lambda: F.conv_transpose3d(x, copy))))
            kept.append(torch.empty(int(1.3e6) * (i + 1), device="cuda"))
        print(seen)


if __name__ == "__main__":
    main()
