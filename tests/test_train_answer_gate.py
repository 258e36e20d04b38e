"""The answer gate (:mod:`tilecost.train.answer_gate`): its rule on answers given as data, and the answers of the
shipped artifact on real held-out measurements of the shipped dataset."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tilecost.train.answer_gate import Answers, artifact_answers, gate_artifacts, judge_answers, stored_answers

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "tilecost" / "models" / "h200"


def _answers(fractions: list[float], flagged: list[bool] | None = None) -> Answers:
    keys = [f"{i + 1}x64x64-bf16-nt" for i in range(len(fractions))]
    flags = flagged if flagged is not None else [False] * len(fractions)
    return Answers(dict(zip(keys, fractions, strict=True)), dict(zip(keys, flags, strict=True)))


def test_the_same_answers_pass_at_a_ratio_of_one() -> None:
    answers = _answers([1.0, 0.95, 0.8, 0.99])

    gate = judge_answers(answers, answers)

    assert gate.passed and gate.problems == 4
    assert gate.ratio == pytest.approx(1.0) and gate.interval == pytest.approx((1.0, 1.0))
    assert gate.challenger == gate.champion and gate.challenger["bad_unflagged"] == 1
    assert "passed" in gate.describe()


def test_answers_worse_beyond_chance_fail() -> None:
    champion = _answers([1.0] * 40)
    challenger = _answers([0.97] * 40)  # worse on every problem, none below 0.90

    gate = judge_answers(challenger, champion)

    assert not gate.passed and gate.ratio == pytest.approx(0.97)
    assert gate.interval[1] < 1 and "worse beyond chance" in gate.reason
    assert "FAILED" in gate.describe()


def test_one_more_bad_answer_fails_even_when_better_on_average_and_flagged() -> None:
    champion = _answers([0.95] * 39 + [1.0])
    challenger = _answers([1.0] * 39 + [0.5])  # better on 39 problems, one answer at half the best

    gate = judge_answers(challenger, champion)

    assert gate.ratio > 1 and gate.interval[1] >= 1
    assert not gate.passed and "it gives 1 answers below 0.90 of the best, the champion 0" in gate.reason
    # flagging the bad answer does not buy it through: an artifact that flags everything would pass that way
    flagged = _answers([1.0] * 39 + [0.5], [True] * 40)
    assert not judge_answers(flagged, champion).passed
    # fewer bad answers than the champion, none flagged, against a champion that flags its own: passes
    champion = _answers([1.0] * 37 + [0.5, 0.6, 0.7], [False] * 37 + [True, True, False])
    fewer = _answers([1.0] * 38 + [0.5, 0.6])
    gate = judge_answers(fewer, champion)
    assert gate.passed and gate.challenger["bad_unflagged"] > gate.champion["bad_unflagged"]


def test_only_problems_both_answered_are_judged_and_none_in_common_passes() -> None:
    champion = _answers([1.0, 0.5])
    challenger = Answers(
        {"1x64x64-bf16-nt": 1.0, "9x9x9-fp16-nn": 0.1}, {"1x64x64-bf16-nt": False, "9x9x9-fp16-nn": False}
    )

    assert judge_answers(challenger, champion).problems == 1
    nothing = judge_answers(Answers({"9x9x9-fp16-nn": 0.1}, {"9x9x9-fp16-nn": False}), champion)
    assert nothing.passed and nothing.problems == 0 and "no held-out problem" in nothing.describe()


@pytest.mark.parametrize(
    ("fractions", "flagged", "message"),
    [
        ({"a": 1.0}, {"b": False}, "must name the same problems"),
        ({"a": 1.5}, {"a": False}, "fraction of a is 1.5"),
        ({"a": math.nan}, {"a": False}, "fraction of a is nan"),
        ({"a": 1}, {"a": False}, "fraction of a is 1;"),
    ],
)
def test_bad_answers_are_refused_naming_the_problem(fractions, flagged, message) -> None:
    with pytest.raises(ValueError, match=message):
        Answers(fractions, flagged)


@pytest.mark.skipif(not (SHIPPED / "metadata.json").is_file(), reason="no shipped h200 artifact")
def test_the_shipped_artifacts_answers_on_real_held_out_measurements() -> None:
    pytest.importorskip("pyarrow")
    from tilecost import Predictor
    from tilecost.problem import Problem

    keys = ["256x7680x5120-bf16-nt", "1x50257x768-fp16-nn"]  # held-out problems of the shipped dataset
    frame = _heldout_frame(keys)
    assert set(frame["problem_key"]) == set(keys) and set(frame["role"]) == {"heldout"}

    answers = artifact_answers(SHIPPED, frame)

    predictor = Predictor.load(SHIPPED)
    for key in keys:
        rows = frame[frame["problem_key"] == key]
        times = dict(zip(rows["config_id"], rows["time_us"], strict=True))
        answer = predictor.predict_best(Problem.from_key(key), measured=False)  # the model, not the database
        assert not answer.measured
        assert answers.fractions[key] == pytest.approx(min(times.values()) / times[answer.config.key])
        assert answers.flagged[key] == bool(answer.ood)
    assert artifact_answers(predictor, frame) == answers  # a loaded predictor answers as its directory does
    assert judge_answers(answers, answers).passed


def _heldout_frame(keys: list[str]):  # type: ignore[no-untyped-def]
    """The timed rows (ok, hopeless) of ``keys`` in the shipped dataset, the newest run's row per configuration."""
    import pyarrow.dataset as ds

    table = ds.dataset(REPO / "datasets" / "measurements", partitioning="hive").to_table(
        columns=["problem_key", "config_id", "time_us", "status", "role", "timestamp"],
        filter=ds.field("problem_key").isin(keys) & ds.field("status").isin(["ok", "hopeless"]),
    )
    frame = table.to_pandas().sort_values("timestamp")
    return frame.drop_duplicates(["problem_key", "config_id"], keep="last")


def _champion_of_another_schema(tmp_path: Path, **changes: object) -> Path:
    """A copy of the shipped artifact whose sidecar says feature schema 1 (so this tilecost refuses to load it),
    with ``changes`` to other sidecar fields (``ood_labels`` replaces ``ood.labels``; ``ood_flags=False`` drops
    ``ood.heldout_flagged``, as in a sidecar written before the forty-sixth session)."""
    import json
    import shutil

    champion = tmp_path / "champion"
    shutil.copytree(SHIPPED, champion)
    meta = json.loads((champion / "metadata.json").read_text())
    meta["feature_schema_version"] = 1
    if "ood_labels" in changes:
        meta["ood"]["labels"] = changes.pop("ood_labels")
    if not changes.pop("ood_flags", True):
        del meta["ood"]["heldout_flagged"]
    meta.update(changes)
    (champion / "metadata.json").write_text(json.dumps(meta))
    return champion


@pytest.mark.skipif(not (SHIPPED / "metadata.json").is_file(), reason="no shipped h200 artifact")
@pytest.mark.parametrize("flags_stored", [True, False], ids=["with its stored flags", "a sidecar without them"])
def test_a_champion_of_another_feature_schema_is_judged_by_its_stored_answers(
    tmp_path: Path, flags_stored: bool
) -> None:
    pytest.importorskip("pyarrow")
    from tilecost.errors import ArtifactError
    from tilecost.predict import Predictor

    champion = _champion_of_another_schema(tmp_path, ood_flags=flags_stored)
    with pytest.raises(ArtifactError, match="feature schema 1"):
        Predictor.load(champion)
    shipped = _metadata(SHIPPED)
    flagged = shipped.ood["heldout_flagged"]
    keys = ["256x7680x5120-bf16-nt", "1x50257x768-fp16-nn", flagged[0]]  # held-out problems of the shipped dataset

    gate = gate_artifacts(SHIPPED, champion, _heldout_frame(keys))

    # the same booster answered these problems at export as it does now: the stored fractions match its answers
    assert gate is not None and gate.passed and gate.problems == 3
    assert gate.ratio == pytest.approx(1.0, abs=1e-5)
    assert "stored" in gate.reason and "feature schema 1" in gate.reason
    expected = sum(key in flagged for key in keys)  # the third at least
    assert gate.challenger["flagged"] == expected >= 1  # the shipped predictor flags these answers today
    if flags_stored:  # as it flagged them at export, its sidecar says
        assert gate.champion["flagged"] == expected and "answers and flags its export stored" in gate.reason
    else:  # an older sidecar: counted as unflagged, and said so
        assert gate.champion["flagged"] == 0 and "counted as unflagged" in gate.describe()
    stored = stored_answers(champion, shipped)
    # every held-out problem the champion's export answered (the shipped sidecar's, copied into the champion)
    assert stored is not None and len(stored.fractions) == len(shipped.ood["heldout_top1"]) > 600
    assert stored.flags_known is flags_stored
    assert sum(stored.flagged.values()) == (len(flagged) if flags_stored else 0)


@pytest.mark.skipif(not (SHIPPED / "metadata.json").is_file(), reason="no shipped h200 artifact")
@pytest.mark.parametrize(
    "changes",
    [{"triton_version": "0.0.0"}, {"device_class": "h100-sxm"}, {"ood_labels": "choices"}],
    ids=["another Triton", "another device class", "stores the full model's choices"],
)
def test_a_champion_measured_under_other_conditions_is_not_judged(tmp_path: Path, changes: dict) -> None:
    pytest.importorskip("pyarrow")

    champion = _champion_of_another_schema(tmp_path, **changes)

    assert stored_answers(champion, _metadata(SHIPPED)) is None
    gate = gate_artifacts(SHIPPED, champion, _heldout_frame(["256x7680x5120-bf16-nt"]))
    assert gate is not None and gate.passed and gate.problems == 0 and "does not load" in gate.reason


@pytest.mark.skipif(not (SHIPPED / "metadata.json").is_file(), reason="no shipped h200 artifact")
def test_a_damaged_champion_has_no_stored_answers(tmp_path: Path) -> None:
    champion = _champion_of_another_schema(tmp_path)
    (champion / "shortlists.npz").write_bytes(b"damaged")

    assert stored_answers(champion, _metadata(SHIPPED)) is None


def _metadata(directory: Path):  # type: ignore[no-untyped-def]
    from tilecost.predict.artifact import load_artifact

    return load_artifact(directory)[0]
