"""Tracking training runs in MLflow: what was trained, on what data, how well, and which model serves.

Each run goes to the experiment ``tilecost-<device class>`` of the tracking store (default
``sqlite:///mlflow.db`` in the working directory, an embedded store that needs no server; the
``MLFLOW_TRACKING_URI`` environment variable or ``--tracking-uri`` choose another). It records:

* parameters: the estimator's settings, the XGBoost parameters they resolve to, the data selection;
* metrics: the held-out evaluation (:meth:`tilecost.train.evaluate.Evaluation.metrics`), grouped
  cross-validation when run, row counts by status, training seconds;
* the dataset as an MLflow input: its source, and a digest over the Parquet files read (the
  full SHA-256 also as the ``dataset_digest`` parameter);
* the feature schema (``feature_schema.json``: FEATURE_NAMES and FEATURE_SCHEMA_VERSION);
* the problems: ``training_problems.json`` and ``evaluation_problems.json`` (sorted problem keys), and the SHA-256 of
  each list as a parameter and a tag of the registered version (``training_problems_sha256``,
  ``evaluation_problems_sha256``), so that two versions can be compared on what each was trained on (the training
  keys since the forty-second session: a promotion rule that judges only the groups a refit's new data aimed at needs
  them);
* the booster through ``mlflow.xgboost.log_model`` (JSON format), registered as a new version of
  the model ``tilecost-<device class>``, and the exported predictor artifact.

The alias ``champion`` of that registered model moves to the new version only when it beats the
current champion on the same evaluation: the champion is loaded and evaluated on the very problems
the new model was, and the new one must win on :meth:`Evaluation.score` (top-1 geometric mean, then
worst problem, then top-5) with a top-1 gain that the problems tell apart from no gain (its 90% paired
bootstrap interval above 1: :func:`beats`; two fits of the same data differed by ±0.01-0.02 of top-1 with the
tenth session's subsampling; today's settings sample nothing, and refits differ by the data they see). The
verdict also names the alignment groups (dtype, layout, N and K modulo 16) the new model is better or worse in.
A champion trained on another feature schema or list cannot be scored by this code at all, so it is
replaced, and the run says why.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilecost.features import FEATURE_NAMES, FEATURE_SCHEMA_VERSION

from .evaluate import Evaluation

__all__ = [
    "CHAMPION_ALIAS",
    "DEFAULT_TRACKING_URI",
    "RunRecord",
    "beats",
    "champion_version",
    "describe",
    "experiment_name",
    "judge",
    "log_training_run",
    "tracking_uri",
    "withhold_champion",
]

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
CHAMPION_ALIAS = "champion"
# MLflow's dataset table stores digests in 36 characters; the full SHA-256 goes into a parameter.
_MLFLOW_DIGEST_CHARS = 32


def tracking_uri(explicit: str | None = None) -> str:
    """``explicit``, else ``$MLFLOW_TRACKING_URI``, else ``sqlite:///mlflow.db`` (relative to the cwd)."""
    return explicit or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI


def experiment_name(device_class: str) -> str:
    """The experiment, and the registered model, of one device class."""
    return f"tilecost-{device_class}"


def feature_names_digest() -> str:
    return hashlib.sha256("\n".join(FEATURE_NAMES).encode()).hexdigest()


@dataclass(frozen=True)
class RunRecord:
    """What one tracked run left in the store."""

    tracking_uri: str
    experiment: str
    run_id: str
    model_name: str
    model_version: str
    promoted: bool
    reason: str
    champion_score: tuple[float, float, float] | None


def _champion(client: Any, name: str) -> Any | None:
    from mlflow.exceptions import MlflowException

    try:
        return client.get_model_version_by_alias(name, CHAMPION_ALIAS)
    except MlflowException:
        return None


def _decide(
    client: Any,
    name: str,
    new_version: str,
    evaluation: Evaluation,
    evaluate_champion: Callable[[Any, str], Evaluation],
) -> tuple[bool, str, tuple[float, float, float] | None]:
    """Whether the new version becomes champion, why, and the champion's score if it was scored."""
    import mlflow.xgboost

    current = _champion(client, name)
    if current is None:
        return True, "no champion yet", None
    if str(current.version) == str(new_version):
        return False, "already champion", None
    tags = current.tags or {}
    if (
        tags.get("feature_schema_version") != str(FEATURE_SCHEMA_VERSION)
        or tags.get("feature_names_sha256") != feature_names_digest()
    ):
        return True, f"champion v{current.version} was trained on another feature schema and cannot be scored", None
    booster = mlflow.xgboost.load_model(f"models:/{name}/{current.version}")
    champion = evaluate_champion(booster, tags.get("target", "log_time_over_roofline"))
    promoted, words, detail = judge(evaluation, champion)
    return promoted, f"{words} v{current.version} ({detail})", champion.score()


def judge(ours: Evaluation, theirs: Evaluation) -> tuple[bool, str, str]:
    """:func:`beats`, with its figures in words: the two scores, the paired top-1 gain with its interval, and the
    alignment groups in which the new model is better or worse beyond chance (:meth:`Evaluation.paired_group_gains`;
    reported, not deciding: :func:`beats`) ("0.9700/0.7500/0.9900 > 0.9690/...; top-1 x1.0010, 90% paired
    x1.0002-x1.0019; better in bf16 nt 16-x (24) x1.0500 (x1.0100-x1.0950)")."""
    mine, other, gain = ours.score(), theirs.score(), ours.paired_top1_gain(theirs)
    promoted, words = _verdict(mine, other, gain)
    groups = ours.paired_group_gains(theirs)
    detail = (
        f"{_fmt(mine)} {'>' if mine > other else '<='} {_fmt(other)};"
        f" top-1 x{gain[0]:.4f}, 90% paired x{gain[1]:.4f}-x{gain[2]:.4f}"
    )
    for verdict in ("better", "worse"):
        named = [str(g) for g in groups if g.verdict == verdict]
        if named:
            detail += f"; {verdict} in " + ", ".join(named)
    return promoted, words, detail


def beats(ours: Evaluation, theirs: Evaluation) -> tuple[bool, str]:
    """Whether ``ours`` beats ``theirs`` on the same problems: a better :meth:`Evaluation.score` (top-1, then
    worst, then top-5) *and* a top-1 gain whose 90% paired bootstrap interval lies above 1
    (:meth:`Evaluation.paired_top1_gain`), so that a refit that moved by the fit's own spread does not
    replace the champion. Returns the verdict and its words ("beats champion" or "does not beat champion").

    The groups :func:`judge` names do not decide: judged by them (better in one group, worse in none, level
    overall), refits on two random 90% subsets of the same training problems told one from the other in one pair of
    three (BENCHMARKS §4, forty-first session), so such a rule would also promote the data's own noise."""
    promoted, words, _ = judge(ours, theirs)
    return promoted, words


def _verdict(
    ours: tuple[float, float, float], theirs: tuple[float, float, float], gain: tuple[float, float, float]
) -> tuple[bool, str]:
    """:func:`beats` on the two scores and the paired gain (ratio, interval low, high), computed once."""
    if ours > theirs and gain[1] > 1.0:
        return True, "beats champion"
    return False, "does not beat champion"


def _fmt(score: tuple[float, ...]) -> str:
    return "/".join(f"{s:.4f}" for s in score)


def _requirements() -> list[str]:
    """The logged model's pip requirements, given rather than inferred: MLflow infers them by loading the model
    in a subprocess and listing what it imports, 4.7 s of the twentieth session's 11.5 s of logging; loading it
    back (``mlflow.xgboost.load_model``, or as a pyfunc) needs xgboost, numpy and pandas."""
    import mlflow.xgboost
    import numpy
    import pandas

    pins = [f"numpy=={numpy.__version__}", f"pandas=={pandas.__version__}"]
    return [*mlflow.xgboost.get_default_pip_requirements(), *pins]


def log_training_run(
    *,
    uri: str,
    device_class: str,
    booster: Any,
    target: str,
    params: Mapping[str, Any],
    metrics: Mapping[str, float],
    evaluation: Evaluation,
    evaluate_champion: Callable[[Any, str], Evaluation],
    dataset_root: str,
    dataset_digest: str,
    artifact_dir: Path | None,
    report: str,
    training_problems: Sequence[str],
    level_trees: int = 0,
) -> RunRecord:
    """Log one training run and decide the champion (module docstring). Returns what was recorded.
    ``training_problems``: the keys of the problems the booster was fitted on (any order)."""
    import mlflow
    import mlflow.xgboost
    from mlflow import MlflowClient
    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.data.meta_dataset import MetaDataset

    mlflow.set_tracking_uri(uri)
    name = experiment_name(device_class)
    mlflow.set_experiment(name)
    problems = sorted(r.problem.key for r in evaluation.problems)
    eval_digest = _keys_digest(problems)
    trained = sorted(set(training_problems))
    train_digest = _keys_digest(trained)
    with mlflow.start_run(run_name=f"train-{device_class}") as run:
        mlflow.log_params({k: v for k, v in params.items() if v is not None})
        mlflow.log_params(
            {
                "dataset_digest": dataset_digest,
                "feature_schema_version": FEATURE_SCHEMA_VERSION,
                "target": target,
                "evaluation_problems_sha256": eval_digest,
                "training_problems_sha256": train_digest,
            }
        )
        mlflow.log_metrics(dict(metrics))
        source_uri = dataset_root if "://" in dataset_root else str(Path(dataset_root).resolve())
        dataset = MetaDataset(  # type: ignore[abstract]  # MLflow's own concrete metadata-only dataset
            source=resolve_dataset_source(source_uri),
            name=f"measurements-{device_class}",
            digest=dataset_digest[:_MLFLOW_DIGEST_CHARS],
        )
        mlflow.log_input(dataset, context="training")
        mlflow.log_dict(
            {"feature_names": list(FEATURE_NAMES), "feature_schema_version": FEATURE_SCHEMA_VERSION},
            "feature_schema.json",
        )
        mlflow.log_dict({"problems": problems}, "evaluation_problems.json")
        mlflow.log_dict({"problems": trained}, "training_problems.json")
        mlflow.log_text(report, "evaluation.txt")
        if artifact_dir is not None:
            mlflow.log_artifacts(str(artifact_dir), artifact_path="predictor_artifact")
        info = mlflow.xgboost.log_model(
            booster, name="model", registered_model_name=name, model_format="json", pip_requirements=_requirements()
        )
        version = str(info.registered_model_version)
        client = MlflowClient()
        version_tags = {
            "target": target,
            "feature_schema_version": str(FEATURE_SCHEMA_VERSION),
            "feature_names_sha256": feature_names_digest(),
            "dataset_digest": dataset_digest,
            "evaluation_problems_sha256": eval_digest,
            "training_problems_sha256": train_digest,
            "heldout_top1_geomean": f"{evaluation.summary()['top1_geomean']:.6f}",
            "level_trees": str(level_trees),
        }
        for key, value in version_tags.items():
            client.set_model_version_tag(name, version, key, value)
        promoted, reason, theirs = _decide(client, name, version, evaluation, evaluate_champion)
        if promoted:
            client.set_registered_model_alias(name, CHAMPION_ALIAS, version)
        if theirs is not None:
            mlflow.log_metrics(
                {
                    "champion_top1_geomean": theirs[0],
                    "champion_top1_worst": theirs[1],
                    "champion_top5_geomean": theirs[2],
                }
            )
        mlflow.set_tags({"champion_decision": reason, "promoted": str(promoted).lower()})
        client.set_model_version_tag(name, version, "champion_decision", reason)
        return RunRecord(uri, name, run.info.run_id, name, version, promoted, reason, theirs)


def _keys_digest(keys: Sequence[str]) -> str:
    """SHA-256 of sorted problem keys, one a line (the digest of an empty list for none)."""
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()


def describe(record: RunRecord) -> str:
    """One line for the terminal."""
    verdict = "now champion" if record.promoted else "champion unchanged"
    return (
        f"MLflow {record.tracking_uri}: experiment {record.experiment}, run {record.run_id}, "
        f"model {record.model_name} v{record.model_version} ({verdict}: {record.reason})"
    )


def champion_version(uri: str, name: str) -> str | None:
    """The version the registered model ``name``'s champion alias names in the store at ``uri`` (None: no
    such model or alias)."""
    import mlflow

    return None if (found := _champion(mlflow.MlflowClient(uri), name)) is None else str(found.version)


def withhold_champion(
    uri: str, name: str, version: str, previous: str | None, why: str, check: str = "answer_gate"
) -> None:
    """A version promoted by the registry whose predictor artifact a check refused (the answer gate; for
    ``tilecost train --gate``, also the promotion rule against the artifact in place): tag it ``check`` with
    ``why``, and move the champion alias back to ``previous`` (when there was one), so that the registry does not
    name a champion whose artifact was withheld."""
    import mlflow

    client = mlflow.MlflowClient(uri)
    client.set_model_version_tag(name, version, check, why[:4000])
    if previous is not None:
        client.set_registered_model_alias(name, CHAMPION_ALIAS, previous)
