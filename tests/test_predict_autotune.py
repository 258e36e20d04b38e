"""Hybrid use with Triton: the model prunes ``triton.autotune`` to its top k (interpreter, injected do_bench)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tilecost import KernelVariant, Predictor, Problem, TileConfig, problem_candidates
from tilecost.predict.autotune import autotuned_matmul, prune_configs_by

from . import test_predict_fixture as fixtures

artifact = fixtures.artifact  # the session fixture, shared by the predictor's test modules

# fp32: the interpreter's bf16 dot is garbage (FACTS.md), its fp32 dot is exact.
PROBLEM = Problem(32, 48, 64, "fp32", "nt")


@pytest.fixture(scope="module")
def predictor(artifact: Path) -> Predictor:
    return Predictor.load(artifact)


def _configs() -> list[TileConfig]:
    ptr = [c for c in problem_candidates(PROBLEM) if c.variant is KernelVariant.PTR and c.split_k == 1]
    return ptr[::7][:10]


@pytest.mark.interpreter
def test_the_autotuner_times_only_the_models_top_k(predictor: Predictor) -> None:
    torch = pytest.importorskip("torch")
    timed: list[float] = []

    def do_bench(kernel_call: object, quantiles: object = None) -> list[float]:
        timed.append(len(timed))  # a fake timer: the later a config is timed, the slower it "runs"
        return [1.0 + len(timed), 1.0, 1.0]

    configs = _configs()
    matmul = autotuned_matmul(predictor, top_k=3, dtype="fp32", layout="nt", configs=configs, do_bench=do_bench)
    a = torch.randn(PROBLEM.m, PROBLEM.k)
    w = torch.randn(PROBLEM.n, PROBLEM.k)

    c = matmul(a, w.T)  # nt: B is the transpose of an N x K tensor

    predicted = predictor.predicted_times_us(PROBLEM)
    expected = sorted(configs, key=lambda x: predicted[x])[:3]
    tuner = matmul.autotuner
    timed_configs = {(t.kwargs["BLOCK_M"], t.kwargs["BLOCK_N"], t.kwargs["BLOCK_K"], t.num_warps, t.num_stages)
                     for t in tuner.configs_timings}  # fmt: skip
    assert len(timed) == 3
    assert timed_configs == {(x.block_m, x.block_n, x.block_k, x.num_warps, x.num_stages) for x in expected}
    torch.testing.assert_close(c, a @ w.T, rtol=1e-4, atol=1e-4)


def test_both_styles_keep_the_same_configs(predictor: Predictor) -> None:
    triton = pytest.importorskip("triton")
    from tilecost.collect.kernels import to_triton_config

    configs = [to_triton_config(c) for c in _configs()]
    args = {"M": PROBLEM.m, "N": PROBLEM.n, "K": PROBLEM.k}
    perf = prune_configs_by(predictor, top_k=4, dtype="fp32")
    early = prune_configs_by(predictor, top_k=4, dtype="fp32", style="early_config_prune")

    by_perf = sorted(configs, key=lambda c: perf["perf_model"](**args, **c.all_kwargs()))[: perf["top_k"]]
    by_early = early["early_config_prune"](configs, args)

    assert by_perf == by_early and len(by_early) == 4
    assert isinstance(by_early[0], triton.Config)


def test_non_candidates_and_foreign_configs_are_predicted_infinite(predictor: Predictor) -> None:
    perf_model = prune_configs_by(predictor, dtype="fp32")["perf_model"]
    args = {"M": PROBLEM.m, "N": PROBLEM.n, "K": PROBLEM.k, "num_warps": 4, "num_stages": 3}

    # 256 x 256 tiles exceed the 32 x 48 problem's smallest covering tiles: not a candidate.
    assert perf_model(**args, BLOCK_M=256, BLOCK_N=256, BLOCK_K=32) == math.inf
    assert perf_model(**args, BLOCK_M=24, BLOCK_N=32, BLOCK_K=32) == math.inf  # no such TileConfig
    assert math.isfinite(perf_model(**args, BLOCK_M=32, BLOCK_N=64, BLOCK_K=64))


def test_bad_arguments_are_refused(predictor: Predictor) -> None:
    with pytest.raises(ValueError, match="top_k=0 is not allowed"):
        prune_configs_by(predictor, top_k=0)
    with pytest.raises(ValueError, match="style='fast' is not allowed"):
        prune_configs_by(predictor, style="fast")
