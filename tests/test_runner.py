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


def _cancelling_operands(m: int, n: int, k: int, seed: int = 0):
    """N(0, 1) operands, then B's columns made orthogonal to A's single row: A·B cancels to ~0."""
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=gen, dtype=torch.float64)
    b = torch.randn(k, n, generator=gen, dtype=torch.float64)
    b -= a[0][:, None] * (a[0] @ b) / (a[0] @ a[0])
    return a, b


def test_relative_error_is_floored_at_the_expected_norm_where_the_product_cancels():
    from tilecost.collect.runner import TOLERANCE, expected_norm, relative_error

    a, b = _cancelling_operands(1, 2, 257)
    ref = a @ b
    floor = expected_norm(a, b)
    assert float(ref.norm()) < 1e-9 * floor  # the two outputs cancel
    # A TF32-sized rounding error (~3e-4 of the expected norm): plainly relative it is enormous,
    # against the floor it is what the rounding is.
    noise = torch.tensor([[1.0, -1.0]], dtype=torch.float64) * 3e-4 * floor / 2**0.5
    c = (ref + noise).float()
    assert relative_error(c, ref) > 1.0
    assert 2.5e-4 < relative_error(c, ref, floor) < TOLERANCE[DType.FP32]


def test_relative_error_still_fails_wrong_products():
    from tilecost.collect.runner import TOLERANCE, expected_norm, relative_error

    gen = torch.Generator().manual_seed(1)
    for m, n, k in [(1, 2, 257), (37, 41, 69), (128, 96, 300)]:
        a, b = torch.randn(m, k, generator=gen), torch.randn(k, n, generator=gen)
        ref = a.double() @ b.double()
        floor = expected_norm(a, b)
        assert relative_error(ref.float(), ref, floor) < 1e-6
        assert relative_error(ref.float(), ref, floor) <= relative_error(ref.float(), ref)  # never larger
        zeros, doubled = torch.zeros_like(ref).float(), (2 * ref).float()
        unwritten = ref.float().clone()
        unwritten[-1, -1] = float("nan")
        for wrong in (zeros, doubled):
            assert relative_error(wrong, ref, floor) > min(TOLERANCE.values()) * 10
        assert relative_error(unwritten, ref, floor) == float("inf")
    # A zero product computed exactly is no error; anything else against a zero scale is.
    zero = torch.zeros(2, 2, dtype=torch.float64)
    assert relative_error(zero.float(), zero) == 0.0
    assert relative_error(torch.ones(2, 2), zero) == float("inf")


@pytest.mark.gpu
def test_gpu_tiny_cancelling_output_is_not_a_wrong_result():
    """1×2×257 fp32 nt on the H200: every tiling came back wrong_result under ‖C − C64‖/‖C64‖ (its
    two outputs cancel; thirty-eighth session, r38sc). With the expected-norm floor they pass, and the
    plain relative error of the same launch is recorded here to show what the floor changed."""
    from tilecost.collect.launch import bind
    from tilecost.collect.runner import TOLERANCE, expected_norm, make_operands, relative_error
    from tilecost.space import problem_candidates

    problem = Problem(1, 2, 257, DType.FP32, Layout.NT)
    configs = list(problem_candidates(problem, "h200"))[::6]
    a, b = make_operands(problem, seed=0, device="cuda")
    ref = a.double() @ b.double()
    floor = expected_norm(a, b)
    for config in configs:
        c = bind(a, b, config)()
        torch.cuda.synchronize()
        err, plain = relative_error(c, ref, floor), relative_error(c, ref)
        print(f"{config.key}: floored {err:.2e}, plain {plain:.2e}, |C64| / floor {float(ref.norm()) / floor:.3f}")
        assert err < TOLERANCE[problem.dtype]
    out = run_problem(problem, configs, FakeTimer({c.key: 1.0 for c in configs}), MeasureProtocol(rounds=2))
    assert all(o.status is Status.OK for o in out.outcomes)
