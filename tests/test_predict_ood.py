"""Out-of-distribution verdicts and their calibration."""

from __future__ import annotations

import functools
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from tilecost import DType, Layout, OODReason, OODVerdict, Predictor, Problem
from tilecost.errors import ArtifactError
from tilecost.predict import calibrate_ood, training_domain
from tilecost.predict.ood import (
    DEFAULT_SPARSE_DISTANCE_LOG2,
    SIGNALS,
    FlagRule,
    OODChecker,
    answer_signals,
    fit_flag_rules,
)

from . import test_predict_fixture as fixtures
from .test_predict_fixture import Dataset

artifact = fixtures.artifact  # the session fixture, shared by the predictor's test modules
dataset = fixtures.dataset  # the session fixture, shared by the predictor's test modules


@pytest.fixture(scope="module")
def predictor(artifact: Path) -> Predictor:
    return Predictor.load(artifact, triton_version=None)


@pytest.mark.parametrize("shape", [(1, 4096, 262144), (65536, 65536, 65536), (1, 1, 2**31 - 1)])
def test_far_away_shapes_are_always_flagged(predictor: Predictor, shape: tuple[int, int, int]) -> None:
    verdict = predictor.predict_best(shape).ood

    assert verdict and OODReason.DIM_OUTSIDE_TRAINING_RANGE in verdict.reasons
    # and by the sparse neighbourhood exactly when farther than the calibrated threshold
    far = verdict.neighbour_distance_log2 > predictor.ood.sparse_distance_log2
    assert (OODReason.SPARSE_NEIGHBOURHOOD in verdict.reasons) == far


LIMIT = 2**31 - 1  # elements of one operand the kernels can index (int32 offsets)


@pytest.mark.parametrize(
    ("shape", "too_large"),
    [
        ((46340, 46340, 1024), False),  # C: 46340² = 2,147,395,600 elements
        ((46341, 46341, 1024), True),  # C: 46341² = 2,147,488,281
        ((1, 2**31 - 1, 1), False),  # B: 2**31 - 1 elements exactly
        ((2, 2**30, 2), True),  # B: 2**31
        ((65536, 65536, 65536), True),
        ((4096, 4096, 4096), False),
    ],
)
def test_an_operand_the_kernels_cannot_index_is_a_reason(
    predictor: Predictor, shape: tuple[int, int, int], too_large: bool
) -> None:
    m, n, k = shape
    assert (max(m * k, k * n, m * n) > LIMIT) is too_large

    verdict = predictor.predict_best(shape).ood

    assert (OODReason.OPERAND_TOO_LARGE in verdict.reasons) is too_large
    if too_large:
        assert verdict


def test_the_operand_limit_is_the_launcher_s() -> None:
    from tilecost.collect import launch
    from tilecost.space import MAX_OPERAND_ELEMENTS

    assert launch.MAX_OPERAND_ELEMENTS is MAX_OPERAND_ELEMENTS == LIMIT


def test_a_training_problem_is_in_distribution(predictor: Predictor, dataset: Dataset) -> None:
    problem = dataset.problems("train")[3]

    model = predictor.predict_best(problem, measured=False).ood  # the model-side rules may still fire
    measured = predictor.predict_best(problem).ood  # a measured answer is judged by its shape alone

    assert set(model.reasons) <= {OODReason.MODEL_UNCERTAIN} and model.neighbour_distance_log2 == 0.0
    assert not measured and measured.reasons == () and measured.neighbour_distance_log2 == 0.0


def test_unseen_dtype_and_layout_are_reasons(predictor: Predictor) -> None:
    fp16 = predictor.predict_best(Problem(4096, 4096, 4096, "fp16", "nt")).ood
    nn = predictor.predict_best(Problem(4096, 4096, 4096, "bf16", "nn")).ood

    assert OODReason.UNSEEN_DTYPE in fp16.reasons and OODReason.UNSEEN_LAYOUT not in fp16.reasons
    assert OODReason.UNSEEN_LAYOUT in nn.reasons and OODReason.UNSEEN_DTYPE not in nn.reasons


def test_a_dtype_and_layout_pair_never_trained_on_is_flagged_though_each_was_seen() -> None:
    # fp16 seen with nt, nn seen with bf16: fp16 nn has no training problem, so no neighbour at all.
    training = [Problem(1024, 1024, 1024, "fp16", "nt"), Problem(1024, 1024, 1024, "bf16", "nn")]
    checker = OODChecker.from_metadata(training_domain(training), {})

    verdict = checker.verdict(Problem(1024, 1024, 1024, "fp16", "nn"))

    assert verdict.reasons == (OODReason.SPARSE_NEIGHBOURHOOD,)
    assert verdict.neighbour_distance_log2 == math.inf
    assert not checker.verdict(Problem(1024, 1024, 1024, "fp16", "nt"))


def test_the_verdict_is_truthy_exactly_when_flagged() -> None:
    assert not OODVerdict()
    assert OODVerdict((OODReason.SPARSE_NEIGHBOURHOOD,), 3.0)


TRAINING = [Problem(2**a, 2**b, 2**c) for a in (4, 6, 8) for b in (10, 12) for c in (10, 12)]


def test_distance_is_to_the_nearest_training_problem_in_octaves() -> None:
    checker = OODChecker.from_metadata(training_domain(TRAINING), {})

    # (2**5, 2**11, 2**11) is 1 octave from 2**4 or 2**6 along m and 1 along n and k: sqrt(3).
    verdict = checker.verdict(Problem(2**5, 2**11, 2**11))

    assert verdict.neighbour_distance_log2 == pytest.approx(math.sqrt(3))
    assert checker.sparse_distance_log2 == DEFAULT_SPARSE_DISTANCE_LOG2  # none stored: the default
    assert verdict.reasons == (OODReason.SPARSE_NEIGHBOURHOOD,)  # sqrt(3) = 1.73 > 1.5
    stored = OODChecker.from_metadata(training_domain(TRAINING), {"sparse_distance_log2": 2.0})
    assert not stored.verdict(Problem(2**5, 2**11, 2**11))


def test_calibration_picks_the_threshold_that_catches_most_within_the_false_flag_budget() -> None:
    # Held-out m between the training m = 2**4 and 2**6 (n, k on the grid), so the distance is the
    # gap along m: 2**4 -> 0; 19 -> log2(19) - 4 = 0.248; 2**4.5 -> 0.5; 2**5 -> 1; 2**10 -> 2, and
    # beyond the m range (max 2**8), so the range rule flags it whatever the threshold.
    ms = [16, 19, round(2**4.5), 32, 1024]
    heldout = [Problem(m, 1024, 1024) for m in ms]
    fractions = [1.0, 0.95, 0.5, 0.6, 0.99]  # bad (< 0.9): the 0.5 and 1-octave ones

    thresholds = calibrate_ood(heldout, fractions, TRAINING, max_good_flagged=0.34, max_p_value=1)  # no test

    # Threshold 0.248 flags the distances 0.5 and 1 (both bad) and, by range, the good 2**10: 1 of 3
    # good flagged, within 0.34. Lower (0) would also flag the good 19: 2 of 3.
    assert thresholds["sparse_distance_log2"] == pytest.approx(math.log2(19) - 4)
    assert thresholds["calibration"] == {"heldout_problems": 5, "bad_problems": 2, "bad_caught": 2,
                                         "catch_rate": 1.0, "good_flagged_rate": pytest.approx(1 / 3),
                                         "leave_one_out": {}, "max_p_value": 1, "adopted": True}  # fmt: skip
    # No budget at all: even the range rule's one good flag is too many; no threshold catches anything, so
    # the threshold is the farthest held-out problem's distance (2**10 is 2 octaves from m = 2**8): it flags
    # none of them, and only shapes farther than the model was judged on.
    none = calibrate_ood(heldout, fractions, TRAINING, max_good_flagged=0.0)
    assert none["sparse_distance_log2"] == pytest.approx(2.0) and none["calibration"]["bad_caught"] == 0
    farther = OODChecker.from_metadata(training_domain(TRAINING), none).verdict(Problem(4096, 1024, 1024))
    assert OODReason.SPARSE_NEIGHBOURHOOD in farther.reasons


def test_calibration_sets_aside_a_threshold_that_catches_bad_problems_only_in_sample() -> None:
    # The five problems above with the significance test on: judged leave one out, the threshold chosen on the
    # other four flags the 0.5-octave bad problem only when 19 is left out, so 1 of 2 bad and 2 of 3 good are
    # flagged (the 2**10 by range): no better than chance, and two bad answers are no evidence.
    heldout = [Problem(m, 1024, 1024) for m in (16, 19, round(2**4.5), 32, 1024)]

    stored = calibrate_ood(heldout, [1.0, 0.95, 0.5, 0.6, 0.99], TRAINING, max_good_flagged=0.34)

    calibration = stored["calibration"]
    assert not calibration["adopted"] and calibration["leave_one_out"]["p_value"] >= 0.05
    # The fallback flags the fewest held-out problems: every margin flags the 2**10 (beyond every training m), so
    # the smallest margin, and the farthest held-out distance (2 octaves) as the threshold.
    assert stored["range_margin_log2"] == 0.0 and stored["sparse_distance_log2"] == pytest.approx(2.0)
    assert calibration["bad_caught"] == 0 and calibration["good_flagged_rate"] == pytest.approx(1 / 3)


def test_calibration_keeps_a_threshold_that_separates_bad_problems_leave_one_out() -> None:
    # 15 good problems within 0.25 octaves of a training m (16, 64, 256) and 7 bad ones 0.8-1 octave away:
    # any threshold between the two groups catches every bad problem, whichever is left out; of the good ones
    # only m = 280 is flagged, by range (beyond every training m), 1 of 15 within the 10% budget.
    good = [Problem(m, 1024, 1024) for m in (16, 17, 18, 19, 58, 60, 62, 64, 66, 70, 240, 248, 250, 256, 280)]
    bad = [Problem(m, 1024, 1024) for m in (30, 32, 34, 36, 120, 128, 136)]

    stored = calibrate_ood(good + bad, [1.0] * len(good) + [0.5] * len(bad), TRAINING)

    calibration = stored["calibration"]
    assert calibration["adopted"] and calibration["leave_one_out"]["p_value"] < 0.05
    # Leave one out, 19 too is flagged: the threshold is the farthest good distance of the others (58's 0.14).
    assert calibration["leave_one_out"]["bad_caught"] == 7 and calibration["leave_one_out"]["good_flagged"] == 2
    assert calibration["bad_caught"] == 7 and calibration["good_flagged_rate"] == pytest.approx(1 / 15)
    checker = OODChecker.from_metadata(training_domain(TRAINING), stored)
    assert [bool(checker.verdict(p)) for p in good + bad] == [False] * (len(good) - 1) + [True] * (len(bad) + 1)


def test_the_pattern_neighbourhood_counts_only_training_problems_of_the_same_n_and_k_alignment() -> None:
    # Training problems all with N and K multiples of 16 but one, 2**4 x 1000 x 1000 (both off 16). A query
    # 256 x 4096 x 1000 (N a multiple of 16, K not) sits on the 16-16 grid (K = 1000 is 0.03 octaves from 1024),
    # but no training problem shares its pattern: the dtype-layout neighbourhood finds it dense, the pattern
    # neighbourhood finds none at all.
    training = [*TRAINING, Problem(16, 1000, 1000)]
    query = Problem(256, 4096, 1000)
    dense = OODChecker.from_metadata(training_domain(training), {})  # an artifact without "neighbourhood"
    patterned = OODChecker.from_metadata(training_domain(training), {"neighbourhood": "pattern"})

    assert dense.neighbourhood == "dtype-layout"
    assert dense.verdict(query).neighbour_distance_log2 == pytest.approx(math.log2(1024 / 1000))
    assert not dense.verdict(query)
    far = patterned.verdict(query)
    assert far.neighbour_distance_log2 == math.inf and far.reasons == (OODReason.SPARSE_NEIGHBOURHOOD,)
    # the x-x query finds the one x-x training problem; the 16-16 ones find the grid, as before
    odd = patterned.verdict(Problem(16, 1001, 999))
    assert odd.neighbour_distance_log2 == pytest.approx(math.hypot(math.log2(1001 / 1000), math.log2(999 / 1000)))
    for problem in TRAINING:
        assert patterned.verdict(problem).neighbour_distance_log2 == 0.0 and not patterned.verdict(problem)
    # the range check stays that of the dtype and layout: K = 1000 lies within it
    assert OODReason.DIM_OUTSIDE_TRAINING_RANGE not in far.reasons


def test_the_compiled_distance_finds_the_same_pattern_neighbours() -> None:
    pytest.importorskip("numba")
    training = [*TRAINING, Problem(16, 1000, 1000), Problem(300, 4000, 1000)]
    checker = OODChecker.from_metadata(training_domain(training), {"neighbourhood": "pattern"})
    compiled = checker.with_compiled_distance()
    rng = np.random.default_rng(40)
    for m, n, k in rng.integers(1, 20000, size=(200, 3)):
        problem = Problem(int(m), int(n), int(k))
        assert compiled.verdict(problem) == checker.verdict(problem)


def test_calibration_fits_the_pattern_neighbourhood_and_says_so() -> None:
    training = [*TRAINING, Problem(16, 1000, 1000)]
    heldout = [Problem(m, 1024, 1024) for m in (16, 19, 32)] + [Problem(64, 4096, 1000)]
    fractions = [1.0, 1.0, 1.0, 0.5]  # the one 16-x problem is bad: only the pattern neighbourhood sees it far

    stored = calibrate_ood(heldout, fractions, training, max_good_flagged=0.0, max_p_value=1)
    old = calibrate_ood(heldout, fractions, training, max_good_flagged=0.0, max_p_value=1, neighbourhood="dtype-layout")

    assert stored["neighbourhood"] == "pattern" and stored["calibration"]["bad_caught"] == 1
    assert old["neighbourhood"] == "dtype-layout" and old["calibration"]["bad_caught"] == 0
    assert OODChecker.from_metadata(training_domain(training), stored).verdict(heldout[-1])
    with pytest.raises(ValueError, match="neighbourhood='shape' is not allowed; use one of dtype-layout, pattern"):
        calibrate_ood(heldout, fractions, training, neighbourhood="shape")


def test_an_unknown_neighbourhood_in_an_artifact_is_refused() -> None:
    with pytest.raises(ArtifactError, match="ood.neighbourhood='shape' is not one of dtype-layout, pattern"):
        OODChecker.from_metadata(training_domain(TRAINING), {"neighbourhood": "shape"})


def test_calibration_checks_its_inputs() -> None:
    with pytest.raises(ValueError, match="2 held-out problems but 1 top-1 fractions"):
        calibrate_ood(TRAINING[:2], [1.0], TRAINING)
    with pytest.raises(ValueError, match=r"top1_fraction values must lie in \[0, 1\]"):
        calibrate_ood(TRAINING[:1], [1.5], TRAINING)
    with pytest.raises(ValueError, match=r"max_p_value=0 must lie in \(0, 1\]"):
        calibrate_ood(TRAINING[:1], [1.0], TRAINING, max_p_value=0)


def test_calibration_keeps_each_held_out_fraction_for_the_model_side_rules() -> None:
    heldout = [Problem(16, 1024, 1024), Problem(32, 1024, 1024)]

    stored = calibrate_ood(heldout, [1.0, 0.5], TRAINING)

    assert stored["heldout_top1"] == {heldout[0].key: 1.0, heldout[1].key: 0.5}
    assert stored["max_good_flagged"] == 0.10


def _with_rules(artifact: Path, directory: Path, rules: tuple[FlagRule, ...]) -> Path:
    """A copy of ``artifact`` whose ``predictor.json`` stores ``rules`` as adopted (with fresh checksums). Whether the
    export adopts a rule depends on the data (the fixture's export adopted one until the seventeenth session's
    data, none since), so the rules a loaded predictor must apply are written here."""
    copy = Path(shutil.copytree(artifact, directory))
    header = json.loads((copy / "predictor.json").read_text())
    header["ood"]["rules"] = [r.to_dict() for r in rules]
    header["ood"]["calibration"] = {**header["ood"]["calibration"], "rules": [r.describe() for r in rules]}
    return fixtures.resave_artifact(copy, files={"predictor.json": json.dumps(header).encode()})


def test_model_side_rules_are_read_from_the_artifact_and_fire_on_their_signal(artifact: Path, tmp_path: Path) -> None:
    written = (
        FlagRule("log2_predicted_us", True, 5.0),  # slower than 32 µs
        FlagRule("log2_top2_gap", False, 0.002),
        FlagRule("neighbour_distance_log2", True, 0.75),  # a distance rule tightens the sparse threshold instead
    )
    copy = _with_rules(artifact, tmp_path / "h200", written)
    header = json.loads((copy / "predictor.json").read_text())
    stored = tuple(FlagRule.from_dict(r) for r in header["ood"]["rules"])
    rules = tuple(r for r in stored if r.signal != "neighbour_distance_log2")
    predictor = Predictor.load(copy, triton_version=None)
    assert stored == written and predictor.ood.rules == rules == written[:2]
    distance = [r.threshold for r in stored if r.signal == "neighbour_distance_log2"]
    metadata = json.loads((copy / "metadata.json").read_text())
    assert predictor.ood.sparse_distance_log2 == min([metadata["ood"]["sparse_distance_log2"], *distance])
    assert header["ood"]["calibration"]["rules"] == [r.describe() for r in stored]
    fired_on: list[tuple[int, int, int]] = []

    group = predictor._group(DType.BF16, Layout.NT)
    for shape in [(64, 4096, 4096), (4096, 4096, 4096), (1, 4096, 1024), (300, 1091, 13), (8192, 2304, 768)]:
        answer = predictor.predict_best(shape, measured=False)
        ranking = predictor.rank(shape, 2, exhaustive=False, measured=False)
        shape_only = predictor.ood.verdict(answer.problem)
        # the runner-up of the set the answer came from: rank's second, unless that set held one feasible
        # configuration, when rank(k=2) ranks every candidate instead (since the thirty-third session's data,
        # 64x4096x4096's whole list holds one in the fixture) and the rules see no runner-up
        _, answered_from = group.scorer.ranked(answer.problem, group.answered_from(answer.problem))
        second = float(answered_from[1]) if len(answered_from) > 1 else None
        assert second is None or ranking[1].time_us == pytest.approx(second)
        signals = answer_signals(answer.problem, answer.time_us, second, shape_only.neighbour_distance_log2)

        fired = any(rule.fires(signals) for rule in rules)

        assert (OODReason.MODEL_UNCERTAIN in answer.ood.reasons) == fired, shape
        assert set(answer.ood.reasons) - {OODReason.MODEL_UNCERTAIN} == set(shape_only.reasons)
        assert ranking[0].ood == answer.ood  # rank gives the verdict predict_best gives
        fired_on += [shape] if fired else []
    assert 0 < len(fired_on) < 5, fired_on  # the rules fire on some of these shapes and not on others


def test_signals_of_an_answer() -> None:
    # 1024 x 1024 x 1024 bf16: 2 * 1024**3 flop over 3 * 1024**2 * 2 bytes = 341.3 flop/byte.
    signals = answer_signals(Problem(1024, 1024, 1024), 8.0, 8.8, 0.5)

    assert signals["log2_predicted_us"] == 3.0
    assert signals["log2_top2_gap"] == pytest.approx(math.log2(1.1))
    assert signals["log2_flop_per_byte"] == pytest.approx(math.log2(1024 / 3))
    assert signals["neighbour_distance_log2"] == 0.5
    assert answer_signals(Problem(1, 1, 1), 8.0, None, 0.0)["log2_top2_gap"] == 10.0  # one candidate


def test_rules_catch_the_most_bad_problems_within_the_good_budget() -> None:
    # Six problems; bad ones are tiny (predicted 2-4 us) or compute bound (flop/byte 2**9).
    def row(predicted: float, intensity: float) -> dict[str, float]:
        return {"log2_predicted_us": predicted, "log2_top2_gap": 0.1, "log2_flop_per_byte": intensity,
                "neighbour_distance_log2": 0.5}  # fmt: skip

    rows = [row(1.0, 3.0), row(2.0, 3.0), row(6.0, 9.0), row(5.0, 3.0), row(7.0, 4.0), row(5.5, 3.0)]
    bad = [True, True, True, False, False, False]

    rules, stats = fit_flag_rules(rows, bad, [False] * 6, max_good_flagged=0.0, max_p_value=1)

    # Round 1: predicted < 3.5 (halfway between 2 and 5) catches 2; round 2: flop/byte > 6.5 the third.
    assert rules == (FlagRule("log2_predicted_us", False, 3.5), FlagRule("log2_flop_per_byte", True, 6.5))
    assert stats["bad_caught"] == 3 and stats["good_flagged_rate"] == 0.0 and stats["catch_rate"] == 1.0
    greedy = functools.partial(fit_flag_rules, max_good_flagged=0.34, max_p_value=1)  # no adoption test
    # Problems the distance rules flag already are not counted again, and their good ones count against
    # the budget: with rows 0, 1 and 4 flagged and room for one good problem of three, only flop/byte > 6.5
    # adds a catch without flagging row 3 or 5 too.
    rules, stats = greedy(rows, bad, [True, True, False, False, True, False])
    assert len(rules) == 1 and rules[0].fires(rows[2]) and not any(rules[0].fires(rows[i]) for i in (3, 5))
    assert stats["bad_caught"] == 3 and stats["good_flagged_rate"] == pytest.approx(1 / 3)
    assert stats["good_flagged_by_rules_rate"] == 0
    # The shape-side flags use the budget up (row 3): rules may still catch, flagging no other good problem.
    rules, stats = greedy(rows, bad, [False, False, False, True, False, False])
    assert stats["bad_caught"] == 3 and stats["good_flagged_rate"] == pytest.approx(1 / 3)
    # They overrun it (rows 3 and 5): no rule is added, however many it would catch.
    rules, stats = greedy(rows, bad, [False, False, False, True, False, True])
    assert rules == () and stats["bad_caught"] == 0 and stats["good_flagged_rate"] == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="signal="):
        FlagRule("made_up", True, 1.0)


def _calibration_set(seed: int, apart: float) -> tuple[list[dict[str, float]], list[bool]]:
    """165 answers, ~9% bad, whose bad ones sit ``apart`` standard deviations lower on one signal."""
    rng = np.random.default_rng(seed)
    bad = rng.random(165) < 0.09
    rows = [{name: float(rng.normal()) for name in SIGNALS} for _ in bad]
    for row, is_bad in zip(rows, bad, strict=True):
        row["log2_top2_gap"] -= apart * is_bad
    return rows, bad.tolist()


def test_rules_are_adopted_only_when_they_hold_out_of_sample() -> None:
    # Signals unrelated to the labels: the greedy search still finds a rule that separates in sample,
    # but judged leave one out it flags bad answers no more often than good ones, so none is adopted.
    rows, bad = _calibration_set(seed=3, apart=0.0)
    rules, stats = fit_flag_rules(rows, bad, [False] * len(bad))
    assert stats["fitted"] and rules == () and not stats["adopted"]
    assert stats["leave_one_out"]["p_value"] >= 0.05
    assert stats["bad_caught"] == 0 and stats["good_flagged_rate"] == 0.0  # as if no rule had been fitted
    # Bad answers three standard deviations apart on the top-2 gap: the rule holds out of sample and is kept.
    rows, bad = _calibration_set(seed=3, apart=3.0)
    rules, stats = fit_flag_rules(rows, bad, [False] * len(bad))
    assert stats["adopted"] and rules[0] == FlagRule("log2_top2_gap", False, rules[0].threshold)
    assert stats["leave_one_out"]["p_value"] < 0.05 and stats["catch_rate"] > 0.5
    assert stats["good_flagged_rate"] <= 0.10
    with pytest.raises(ValueError, match="max_p_value="):
        fit_flag_rules(rows, bad, [False] * len(bad), max_p_value=0)


def test_a_distance_rule_lowers_the_sparse_neighbourhood_threshold() -> None:
    checker = OODChecker.from_metadata(training_domain(TRAINING), {"sparse_distance_log2": 3.0})

    ruled = checker.with_rules([FlagRule("neighbour_distance_log2", True, 1.0), FlagRule("log2_top2_gap", True, 0.1)])

    assert ruled.sparse_distance_log2 == 1.0 and ruled.rules == (FlagRule("log2_top2_gap", True, 0.1),)
    assert ruled.verdict(Problem(2**5, 2**11, 2**11)).reasons == (OODReason.SPARSE_NEIGHBOURHOOD,)  # sqrt(3) > 1
    assert not checker.verdict(Problem(2**5, 2**11, 2**11))


def test_calibration_widens_a_small_groups_range_but_never_beyond_all_training_problems() -> None:
    # bf16 spans m = 2**4..2**12; fp16 has one problem at m = 2**6. A good fp16 held-out problem at
    # m = 2**7 lies 1 octave beyond fp16's range but inside bf16's: the unwidened range flags it.
    training = [Problem(16, 1024, 1024), Problem(4096, 1024, 1024), Problem(64, 1024, 1024, "fp16")]
    heldout = [Problem(128, 1024, 1024, "fp16"), Problem(64, 1024, 1024)]
    unwidened = OODChecker.from_metadata(training_domain(training), {"sparse_distance_log2": 9.0})
    assert OODReason.DIM_OUTSIDE_TRAINING_RANGE in unwidened.verdict(heldout[0]).reasons

    stored = calibrate_ood(heldout, [1.0, 1.0], training, max_good_flagged=0.0)

    # Margins 0 and 0.5 flag the good problem; 1 octave is the smallest that does not.
    assert stored["range_margin_log2"] == 1.0 and stored["calibration"]["good_flagged_rate"] == 0.0
    checker = OODChecker.from_metadata(training_domain(training), stored)
    assert not checker.verdict(heldout[0])
    # Beyond the range of every training problem (m = 2**13 > 2**12) the range rule still fires.
    far = checker.verdict(Problem(8192, 1024, 1024, "fp16"))
    assert OODReason.DIM_OUTSIDE_TRAINING_RANGE in far.reasons
    # An artifact without a stored margin keeps the group's own range.
    assert OODChecker.from_metadata(training_domain(training), {}).range_margin_log2 == 0.0
