"""kfuse: fused custom-kernel replacements for small PyTorch models, and an honest judge for them."""

__version__ = "0.1.0"
