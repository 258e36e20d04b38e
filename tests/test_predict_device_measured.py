"""Another device class's measured bests in an artifact (``measured-<class>.json``, ``tilecost refresh-measured
--for``): a predictor loaded for that class answers a shape that device measured with that device's own best, as a
measurement, and keeps the artifact device's bests, flagged, for the rest. Real H100 rows: the shipped dataset's
``device_class=h100_sxm`` partition."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tilecost import OODReason, Predictor, Problem, Source, load_device
from tilecost.errors import ArtifactError
from tilecost.predict.artifact import device_measured_file, load_artifact, save_artifact
from tilecost.train.dataset import load_measurements
from tilecost.train.pipeline import candidate_rows
from tilecost.train.refresh import refresh_measured

from . import test_predict_fixture as fixtures

artifact = fixtures.artifact  # the session fixture, shared by the predictor's test modules
H100_FILE = device_measured_file("h100_sxm")


@pytest.fixture(scope="module")
def with_h100(artifact: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture artifact with the shipped dataset's H100 measured bests beside its own."""
    out = tmp_path_factory.mktemp("device-measured") / "artifact"
    refresh_measured(artifact, fixtures.DATASET, out=out, for_device="h100_sxm")
    return out


@pytest.fixture(scope="module")
def h100_rows() -> pd.DataFrame:
    """The shipped dataset's H100 rows, one per (problem, configuration)."""
    return candidate_rows(load_measurements(fixtures.DATASET, "h100_sxm").frame)


@pytest.fixture(scope="module")
def h100_best(h100_rows: pd.DataFrame) -> dict[str, tuple[str, float]]:
    """Each H100 problem's fastest configuration and time, from the rows themselves."""
    fastest = h100_rows.sort_values(["problem_key", "time_us", "config_id"]).groupby("problem_key").first()
    return {key: (row.config_id, float(row.time_us)) for key, row in fastest.iterrows()}


@pytest.fixture(scope="module")
def h100_roles(h100_rows: pd.DataFrame) -> dict[str, str]:
    """Each H100 problem's role: ``heldout`` (every candidate timed) or ``train`` (a seeded sample of them)."""
    return {str(k): str(v) for k, v in h100_rows.groupby("problem_key")["role"].first().items()}


def test_a_shape_the_device_measured_is_answered_with_its_own_best_unflagged(
    with_h100: Path, h100_best: dict[str, tuple[str, float]], h100_roles: dict[str, str]
) -> None:
    key = min(k for k in h100_best if k.endswith("-bf16-nt") and h100_roles[k] == "heldout")
    problem = Problem.from_key(key)
    h100 = Predictor.load(with_h100, device="h100_sxm", triton_version=None)

    answer = h100.predict_best(problem)

    assert answer.source is Source.MEASURED and answer.measured
    assert (answer.config.key, answer.time_us) == h100_best[key]
    assert OODReason.DEVICE_MISMATCH not in answer.ood.reasons
    assert answer.configs_measured is not None and answer.measured_all is True  # held-out: every candidate
    ranking = h100.rank(problem, 3)
    assert ranking[0] == answer and all(p.source is Source.MODEL for p in ranking[1:])
    assert all(OODReason.DEVICE_MISMATCH in p.ood.reasons for p in ranking[1:])  # the H200 model's predictions
    model = h100.predict_best(problem, measured=False)
    assert model.source is Source.MODEL and OODReason.DEVICE_MISMATCH in model.ood.reasons


def test_a_sampled_training_shape_is_answered_as_the_best_of_its_sample(
    with_h100: Path, h100_rows: pd.DataFrame, h100_best: dict[str, tuple[str, float]], h100_roles: dict[str, str]
) -> None:
    key = min(k for k in h100_best if h100_roles[k] == "train")
    timed = h100_rows.loc[h100_rows["problem_key"] == key, "config_id"].nunique()
    h100 = Predictor.load(with_h100, device="h100_sxm", triton_version=None)

    answer = h100.predict_best(Problem.from_key(key))

    assert answer.source is Source.MEASURED and (answer.config.key, answer.time_us) == h100_best[key]
    assert answer.measured_all is False and answer.configs_measured == timed  # a 25% sample, said so


def test_other_shapes_and_other_devices_answer_as_before(
    with_h100: Path, artifact: Path, h100_best: dict[str, tuple[str, float]]
) -> None:
    h100 = Predictor.load(with_h100, device="h100_sxm", triton_version=None)
    home = Predictor.load(with_h100, triton_version=None)
    only_h200 = next(k for k in home.measured if k not in h100_best)
    measured_there = min(h100_best)

    elsewhere = h100.predict_best(Problem.from_key(only_h200))
    assert elsewhere.source is Source.MEASURED_ON_ARTIFACT_DEVICE and OODReason.DEVICE_MISMATCH in elsewhere.ood.reasons
    assert home.measured_here == {}  # the H200 predictor reads only its own table
    same_as_before = Predictor.load(artifact, triton_version=None)
    assert home.predict_best(Problem.from_key(measured_there)) == same_as_before.predict_best(
        Problem.from_key(measured_there)
    )
    # Another Triton release: the H100's kernels then are not the ones measured either.
    other_triton = Predictor.load(with_h100, device="h100_sxm", triton_version="9.9.9")
    assert other_triton.predict_best(Problem.from_key(measured_there)).source is Source.MODEL


def test_a_table_naming_another_device_is_refused(with_h100: Path, tmp_path: Path) -> None:
    metadata, blobs = load_artifact(with_h100)
    table = json.loads(blobs[H100_FILE])
    extra = {name: data for name, data in blobs.items() if name != metadata.model_file}
    extra[H100_FILE] = json.dumps({**table, "device_class": "h200"}).encode()
    save_artifact(tmp_path / "bad", blobs[metadata.model_file], metadata, extra)  # checksums match: a mislabel

    with pytest.raises(ArtifactError, match="measured-h100_sxm.json holds device_class='h200', not 'h100_sxm'"):
        Predictor.load(tmp_path / "bad", device="h100_sxm", triton_version=None)
    Predictor.load(tmp_path / "bad", triton_version=None)  # the H200 predictor does not read it

    shutil.copytree(with_h100, tmp_path / "corrupt")
    (tmp_path / "corrupt" / H100_FILE).write_text("{}")
    with pytest.raises(ArtifactError, match="measured-h100_sxm.json does not match its checksum"):
        Predictor.load(tmp_path / "corrupt", device="h100_sxm")


def test_a_device_class_no_table_can_be_named_for_still_loads_flagged(with_h100: Path) -> None:
    """A spec may name its class with upper case, which no artifact file is named for: it has no table, and the
    predictor answers as for any other device, flagged (as before the tables)."""
    spec = dataclasses.replace(load_device("h100_sxm"), device_class="H100pcie")

    predictor = Predictor.load(with_h100, device=spec, triton_version=None)

    assert predictor.measured_here == {}
    assert OODReason.DEVICE_MISMATCH in predictor.predict_best((64, 64, 64)).ood.reasons
