"""kfuse: fused custom-kernel replacements for small PyTorch models, and an honest judge for them.

Layout (imports flow one way, tests/test_layout.py): cli and tune on top; bench -> judge; compiler -> kernels; this
module, errors, loader, extract and problem the base every layer reads.
"""

__version__ = "0.2.0"
PRECISIONS = ("fp32", "tf32")  # fp32: PyTorch's default math; tf32: TF32 allowed for reference and candidate
