"""The judge: the verdict on one candidate ModelNew against its problem (`kfuse check`).

verdict (static check, then the isolated worker with its timeout) -> worker (the protocol, in a trusted process)
-> sandbox (the candidate's own process), with wire (data-only messages), compare, timing, roofline and
static beside them (and kfuse.gpulock, which the planner shares); report prints a verdict. The parent never imports
user code.
"""

from kfuse.judge.verdict import CheckOptions, check

__all__ = ["CheckOptions", "check"]
