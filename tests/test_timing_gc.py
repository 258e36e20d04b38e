"""The GPU timer's round wrapper, on CPU: the garbage collector is off while a round is enqueued, and a
launch the timer has not seen runs once, untimed, before its first round."""

from __future__ import annotations

import pytest


def test_a_round_runs_with_the_garbage_collector_off_and_leaves_it_as_it_was(monkeypatch):
    """The GPU timer disables Python's collector while it enqueues a round (a collection inside a
    chunk would outlast the spin) and restores it after, also when a launch raises."""
    import gc

    from tilecost.collect.timing import CudaEventTimer

    seen = []
    timer = CudaEventTimer.__new__(CudaEventTimer)  # no GPU: only the wrapper is exercised

    def fake_round(items):
        seen.append(gc.isenabled())
        if items == "boom":
            raise RuntimeError("launch failed")
        return {}

    monkeypatch.setattr(timer, "_run_round", fake_round)
    assert gc.isenabled()
    assert timer.run_round([]) == {}
    assert seen == [False] and gc.isenabled()
    with pytest.raises(RuntimeError):
        timer.run_round("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        timer.run_round([])
        assert not gc.isenabled(), "a collector the caller had turned off stays off"
    finally:
        gc.enable()


def test_each_launch_is_warmed_up_once_before_its_first_round():
    """A launch never seen runs once before the spin (its first launch loads the kernel: milliseconds of
    host time); the same launch in a later round is not run again, a new one for the same key is."""
    from tilecost.collect.timing import CudaEventTimer

    timer = CudaEventTimer.__new__(CudaEventTimer)
    timer._warmed = set()
    calls = []

    def launch_a():
        calls.append("a")

    def launch_b():
        calls.append("b")

    assert timer._warm_up([("a", launch_a, 5), ("b", launch_b, 5)]) == 2
    assert calls == ["a", "b"], "one untimed launch each, whatever the repetitions"
    assert timer._warm_up([("a", launch_a, 5), ("b", launch_b, 5)]) == 0
    assert calls == ["a", "b"]

    def launch_a_next_problem():
        calls.append("a2")

    assert timer._warm_up([("a", launch_a_next_problem, 3)]) == 1
    assert calls[-1] == "a2"
