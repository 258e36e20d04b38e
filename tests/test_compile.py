"""The parallel compiler: real spawned workers compiling the real kernels (under Triton's interpreter on
CPU, where nothing is compiled and every config succeeds; for real on the H200), deduplicated by
specialisation pattern, reported problem by problem, on a pool that outlives one call."""

from __future__ import annotations

import threading

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
