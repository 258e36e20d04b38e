"""Run-time dispatch rules: choosing by extents, fitting from the model, the speed they keep."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from tilecost import DType, KernelVariant, Layout, Predictor, Problem, TileConfig
from tilecost.predict import DispatchRule, dispatch_speed, fit_dispatch
from tilecost.predict.jit import JIT_ENV

from . import test_predict_fixture as fixtures
from .test_predict_fixture import Dataset

artifact = fixtures.artifact  # the session fixture, shared by the predictor's test modules
dataset = fixtures.dataset  # the session fixture, shared by the predictor's test modules

SMALL = TileConfig("ptr", 16, 64, 64, 1, 4, 4, 3)
WIDE = TileConfig("ptr", 64, 128, 64, 8, 1, 4, 3)
BIG = TileConfig("ptr", 128, 256, 64, 8, 1, 8, 3)
RULE = DispatchRule(
    DType.BF16,
    Layout.NT,
    (SMALL, WIDE, BIG),
    {"axis": "m", "threshold_log2": 6.0, "below": {"config": 0},
     "above": {"axis": "n", "threshold_log2": 12.0, "below": {"config": 1}, "above": {"config": 2}}},
)  # fmt: skip


def test_choose_walks_the_tree_on_log2_extents() -> None:
    assert RULE.choose(63, 10**6, 1) == SMALL  # log2(63) = 5.98 < 6
    assert RULE.choose(64, 4095, 1) == WIDE  # log2(64) = 6 is not below 6; log2(4095) < 12
    assert RULE.choose(64, 4096, 1) == BIG


def test_round_trips_through_json_and_reads_as_text() -> None:
    assert DispatchRule.from_dict(RULE.to_dict()) == RULE
    assert RULE.describe().splitlines() == [
        "if log2(m) < 6.000:",
        f"    {SMALL.key}",
        "else:",
        "    if log2(n) < 12.000:",
        f"        {WIDE.key}",
        "    else:",
        f"        {BIG.key}",
    ]


def test_speed_kept_is_measured_best_over_the_chosen_configs_time() -> None:
    measured = {
        Problem(16, 8192, 4096): {SMALL.key: 10.0, WIDE.key: 8.0},  # chosen SMALL: 8 / 10 = 0.8
        Problem(4096, 8192, 4096): {BIG.key: 100.0, WIDE.key: 100.0},  # chosen BIG: 1.0
        Problem(4096, 1024, 4096): {BIG.key: 50.0},  # chosen WIDE: not measured
    }

    speed = dispatch_speed(RULE, measured)

    assert speed["problems"] == 2 and speed["unmeasured"] == ["4096x1024x4096-bf16-nt"]
    assert speed["mean_speed_fraction"] == pytest.approx(0.9)
    assert speed["geomean_speed_fraction"] == pytest.approx(0.8**0.5)
    assert speed["min_speed_fraction"] == pytest.approx(0.8)


def test_fitted_rules_have_two_to_four_pointer_configs_and_beat_any_single_one(
    artifact: Path,
    dataset: Dataset,
) -> None:
    predictor = Predictor.load(artifact)
    group = predictor._group(DType.BF16, Layout.NT).scorer
    problems = dataset.problems("train")[:30]

    rule = fit_dispatch(group, problems, min_leaf_fraction=0.2)

    assert 2 <= len(rule.configs) <= 4
    assert all(c.variant is KernelVariant.PTR for c in rule.configs)

    def loss(choose: object) -> float:  # summed log slowdown against each problem's model best
        total = 0.0
        for problem in problems:
            times = predictor.predicted_times_us(problem)
            chosen = choose(problem)  # type: ignore[operator]
            total += 5.0 if chosen not in times else math.log(times[chosen] / min(times.values()))
        return total

    assert loss(lambda p: rule.choose(p.m, p.n, p.k)) <= min(loss(lambda p, c=c: c) for c in rule.configs) + 1e-9


def test_fit_needs_problems(artifact: Path) -> None:
    group = Predictor.load(artifact)._group(DType.BF16, Layout.NT).scorer
    with pytest.raises(ValueError, match="at least one problem"):
        fit_dispatch(group, [])


needs_numba = pytest.mark.skipif(
    importlib.util.find_spec("numba") is None, reason="numba is not installed (pip install tilecost[fast])"
)


@needs_numba
def test_the_compiled_stump_search_is_the_numpy_one_bit_for_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    from tilecost.predict.dispatch import _stump, _stump_of
    from tilecost.predict.jit import compiled_stump

    monkeypatch.delenv(JIT_ENV, raising=False)
    kernel = compiled_stump()
    rng = np.random.default_rng(5)
    seen = {"leaf": 0, "split": 0}
    for case in range(120):
        problems, configs = int(rng.integers(2, 90)), int(rng.integers(1, 40))
        # Extents on a coarse log2 grid (ties on every axis), regrets with repeated columns and a penalty
        # value, as fit_dispatch builds them; every fourth case has a column best on every row (one leaf wins).
        points = np.round(rng.uniform(0, 14, size=(problems, 3)) * 2) / 2
        regret = np.abs(rng.normal(size=(problems, configs))) * rng.uniform(0.1, 2, size=configs)
        regret[rng.random((problems, configs)) < 0.2] = 5.0
        if configs > 2:
            regret[:, 1] = regret[:, 2]
        if case % 4 == 0:
            regret[:, rng.integers(configs)] = 0.0
        min_leaf = int(rng.integers(1, max(2, problems // 3)))
        rows = rng.permutation(problems)[: int(rng.integers(1, problems + 1))]
        ours = _stump_of(regret, rows, points, min_leaf, kernel)
        theirs = _stump(regret[rows], points[rows], min_leaf)
        assert ours[1] == theirs[1], case
        assert ours[0] == theirs[0] or (np.isnan(ours[0]) and np.isnan(theirs[0])), case  # the same bits
        seen["leaf" if "config" in theirs[1] else "split"] += 1
    assert min(seen.values()) >= 20, seen  # both kinds of answer were compared


@needs_numba
def test_compiled_and_numpy_fits_give_the_same_rule(
    artifact: Path, dataset: Dataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(JIT_ENV, raising=False)
    group = Predictor.load(artifact)._group(DType.BF16, Layout.NT).scorer
    problems = dataset.problems("train")[:80]

    assert fit_dispatch(group, problems, compiled=True) == fit_dispatch(group, problems, compiled=False)


def test_compiled_true_without_the_compiled_path_says_how_to_get_it(
    artifact: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    group = Predictor.load(artifact)._group(DType.BF16, Layout.NT).scorer
    monkeypatch.setenv(JIT_ENV, "0")
    with pytest.raises(RuntimeError, match="needs numba"):
        fit_dispatch(group, [Problem(64, 64, 64)], compiled=True)
