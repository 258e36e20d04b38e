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

__all__ = ["CompileResult", "close_pool", "compile_pool", "precompile", "problem_pattern", "specialisation_key"]


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
    device = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"  # the interpreter runs on the CPU
    a = torch.empty((problem.m, problem.k), dtype=dt, device=device)
    if problem.layout is Layout.NN:
        b = torch.empty((problem.k, problem.n), dtype=dt, device=device)
    else:
        b = torch.empty((problem.n, problem.k), dtype=dt, device=device).T
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


def compile_pool(workers: int | None = None) -> ProcessPoolExecutor:
    """Spawned worker processes for :func:`precompile`, kept for a whole sweep.

    A worker pays for its start once: Python, torch and Triton imports, a CUDA context (for the
    registers and spills of each compiled kernel), and Triton's first compile (FACTS.md: 1.7 s
    against 0.2 s for the next ones). A pool per group of problems paid it again for every group.
    """
    workers = workers or max(1, (os.cpu_count() or 2) - 1)
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))


def close_pool(pool: ProcessPoolExecutor, terminate: bool = False) -> None:
    """Shut ``pool`` down: after its compiles finish, or with ``terminate`` at once.

    Terminating cancels the queued compiles and ends the worker processes in the middle of the
    ones they are running, so a sweep that stops at its time budget returns in seconds instead of
    waiting minutes for a cold pattern's kernels (the eighth session's H200 call was killed by its
    hard timeout while it waited). Nothing is lost: Triton writes a kernel to its cache under a
    temporary name and renames it into place, so an interrupted compile leaves no entry, and the
    next run compiles that kernel again.
    """
    if not terminate:
        pool.shutdown(wait=True, cancel_futures=True)
        return
    force = getattr(pool, "terminate_workers", None)  # Python >= 3.14
    if force is not None:
        force()
        return
    # Before 3.14 the workers and the executor's manager thread are reached through its own
    # attributes (shutdown clears them). The manager thread is what marks the running futures as
    # failed once their workers are gone; a second ``shutdown`` no longer joins it, so it is joined
    # here, or a caller could still see those futures pending (CI saw it on a loaded machine).
    processes = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=10)
    if manager is not None:
        manager.join(timeout=10)


def precompile(
    pairs: Iterable[tuple[Problem, TileConfig]],
    workers: int | None = None,
    chunk: int = 2,
    on_done: Callable[[int, int], None] | None = None,
    stop: threading.Event | None = None,
    pool: ProcessPoolExecutor | None = None,
    on_problem: Callable[[str, dict[tuple[str, str], CompileResult]], None] | None = None,
) -> dict[tuple[str, str], CompileResult]:
    """Compile every distinct kernel that ``pairs`` need, in worker processes.

    Returns the result for each (problem key, config key) pair; pairs that share a specialisation
    pattern share the result of the one that was compiled. ``pool`` (from :func:`compile_pool`) is
    used and left running; without it a pool of ``workers`` is started and shut down here. Tasks are
    chunks of ``chunk`` configs of one problem, in the order of ``pairs``; ``on_problem(key,
    results)`` is called as soon as every pair of a problem has its result, so that the problem can
    be measured while the rest compiles. Once ``stop`` is set (the sweep will not measure these
    pairs), tasks not yet started are cancelled and the pairs compiled so far are returned at once:
    the tasks already running are not waited for (a pool of its own is terminated; a shared pool's
    owner closes it with :func:`close_pool`).
    """
    pairs = list(pairs)
    representative: dict[tuple[object, ...], tuple[Problem, TileConfig]] = {}
    members: dict[tuple[object, ...], list[tuple[Problem, TileConfig]]] = {}
    needs: dict[str, set[tuple[object, ...]]] = {}  # problem key -> specs it waits for
    for problem, config in pairs:
        spec = (*specialisation_key(problem, config), config.key)
        representative.setdefault(spec, (problem, config))
        members.setdefault(spec, []).append((problem, config))
        needs.setdefault(problem.key, set()).add(spec)
    spec_of = {(p.key, c.key): spec for spec, (p, c) in representative.items()}

    by_problem: dict[str, list[str]] = {}
    for problem, config in representative.values():
        by_problem.setdefault(problem.key, []).append(config.key)
    tasks = [(p, keys[i : i + chunk]) for p, keys in by_problem.items() for i in range(0, len(keys), chunk)]

    out: dict[tuple[str, str], CompileResult] = {}
    per_problem: dict[str, dict[tuple[str, str], CompileResult]] = {}  # the same results, by problem
    total = sum(len(t[1]) for t in tasks)
    compiled = 0
    own_pool = pool is None
    if pool is None:
        pool = compile_pool(workers)
    futures = [pool.submit(_compile_chunk, p, keys) for p, keys in tasks]
    try:
        for future in futures:
            while stop is not None and not stop.is_set():
                done, _ = wait([future], timeout=0.5)
                if done:
                    break
            if stop is not None and stop.is_set():
                break
            finished: set[str] = set()
            for result in future.result():
                compiled += 1
                spec = spec_of[(result.problem_key, result.config_key)]
                for problem, config in members[spec]:
                    pair = (problem.key, config.key)
                    out[pair] = per_problem.setdefault(problem.key, {})[pair] = CompileResult(
                        problem.key, config.key, result.status, result.registers, result.spills, result.smem_bytes,
                        result.error,
                    )  # fmt: skip
                    waiting = needs[problem.key]
                    waiting.discard(spec)
                    if not waiting:
                        finished.add(problem.key)
            if on_problem:
                for key in finished:
                    on_problem(key, dict(per_problem[key]))
            if on_done:
                on_done(compiled, total)
    finally:
        for future in futures:
            future.cancel()  # those not started
        stopped = stop is not None and stop.is_set()
        if own_pool:
            close_pool(pool, terminate=stopped)
        elif not stopped:
            wait(futures)  # an error left tasks running: let them finish before the caller goes on
    return out
