"""The compiler behind `kfuse optimize`: a problem file in, a ModelNew file out.

optimize runs the pipeline: capture (torch.export, losses decomposed, rewrite's algebraic rewrites) -> plan (group the
graph into steps: library calls, fused pointwise kernels, and the kernel families' own steps from kfuse.kernels)
-> codegen (print the plan as CUDA C++ or C++, each family printing its own steps) -> emit (the ModelNew file).
"""
