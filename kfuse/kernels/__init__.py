"""The kernel families and what they share, below the compiler (kfuse.compiler imports these, never the reverse).

One module per family, each with its planning hook (which steps it takes over) and its CUDA/C++ printers: reduce
(reductions and losses), window (pooling and scans), attention, gemm (with gemm_cuda, the 3xTF32 template),
conv (convolutions with fused epilogues), recurrent (nn.GRU). Shared below them: steps (the plan's step types and
graph helpers), printing (a fused kernel's op function and arguments), ops (the op -> C expression table),
choices (the planner's overridable choices) and eager_precision (what precision eager's own call runs at).
"""
