"""The out-of-distribution flags fitted on the predictor's own answers (tilecost.predict.answer_calibration), on the
fixture artifact: a real booster, real shortlists, the shipped measurements."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import asdict
from pathlib import Path

import pytest

from tilecost import Predictor, Problem
from tilecost.predict import calibrate_ood
from tilecost.predict.answer_calibration import ANSWER_LABELS, FLAGGED_KEY, calibrate_on_answers
from tilecost.predict.artifact import load_artifact

from . import test_predict_fixture as fixtures
from .test_predict_fixture import Dataset

artifact = fixtures.artifact  # the session fixtures, shared by the predictor's test modules
dataset = fixtures.dataset


def answer_fractions(directory: Path, data: Dataset, problems: list[Problem] | None = None) -> dict[str, float]:
    """Each held-out problem's best measured time over its answer's (0: never timed), as the benchmark scores it."""
    predictor = Predictor.load(directory, triton_version=None)  # judged as on the device that measured
    out = {}
    for problem in data.problems("heldout") if problems is None else problems:
        answer = predictor.predict_best(problem, measured=False).config.key
        best = min(data.times(problem).values())
        out[problem.key] = best / data.times(problem, ("ok", "hopeless")).get(answer, math.inf)
    return out


@pytest.fixture(scope="module")
def refitted(artifact: Path, dataset: Dataset, tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp("answers") / "h200"
    shutil.copytree(artifact, directory)
    # Without the leave-one-out test (max_p_value 1), which sets aside every flag of the fixture's small model: the
    # flags then fire, and the budget below is a test of something.
    ood = load_artifact(directory)[0].ood
    fixtures.resave_artifact(
        directory, metadata={"ood": {**ood, "calibration": {**ood["calibration"], "max_p_value": 1}}}
    )
    fractions = answer_fractions(directory, dataset)
    before = load_artifact(directory)
    after = calibrate_on_answers(directory, fractions)
    return directory, fractions, before, after


def test_the_flags_are_fitted_on_the_answers_and_nothing_else_changes(refitted) -> None:
    directory, fractions, (before, old), after = refitted
    _, new = load_artifact(directory)

    training = [Problem.from_key(k) for k in before.domain["problems"]]
    problems = [Problem.from_key(k) for k in sorted(fractions)]
    expected = calibrate_ood(
        problems, [min(1.0, fractions[p.key]) for p in problems], training,
        neighbourhood=before.ood["neighbourhood"], neighbours=before.ood["neighbours"], max_p_value=1,
    )  # fmt: skip
    assert dict(after.ood) == expected | {"labels": ANSWER_LABELS, FLAGGED_KEY: after.ood[FLAGGED_KEY]}
    assert before.ood.get("labels") is None  # the fixture's export fitted them on the full model's choices
    assert after.ood["heldout_top1"] == {k: round(min(1.0, f), 6) for k, f in fractions.items()}
    model_side = json.loads(new["predictor.json"])["ood"]["calibration"]
    assert model_side["problems"] == len(fractions)
    assert model_side["bad_problems"] == sum(f < 0.90 for f in fractions.values())
    # Booster, shortlists, measured answers, groups and every other sidecar field as they were.
    assert {name: blob for name, blob in new.items() if name != "predictor.json"} == {
        name: blob for name, blob in old.items() if name != "predictor.json"
    }
    assert json.loads(new["predictor.json"])["groups"] == json.loads(old["predictor.json"])["groups"]
    assert asdict(after) | {"files": {}, "ood": {}} == asdict(before) | {"files": {}, "ood": {}}


def test_judged_on_the_answers_they_were_fitted_on_the_flags_keep_the_false_flag_budget(
    refitted, dataset: Dataset
) -> None:
    """The bar is judged on what callers get: the share of good answers the loaded predictor flags is within the
    budget the calibration holds to, and it catches as many bad answers as the calibration says."""
    directory, fractions, _, after = refitted
    predictor = Predictor.load(directory, triton_version=None)  # judged as on the device that measured
    flagged = {key: bool(predictor.predict_best(Problem.from_key(key), measured=False).ood) for key in fractions}

    good = [key for key, f in fractions.items() if f >= 0.90]
    bad = [key for key, f in fractions.items() if f < 0.90]
    assert good and sum(flagged[k] for k in good) / len(good) <= after.ood["max_good_flagged"]
    assert sum(flagged[k] for k in bad) == after.ood["calibration"]["bad_caught"] > 0
    assert math.isclose(
        sum(flagged[k] for k in good) / len(good), after.ood["calibration"]["good_flagged_rate"], abs_tol=1e-12
    )
    # and the sidecar records which, so that a tilecost that cannot load the artifact still counts its flags
    assert after.ood[FLAGGED_KEY] == sorted(key for key, f in flagged.items() if f)


@pytest.mark.parametrize(
    ("fractions", "message"),
    [
        ({}, "no held-out answer"),
        ({"4096x4096": 1.0}, "'4096x4096' is not a problem key"),
        ({"4096x4096x4096-bf17-nt": 1.0}, "is not a problem key"),
        (
            {"100x1000x1000-bf16-nt": 1.5},
            r"fractions\['100x1000x1000-bf16-nt'\]=1.5: a fraction is a number in \[0, 1\]",
        ),
        ({"100x1000x1000-bf16-nt": float("nan")}, "a fraction is a number in"),
        ({"100x1000x1000-bf16-nt": True}, "a fraction is a number in"),
        ({"100x1000x1000-bf16-nt": "0.9"}, "a fraction is a number in"),
    ],
)
def test_bad_fractions_are_refused_before_anything_is_written(
    artifact: Path, tmp_path: Path, fractions: object, message: str
) -> None:
    directory = tmp_path / "h200"
    shutil.copytree(artifact, directory)
    before = {p.name: p.read_bytes() for p in directory.iterdir()}

    with pytest.raises(ValueError, match=message):
        calibrate_on_answers(directory, fractions)  # type: ignore[arg-type]

    assert {p.name: p.read_bytes() for p in directory.iterdir()} == before


def test_a_training_problem_is_no_held_out_answer(artifact: Path, tmp_path: Path) -> None:
    directory = tmp_path / "h200"
    shutil.copytree(artifact, directory)
    trained = load_artifact(directory)[0].domain["problems"][0]

    with pytest.raises(ValueError, match=f"{trained} is one of the artifact's training problems"):
        calibrate_on_answers(directory, {trained: 1.0})


def test_an_artifact_without_the_predictor_s_lists_gets_the_shape_side_alone(
    artifact: Path, dataset: Dataset, tmp_path: Path
) -> None:
    """Without ``predictor.json`` and the shortlists the predictor scores every candidate: its answers calibrate the
    shape side, and no model-side file is made up."""
    from tilecost.predict.artifact import save_artifact

    metadata, files = load_artifact(artifact)
    model = files.pop(metadata.model_file)
    bare = {name: blob for name, blob in files.items() if name not in ("predictor.json", "shortlists.npz")}
    directory = save_artifact(tmp_path / "bare", model, metadata, bare)
    problems = dataset.problems("heldout")[:12]  # every candidate scored: a few problems keep it quick
    fractions = answer_fractions(directory, dataset, problems)

    after = calibrate_on_answers(directory, fractions)

    _, written = load_artifact(directory)
    assert set(written) == set(bare) | {metadata.model_file}
    assert after.ood["labels"] == ANSWER_LABELS
    assert after.ood["heldout_top1"] == {k: round(min(1.0, f), 6) for k, f in fractions.items()}
