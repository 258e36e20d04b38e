"""Training runs in a real MLflow store (sqlite in a temporary directory): what is logged, and the
``champion`` alias moving only when a new model beats the current one on the same evaluation."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.test_train_fixtures import HELDOUT_PROBLEMS, TRAIN_PROBLEMS, write_dataset
from tilecost.features import FEATURE_NAMES, FEATURE_SCHEMA_VERSION
from tilecost.problem import Problem
from tilecost.train.pipeline import train_device_class
from tilecost.train.tracking import CHAMPION_ALIAS, tracking_uri

EXTRA_HELDOUT = tuple(
    Problem(m, n, k, "bf16", "nt")
    for m, n, k in ((96, 3072, 1536), (1536, 512, 3072), (8, 4096, 2048), (640, 640, 2560), (2048, 2048, 128),
                    (200, 700, 1300), (48, 1536, 6144), (4096, 256, 512))
)  # fmt: skip
WEAK = {"n_estimators": 1, "max_depth": 1, "n_jobs": 1}
STRONG = {"n_estimators": 60, "max_depth": 6, "n_jobs": 1}

pytest.importorskip("mlflow")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory):
    """Three runs into one store: weak (first champion), strong (beats it, by a gain the paired interval
    tells apart from none), weak again (does not)."""
    base = tmp_path_factory.mktemp("mlflow")
    # 11 held-out problems, so that the strong model's gain is one the paired interval tells apart from none
    # (with the fixture's 3, a resample of only the problems both models solve is too likely).
    root = write_dataset(base / "ds", heldout=HELDOUT_PROBLEMS + EXTRA_HELDOUT)
    uri = f"sqlite:///{base / 'mlflow.db'}"
    monkey = pytest.MonkeyPatch()
    monkey.chdir(base)  # MLflow puts a sqlite store's artifacts under ./mlruns
    # The predictor's shortlists take ~15 s to precompute even here; tests/test_train_export.py
    # covers the hook, so these runs get a stand-in.
    monkey.setattr("tilecost.predict.prepare_artifact_files", lambda model_json, metadata, **_: {"fake.json": b"{}"})
    try:
        results = [
            train_device_class(root, "h200", model_params=params, tracking_uri=uri, export_dir=base / f"art{i}")
            for i, params in enumerate((WEAK, STRONG, WEAK))
        ]
    finally:
        monkey.undo()
    return uri, root, results


def _client(uri: str):
    import mlflow
    from mlflow import MlflowClient

    mlflow.set_tracking_uri(uri)
    return MlflowClient()


def test_champion_moves_only_on_improvement(runs) -> None:
    uri, _, (weak, strong, weak_again) = runs
    assert strong.evaluation.score() > weak.evaluation.score()  # the premise of this test

    assert (weak.run.promoted, weak.run.reason) == (True, "no champion yet")
    assert strong.run.promoted and strong.run.reason.startswith("beats champion v1")
    assert not weak_again.run.promoted and weak_again.run.reason.startswith("does not beat champion v2")
    champion = _client(uri).get_model_version_by_alias("tilecost-h200", CHAMPION_ALIAS)
    assert str(champion.version) == strong.run.model_version == "2"
    # The champion was re-evaluated on the same problems: its score is the strong run's own.
    assert weak_again.run.champion_score == pytest.approx(strong.evaluation.score())


def test_run_logs_params_metrics_dataset_and_feature_schema(runs) -> None:
    uri, _, (_, strong, _) = runs
    client = _client(uri)
    run = client.get_run(strong.run.run_id)

    assert run.data.params["dataset_digest"] == strong.measurements.digest
    assert run.data.params["target"] == "log_time_over_roofline"
    assert run.data.params["model.n_estimators"] == "60"
    assert run.data.metrics["heldout_top1_geomean"] == pytest.approx(strong.evaluation.summary()["top1_geomean"])
    assert "heldout_tutorial_geomean" in run.data.metrics and "rows_ok" in run.data.metrics
    (dataset_input,) = run.inputs.dataset_inputs
    assert strong.measurements.digest.startswith(dataset_input.dataset.digest)
    local = client.download_artifacts(run.info.run_id, "feature_schema.json")
    schema = json.loads(Path(local).read_text())
    assert schema == {"feature_names": list(FEATURE_NAMES), "feature_schema_version": FEATURE_SCHEMA_VERSION}
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"evaluation.txt", "predictor_artifact"} <= artifacts
    # What it was trained on and judged by, as sorted problem keys with their digests (parameter and version tag).
    for name, expected in (("training", TRAIN_PROBLEMS), ("evaluation", HELDOUT_PROBLEMS + EXTRA_HELDOUT)):
        keys = json.loads(Path(client.download_artifacts(run.info.run_id, f"{name}_problems.json")).read_text())
        assert keys == {"problems": sorted(p.key for p in expected)}
        digest = hashlib.sha256("\n".join(keys["problems"]).encode()).hexdigest()
        assert run.data.params[f"{name}_problems_sha256"] == digest
        assert (
            client.get_model_version("tilecost-h200", strong.run.model_version).tags[f"{name}_problems_sha256"]
            == digest
        )


def test_registered_model_versions_carry_their_target_and_schema(runs) -> None:
    uri, _, results = runs
    client = _client(uri)
    versions = client.search_model_versions("name='tilecost-h200'")

    assert sorted(int(v.version) for v in versions) == [1, 2, 3]
    for version in versions:
        assert version.tags["target"] == "log_time_over_roofline"
        assert version.tags["feature_schema_version"] == str(FEATURE_SCHEMA_VERSION)
    assert {r.run.model_version for r in results} == {"1", "2", "3"}


def test_a_registered_model_loads_back_and_names_what_it_needs(runs) -> None:
    import mlflow
    import mlflow.pyfunc
    import mlflow.xgboost
    import numpy as np
    import xgboost as xgb

    uri, _, (_, strong, _) = runs
    mlflow.set_tracking_uri(uri)
    booster = mlflow.xgboost.load_model("models:/tilecost-h200/2")
    x = np.zeros((3, len(FEATURE_NAMES)))
    assert np.array_equal(booster.inplace_predict(x), strong.model.booster_.inplace_predict(x))
    needs = Path(mlflow.pyfunc.get_model_dependencies("models:/tilecost-h200/2")).read_text().split()
    assert {f"xgboost=={xgb.__version__}", f"numpy=={np.__version__}"} <= set(needs)


def test_tracking_uri_defaults_to_local_sqlite(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking_uri() == "sqlite:///mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://tracking:5000")
    assert tracking_uri() == "http://tracking:5000"
    assert tracking_uri("sqlite:///x.db") == "sqlite:///x.db"
