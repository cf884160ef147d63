"""The adversarial corpus: each candidate, the problem it answers and the verdict an honest judge must give.

Both targets hold a file of each name under cpu/ and cuda/; the CUDA-only entries are marked.
"""

# name: (problem, expected status, a word the reasons must contain ("a|b": either), targets)
BOTH = ("cpu", "cuda")
CORPUS = {
    "leaky_honest": ("leaky_relu", "correct", "", BOTH),
    "linear_honest": ("linear_relu", "correct", "", BOTH),
    "leaky_pointer_cache": ("leaky_relu", "incorrect", "refill", BOTH),
    "leaky_writes_input": ("leaky_relu", "incorrect", "input", BOTH),
    "leaky_first_row": ("leaky_relu", "incorrect", "mismatch", BOTH),
    # NaN when the poisoned memory is what the allocator hands out (always on CUDA; glibc, on the CPU target,
    # sometimes picks another free chunk, and the stale values there fail as a mismatch).
    "leaky_unwritten": ("leaky_relu", "incorrect", "nan|mismatch", BOTH),
    "linear_snapshot": ("linear_relu", "incorrect", "re-randomised", BOTH),
    "leaky_fp16": ("leaky_relu", "incorrect", "mismatch", BOTH),
    "leaky_truncated_mantissa": ("leaky_relu", "incorrect", "precision", BOTH),
    "leaky_segfault": ("leaky_relu", "crashed", "sigsegv", BOTH),
    "leaky_hang": ("leaky_relu", "timeout", "timed out", BOTH),
    "leaky_try_fallback": ("leaky_relu", "rejected", "try", BOTH),
    "leaky_thread": ("leaky_relu", "rejected", "thread", BOTH),
    "leaky_torch_only": ("leaky_relu", "rejected", "custom kernel", BOTH),
    "leaky_wrong_ctor": ("leaky_relu", "rejected", "signature", BOTH),
    "leaky_illegal_address": ("leaky_relu", "crashed", "illegal", ("cuda",)),
    "leaky_side_stream": ("leaky_relu", "rejected", "stream", ("cuda",)),
    # From the review of the judge: a candidate attacking the judge from inside its own process.
    "leaky_forged_verdict": ("leaky_relu", "incorrect", "mismatch", ("cpu",)),
    "leaky_reused_buffer": ("leaky_relu", "incorrect", "bitwise", ("cpu",)),
    # Run-to-run differences its problem's Model has too (an atomic library call kept): allowed.
    "leaky_inherited_variation": ("leaky_relu_varying", "correct", "", ("cpu",)),
    # Told, not judged: another batch size (the verdict's other_batch) is no part of KernelBench's check.
    "leaky_fixed_batch": ("leaky_relu", "correct", "", ("cpu",)),
}
