"""tilecost.predict: rank the candidates of a shape with an exported model (numpy only).

Never imports torch, triton, mlflow, pandas, xgboost or tilecost.train: it runs inside compilers.
``Prediction.triton_config()`` and :mod:`tilecost.predict.autotune` import triton when called.

Modules: ``artifact`` (the artifact format), ``trees`` (XGBoost JSON evaluated in numpy),
``feasibility`` (the candidate rules as array arithmetic), ``scoring`` (a group's candidates scored
with the model), ``shortlist`` and ``export`` (what is precomputed at export), ``ood``
(out-of-distribution verdicts and their calibration), ``answer_calibration`` (the flags fitted on the
predictor's own held-out answers), ``dispatch`` (run-time dispatch rules),
``querylog`` (the opt-in log of flagged queries, :class:`QueryLog`), ``predictor``
(:class:`Predictor`, :func:`predict_best`, :func:`rank`), ``autotune`` (pruning for
``triton.autotune``).
"""

from tilecost.predict.artifact import ARTIFACT_SCHEMA_VERSION, ArtifactMetadata, load_artifact, save_artifact
from tilecost.predict.dispatch import DispatchRule, dispatch_speed, fit_dispatch
from tilecost.predict.export import prepare_artifact_files
from tilecost.predict.ood import OODReason, OODVerdict, calibrate_ood, training_domain
from tilecost.predict.predictor import Prediction, Predictor, Source, parse_problem, predict_best, rank, shipped_devices
from tilecost.predict.querylog import QueryLog
from tilecost.predict.trees import TreeEnsemble

__all__ = [
    "ARTIFACT_SCHEMA_VERSION",
    "ArtifactMetadata",
    "DispatchRule",
    "OODReason",
    "OODVerdict",
    "Prediction",
    "Predictor",
    "QueryLog",
    "Source",
    "TreeEnsemble",
    "calibrate_ood",
    "dispatch_speed",
    "fit_dispatch",
    "load_artifact",
    "parse_problem",
    "predict_best",
    "prepare_artifact_files",
    "rank",
    "save_artifact",
    "shipped_devices",
    "training_domain",
]
