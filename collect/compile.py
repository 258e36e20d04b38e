"""Compile ahead, in parallel worker processes that share Triton's on-disk cache.

Compiling is the slow part of a sweep (FACTS.md: 70 configs of one new specialisation pattern took
175-235 s in one process; 16 spawned processes compiled 66 in 14.8 s, and loading them from the
shared disk cache afterwards took 0.44 s). :func:`precompile` spreads the (problem, config) pairs of
a plan over ``workers`` spawned processes. Pairs are grouped by specialisation pattern first, since
a pattern that is compiled once serves every problem that shares it: only one problem per pattern
is compiled, and the measuring process then loads every kernel from the cache.

Each worker allocates the problem's operands once (``torch.empty``: compiling reads no values) and
calls :meth:`~tilecost.collect.launch.BoundMatmul.compile`, which compiles without launching. The
failures a compiler can raise for a configuration (Triton's ``OutOfResources``, ``PTXASError``,
``CompilationError``) are returned as results, never swallowed.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, wait
from dataclasses import dataclass

from tilecost.config import KernelVariant, TileConfig
from tilecost.measurement import Status
from tilecost.problem import Layout, Problem

__all__ = ["CompileResult", "precompile", "problem_pattern", "specialisation_key"]


@dataclass(frozen=True, slots=True)
class CompileResult:
    problem_key: str
    config_key: str
    status: Status  # OK, OUT_OF_RESOURCES or COMPILE_ERROR
    registers: int | None = None
    spills: int | None = None
    smem_bytes: int | None = None
    error: str | None = None


def _dim_class(value: int) -> str:
    # Triton specialises an integer argument on ``== 1`` and on divisibility by 16.
    return "1" if value == 1 else ("16" if value % 16 == 0 else "x")


def problem_pattern(problem: Problem) -> str:
    """The problem's specialisation pattern for the pointer kernel, e.g. ``"bf16-nt-16-x"``
    (N a multiple of 16, K not). Problems of one pattern share every compiled kernel."""
    return f"{problem.dtype.value}-{problem.layout.value}-{_dim_class(problem.n)}-{_dim_class(problem.k)}"


def specialisation_key(problem: Problem, config: TileConfig) -> tuple[object, ...]:
    """What Triton's compile cache keys this pair on besides the config itself.

    The pointer kernel specialises N, K and the strides derived from them (M is
    ``do_not_specialize``); the descriptor kernel specialises none of its extents, so one compile
    serves every aligned problem of a dtype and layout.
    """
    if config.variant is KernelVariant.TMA:
        pattern: tuple[str, ...] = ()
    else:
        pattern = (_dim_class(problem.n), _dim_class(problem.k))
    return (problem.dtype, problem.layout, config.variant, pattern)


def _compile_chunk(problem_key: str, config_keys: Sequence[str]) -> list[CompileResult]:
    """Worker body: compile ``config_keys`` for one problem. Runs in a spawned process."""
    import torch
    from triton.compiler.errors import CompilationError
    from triton.runtime.errors import OutOfResources, PTXASError

    from tilecost.collect.launch import bind, torch_dtype

    problem = Problem.from_key(problem_key)
    dt = torch_dtype(problem.dtype)
    a = torch.empty((problem.m, problem.k), dtype=dt, device="cuda")
    if problem.layout is Layout.NN:
        b = torch.empty((problem.k, problem.n), dtype=dt, device="cuda")
    else:
        b = torch.empty((problem.n, problem.k), dtype=dt, device="cuda").T
    results = []
    for key in config_keys:
        config = TileConfig.from_key(key)
        try:
            info = bind(a, b, config).compile()
        except OutOfResources as exc:
            results.append(CompileResult(problem_key, key, Status.OUT_OF_RESOURCES, error=str(exc)[:500]))
        except (PTXASError, CompilationError) as exc:
            results.append(CompileResult(problem_key, key, Status.COMPILE_ERROR, error=str(exc)[:500]))
        else:
            results.append(CompileResult(problem_key, key, Status.OK, info.registers, info.spills, info.smem_bytes))
    return results


def precompile(
    pairs: Iterable[tuple[Problem, TileConfig]],
    workers: int | None = None,
    chunk: int = 4,
    on_done: Callable[[int, int], None] | None = None,
    stop: threading.Event | None = None,
) -> dict[tuple[str, str], CompileResult]:
    """Compile every distinct kernel that ``pairs`` need, in ``workers`` processes.

    Returns the result for each (problem key, config key) pair; pairs that share a specialisation
    pattern share the result of the one that was compiled. Once ``stop`` is set (the sweep will not
    measure these pairs), tasks not yet started are cancelled, those running finish, and the pairs
    compiled so far are returned.
    """
    pairs = list(pairs)
    representative: dict[tuple[object, ...], tuple[Problem, TileConfig]] = {}
    members: dict[tuple[object, ...], list[tuple[Problem, TileConfig]]] = {}
    for problem, config in pairs:
        spec = (*specialisation_key(problem, config), config.key)
        representative.setdefault(spec, (problem, config))
        members.setdefault(spec, []).append((problem, config))

    by_problem: dict[str, list[str]] = {}
    for problem, config in representative.values():
        by_problem.setdefault(problem.key, []).append(config.key)
    tasks = [(p, keys[i : i + chunk]) for p, keys in by_problem.items() for i in range(0, len(keys), chunk)]

    workers = workers or max(1, (os.cpu_count() or 2) - 1)
    compiled: dict[tuple[str, str], CompileResult] = {}
    total = sum(len(t[1]) for t in tasks)
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures = [pool.submit(_compile_chunk, p, keys) for p, keys in tasks]
        for future in futures:
            while stop is not None and not stop.is_set():
                done, _ = wait([future], timeout=0.5)
                if done:
                    break
            if stop is not None and stop.is_set():
                pool.shutdown(wait=True, cancel_futures=True)
                break
            for result in future.result():
                compiled[(result.problem_key, result.config_key)] = result
            if on_done:
                on_done(len(compiled), total)

    out: dict[tuple[str, str], CompileResult] = {}
    for spec, (rep_problem, rep_config) in representative.items():
        if (rep_problem.key, rep_config.key) not in compiled:  # stopped before it was compiled
            continue
        result = compiled[(rep_problem.key, rep_config.key)]
        for problem, config in members[spec]:
            out[(problem.key, config.key)] = CompileResult(
                problem.key, config.key, result.status, result.registers, result.spills, result.smem_bytes, result.error
            )
    return out
