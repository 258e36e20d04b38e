"""Measure one problem on the GPU: operands, correctness check of every config, then the protocol.

This is the body that the sweep's measuring worker and the kernel-quality benchmark share (the GPU
edge: imports torch). For each configuration it binds the kernel (loading the compiled binary from
Triton's cache, where :mod:`tilecost.collect.compile` left it), launches it once on poisoned output
and compares with a float64 product of the same inputs (:func:`relative_error`), then times every correct configuration
together, interleaved, by :func:`tilecost.collect.protocol.measure`. ``torch.matmul`` (cuBLAS), or
``torch._scaled_mm`` for fp8, can be timed in the same rounds as a baseline.

Failures a configuration can cause are recorded as its status: ``OutOfResources`` →
``out_of_resources``; ``PTXASError``/``CompilationError`` → ``compile_error``; an output outside
the dtype's tolerance (or with unwritten elements) → ``wrong_result``; a first launch slower than
``timeout_s`` → ``timeout``. A CUDA error (an illegal address) poisons the whole CUDA context, so
it is not recorded here: :class:`ContextLost` names the configuration and the caller, which runs
this in a restartable process, records it as ``crashed``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tilecost.collect.protocol import DEFAULT_PROTOCOL, MeasureProtocol, RoundTimer, Timing, measure
from tilecost.config import TileConfig
from tilecost.measurement import Status
from tilecost.problem import DType, Layout, Problem

if TYPE_CHECKING:
    import torch

__all__ = [
    "BASELINE_KEY",
    "ConfigOutcome",
    "ContextLost",
    "ProblemOutcome",
    "TOLERANCE",
    "make_operands",
    "expected_norm",
    "relative_error",
    "run_problem",
]

# Relative Frobenius error allowed per dtype (see :func:`relative_error`, and tests/test_kernels.py for
# the derivation: tf32 and fp16 ~3e-4 expected, bf16 ~2.3e-3, fp8 with bf16 output a little more).
TOLERANCE = {DType.FP32: 2e-3, DType.FP16: 2e-3, DType.BF16: 1e-2, DType.FP8: 2e-2}
BASELINE_KEY = "torch"


class ContextLost(RuntimeError):
    """A configuration's launch raised a CUDA error; the process's CUDA context is unusable."""

    def __init__(self, config_key: str, message: str):
        super().__init__(f"{config_key}: {message}")
        self.config_key = config_key


@dataclass(frozen=True, slots=True)
class ConfigOutcome:
    config: TileConfig
    status: Status
    timing: Timing | None = None
    rel_error: float | None = None
    registers: int | None = None
    spills: int | None = None
    smem_bytes: int | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ProblemOutcome:
    problem: Problem
    outcomes: tuple[ConfigOutcome, ...]
    baseline: Timing | None
    seconds: float


def make_operands(problem: Problem, seed: int = 0, device: str = "cuda") -> tuple[torch.Tensor, torch.Tensor]:
    """A and B for ``problem``, drawn from N(0, 1) with a fixed seed, in the problem's layout."""
    import torch

    from tilecost.collect.launch import torch_dtype

    gen = torch.Generator(device=device).manual_seed(seed)
    dt = torch_dtype(problem.dtype)
    a = torch.randn((problem.m, problem.k), generator=gen, device=device).to(dt)
    if problem.layout is Layout.NN:
        b = torch.randn((problem.k, problem.n), generator=gen, device=device).to(dt)
    else:
        b = torch.randn((problem.n, problem.k), generator=gen, device=device).to(dt).T
    return a, b


def baseline_launcher(problem: Problem, a: torch.Tensor, b: torch.Tensor) -> Callable[[], object]:
    """The vendor library doing the same product: cuBLAS through torch (TF32 allowed for fp32, as
    the kernels' fp32 dot is tf32), ``torch._scaled_mm`` with unit scales for fp8 (bf16 output)."""
    import torch

    if problem.dtype is DType.FP8:
        one = torch.ones((), dtype=torch.float32, device="cuda")
        if problem.layout is Layout.NN:
            b = b.T.contiguous().T  # _scaled_mm wants B column-major

        def run_fp8() -> object:
            return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

        return run_fp8
    torch.backends.cuda.matmul.allow_tf32 = True

    def run() -> object:
        return torch.matmul(a, b)

    return run


def expected_norm(a: torch.Tensor, b: torch.Tensor) -> float:
    """‖A‖·‖B‖ / √K (Frobenius norms): the expected norm of A·B for operands with independent N(0, 1)
    entries (E‖AB‖² = M·N·K), which is what :func:`make_operands` draws."""
    return float(a.double().norm() * b.double().norm()) / max(a.shape[1], 1) ** 0.5


def relative_error(c: torch.Tensor, ref: torch.Tensor, floor: float = 0.0) -> float:
    """‖C − C64‖ / max(‖C64‖, ``floor``) (Frobenius norms); ``inf`` where C is not finite.

    The collector passes :func:`expected_norm` as the floor. It matters only where the product cancels:
    a tiny output (1×2×257 fp32 nt has two elements) can come out far below its expected norm while
    the rounding error of its K products does not shrink with it, so ‖C − C64‖ / ‖C64‖ alone failed
    every tiling of that problem (0.0029 against fp32's 2e-3, thirty-eighth session). Where the output
    holds a few thousand elements or more, the two terms agree to a few percent (64×64×64: within 2% on
    20 seeds), so this is the plain relative error; it is never larger. A wrong tile or an unwritten
    element is still an error of order 1 (or ``inf``) against either.
    """
    if not c.isfinite().all():
        return float("inf")
    diff = float((c.double() - ref).norm())
    scale = max(float(ref.norm()), floor)
    if scale > 0:
        return diff / scale
    return 0.0 if diff == 0 else float("inf")


def run_problem(
    problem: Problem,
    configs: Sequence[TileConfig],
    timer: RoundTimer,
    protocol: MeasureProtocol = DEFAULT_PROTOCOL,
    *,
    seed: int = 0,
    with_baseline: bool = False,
    timeout_s: float = 10.0,
    device: str = "cuda",
    on_config: Callable[[str], None] | None = None,
    on_round: Callable[[int, int], None] | None = None,
) -> ProblemOutcome:
    """Check and time ``configs`` on ``problem``; see the module docstring."""
    import torch
    from triton.compiler.errors import CompilationError
    from triton.runtime.errors import OutOfResources, PTXASError

    from tilecost.collect.launch import bind, torch_out_dtype

    started = time.perf_counter()
    a, b = make_operands(problem, seed, device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    ref = a.double() @ b.double()
    floor = expected_norm(a, b)
    # One output and one split-K workspace serve every configuration: they never run concurrently,
    # and hundreds of M×N outputs of a large problem would not fit in device memory.
    max_split = max((c.split_k for c in configs), default=1)
    out = torch.empty((problem.m, problem.n), dtype=torch_out_dtype(problem.dtype), device=device)
    workspace = torch.empty(
        max_split * problem.m * problem.n if max_split > 1 else 1, dtype=torch.float32, device=device
    )
    outcomes: dict[str, ConfigOutcome] = {}
    launchers: dict[str, Callable[[], object]] = {}
    for config in configs:
        if on_config:
            on_config(config.key)  # before anything that could kill the context
        try:
            bound = bind(a, b, config, out=out, workspace=workspace)
            info = bound.compile()
            bound.out.fill_(float("nan"))
            t0 = time.perf_counter()
            c = bound()
            sync()
            first_s = time.perf_counter() - t0
        except OutOfResources as exc:
            outcomes[config.key] = ConfigOutcome(config, Status.OUT_OF_RESOURCES, error=str(exc)[:500])
            continue
        except (PTXASError, CompilationError) as exc:
            outcomes[config.key] = ConfigOutcome(config, Status.COMPILE_ERROR, error=str(exc)[:500])
            continue
        except torch.AcceleratorError as exc:  # CUDA errors: the context is gone
            raise ContextLost(config.key, str(exc)[:500]) from exc
        meta = dict(registers=info.registers, spills=info.spills, smem_bytes=info.smem_bytes)
        if first_s > timeout_s:
            outcomes[config.key] = ConfigOutcome(
                config, Status.TIMEOUT, error=f"first launch took {first_s:.1f} s", **meta
            )
            continue
        err = relative_error(c, ref, floor)
        if not err < TOLERANCE[problem.dtype]:
            outcomes[config.key] = ConfigOutcome(config, Status.WRONG_RESULT, rel_error=err, **meta)
            continue
        outcomes[config.key] = ConfigOutcome(config, Status.OK, rel_error=err, **meta)
        launchers[config.key] = bound
    del ref

    if with_baseline:
        launchers[BASELINE_KEY] = baseline_launcher(problem, a, b)
        launchers[BASELINE_KEY]()
    timings = measure(launchers, timer, protocol, on_round=on_round, exempt=frozenset({BASELINE_KEY}))
    baseline = timings.pop(BASELINE_KEY, None)
    for key, timing in timings.items():
        o = outcomes[key]
        status = Status.HOPELESS if timing.hopeless else Status.OK
        outcomes[key] = ConfigOutcome(o.config, status, timing, o.rel_error, o.registers, o.spills, o.smem_bytes)
    ordered = tuple(outcomes[c.key] for c in configs)
    return ProblemOutcome(problem, ordered, baseline, time.perf_counter() - started)
