"""run_problem end to end on CPU: real kernels under the interpreter, a fake timer, real statuses."""

from __future__ import annotations

import pytest

from tilecost import DType, KernelVariant, Layout, Problem, TileConfig
from tilecost.measurement import Status

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from tilecost.collect.protocol import MeasureProtocol  # noqa: E402
from tilecost.collect.runner import run_problem  # noqa: E402

from .test_protocol import FakeTimer  # noqa: E402


@pytest.mark.interpreter
def test_run_problem_checks_then_times_every_config():
    problem = Problem(19, 40, 72, DType.FP16, Layout.NT)
    configs = [
        TileConfig(KernelVariant.PTR, 16, 32, 32, 1, 1, 2, 2),
        TileConfig(KernelVariant.TMA, 16, 32, 32, 1, 2, 2, 3),
        TileConfig(KernelVariant.PTR, 32, 32, 32, 1, 1, 2, 2),
    ]
    times = {c.key: 10.0 + i for i, c in enumerate(configs)}
    out = run_problem(problem, configs, FakeTimer(times), MeasureProtocol(rounds=2), device="cpu")
    assert [o.config for o in out.outcomes] == configs
    assert all(o.status is Status.OK for o in out.outcomes)
    assert all(o.rel_error is not None and o.rel_error < 2e-3 for o in out.outcomes)
    assert [o.timing.median_us for o in out.outcomes] == [10.0, 11.0, 12.0]


@pytest.mark.interpreter
def test_wrong_results_are_recorded_not_timed(monkeypatch):
    from tilecost.collect import runner

    problem = Problem(8, 32, 32, DType.FP32, Layout.NN)
    config = TileConfig(KernelVariant.PTR, 16, 32, 32, 1, 1, 2, 2)
    monkeypatch.setitem(runner.TOLERANCE, DType.FP32, 0.0)  # nothing can pass a zero tolerance
    out = run_problem(problem, [config], FakeTimer({config.key: 1.0}), device="cpu")
    assert out.outcomes[0].status is Status.WRONG_RESULT and out.outcomes[0].timing is None


@pytest.mark.interpreter
def test_compiler_failures_and_timeouts_become_statuses(monkeypatch):
    from triton.compiler.errors import CompilationError
    from triton.runtime.errors import OutOfResources

    from tilecost.collect.launch import BoundMatmul

    problem = Problem(8, 32, 32, DType.FP16, Layout.NT)
    too_big = TileConfig(KernelVariant.PTR, 16, 32, 32, 1, 1, 2, 5)
    refused = TileConfig(KernelVariant.PTR, 16, 32, 32, 1, 1, 2, 4)
    fine = TileConfig(KernelVariant.PTR, 16, 32, 32, 1, 1, 2, 2)
    real_compile = BoundMatmul.compile

    def compile_or_fail(self):
        if self.config == too_big:
            raise OutOfResources(300_000, 232_448, "shared memory")
        if self.config == refused:
            raise CompilationError("kernel.py", None, "refused on purpose")
        return real_compile(self)

    monkeypatch.setattr(BoundMatmul, "compile", compile_or_fail)
    times = {c.key: 1.0 for c in (too_big, refused, fine)}
    out = run_problem(problem, [too_big, refused, fine], FakeTimer(times), device="cpu")
    assert [o.status for o in out.outcomes] == [Status.OUT_OF_RESOURCES, Status.COMPILE_ERROR, Status.OK]
    assert "shared memory" in out.outcomes[0].error
    # A first launch slower than the limit is a timeout, not timed further.
    slow = run_problem(problem, [fine], FakeTimer(times), device="cpu", timeout_s=0.0)
    assert slow.outcomes[0].status is Status.TIMEOUT and slow.outcomes[0].timing is None
