"""Evaluating a saved model: an exported artifact directory or an MLflow registered model.

:func:`evaluate_saved_model` is ``tilecost evaluate``: it loads the booster (verifying the
artifact's checksums, feature list and feature schema through
:func:`tilecost.predict.artifact.load_artifact`), refuses to evaluate on a problem the model was
trained on, and scores the held-out problems of the dataset with the same evaluation as training.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tilecost.device import load_device
from tilecost.errors import ArtifactError, DatasetError
from tilecost.features import FEATURE_NAMES, FEATURE_SCHEMA_VERSION
from tilecost.problem import DType, Layout, Problem

from .dataset import load_measurements
from .evaluate import Evaluation
from .model import CostModel

__all__ = ["evaluate_saved_model", "heldout_trained_on", "load_artifact_model", "load_registered_model"]


def load_artifact_model(directory: str | Path) -> tuple[CostModel, Any]:
    """The fitted :class:`CostModel` of an artifact directory and its metadata."""
    import xgboost as xgb

    from tilecost.predict.artifact import load_artifact

    metadata, blobs = load_artifact(directory, tuple(FEATURE_NAMES), FEATURE_SCHEMA_VERSION)
    booster = xgb.Booster()
    booster.load_model(bytearray(blobs[metadata.model_file]))
    return CostModel.from_booster(booster, metadata.target, metadata.level_trees), metadata


def heldout_trained_on(metadata: Any, heldout: Any) -> list[str]:
    """The keys (sorted) of the problems in ``heldout`` (a frame with ``problem_key``) that the model of an artifact
    with ``metadata`` was trained on: scored on them, its evaluation would flatter it."""
    trained_on = {Problem.from_key(key).key for key in metadata.domain.get("problems", [])}
    return sorted(trained_on & set(heldout["problem_key"]))


def load_registered_model(model_uri: str, tracking_uri: str | None = None) -> tuple[CostModel, str]:
    """The :class:`CostModel` behind ``models:/NAME@ALIAS`` or ``models:/NAME/VERSION``; its target
    comes from the version's ``target`` tag, which training sets."""
    import mlflow
    import mlflow.xgboost
    from mlflow import MlflowClient

    from .tracking import tracking_uri as resolve_uri

    mlflow.set_tracking_uri(resolve_uri(tracking_uri))
    if not model_uri.startswith("models:/"):
        raise ValueError(f"model_uri={model_uri!r}: use models:/NAME@ALIAS or models:/NAME/VERSION")
    path = model_uri.removeprefix("models:/")
    client = MlflowClient()
    if "@" in path:
        name, alias = path.split("@", 1)
        version = client.get_model_version_by_alias(name, alias)
    else:
        name, _, number = path.partition("/")
        version = client.get_model_version(name, number)
    tags = version.tags or {}
    if tags.get("feature_schema_version") != str(FEATURE_SCHEMA_VERSION):
        raise ArtifactError(
            f"{model_uri}: trained on feature schema {tags.get('feature_schema_version')!r}, "
            f"this tilecost computes schema {FEATURE_SCHEMA_VERSION}"
        )
    booster = mlflow.xgboost.load_model(f"models:/{name}/{version.version}")
    target = tags.get("target", "log_time_over_roofline")
    model = CostModel.from_booster(booster, target, int(tags.get("level_trees", 0)))
    return model, f"{name} v{version.version}"


def evaluate_saved_model(
    dataset: str | Path,
    device_class: str,
    *,
    artifact: str | Path | None = None,
    model_uri: str | None = None,
    tracking_uri: str | None = None,
    dtypes: Sequence[DType | str] | None = None,
    layouts: Sequence[Layout | str] | None = None,
    triton_version: str | None = None,
) -> tuple[Evaluation, str]:
    """Evaluate an artifact (or registered model) on the held-out problems; returns the evaluation
    and a line describing what was evaluated on what."""
    from .pipeline import evaluate_model, split_by_role

    if (artifact is None) == (model_uri is None):
        raise ValueError("give exactly one of artifact and model_uri")
    metadata = None
    if artifact is not None:
        model, metadata = load_artifact_model(artifact)
        if metadata.device_class != device_class:
            raise ArtifactError(f"{artifact}: a model of device class {metadata.device_class!r}, not {device_class!r}")
        what = f"artifact {artifact} (target {metadata.target}, Triton {metadata.triton_version})"
    else:
        assert model_uri is not None
        model, name = load_registered_model(model_uri, tracking_uri)
        what = f"MLflow model {name} ({model_uri})"
    device = load_device(device_class)
    measurements = load_measurements(
        dataset, device_class, dtypes=dtypes, layouts=layouts, triton_version=triton_version
    )
    _, heldout = split_by_role(measurements)
    if heldout.empty:
        raise DatasetError(f"{device_class}: the dataset has no held-out problems to evaluate on")
    seen = heldout_trained_on(metadata, heldout) if metadata is not None else []
    if seen:
        raise DatasetError(f"the model was trained on held-out problem(s) {seen[:5]}; its evaluation would flatter it")
    evaluation = evaluate_model(model, heldout, device)
    return (
        evaluation,
        f"{what} on {len(evaluation.problems)} held-out problems of {dataset} ({measurements.digest[:12]})",
    )
