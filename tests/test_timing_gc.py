"""The GPU timer's round wrapper, on CPU: the garbage collector is off while a round is enqueued."""

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
