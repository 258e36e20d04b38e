"""Export: the artifact round-trips through load_artifact with its checksums, carries the tuning
database and training domain, merges the predictor's files, and ``tilecost evaluate`` reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_train_fixtures import HELDOUT_PROBLEMS, TRAIN_PROBLEMS, write_dataset
from tilecost.cli import main
from tilecost.errors import ArtifactError, DatasetError
from tilecost.features import FEATURE_NAMES, FEATURE_SCHEMA_VERSION
from tilecost.predict.artifact import MODEL_FILE, load_artifact
from tilecost.train.export import MEASURED_FILE
from tilecost.train.loading import evaluate_saved_model, load_artifact_model
from tilecost.train.pipeline import train_device_class

PARAMS = {"n_estimators": 30, "max_depth": 4, "n_jobs": 1}
CALLS: list[tuple[bytes, object]] = []


def _fake_prepare(model: bytes, metadata: object, **_: object) -> dict[str, bytes]:
    CALLS.append((model, metadata))
    return {"predictor.json": b'{"format": 1}'}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("export")
    root = write_dataset(base / "ds")
    monkey = pytest.MonkeyPatch()
    monkey.setattr("tilecost.predict.prepare_artifact_files", _fake_prepare)
    try:
        result = train_device_class(root, "h200", model_params=PARAMS, export_dir=base / "artifact")
    finally:
        monkey.undo()
    return root, base / "artifact", result


def test_artifact_round_trips_with_checksums(exported) -> None:
    _, directory, result = exported

    metadata, blobs = load_artifact(directory, tuple(FEATURE_NAMES), FEATURE_SCHEMA_VERSION)

    assert set(blobs) == {MODEL_FILE, MEASURED_FILE, "predictor.json"}
    assert MODEL_FILE == "model.ubj" and blobs[MODEL_FILE] == result.model.model_ubjson()  # the compact format
    assert metadata.target == "log_time_over_roofline"
    assert metadata.device_class == "h200" and metadata.triton_version == "3.6.0"
    assert metadata.fingerprint["gpu_name"] == "NVIDIA H200"
    assert metadata.training["dataset_digest"] == result.measurements.digest
    assert metadata.training["seed"] == 0
    assert metadata.training["metrics"]["heldout_top1_geomean"] == pytest.approx(
        result.evaluation.summary()["top1_geomean"]
    )


def test_predictor_files_are_prepared_from_the_exported_model_and_metadata(exported) -> None:
    _, _, result = exported

    model, metadata = CALLS[-1]

    assert model == result.model.model_ubjson()
    assert metadata.domain["problems"] == sorted(p.key for p in TRAIN_PROBLEMS)


def test_training_domain_lists_only_training_problems(exported) -> None:
    _, directory, _ = exported
    metadata, _ = load_artifact(directory)
    domain = metadata.domain

    assert domain["dtypes"] == ["bf16"] and domain["layouts"] == ["nt"]
    assert domain["log2_m"] == [4.0, 11.0]  # M from 16 to 2048 over the training problems
    assert [16, 1024, 4096, "bf16", "nt"] in domain["problem_dims"]
    assert not {p.key for p in HELDOUT_PROBLEMS} & set(domain["problems"])


def test_measured_database_covers_every_problem_with_its_best(exported) -> None:
    _, directory, result = exported
    _, blobs = load_artifact(directory)
    measured = json.loads(blobs[MEASURED_FILE])
    frame = result.measurements.frame

    assert set(measured) == {p.key for p in TRAIN_PROBLEMS + HELDOUT_PROBLEMS}
    for key, entry in measured.items():
        rows = frame[frame["problem_key"] == key]
        assert entry["time_us"] == pytest.approx(rows["time_us"].min())
        fastest = rows[rows["time_us"] == rows["time_us"].min()]["config_id"]
        assert entry["config_id"] == min(fastest)  # ties go to the smaller config id
        assert entry["configs_measured"] == len(rows)
    assert measured[HELDOUT_PROBLEMS[0].key]["complete"] is True
    assert measured[TRAIN_PROBLEMS[0].key]["complete"] is False  # a 35% sample


def test_a_corrupted_artifact_is_refused(exported, tmp_path: Path) -> None:
    _, directory, _ = exported
    copy = tmp_path / "copy"
    copy.mkdir()
    for path in directory.iterdir():
        (copy / path.name).write_bytes(path.read_bytes())
    measured = copy / MEASURED_FILE
    measured.write_bytes(measured.read_bytes().replace(b"time_us", b"time_ms", 1))

    with pytest.raises(ArtifactError, match="measured.json does not match its checksum"):
        load_artifact_model(copy)


def test_evaluating_the_artifact_reproduces_the_training_evaluation(exported) -> None:
    root, directory, result = exported

    evaluation, description = evaluate_saved_model(root, "h200", artifact=directory)

    assert evaluation.score() == pytest.approx(result.evaluation.score())
    assert "held-out problems" in description


def test_evaluating_on_problems_the_model_trained_on_is_refused(exported, tmp_path: Path) -> None:
    _, directory, _ = exported
    # Same problems, roles swapped: the artifact's training problems become "held-out".
    swapped = write_dataset(tmp_path / "swapped", train=HELDOUT_PROBLEMS, heldout=TRAIN_PROBLEMS)

    with pytest.raises(DatasetError, match="trained on held-out problem"):
        evaluate_saved_model(swapped, "h200", artifact=directory)


def test_cli_train_then_evaluate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    root = write_dataset(tmp_path / "ds")
    monkeypatch.setattr("tilecost.predict.prepare_artifact_files", _fake_prepare)
    artifact = tmp_path / "artifact"

    code = main(
        ["train", "--dataset", str(root), "--device-class", "h200", "--export-dir", str(artifact), "--no-mlflow",
         "--param", "n_estimators=20", "--param", "max_depth=4", "--n-jobs", "1"]
    )  # fmt: skip
    trained = capsys.readouterr().out

    assert code == 0
    assert "model top1" in trained and "trained h200" in trained
    assert main(["evaluate", "--dataset", str(root), "--artifact", str(artifact), "--summary-only"]) == 0
    evaluated = capsys.readouterr().out
    assert evaluated.splitlines()[1] in trained  # the same table header and numbers
