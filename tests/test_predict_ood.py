"""Out-of-distribution verdicts and their calibration."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tilecost import OODReason, OODVerdict, Predictor, Problem
from tilecost.predict import calibrate_ood, training_domain
from tilecost.predict.ood import DEFAULT_SPARSE_DISTANCE_LOG2, OODChecker

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
    assert OODReason.SPARSE_NEIGHBOURHOOD in verdict.reasons


def test_a_training_problem_is_in_distribution(predictor: Predictor, dataset: Dataset) -> None:
    verdict = predictor.predict_best(dataset.problems("train")[3], measured=False).ood

    assert not verdict and verdict.reasons == () and verdict.neighbour_distance_log2 == 0.0


def test_unseen_dtype_and_layout_are_reasons(predictor: Predictor) -> None:
    fp16 = predictor.predict_best(Problem(4096, 4096, 4096, "fp16", "nt")).ood
    nn = predictor.predict_best(Problem(4096, 4096, 4096, "bf16", "nn")).ood

    assert OODReason.UNSEEN_DTYPE in fp16.reasons and OODReason.UNSEEN_LAYOUT not in fp16.reasons
    assert OODReason.UNSEEN_LAYOUT in nn.reasons and OODReason.UNSEEN_DTYPE not in nn.reasons


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

    thresholds = calibrate_ood(heldout, fractions, TRAINING, max_good_flagged=0.34)

    # Threshold 0.248 flags the distances 0.5 and 1 (both bad) and, by range, the good 2**10: 1 of 3
    # good flagged, within 0.34. Lower (0) would also flag the good 19: 2 of 3.
    assert thresholds["sparse_distance_log2"] == pytest.approx(math.log2(19) - 4)
    assert thresholds["calibration"] == {"heldout_problems": 5, "bad_problems": 2, "bad_caught": 2,
                                         "catch_rate": 1.0, "good_flagged_rate": pytest.approx(1 / 3)}  # fmt: skip
    # No budget at all: even the range rule's one good flag is too many; the threshold flags nothing.
    none = calibrate_ood(heldout, fractions, TRAINING, max_good_flagged=0.0)
    assert none["sparse_distance_log2"] == 1e9 and none["calibration"]["bad_caught"] == 0


def test_calibration_checks_its_inputs() -> None:
    with pytest.raises(ValueError, match="2 held-out problems but 1 top-1 fractions"):
        calibrate_ood(TRAINING[:2], [1.0], TRAINING)
    with pytest.raises(ValueError, match=r"top1_fraction values must lie in \[0, 1\]"):
        calibrate_ood(TRAINING[:1], [1.5], TRAINING)
