"""tilecost.train: fit the XGBoost cost model per device class, evaluate it, track it in MLflow.

Modules: ``dataset`` (reading and checking the Parquet measurements), ``model`` (:class:`CostModel`,
the scikit-learn-style estimator and its target transforms), ``baselines`` and ``evaluate`` (judging
a ranking on held-out problems), ``pipeline`` (a training run end to end), ``export`` (the predictor
artifact), ``tracking`` (MLflow), ``loading`` (evaluating a saved model), ``cli`` (``tilecost train``
and ``tilecost evaluate``); the nightly loop (``nightly`` and its ``nightly_*`` modules, ``drift``,
``progress``) and the figures (``figures``, ``report``: ``tilecost report``). Importing this package
imports neither xgboost, mlflow, pandas nor matplotlib; they load when a function needs them.
"""

from tilecost.train.dataset import Measurements, load_measurements
from tilecost.train.evaluate import Evaluation, ProblemResult, evaluate_predictions
from tilecost.train.loading import evaluate_saved_model, load_artifact_model
from tilecost.train.model import CostModel
from tilecost.train.nightly import NightlyResult, NightlySettings, run_nightly
from tilecost.train.pipeline import TrainResult, evaluate_model, grouped_cross_validation, train_device_class
from tilecost.train.report import write_report

__all__ = [
    "CostModel",
    "Evaluation",
    "Measurements",
    "NightlyResult",
    "NightlySettings",
    "ProblemResult",
    "TrainResult",
    "evaluate_model",
    "evaluate_predictions",
    "evaluate_saved_model",
    "grouped_cross_validation",
    "load_artifact_model",
    "load_measurements",
    "run_nightly",
    "train_device_class",
    "write_report",
]
