"""The parallel compiler: real spawned workers compiling the real kernels (under Triton's interpreter on
CPU, where nothing is compiled and every config succeeds; for real on the H200), deduplicated by
specialisation pattern, reported problem by problem, on a pool that outlives one call."""

from __future__ import annotations

import threading

import pytest

from tilecost.collect.compile import compile_pool, precompile, specialisation_key
from tilecost.config import KernelVariant
from tilecost.problem import Problem
from tilecost.space import problem_candidates


def _pairs():
    same_a = Problem(64, 64, 64, "bf16", "nt")
    same_b = Problem(32, 64, 64, "bf16", "nt")  # M differs: the pointer kernel shares every compile
    other = Problem(64, 48, 40, "bf16", "nt")  # K = 40: another divisibility pattern
    configs = [c for c in problem_candidates(same_a, "h200") if c.variant is KernelVariant.PTR][:3]
    return [(p, c) for p in (same_a, same_b, other) for c in configs], configs


def test_results_arrive_problem_by_problem_and_compile_once_per_pattern():
    pairs, configs = _pairs()
    reported: list[tuple[str, set]] = []
    progress: list[tuple[int, int]] = []
    pool = compile_pool(2)
    try:
        out = precompile(pairs, pool=pool, chunk=1, on_problem=lambda k, r: reported.append((k, set(r))),
                         on_done=lambda done, total: progress.append((done, total)))  # fmt: skip
        assert set(out) == {(p.key, c.key) for p, c in pairs}
        assert {r.status.value for r in out.values()} == {"ok"}
        # Each problem is reported once, with exactly its own pairs.
        assert sorted(k for k, _ in reported) == sorted({p.key for p, _ in pairs})
        for key, got in reported:
            assert got == {(p.key, c.key) for p, c in pairs if p.key == key}
        # Two patterns × three configs compiled, not three problems × three.
        distinct = {(*specialisation_key(p, c), c.key) for p, c in pairs}
        assert len(distinct) == 6 and progress[-1] == (6, 6)
        # The pool outlives the call: a second one on it works (and finds the same results).
        again = precompile(pairs[:3], pool=pool)
        assert set(again) == {(p.key, c.key) for p, c in pairs[:3]}
    finally:
        pool.shutdown()


def test_a_stopped_compile_returns_at_once_and_reports_nothing():
    pairs, _ = _pairs()
    stop = threading.Event()
    stop.set()
    reported: list[str] = []
    out = precompile(pairs, workers=1, stop=stop, on_problem=lambda k, r: reported.append(k))
    assert out == {} and reported == []


def _gone(pid: int, within_s: float = 5.0) -> bool:
    """Whether process ``pid`` has ended (exited or a zombie), waiting up to ``within_s`` (Linux /proc)."""
    import time
    from pathlib import Path

    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def test_closing_a_pool_with_terminate_ends_its_running_work_at_once():
    """A sweep that stops at its time budget must not wait for the compiles its workers are running:
    ``close_pool(terminate=True)`` ends them (stand-in tasks that would run a minute), while a plain
    close lets queued work finish."""
    import time

    from tilecost.collect.compile import close_pool

    pool = compile_pool(2)
    running = [pool.submit(time.sleep, 60) for _ in range(4)]
    time.sleep(1.0)  # the workers have started and picked up two of the sleeps
    pids = [p.pid for p in pool._processes.values()]
    t0 = time.monotonic()
    close_pool(pool, terminate=True)
    assert time.monotonic() - t0 < 15, "closing waited for the running tasks"
    assert pids and all(_gone(pid) for pid in pids), "a worker outlived the close"
    # close_pool joins the executor's manager thread, which marks the killed workers' futures as
    # failed: every future is settled when it returns (CI once saw one still pending before it did).
    assert all(f.done() for f in running), "a running task's future was still pending after the close"
    assert not any(not f.cancelled() and f.exception() is None for f in running)

    pool = compile_pool(1)
    quick = pool.submit(sum, [1, 2, 3])
    close_pool(pool)
    assert quick.result() == 6


@pytest.mark.gpu
def test_gpu_a_stopped_cold_compile_returns_within_seconds(tmp_path, monkeypatch):
    """On the H200: a whole fp8 pattern compiled into an empty Triton cache takes minutes; stopped two
    seconds in, ``precompile`` on its own pool returns within seconds, the pairs it finished carry
    their results and nothing of the cut-off compiles is in the cache's index as a kernel."""
    import time

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))  # the spawned workers inherit it
    problem = Problem(1000, 1000, 1000, "fp8e4m3", "nn")
    pairs = [(problem, c) for c in problem_candidates(problem, "h200")][:400]
    stop = threading.Event()
    timer = threading.Timer(2.0, stop.set)
    timer.start()
    t0 = time.monotonic()
    out = precompile(pairs, workers=4, stop=stop)
    took = time.monotonic() - t0
    assert took < 20, f"a stopped compile took {took:.1f} s to return"
    assert len(out) < len(pairs), "the stop came before the pattern was compiled"
    assert {r.status.value for r in out.values()} <= {"ok", "out_of_resources", "compile_error"}
