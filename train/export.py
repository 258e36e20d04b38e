"""Exporting a trained cost model as the self-contained artifact the predictor loads.

The artifact (format: :mod:`tilecost.predict.artifact`) is the booster in XGBoost's JSON format, a
``metadata.json`` sidecar and extra files, never a pickle:

* the sidecar records the device class and fingerprint of the measurements, the Triton version,
  :data:`~tilecost.features.FEATURE_NAMES` and :data:`~tilecost.features.FEATURE_SCHEMA_VERSION`,
  the target transform, the training domain (:func:`training_domain`) and how the model was
  trained (parameters, seed, dataset digest, metrics, row counts);
* ``measured.json`` is the tuning database of measured bests (:func:`measured_database`) over
  every measured problem, training and held-out: a shape that was measured needs no model. The sidecar's
  ``measured_from`` names the dataset (:func:`measured_provenance`); ``tilecost refresh-measured``
  (:mod:`tilecost.train.refresh`) rebuilds the table from a newer dataset without retraining;
* whatever :func:`tilecost.predict.prepare_artifact_files` precomputes for the predictor, when
  that function exists (shortlists, out-of-distribution calibration), merged in.

The shipped model lives in ``tilecost/models/<device class>/`` (:func:`default_export_dir`).
"""

from __future__ import annotations

import importlib
import inspect
import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tilecost.features import FEATURE_NAMES, FEATURE_SCHEMA_VERSION
from tilecost.predict.artifact import ArtifactMetadata, save_artifact
from tilecost.predict.export import SHORTLISTS_FILE
from tilecost.problem import DType, Layout, Problem

if TYPE_CHECKING:
    import pandas as pd

    from .dataset import Measurements
    from .evaluate import Evaluation

__all__ = [
    "MEASURED_FILE",
    "build_metadata",
    "default_export_dir",
    "export_artifact",
    "main_trees_scorer",
    "measured_database",
    "measured_file",
    "measured_provenance",
    "ood_calibration",
    "training_domain",
]

MEASURED_FILE = "measured.json"


def default_export_dir(device_class: str) -> Path:
    """``tilecost/models/<device_class>/`` inside the installed package (the shipped model): what ``tilecost
    evaluate``, ``report`` and the predictor read by default. ``tilecost train`` writes here only when given it as
    ``--export-dir``, never by default."""
    import tilecost

    return Path(tilecost.__file__).resolve().parent / "models" / device_class


def _predict_function(name: str) -> Any:
    """A function of :mod:`tilecost.predict` if this version has it (the predictor is built alongside)."""
    return getattr(importlib.import_module("tilecost.predict"), name, None)


def training_domain(frame: pd.DataFrame) -> dict[str, Any]:
    """What the model was trained on, for out-of-distribution checks.

    The predictor's own form (:func:`tilecost.predict.training_domain`: ``dtypes``, ``layouts``,
    ``log2_min``/``log2_max`` per dimension and ``problems`` as sorted problem keys, which carry
    dtype and layout), plus ``log2_m``/``log2_n``/``log2_k`` as ``[min, max]`` and
    ``problem_dims``, each training problem as ``[m, n, k, dtype, layout]``.
    """
    rows = frame[["m", "n", "k", "dtype", "layout"]].drop_duplicates()
    problems = sorted(
        (
            Problem(int(m), int(n), int(k), DType.parse(d), Layout.parse(x))
            for m, n, k, d, x in rows.itertuples(index=False, name=None)
        ),
        key=lambda p: p.key,
    )
    if not problems:
        raise ValueError("no training problems: the training domain would be empty")
    predictor_form = _predict_function("training_domain")
    domain: dict[str, Any] = dict(predictor_form(problems)) if predictor_form else {}
    domain.setdefault("dtypes", sorted({p.dtype.value for p in problems}))
    domain.setdefault("layouts", sorted({p.layout.value for p in problems}))
    domain.setdefault("problems", [p.key for p in problems])
    for dim in ("m", "n", "k"):
        values = [getattr(p, dim) for p in problems]
        domain[f"log2_{dim}"] = [math.log2(min(values)), math.log2(max(values))]
    domain["problem_dims"] = [[p.m, p.n, p.k, p.dtype.value, p.layout.value] for p in problems]
    return domain


def ood_calibration(evaluation: Evaluation | None, training: Sequence[Problem]) -> dict[str, Any]:
    """``metadata.ood``: thresholds :func:`tilecost.predict.calibrate_ood` fits on the held-out
    problems' top-1 fractions (empty when there is no evaluation or no such function)."""
    calibrate = _predict_function("calibrate_ood")
    if calibrate is None or evaluation is None or not evaluation.problems:
        return {}
    heldout = [r.problem for r in evaluation.problems]
    return dict(calibrate(heldout, [min(1.0, r.top1) for r in evaluation.problems], list(training)))


def measured_database(frame: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """The best measured configuration of every problem in ``frame`` (timed rows).

    ``{problem_key: {"config_id", "time_us", "complete", "configs_measured"}}``: the fastest timed
    configuration and its time; ``complete`` when the problem's whole candidate space was measured
    (its sweep's ``sample_fraction`` is 1.0), so the best is the best of the space;
    ``configs_measured``, how many distinct configurations carry a time. Ties go to the smaller
    config id, so the file is deterministic.
    """
    ordered = frame.sort_values(["problem_key", "time_us", "config_id"], kind="stable")
    database: dict[str, dict[str, Any]] = {}
    for key, rows in ordered.groupby("problem_key", sort=True):
        first = rows.iloc[0]
        database[str(key)] = {
            "config_id": str(first["config_id"]),
            "time_us": float(first["time_us"]),
            "complete": bool(float(rows["sample_fraction"].max()) >= 1.0),
            "configs_measured": int(rows["config_id"].nunique()),
        }
    return database


def measured_file(measured: Mapping[str, Mapping[str, Any]]) -> bytes:
    """The bytes of ``measured.json``: the export and ``tilecost refresh-measured`` write the same table alike, so
    refreshing from the dataset an artifact was exported from leaves the file as it was."""
    return json.dumps(measured, indent=1, sort_keys=True).encode()


def measured_provenance(measurements: Measurements) -> dict[str, Any]:
    """What the sidecar's ``measured_from`` records of the dataset a ``measured.json`` was built from."""
    return {
        "dataset_digest": measurements.digest,
        "dataset_files": len(measurements.files),
        "problems": int(measurements.frame["problem_key"].nunique()),
        "timed_rows": measurements.rows_timed,
    }


def build_metadata(
    *,
    device_class: str,
    fingerprint: Mapping[str, Any],
    target: str,
    domain: Mapping[str, Any],
    training: Mapping[str, Any],
    ood: Mapping[str, Any] | None = None,
    level_trees: int = 0,
    measured_from: Mapping[str, Any] | None = None,
) -> ArtifactMetadata:
    """The sidecar for a model trained on the current feature schema (``level_trees``: the booster's
    trailing per-problem level trees, :attr:`CostModel.level_trees_`; ``measured_from``:
    :func:`measured_provenance` of the dataset ``measured.json`` is built from)."""
    triton = fingerprint.get("triton_version")
    if not isinstance(triton, str):
        raise ValueError(f"fingerprint triton_version={triton!r}: the rows must come from one Triton version")
    return ArtifactMetadata(
        device_class=device_class,
        fingerprint=dict(fingerprint),
        triton_version=triton,
        feature_names=tuple(FEATURE_NAMES),
        feature_schema_version=FEATURE_SCHEMA_VERSION,
        target=target,
        domain=dict(domain),
        training=dict(training),
        ood=dict(ood or {}),
        level_trees=level_trees,
        measured_from=dict(measured_from or {}),
    )


def main_trees_scorer(booster: Any, level_trees: int) -> Callable[[Any], Any]:
    """The export's scorer for an XGBoost ``booster``: its main trees' margin (``inplace_predict`` without the last
    ``level_trees``, which a predictor adds once per problem), on one thread, which scores the shortlists' batches of a
    few dozen rows ~2.5x faster than two (measured with benchmarks/predict_latency.py's export, 2026-11-29)."""
    booster.set_param({"nthread": 1})
    main_trees = booster.num_boosted_rounds() - level_trees

    def scorer(x: Any) -> Any:
        return booster.inplace_predict(x, iteration_range=(0, main_trees))

    return scorer


def _predictor_files(
    model: bytes, metadata: ArtifactMetadata, scorer: Any = None, settings: Mapping[str, Any] | None = None
) -> dict[str, bytes]:
    """Files :func:`tilecost.predict.prepare_artifact_files` precomputes, if that function exists.

    ``scorer`` (the booster's ``inplace_predict``) is passed when the function takes one: it scores
    the shortlists' sample shapes about 20x faster than evaluating the trees in numpy, and the
    function checks it against them first. ``settings``: keyword arguments of that function (such as
    ``samples``), passed as they are.
    """
    prepare = _predict_function("prepare_artifact_files")
    if prepare is None:
        return {}
    arguments = dict(settings or {})
    if scorer is not None and "scorer" in inspect.signature(prepare).parameters:
        arguments["scorer"] = scorer
    files = prepare(model, metadata, **arguments)
    if not isinstance(files, Mapping) or not all(isinstance(v, bytes) for v in files.values()):
        raise TypeError("tilecost.predict.prepare_artifact_files must return a dict of file name -> bytes")
    return dict(files)


def export_artifact(
    directory: str | Path,
    model: bytes,
    metadata: ArtifactMetadata,
    measured: Mapping[str, Mapping[str, Any]],
    *,
    scorer: Any = None,
    settings: Mapping[str, Any] | None = None,
    heldout: pd.DataFrame | None = None,
    device_tables: Mapping[str, bytes] | None = None,
) -> tuple[Path, list[str]]:
    """Write the artifact to ``directory``; returns it and the names of the files written besides
    the booster and the sidecar. ``model``: the booster's UBJSON (written as ``model.ubj``) or JSON
    (``model.json``), as ``Booster.save_raw`` gives them. ``scorer``, ``settings``: see :func:`_predictor_files`.

    ``heldout``: the held-out rows (:func:`~tilecost.train.pipeline.split_by_role`'s second frame). With them, once
    the artifact is written, its out-of-distribution flags are fitted again on the answers its predictor gives those
    problems (:func:`tilecost.predict.answer_calibration.calibrate_on_answers`), which is what the flags are judged
    by; ``metadata``'s calibration (the full model's choices, :func:`ood_calibration`) gives its settings. Not when
    the predictor's precomputation wrote no shortlists (there would be no predictor's answers to fit them on).

    ``device_tables``: other device classes' measured bests by file name (``measured-<class>.json``,
    :func:`~tilecost.train.refresh.other_device_tables`), written as they are."""
    extra = {MEASURED_FILE: measured_file(measured), **(device_tables or {})}
    predictor = _predictor_files(model, metadata, scorer, settings)
    clash = sorted(set(predictor) & set(extra))
    if clash:
        raise ValueError(f"prepare_artifact_files returned {clash}, which training writes itself")
    extra.update(predictor)
    path = save_artifact(directory, model, metadata, extra)
    if heldout is not None and not heldout.empty and metadata.ood and SHORTLISTS_FILE in predictor:
        from tilecost.predict.answer_calibration import calibrate_on_answers

        from .answer_gate import artifact_answers

        calibrate_on_answers(path, artifact_answers(path, heldout).fractions)
    return path, sorted(extra)
