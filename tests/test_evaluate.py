"""Evaluation metrics and baselines on hand-made cases whose answers are worked out in comments."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tilecost.config import TileConfig
from tilecost.device import load_device
from tilecost.features import ConfigArrays
from tilecost.problem import Problem
from tilecost.space import problem_candidates
from tilecost.train.baselines import fixed_choice, roofline_order, stand_in, tutorial_choice
from tilecost.train.evaluate import evaluate_predictions, problem_groups

DEVICE = load_device("h200")


def _rows(problem: Problem, times: dict[str, float]) -> pd.DataFrame:
    records = []
    for key, time_us in times.items():
        c = TileConfig.from_key(key)
        records.append(
            {"problem_key": problem.key, "config_id": key, "time_us": time_us, **c.to_dict(), "m": problem.m}
        )
    return pd.DataFrame.from_records(records)


# Problem 1 (M = 1000): six candidates, best B at 5 µs.
P1 = Problem(1000, 1000, 1000, "bf16", "nt")
P1_TIMES = {
    "tma-128x128x64-g8-s1-w4-p3": 10.0,  # A: the fixed baseline's config
    "ptr-64x64x32-g1-s1-w4-p3": 5.0,  # B: the best
    "ptr-128x32x32-g8-s1-w4-p4": 8.0,  # C: tutorial config 6
    "ptr-32x32x32-g1-s1-w2-p2": 20.0,  # D
    "ptr-16x16x32-g1-s1-w2-p2": 40.0,  # E
    "ptr-128x64x32-g8-s1-w4-p4": 6.25,  # F: tutorial config 4
}
# The model's order: D, A, F, C, E, B.
P1_PREDICTED = [2.0, 6.0, 4.0, 1.0, 5.0, 3.0]
# Problem 2 (M = 64, skinny): predictions are every time × e^0.5, a perfect order.
P2 = Problem(64, 4096, 4096, "bf16", "nt")
P2_TIMES = {"ptr-64x64x64-g1-s1-w4-p3": 30.0, "ptr-32x64x64-g1-s1-w4-p3": 20.0, "ptr-16x64x64-g1-s1-w2-p3": 25.0}


def _evaluate():
    frame = pd.concat([_rows(P1, P1_TIMES), _rows(P2, P2_TIMES)], ignore_index=True)
    predicted = np.array(P1_PREDICTED + [t * math.exp(0.5) for t in P2_TIMES.values()])
    return evaluate_predictions(frame, predicted, DEVICE)


def test_top1_top5_and_baselines_match_the_hand_computed_values() -> None:
    evaluation = _evaluate()
    p1, p2 = sorted(evaluation.problems, key=lambda r: r.problem.m, reverse=True)

    assert p1.top1 == pytest.approx(5 / 20)  # model picks D (20 µs); best is B (5 µs)
    assert p1.top5 == pytest.approx(5 / 6.25)  # D, A, F, C, E: F is the fastest of them
    assert p1.baselines["fixed"] == pytest.approx(5 / 10)  # A was measured: exact
    assert p1.baselines["tutorial"] == pytest.approx(5 / 6.25)  # best of C (8) and F (6.25)
    assert (p1.best_config, p1.model_config) == ("ptr-64x64x32-g1-s1-w4-p3", "ptr-32x32x32-g1-s1-w2-p2")
    assert p2.top1 == p2.top5 == 1.0
    assert p2.kendall_tau == pytest.approx(1.0)
    assert p2.log_rmse == pytest.approx(0.5)  # ln(t·e^0.5) - ln(t) = 0.5 on every row


def test_aggregates_are_geometric_means_and_worst_problems() -> None:
    summary = _evaluate().summary()

    assert summary["problems"] == 2
    assert summary["top1_geomean"] == pytest.approx(math.sqrt(0.25 * 1.0))  # 0.5
    assert summary["top1_worst"] == pytest.approx(0.25)
    assert summary["top5_geomean"] == pytest.approx(math.sqrt(0.8 * 1.0))


def test_breakdown_groups_split_skinny_m_and_size() -> None:
    evaluation = _evaluate()

    assert evaluation.summary("skinny_m")["top1_geomean"] == pytest.approx(1.0)  # only P2 has M <= 64
    assert evaluation.summary("wide_m")["top1_geomean"] == pytest.approx(0.25)
    # 2·1000³ = 2e9 and 2·64·4096² = 2.1e9 FLOP: both small.
    assert evaluation.summary("small")["problems"] == 2
    assert evaluation.summary("large") == {"problems": 0.0}
    assert ("unaligned", "N or K % 16 != 0") in problem_groups(Problem(64, 4095, 4096))
    metrics = evaluation.metrics()
    assert metrics["heldout_top1_geomean/skinny_m"] == pytest.approx(1.0)
    assert "heldout_log_rmse" in metrics
    assert metrics["heldout_top1_interval_low"] <= 0.5 <= metrics["heldout_top1_interval_high"]


def test_the_top1_interval_resamples_the_problems() -> None:
    evaluation = _evaluate()  # top-1 0.25 and 1.0: a resample holds either or both

    low, high = evaluation.top1_interval(level=0.98)

    assert low == pytest.approx(0.25) and high == pytest.approx(1.0)
    assert evaluation.top1_interval(seed=3) == evaluation.top1_interval(seed=3)
    assert "90% interval 0." in evaluation.table()
    with pytest.raises(ValueError, match="level=1.5"):
        evaluation.top1_interval(level=1.5)


def test_table_is_readable_text_with_every_group_and_problem() -> None:
    table = _evaluate().table()

    assert "model top1" in table and "tutorial" in table and "roofline" in table
    assert P1.key in table and P2.key in table
    assert "M <= 64" in table


def test_reversed_predictions_have_kendall_tau_minus_one() -> None:
    frame = _rows(P2, P2_TIMES)
    evaluation = evaluate_predictions(frame, 1.0 / frame["time_us"].to_numpy(), DEVICE)

    assert evaluation.problems[0].kendall_tau == pytest.approx(-1.0)
    assert evaluation.problems[0].top1 == pytest.approx(20 / 30)  # picks the slowest, 30 µs


def test_ties_in_prediction_go_to_the_earlier_candidate_of_the_space() -> None:
    frame = _rows(P2, P2_TIMES)

    evaluation = evaluate_predictions(frame, np.ones(len(frame)), DEVICE)

    # The space orders BLOCK_M 16 before 32 before 64.
    assert evaluation.problems[0].model_config == "ptr-16x64x64-g1-s1-w2-p3"


# Problem 3 (K = 128): a split-K configuration measured before the space stopped offering split-K at K <= 256.
P3 = Problem(12436, 20, 128, "fp32", "nt")
P3_TIMES = {"tma-128x32x32-g1-s2-w8-p2": 10.0, "tma-128x32x64-g1-s1-w4-p2": 7.0, "ptr-64x32x32-g1-s1-w4-p2": 8.0}


def test_a_configuration_the_space_no_longer_offers_is_never_chosen() -> None:
    evaluation = evaluate_predictions(_rows(P3, P3_TIMES), np.array([1.0, 3.0, 2.0]), DEVICE)
    result = evaluation.problems[0]

    # the model ranks the split-K configuration first; the predictor could not answer it, so its next counts
    assert result.model_config == "ptr-64x32x32-g1-s1-w4-p2"
    assert result.top1 == pytest.approx(7 / 8)
    assert result.candidates == 2
    assert evaluation.rows == 3  # its prediction still counts for log-RMSE


def test_a_refused_best_still_counts_as_the_best() -> None:
    times = dict(P3_TIMES, **{"tma-128x32x32-g1-s2-w8-p2": 5.0})
    result = evaluate_predictions(_rows(P3, times), np.array([3.0, 1.0, 2.0]), DEVICE).problems[0]

    assert result.best_config == "tma-128x32x32-g1-s2-w8-p2"
    assert result.top1 == pytest.approx(5 / 7)  # a rule that refuses the best shows as a loss


def test_a_problem_with_no_offered_configuration_is_refused() -> None:
    frame = _rows(P3, {"tma-128x32x32-g1-s2-w8-p2": 10.0})
    with pytest.raises(ValueError, match="none of its 1 measured configurations is offered"):
        evaluate_predictions(frame, np.ones(1), DEVICE)


def test_bad_predictions_are_refused() -> None:
    frame = _rows(P2, P2_TIMES)
    with pytest.raises(ValueError, match="3 rows"):
        evaluate_predictions(frame, np.ones(2), DEVICE)
    with pytest.raises(ValueError, match="positive"):
        evaluate_predictions(frame, np.array([1.0, -1.0, 1.0]), DEVICE)


def test_stand_in_clips_tiles_to_the_covering_tile_and_drops_group_on_one_row() -> None:
    # 1×4096×1024: M is covered by a 16-row tile, so the tutorial's 128×256×64 g8 runs as 16×256×64
    # g1 (one row of 4096 / 256 = 16 blocks either way).
    problem = Problem(1, 4096, 1024)
    config = TileConfig.from_key("ptr-128x256x64-g8-s1-w8-p3")

    assert stand_in(config, problem).key == "ptr-16x256x64-g1-s1-w8-p3"


def test_fixed_baseline_falls_back_to_pointers_where_tma_is_impossible() -> None:
    aligned = Problem(4096, 4096, 4096)
    unaligned = Problem(4096, 4096, 4001)  # K·2 bytes = 8002, not a multiple of 16: no TMA
    aligned_c = problem_candidates(aligned, DEVICE)
    unaligned_c = problem_candidates(unaligned, DEVICE)

    assert aligned_c[fixed_choice(aligned, aligned_c).index].key == "tma-128x128x64-g8-s1-w4-p3"
    chosen = fixed_choice(unaligned, unaligned_c)
    assert (unaligned_c[chosen.index].key, chosen.how) == ("ptr-128x128x64-g8-s1-w4-p3", "exact")


def test_tutorial_baseline_uses_stand_ins_on_a_decode_shape() -> None:
    problem = Problem(1, 4096, 1024)
    candidates = problem_candidates(problem, DEVICE)
    times = [1.0] * len(candidates)

    choice = tutorial_choice(problem, candidates, times)

    assert choice.how == "stand-in"
    assert candidates[choice.index].block_m == 16


def test_roofline_breaks_ties_by_smaller_shared_memory() -> None:
    # Same tile, stages 2 and 4: the roofline ignores stages, so the two tie; 2 stages need less
    # shared memory: 2·(64·64 + 64·64)·2 = 32,768 bytes against 65,536.
    problem = Problem(4096, 4096, 4096)
    configs = [TileConfig.from_key("ptr-64x64x64-g1-s1-w4-p4"), TileConfig.from_key("ptr-64x64x64-g1-s1-w4-p2")]

    order = roofline_order(problem, ConfigArrays.from_configs(configs), DEVICE, np.array([0, 1]))

    assert order[0] == 1


def _with_top1(evaluation, scores):
    """``evaluation`` with its problems' top-1 replaced (same problems, hence comparable)."""
    import dataclasses

    problems = tuple(dataclasses.replace(r, top1=s) for r, s in zip(evaluation.problems, scores, strict=True))
    return dataclasses.replace(evaluation, problems=problems)


def test_the_paired_gain_compares_the_same_problems() -> None:
    base = _evaluate()  # P1 0.25, P2 1.0
    better = _with_top1(base, [0.5, 1.0])  # twice as good on P1, the same on P2

    gain, low, high = better.paired_top1_gain(base, level=0.98)

    assert gain == pytest.approx(math.sqrt(2.0))  # geometric means 0.5**0.5 / 0.25**0.5
    assert low == pytest.approx(1.0) and high == pytest.approx(2.0)  # resamples of P2 alone, of P1 alone
    assert base.paired_top1_gain(base) == (1.0, 1.0, 1.0)
    other = evaluate_predictions(_rows(P2, P2_TIMES), np.array(list(P2_TIMES.values())), DEVICE)
    assert other.paired_top1_gain(base)[0] == pytest.approx(1.0)  # only P2 is shared: the same score
    lone = evaluate_predictions(_rows(P1, P1_TIMES), np.array(P1_PREDICTED), DEVICE)
    with pytest.raises(ValueError, match="share no problem"):
        lone.paired_top1_gain(other)


def test_a_champion_is_beaten_only_by_a_gain_the_problems_tell_apart() -> None:
    from tilecost.train.tracking import beats

    base = _evaluate()
    # Better on P1 only: a better score, but half the resamples hold P2 alone (no gain), so no.
    assert beats(_with_top1(base, [0.5, 1.0]), base) == (False, "does not beat champion")
    # Better on both problems: every resample gains.
    assert beats(_with_top1(base, [0.5, 1.0]), _with_top1(base, [0.25, 0.9])) == (True, "beats champion")
    # A worse score never wins, whatever the interval.
    assert beats(base, _with_top1(base, [0.5, 1.0]))[0] is False
    assert beats(base, base)[0] is False


def _judged(top1s):
    """An evaluation of hand-set top-1 figures, one per (problem, top-1) pair: what the promotion rule reads."""
    from tilecost.train.evaluate import Evaluation, ProblemResult

    results = tuple(
        ProblemResult(
            p, 10, "a", 1.0, "a", t, min(1.0, 1.05 * t), 0.5, 0.1, {n: 0.5 for n in ("fixed", "tutorial", "roofline")}
        )
        for p, t in top1s
    )
    return Evaluation(results, 0.1, 10 * len(results))


# 40 problems with N and K multiples of 16, 10 with K = 1000 (bf16 nt 16-x), 5 fp16 ones (too few to judge alone).
ALIGNED = [Problem(64 * (i + 1), 1024, 1024) for i in range(40)]
RAGGED = [Problem(64 * (i + 1), 1024, 1000) for i in range(10)]
FEW = [Problem(64 * (i + 1), 1024, 1024, "fp16") for i in range(5)]
CHAMPION = [(p, 0.9) for p in ALIGNED + RAGGED + FEW]


def _challenger(aligned_spread: float, ragged: float) -> list:
    """Aligned problems alternately x(1 + spread) and x(1 - spread), the ragged ones all x``ragged``."""
    return (
        [(p, 0.9 * (1 + aligned_spread if i % 2 else 1 - aligned_spread)) for i, p in enumerate(ALIGNED)]
        + [(p, 0.9 * ragged) for p in RAGGED]
        + [(p, 0.9) for p in FEW]
    )


def test_group_gains_are_per_alignment_group_at_the_joint_level() -> None:
    from tilecost.train.evaluate import alignment_group

    assert alignment_group(RAGGED[0]) == "bf16 nt 16-x"
    assert alignment_group(Problem(5, 1000, 1024, "fp8e4m3", "nn")) == "fp8e4m3 nn x-16"

    gains = _judged(_challenger(0.05, 1.1)).paired_group_gains(_judged(CHAMPION))

    # fp16 (5 problems) is below the 8 a group needs; the two judged groups share the 90% at 95% each.
    assert [(g.group, g.problems) for g in gains] == [("bf16 nt 16-16", 40), ("bf16 nt 16-x", 10)]
    assert all(g.level == pytest.approx(0.95) for g in gains)
    aligned, ragged = gains
    assert ragged.ratio == pytest.approx(1.1) and ragged.verdict == "better"  # every resample gains x1.1
    assert aligned.low < 1 < aligned.high and aligned.verdict == "level"
    with pytest.raises(ValueError, match="min_problems=1"):
        _judged(CHAMPION).paired_group_gains(_judged(CHAMPION), min_problems=1)
    # Judging only some groups: the joint level is shared among those alone (one group: 90% itself).
    (only,) = _judged(_challenger(0.05, 1.1)).paired_group_gains(_judged(CHAMPION), groups=["bf16 nt 16-x"])
    assert (only.group, only.problems, only.verdict) == ("bf16 nt 16-x", 10, "better")
    assert only.level == pytest.approx(0.90)


def test_the_verdict_names_the_groups_that_moved_and_they_do_not_decide() -> None:
    from tilecost.train.tracking import judge

    champion = _judged(CHAMPION)
    # The ragged group x1.1 in every problem, the aligned ones scattered by ±8%: overall x1.017 with an interval
    # that holds 1, so the champion stays although one group is better beyond chance.
    promoted, words, detail = judge(_judged(_challenger(0.08, 1.1)), champion)
    assert (promoted, words) == (False, "does not beat champion")
    assert "better in bf16 nt 16-x (10) x1.1000 (x1.1000-x1.1000)" in detail and "worse in" not in detail
    # Every aligned problem x1.05 (overall better beyond chance), the ragged group x0.9: promoted, and the group
    # it is worse in is named.
    challenger = [(p, 0.9 * 1.05) for p in ALIGNED] + [(p, 0.9 * 0.9) for p in RAGGED] + [(p, 0.9) for p in FEW]
    promoted, words, detail = judge(_judged(challenger), champion)
    assert (promoted, words) == (True, "beats champion")
    assert "better in bf16 nt 16-16 (40) x1.0500" in detail and "worse in bf16 nt 16-x (10) x0.9000" in detail
    # Level everywhere: nothing named.
    assert "in bf16" not in judge(champion, champion)[2]
