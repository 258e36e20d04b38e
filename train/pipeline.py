"""One training run end to end: read, split by problem, featurise, fit, evaluate, export, track.

:func:`train_device_class` is what ``tilecost train`` runs and what a notebook calls:

1. :func:`~tilecost.train.dataset.load_measurements` reads the timed rows of one device class;
2. :func:`split_by_role` separates training problems from held-out ones (``role`` column, chosen
   by the collector before anything was measured); a problem never appears on both sides, and
   held-out problems are never trained on;
3. :func:`build_features` computes :func:`tilecost.features.feature_matrix` for every row, with the
   *estimated* registers per thread (the predictor cannot know the compiler's count);
4. :class:`~tilecost.train.model.CostModel` is fitted on the training problems;
   :func:`grouped_cross_validation` optionally scores the settings on held-out folds of training
   problems (GroupKFold: a problem's rows stay in one fold), which is how the defaults were tuned;
5. :func:`evaluate_model` judges it on the held-out problems against the baselines;
6. the artifact is exported and the run logged to MLflow (:mod:`~tilecost.train.export`,
   :mod:`~tilecost.train.tracking`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tilecost.device import DeviceSpec, load_device
from tilecost.errors import DatasetError
from tilecost.features import ConfigArrays, ProblemArrays, feature_matrix
from tilecost.problem import DType, Layout, Problem

from .dataset import Measurements, load_measurements
from .evaluate import Evaluation, evaluate_predictions
from .model import CostModel

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "TrainResult",
    "build_features",
    "candidate_rows",
    "evaluate_model",
    "grouped_cross_validation",
    "fit_rows",
    "split_by_role",
    "train_device_class",
]


def build_features(frame: pd.DataFrame, device: DeviceSpec) -> np.ndarray:
    """The feature matrix of dataset rows (one row each), registers per thread estimated."""
    problems = ProblemArrays.from_columns(
        frame["m"].to_numpy(), frame["n"].to_numpy(), frame["k"].to_numpy(),
        frame["dtype"].to_numpy(), frame["layout"].to_numpy(),
    )  # fmt: skip
    variants = frame["variant"].astype(str)
    unknown = sorted(set(variants.unique()) - {"ptr", "tma"})
    if unknown:
        raise DatasetError(f"unknown kernel variant(s) {unknown}; allowed 'ptr', 'tma'")
    configs = ConfigArrays(
        *(frame[c].to_numpy(dtype=np.float64) for c in ("block_m", "block_n", "block_k", "group_m", "split_k")),
        frame["num_warps"].to_numpy(dtype=np.float64),
        frame["num_stages"].to_numpy(dtype=np.float64),
        (variants == "tma").to_numpy(),
    )
    return feature_matrix(problems, configs, device)


def fit_rows(
    model: CostModel,
    frame: pd.DataFrame,
    device: DeviceSpec,
    *,
    X: np.ndarray | None = None,
    time_us: np.ndarray | None = None,
) -> CostModel:
    """Fit ``model`` on dataset rows: their features (``X`` when already built), measured times (or
    ``time_us`` in their place, e.g. another model's predictions), problems and screening-bound flags."""
    return model.fit(
        build_features(frame, device) if X is None else X,
        frame["time_us"].to_numpy() if time_us is None else time_us,
        groups=frame["problem_key"].to_numpy(),
        hopeless=(frame["status"] == "hopeless").to_numpy(),
    )


def split_by_role(measurements: Measurements) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Training rows and held-out rows; a problem on both sides raises :class:`DatasetError`."""
    train = measurements.subset("train")
    heldout = measurements.subset("heldout")
    both = sorted(set(train["problem_key"]) & set(heldout["problem_key"]))
    if both:
        raise DatasetError(f"problem(s) {both[:5]} have rows of both roles; a problem must be train or heldout")
    if train.empty:
        raise DatasetError(f"{measurements.device_class}: no training problems (role=train) among the timed rows")
    return train, heldout


def candidate_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (problem, configuration): repeated measurements (several sweep runs of one
    problem) collapse to the median time, so each candidate is ranked once."""
    key = ["problem_key", "config_id"]
    if not frame.duplicated(key).any():
        return frame.reset_index(drop=True)
    times = frame.groupby(key, sort=False)["time_us"].median()
    first = frame.drop_duplicates(key).set_index(key)
    first["time_us"] = times
    return first.reset_index()


def evaluate_model(model: CostModel, frame: pd.DataFrame, device: DeviceSpec) -> Evaluation:
    """Rank every candidate of each problem in ``frame`` with ``model`` and evaluate it."""
    rows = candidate_rows(frame)
    return evaluate_predictions(rows, model.predict(build_features(rows, device)), device)


def grouped_cross_validation(
    model: CostModel, frame: pd.DataFrame, X: np.ndarray, *, folds: int = 5, seed: int = 0
) -> Evaluation:
    """Out-of-fold evaluation over training problems: GroupKFold by problem (shuffled with
    ``seed``), each fold's problems ranked by a clone of ``model`` fitted on the other folds.

    Training problems were measured on a sample of their candidates, so "best" here is the best
    measured, not the best of the space: use it to compare settings, not as the held-out figure.
    """
    from sklearn.model_selection import GroupKFold

    groups = frame["problem_key"].to_numpy()
    if len(np.unique(groups)) < folds:
        raise ValueError(f"{len(np.unique(groups))} training problems cannot fill {folds} folds")
    predicted = np.empty(len(frame))
    splitter = GroupKFold(n_splits=folds, shuffle=True, random_state=seed)
    for fit_index, test_index in splitter.split(X, groups=groups):
        assert not set(groups[fit_index]) & set(groups[test_index])  # a problem on one side only
        fold_model = CostModel(**model.get_params()).fit(
            X[fit_index], frame["time_us"].to_numpy()[fit_index], groups=groups[fit_index],
            hopeless=(frame["status"] == "hopeless").to_numpy()[fit_index],
        )  # fmt: skip
        predicted[test_index] = fold_model.predict(X[test_index])
    rows = frame.assign(_predicted=predicted)
    rows = candidate_rows(rows)
    return evaluate_predictions(rows, rows["_predicted"].to_numpy(), load_device(frame["device_class"].iloc[0]))


@dataclass
class TrainResult:
    """Everything a training run produced."""

    measurements: Measurements
    model: CostModel
    evaluation: Evaluation | None
    cv: Evaluation | None
    metrics: dict[str, float]
    params: dict[str, Any]
    seconds: dict[str, float]  # wall seconds per stage: read, features, fit, cv, evaluate, export, mlflow
    artifact_dir: Path | None = None
    artifact_files: list[str] = field(default_factory=list)
    run: Any = None  # tracking.RunRecord when logged

    @property
    def training_seconds(self) -> float:
        """Reading, featurising, fitting and evaluating (what the 2-minute bar is about)."""
        return sum(self.seconds.get(k, 0.0) for k in ("read", "features", "fit", "evaluate"))

    def timing(self) -> str:
        """One line of wall seconds per stage."""
        stages = ", ".join(f"{k} {v:.1f} s" for k, v in self.seconds.items())
        return f"wall time: training {self.training_seconds:.1f} s ({stages})"

    def report(self) -> str:
        """The terminal report: data summary, held-out table (and CV summary if run)."""
        parts = [self.measurements.summary(), f"model: {self.model!r}, target {self.model.target_}"]
        if self.cv is not None:
            s = self.cv.summary()
            parts.append(
                f"grouped {self.params.get('cv_folds')}-fold CV over training problems "
                "(against the best of their measured sample): "
                f"top-1 {s['top1_geomean']:.3f} (worst {s['top1_worst']:.3f}), top-5 {s['top5_geomean']:.3f}"
            )
        if self.evaluation is None:
            parts.append("no held-out problems in the dataset: nothing to evaluate on")
        else:
            parts.append(f"held-out problems ({len(self.evaluation.problems)}), never trained on:")
            parts.append(self.evaluation.table())
        return "\n".join(parts)


def train_device_class(
    dataset: str | Path,
    device_class: str,
    *,
    dtypes: Sequence[DType | str] | None = None,
    layouts: Sequence[Layout | str] | None = None,
    triton_version: str | None = None,
    model_params: Mapping[str, Any] | None = None,
    cv_folds: int = 0,
    export_dir: str | Path | None = None,
    tracking_uri: str | None = None,
    log: Any = None,
) -> TrainResult:
    """Train, evaluate, export (if ``export_dir``) and track (if ``tracking_uri``) one device class.

    ``model_params`` override :class:`CostModel`'s defaults; ``log`` is a ``print``-like callable
    for progress lines (None: silent).
    """
    say = log or (lambda *_: None)
    clock = _Stopwatch()
    device = load_device(device_class)
    with clock("read"):
        measurements = load_measurements(
            dataset, device_class, dtypes=dtypes, layouts=layouts, triton_version=triton_version
        )
        _check_device(measurements, device)
        train, heldout = split_by_role(measurements)
    say(measurements.summary())
    if tracking_uri is not None and heldout.empty:
        raise DatasetError(
            f"{device_class}: no held-out problems, so no evaluation to log or to compare champions on; "
            "train without MLflow (--no-mlflow) or add held-out problems"
        )
    with clock("features"):
        X = build_features(train, device)
    model = CostModel(**dict(model_params or {}))
    with clock("fit"):
        fit_rows(model, train, device, X=X)
    say(f"fitted on {len(train):,} rows of {model.n_problems_} training problems in {clock.seconds['fit']:.1f} s")
    cv = None
    if cv_folds:
        with clock("cv"):
            cv = grouped_cross_validation(model, train, X, folds=cv_folds, seed=model.seed)
    evaluation = None
    if not heldout.empty:
        with clock("evaluate"):
            evaluation = evaluate_model(model, heldout, device)

    metrics: dict[str, float] = {f"rows_{s}": float(c) for s, c in measurements.status_counts.items()}
    metrics.update(rows_timed=float(measurements.rows_timed), rows_train=float(len(train)),
                   rows_heldout=float(len(heldout)))  # fmt: skip
    if evaluation is not None:
        metrics.update(evaluation.metrics("heldout"))
    if cv is not None:
        metrics.update(cv.metrics("cv"))
    params = {
        **{f"model.{k}": v for k, v in model.get_params().items()},
        **{f"xgb.{k}": v for k, v in model.xgb_params().items() if k != "nthread"},
        "device_class": device_class,
        "dtypes": ",".join(measurements.selection["dtypes"] or []) or "all",
        "layouts": ",".join(measurements.selection["layouts"] or []) or "all",
        "triton_version": measurements.fingerprint()["triton_version"],
        "cv_folds": cv_folds,
        "train_problems": len(train["problem_key"].unique()),
        "heldout_problems": len(heldout["problem_key"].unique()),
    }
    result = TrainResult(measurements, model, evaluation, cv, metrics, params, clock.seconds)
    metrics.update({f"seconds_{k}": v for k, v in clock.seconds.items()})
    metrics["seconds_training"] = result.training_seconds
    if export_dir is not None:
        with clock("export"):
            _export(result, train, Path(export_dir))
        metrics["seconds_export"] = clock.seconds["export"]
        say(f"exported the predictor artifact to {result.artifact_dir} ({', '.join(result.artifact_files)}) "
            f"in {clock.seconds['export']:.1f} s")  # fmt: skip
    if tracking_uri is not None:
        from .tracking import log_training_run

        def evaluate_champion(booster: Any, target: str) -> Evaluation:
            return evaluate_model(CostModel.from_booster(booster, target), heldout, device)

        assert evaluation is not None  # checked before fitting
        with clock("mlflow"):
            result.run = log_training_run(
                uri=tracking_uri, device_class=device_class, booster=model.booster_, target=model.target_,
                params=params, metrics=metrics, evaluation=evaluation, evaluate_champion=evaluate_champion,
                dataset_root=str(dataset), dataset_digest=measurements.digest, artifact_dir=result.artifact_dir,
                report=result.report(), level_trees=model.level_trees_,
                training_problems=train["problem_key"].unique().tolist(),
            )  # fmt: skip
    return result


class _Stopwatch:
    """Wall seconds per named stage: ``with clock("fit"): ...``; read them in :attr:`seconds`."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._stage = ""

    def __call__(self, stage: str) -> _Stopwatch:
        self._stage = stage
        return self

    def __enter__(self) -> None:
        self._started = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.seconds[self._stage] = self.seconds.get(self._stage, 0.0) + time.perf_counter() - self._started


def _check_device(measurements: Measurements, device: DeviceSpec) -> None:
    """The rows must come from the device the spec describes (hardware is data, checked once)."""
    counts = sorted({int(x) for x in measurements.frame["sm_count"].unique()})
    if counts != [device.sm_count]:
        raise DatasetError(
            f"{measurements.device_class}: rows measured on devices with {counts} SMs, "
            f"the spec tilecost/devices/{device.device_class}.json says {device.sm_count}"
        )


def _export(result: TrainResult, train: pd.DataFrame, directory: Path, *, samples: int | None = None) -> None:
    from .export import (
        build_metadata,
        export_artifact,
        main_trees_scorer,
        measured_database,
        measured_provenance,
        ood_calibration,
        training_domain,
    )
    from .refresh import other_device_tables

    m = result.measurements
    training = {
        "params": {k: v for k, v in result.params.items()},
        "seed": result.model.seed,
        "dataset_digest": m.digest,
        "dataset_files": len(m.files),
        "metrics": {k: v for k, v in result.metrics.items() if "/" not in k},
        "row_counts": {"by_status": dict(m.status_counts), "timed": m.rows_timed, "train": len(train)},
    }
    domain = training_domain(train)
    metadata = build_metadata(
        device_class=m.device_class,
        fingerprint=m.fingerprint(),
        target=result.model.target_,
        domain=domain,
        training=training,
        ood=ood_calibration(result.evaluation, [Problem.from_key(k) for k in sorted(set(train["problem_key"]))]),
        level_trees=result.model.level_trees_,
        measured_from=measured_provenance(m),
    )
    scorer = main_trees_scorer(result.model.booster_, result.model.level_trees_)  # training is over by now
    settings = None if samples is None else {"samples": samples}
    measured = measured_database(candidate_rows(m.frame))
    heldout = m.subset("heldout") if result.evaluation is not None else None
    # Other device classes' measured bests in the same dataset go along: a predictor loaded for one answers with them
    tables = other_device_tables(m.root, m.device_class, metadata.triton_version) if m.root else {}
    path, files = export_artifact(
        directory, result.model.model_ubjson(), metadata, measured, scorer=scorer, settings=settings, heldout=heldout,
        device_tables=tables,
    )  # fmt: skip
    result.artifact_dir = path
    result.artifact_files = files
