"""scripts/shrink_sizes.py: small copies of KernelBench problems for the CPU judge."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("shrink_sizes", Path(__file__).parents[1] / "scripts" / "shrink_sizes.py")
shrink_sizes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shrink_sizes)


def test_only_the_size_constants_are_cut():
    text = ("batch_size = 128\nheight = width = 256  # square\nD, H, W = 16, 32, 64\nN = 2048 * 2\n"
            "kernel_size = 3\nin_channels  = 64  \ndim = 1\nseq_len = 512\n    width = 99\nscale = 0.5\n")
    assert shrink_sizes.shrink(text) == (
        "batch_size = 2\nheight = width = 12\nD, H, W = 12, 12, 12\nN = 256\nkernel_size = 3\nin_channels  = 64  \n"
        "dim = 1\nseq_len = 512\n    width = 99\nscale = 0.5\n")


def test_batch_only_keeps_the_images_whole():
    assert shrink_sizes.shrink("batch_size = 10\nheight, width = 224, 224\n", batch_only=True) == (
        "batch_size = 2\nheight, width = 224, 224\n")


def test_odd_sides_make_even_sides_odd_and_cut_nothing():
    text = "batch_size = 128\nheight = width = 256\ndepth, height, width = 16, 63, 64\nin_features = 1024\n"
    assert shrink_sizes.shrink(text, odd_sides=True) == (
        "batch_size = 128\nheight = width = 255\ndepth, height, width = 15, 63, 63\nin_features = 1024\n")
