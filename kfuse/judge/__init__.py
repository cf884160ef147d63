"""The judge: the verdict on one candidate ModelNew against its problem (`kfuse check`).

verdict (static check, then the isolated worker with its timeout) -> worker (the protocol, in a trusted process)
-> sandbox (the candidate's own process), with wire (data-only messages), compare, timing, roofline, gpulock and
static beside them; report prints a verdict. The parent never imports user code.
"""

from kfuse.judge.verdict import CheckOptions, check

__all__ = ["CheckOptions", "check"]
