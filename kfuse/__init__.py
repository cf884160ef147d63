"""kfuse: fused custom-kernel replacements for small PyTorch models, and an honest judge for them."""

__version__ = "0.2.0"
PRECISIONS = ("fp32", "tf32")  # fp32: PyTorch's default math; tf32: TF32 allowed for reference and candidate
