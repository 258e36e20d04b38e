"""The outcome of measuring one configuration on one problem: a status and, when timed, a time.

Shared by the collector, which writes it, and training, which reads it.
"""

from __future__ import annotations

import enum

__all__ = ["Status"]


class Status(enum.Enum):
    """What happened to one (problem, config) pair in a sweep."""

    OK = "ok"  # compiled, correct, timed over the full protocol
    HOPELESS = "hopeless"  # correct, but slower than the protocol's bound after screening; time is that bound
    COMPILE_ERROR = "compile_error"  # Triton or ptxas refused it
    OUT_OF_RESOURCES = "out_of_resources"  # needs more shared memory, registers or threads than the device has
    WRONG_RESULT = "wrong_result"  # ran, but its output differs from torch.matmul beyond the dtype's tolerance
    TIMEOUT = "timeout"  # one launch exceeded the sweep's time limit
    CRASHED = "crashed"  # killed the CUDA context (illegal address) or the worker process

    @property
    def timed(self) -> bool:
        """Whether rows of this status carry a measured time."""
        return self in (Status.OK, Status.HOPELESS)
