"""The cost model: an XGBoost regressor of a configuration's time on a problem, scikit-learn style.

:class:`CostModel` maps the feature matrix of :func:`tilecost.features.feature_matrix` (columns
:data:`~tilecost.features.FEATURE_NAMES`) to a predicted time in µs. The booster itself fits a
*target*, one of :data:`tilecost.predict.artifact.TARGETS`:

* ``log_time_over_roofline`` (the default): ``ln(time_us / roofline_us)``, where ``roofline_us`` is
  the seed's analytical time of the same (problem, configuration) pair, read from the
  ``log2_roofline_time_us`` feature. Predicted µs = roofline µs × exp(prediction).
* ``log_time_us``: ``ln(time_us)``.

Why the ratio to the roofline: times span five orders of magnitude (4 µs to 200 ms) across problems,
and trees predict piecewise constants, so on ``ln(time)`` most of their splits go to telling problem
sizes apart and a shape larger or smaller than any trained on gets a time clamped to the nearest leaf.
Dividing by the roofline takes the size out (it is proportional to 2·M·N·K / peak for compute-bound
shapes), leaves the trees the kernel's inefficiency, a quantity of order 1-100 that transfers between
sizes, and lets them spend their splits on what tells configurations of one problem apart. On grouped
5-fold cross-validation over the 92 H200 training problems (two shuffles, the protocol of
benchmarks/train_quality.py) the ratio target ranked at least as well as ``ln(time)`` at equal
settings: top-1 0.789 against 0.780 geometric mean, and without per-problem balancing 0.778 against
0.732; the held-out problems were not used to choose.

Weights (:meth:`CostModel.sample_weight`): by default each problem carries the same total weight
(``balance_problems``); without it problems with 2,500 candidates outweigh those with 60 forty-fold,
while the user cares about each shape equally. Within a problem, a row's weight halves for every
``fast_halflife_octaves`` (default 0.5 since the seventeenth session, 1 before) its time lies above the
problem's best measured (down to ``fast_weight_floor``, default 0), before balancing: the user meets only the
fast end of each problem's ranking, so the trees spend their splits there, while the label stays the time. On
grouped 5-fold CV over the 3,863 H200 training problems of the seventeenth session (fold seed 1; held-out
problems unread; ``benchmarks/experiments/settings_topk_cv.py``), half-life 0.5 against 1: top-1 0.9655 against
0.9607, top-5 0.9903 against 0.9885 (docs/BENCHMARKS.md §4). Earlier, on 5-fold CV over the 236 H200 training
problems (fold seeds 0 and 1; held-out problems unread), half-life
1 octave against none: top-1 0.893/0.889 against 0.867/0.864, worst 0.160/0.176 against 0.029/0.086,
top-5 0.949/0.940 against 0.945/0.942, log-RMSE 0.27 against 0.25. Half-life 0.5 ranked alike (top-1
0.898/0.886) at log-RMSE 0.35; 0.25 with floor 0.02 0.888; 0.5 with floor 0.05 0.884. At half-life 0.5,
neither hyperparameters (learning rate 0.05, min_child_weight 5, column sampling 0.6, depth 6 with 400
trees: 0.850; at half-life 1, depth 10 with 240 trees: 0.888) nor down-weighting screening bounds
(``hopeless_weight`` 0.3: 0.886) or problems whose best is under 8 µs (``tiny_best_us``/``tiny_weight``
0.3: 0.902 at half-life 0.5, 0.869 at 1: noise) helped clearly. The CV worst problems are tiny
ones whose pick has an outlier screening time (a 16x16 tile timed at 210 ms on 48x383x3), noise no
weighting removes. ``hopeless_weight`` scales rows whose time
is a screening bound (noisier); ``tiny_weight`` rows of problems whose best is under ``tiny_best_us``.
``hopeless_keep`` (default 1.0: all) fits only a seeded share of the screening-bound rows, each weighted by
``hopeless_weight / hopeless_keep``: a third of the rows are such bounds and the fit's time grows with its rows. On
grouped 5-fold CV over the twenty-eighth session's 4,244 H200 training problems (fold seed 0,
``benchmarks/experiments/hopeless_rows_cv.py``), keeping half (16% fewer rows) fitted in 80.3 s a fold against 97.5
s, at top-1 0.9538 against 0.9563 and 535 problems below 0.90 against 491: a loss, so the default keeps them all.
``fit``'s ``problem_weight`` counts a problem as R problems (in the mean row count, its total, its kind's count and
the level trees): the fit its rows would give repeated R times under R problem ids, without the copies (the
seventy-fifth session's joint fits of two devices' rows, ``benchmarks/experiments/joint_fit_heldout.py``).

Kinds (``balance_kinds``, default 0: off): a problem of a (dtype, layout) kind holding P of the training
problems is weighted by (mean P over kinds / P) ** balance_kinds, after the per-problem balancing (the
dataset is uneven: fifth session, bf16 nt 150 of 286 training problems, fp32 nn 10). On grouped 5-fold CV
over the 286 training problems (with the then-default subsampling 0.8; fold seeds 0-3, held-out
unread): off top-1 0.882, worst 0.086, top-5 0.958;
0.25: 0.888 / 0.108 / 0.962; 0.5: 0.896 / 0.142 / 0.956; 1.0 (seeds 0-1): 0.875 against 0.882 off. The
held-out problems, evaluated once with 0.5, gave top-1 0.910 against 0.933 off; over XGBoost seeds 1-3 the
two settings' held-out top-1 ranged 0.898-0.937 and 0.898-0.933 alike. The seed moves the held-out figures
more than the setting does, so it stays off; without subsampling CV did not prefer it either (0.25: 0.893,
0.5: 0.890, against 0.894 off). ``n_bags`` (default 1) averages boosters fitted with seeds
seed, seed + 1, ... into one booster of ``n_estimators`` trees; it differs from one booster only with
subsampling (CV, with subsampling 0.8: 3 × 100 trees at learning rate 0.3, top-1 0.891 against 0.882).

No subsampling (default since the fifth session; ``subsample`` and ``colsample_bytree`` 1.0, were 0.8):
with row and column sampling, XGBoost's seed alone moved the held-out top-1 between 0.898 and 0.937 and the
worst problem between 0.077 and 0.696 (seeds 0-3, same data and settings), more than any setting did.
Without it the fit is deterministic, and grouped 5-fold CV over the 286 training problems (fold seeds 0-3)
preferred it on every figure: top-1 0.894 against 0.882, worst 0.115 against 0.086, top-5 0.967 against
0.958, worst top-5 0.530 against 0.196, log-RMSE 0.270 against 0.271 (``max_bin`` 1024: 0.888).

Depth 10 since the twelfth session: on its 1,045 training problems grouped 5-fold CV preferred it to
depth 8 on every one of 8 fold seeds (top-1 0.939 against 0.930; ``benchmarks/experiments/capacity_cv.py``,
BENCHMARKS §4), where on ~300 problems depth 8 had been better. Depth 12 grown loss-guided (best leaf first,
``max_leaves`` 768 a tree) since the fifteenth session: on its 2,495 training problems grouped 5-fold CV
preferred it to depth 10 on every fold seed (0.958 / 0.957 / 0.958 against 0.953 / 0.954 / 0.953 on fold seeds
1-3; 11.2% of test problems below 0.90 against 13.3%), at about depth 10's size (depth-10 trees hold ~700-850
leaves; unrestricted depth-12 trees about three times the nodes, the reason the fourteenth session did not ship
depth 12's own +0.004). The other defaults (learning rate 0.1,
300 trees) are what grouped
cross-validation over the training problems preferred, or could not tell apart, among ~45 settings
(depth 4-12, learning rate 0.03-0.2 with 150-1000 trees, min_child_weight 1-50, column sampling
0.3-1, L2 1-100, pseudo-Huber loss, target caps, near-best and hopeless weights, bagging): all lay
within 0.73-0.81 top-1, differences of the size of the folds' noise; more trees cost the predictor
time on every call and its export-time precomputation, so 300 stay.

Centring (``center_problems``, default since the seventh session): the booster's target is ln(time /
roofline) minus its problem's weighted mean (with the weights above), so that every split of its
``n_estimators`` trees goes to telling one problem's candidates apart, which is all a pick needs. The problem's
level (that mean) is learnt by ``level_estimators`` trees of depth ``level_max_depth`` from the problem's own
columns (:data:`~tilecost.features.PROBLEM_FEATURES`; one row per training problem, every other column
missing, so no level tree can read a configuration), appended after the main trees into the one booster:
its prediction stays ln(time / roofline), and the predicted µs stay times. A predictor ranks with the main
trees and adds the level once per query (``ArtifactMetadata.level_trees``). On grouped 5-fold CV over the 310
H200 training problems (fold seeds 0-1, held-out unread): top-1 0.902 against 0.872 uncentred, worst 0.192
against 0.055, top-5 0.964 against 0.958; log-RMSE 0.332 against 0.284 (the level trees' error adds to the
predicted µs); 100 level trees of depth 4 ranked alike at log-RMSE 0.336. With fold seeds 0-3 and the level
as each fit fold's mean (``benchmarks/experiments/centered_target_cv.py``): 0.901 against 0.883, better on
every seed.

``rank_rounds`` > 0 adds that many trees fitted with XGBoost's pairwise ranking objective
(``rank:pairwise``, one query per problem, relevance falling by one grade per 1/16 octave slower
than the problem's best) on top of the regression, starting from its predictions, negated into the
same booster. Pairwise gradients sum to zero within each problem, so the level of a problem's
predicted times stays where the regression put it while its candidates are reordered; their spread
does not: 100 such rounds raised cross-validated top-1 from 0.78 to 0.84 and top-5 from 0.89 to
0.95, but log-RMSE from 0.39 to 2.5 (and the held-out top-1 not at all), so the default is 0: the
exported model's µs are meant to be times.
"""

from __future__ import annotations

import inspect
import os
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from tilecost.errors import NotFittedError
from tilecost.features import FEATURE_NAMES, PROBLEM_FEATURES
from tilecost.predict.artifact import TARGETS

__all__ = ["TARGETS", "CostModel", "from_target", "to_target"]

_DTYPE_COLUMNS = [FEATURE_NAMES.index(f"dtype_{d}") for d in ("fp16", "bf16", "fp32", "fp8")]
_LAYOUT_NT = FEATURE_NAMES.index("layout_nt")
_PROBLEM_COLUMNS = len(PROBLEM_FEATURES)  # the first columns of the feature matrix


def _joined_booster(boosters: list[Any], scales: list[float]) -> Any:
    """One booster whose margin is ``boosters[0]``'s base score plus, for each booster, its trees'
    margin times its scale: their trees one booster after the other, each leaf multiplied by its
    booster's scale. Only the first booster's base score is kept."""
    import json

    import xgboost as xgb

    models = [json.loads(b.save_raw("json")) for b in boosters]
    merged = models[0]
    model = merged["learner"]["gradient_booster"]["model"]
    trees: list[dict[str, Any]] = []
    for m, scale in zip(models, scales, strict=True):
        for tree in m["learner"]["gradient_booster"]["model"]["trees"]:
            tree["split_conditions"] = [
                v * scale if left == -1 else v
                for v, left in zip(tree["split_conditions"], tree["left_children"], strict=True)
            ]
            tree["base_weights"] = [w * scale for w in tree["base_weights"]]
            tree["id"] = len(trees)
            trees.append(tree)
    model["trees"] = trees
    model["tree_info"] = [0] * len(trees)
    model["iteration_indptr"] = list(range(len(trees) + 1))
    model["gbtree_model_param"]["num_trees"] = str(len(trees))
    out = xgb.Booster()
    out.load_model(bytearray(json.dumps(merged).encode()))
    return out


def _average_boosters(boosters: list[Any]) -> Any:
    """One booster predicting the mean of ``boosters``' margins (:func:`_joined_booster`, every leaf
    divided by their number). They must share the base score (XGBoost estimates it from the labels,
    which the bags share)."""
    import json

    bases = {json.loads(b.save_config())["learner"]["learner_model_param"]["base_score"] for b in boosters}
    if len(bases) != 1:
        raise ValueError(f"boosters with different base scores {sorted(bases)} cannot be averaged")
    return _joined_booster(boosters, [1.0 / len(boosters)] * len(boosters))


def _kind_of_rows(X: NDArray[np.float64]) -> NDArray[np.intp]:
    """Each feature row's (dtype, layout) kind as 0..7, read off its one-hot dtype and layout columns."""
    return np.argmax(X[:, _DTYPE_COLUMNS], axis=1) * 2 + (X[:, _LAYOUT_NT] > 0.5)


def _problem_weight_rows(problem_weight: ArrayLike, rows: int, rank_rounds: int) -> NDArray[np.float64]:
    """``fit``'s ``problem_weight`` checked: one positive finite value a row; not with a ranking stage."""
    if rank_rounds:
        raise ValueError(f"problem_weight cannot be given with rank_rounds={rank_rounds}: the ranking stage weighs "
                         "every problem alike; use rank_rounds=0")  # fmt: skip
    weight = np.asarray(problem_weight)
    if weight.dtype == bool or not np.issubdtype(weight.dtype, np.number):
        raise ValueError(f"problem_weight has dtype {weight.dtype}; give one positive finite number a row")
    weight = weight.astype(np.float64)
    if weight.shape != (rows,):
        raise ValueError(f"problem_weight has shape {weight.shape}; give one value a row ({rows},)")
    if not (np.isfinite(weight) & (weight > 0)).all():
        raise ValueError("problem_weight must be positive and finite in every row")
    return weight


def _per_problem(row_weight: NDArray[np.float64], problem: NDArray[np.intp], problems: int) -> NDArray[np.float64]:
    """Each problem's weight from its rows' ``problem_weight``, refusing a problem whose rows differ."""
    first = np.zeros(problems)
    first[problem] = row_weight
    if not np.array_equal(first[problem], row_weight):
        raise ValueError("problem_weight differs between rows of one problem; give every row its problem's weight")
    return first


_ROOFLINE = FEATURE_NAMES.index("log2_roofline_time_us")
_LN2 = float(np.log(2.0))
# Relevance grades for the ranking stage: 31 for the best measured of a problem, one grade less per
# 1/16 octave (4.4%) slower, 0 from 3.7x slower on: pairs are formed between differing grades only.
_GRADES_PER_OCTAVE = 16
_TOP_GRADE = 31


def to_target(time_us: ArrayLike, features: NDArray[np.float64], target: str) -> NDArray[np.float64]:
    """The booster's label for measured times (see the module docstring)."""
    y = np.log(np.asarray(time_us, dtype=np.float64))
    if target == "log_time_over_roofline":
        return y - _LN2 * features[:, _ROOFLINE]
    if target == "log_time_us":
        return y
    raise ValueError(f"target={target!r} is not allowed; use one of {TARGETS}")


def from_target(y: ArrayLike, features: NDArray[np.float64], target: str) -> NDArray[np.float64]:
    """Predicted µs from the booster's output: the inverse of :func:`to_target`."""
    y = np.asarray(y, dtype=np.float64)
    if target == "log_time_over_roofline":
        return np.exp(y + _LN2 * features[:, _ROOFLINE])
    if target == "log_time_us":
        return np.exp(y)
    raise ValueError(f"target={target!r} is not allowed; use one of {TARGETS}")


class CostModel:
    """Predicts a configuration's time in µs on a problem from the feature matrix.

    scikit-learn conventions: the constructor stores its keyword arguments and does nothing else;
    :meth:`fit` validates, fits and returns ``self``; fitted state ends in ``_``; :meth:`predict`
    before :meth:`fit` raises :class:`~tilecost.errors.NotFittedError`. ``seed`` fixes XGBoost's
    row and column sampling; ``n_jobs`` its threads (default: all cores).
    """

    def __init__(
        self,
        *,
        target: str = "log_time_over_roofline",
        n_estimators: int = 300,
        max_depth: int = 12,
        max_leaves: int = 768,
        learning_rate: float = 0.1,
        subsample: float = 1.0,
        colsample_bytree: float = 1.0,
        min_child_weight: float = 1.0,
        reg_lambda: float = 1.0,
        max_bin: int = 256,
        balance_problems: bool = True,
        hopeless_weight: float = 1.0,
        hopeless_keep: float = 1.0,
        fast_halflife_octaves: float = 0.5,
        fast_weight_floor: float = 0.0,
        tiny_best_us: float = 0.0,
        tiny_weight: float = 1.0,
        balance_kinds: float = 0.0,
        n_bags: int = 1,
        rank_rounds: int = 0,
        rank_learning_rate: float = 0.05,
        center_problems: bool = True,
        level_estimators: int = 200,
        level_max_depth: int = 6,
        seed: int = 0,
        n_jobs: int | None = None,
    ) -> None:
        self.target = target
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.max_leaves = max_leaves
        self.learning_rate = learning_rate
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.min_child_weight = min_child_weight
        self.reg_lambda = reg_lambda
        self.max_bin = max_bin
        self.balance_problems = balance_problems
        self.hopeless_weight = hopeless_weight
        self.hopeless_keep = hopeless_keep
        self.fast_halflife_octaves = fast_halflife_octaves
        self.fast_weight_floor = fast_weight_floor
        self.tiny_best_us = tiny_best_us
        self.tiny_weight = tiny_weight
        self.balance_kinds = balance_kinds
        self.n_bags = n_bags
        self.rank_rounds = rank_rounds
        self.rank_learning_rate = rank_learning_rate
        self.center_problems = center_problems
        self.level_estimators = level_estimators
        self.level_max_depth = level_max_depth
        self.seed = seed
        self.n_jobs = n_jobs

    # ------------------------------------------------------------------ scikit-learn protocol
    @classmethod
    def _param_names(cls) -> list[str]:
        return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        del deep
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> CostModel:
        known = self._param_names()
        for name, value in params.items():
            if name not in known:
                raise ValueError(f"{name!r} is not a parameter of CostModel; use one of {known}")
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        defaults = CostModel().get_params()
        changed = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items() if v != defaults[k])
        return f"CostModel({changed})"

    # ------------------------------------------------------------------ fitting
    def xgb_params(self) -> dict[str, Any]:
        """The XGBoost training parameters these settings resolve to (also logged to MLflow)."""
        return {
            "objective": "reg:squarederror",
            "tree_method": "hist",
            "max_depth": self.max_depth,
            "eta": self.learning_rate,
            "subsample": self.subsample,
            "colsample_bytree": self.colsample_bytree,
            "min_child_weight": self.min_child_weight,
            "lambda": self.reg_lambda,
            "max_bin": self.max_bin,
            **({"grow_policy": "lossguide", "max_leaves": self.max_leaves} if self.max_leaves else {}),
            "seed": self.seed,
            "nthread": self.n_jobs or os.cpu_count() or 1,
        }

    def _validate(self) -> None:
        if self.target not in TARGETS:
            raise ValueError(f"target={self.target!r} is not allowed; use one of {TARGETS}")
        if not isinstance(self.center_problems, bool):
            raise ValueError(f"center_problems={self.center_problems!r} must be True or False")
        for name in ("n_estimators", "max_depth", "max_bin", "n_bags", "level_estimators", "level_max_depth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} must be a positive int")
        for name in ("rank_rounds", "max_leaves"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name}={value!r} must be a non-negative int (0: off)")
        for name in ("learning_rate", "subsample", "colsample_bytree", "rank_learning_rate", "hopeless_keep"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0 < value <= 1):
                raise ValueError(f"{name}={value!r} must lie in (0, 1]")
        for name in ("hopeless_weight", "tiny_weight"):
            value = getattr(self, name)
            if isinstance(value, bool) or not (isinstance(value, (int, float)) and value > 0):
                raise ValueError(f"{name}={value!r} must be positive")
        for name in ("fast_halflife_octaves", "tiny_best_us", "balance_kinds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not (isinstance(value, (int, float)) and value >= 0):
                raise ValueError(f"{name}={value!r} must be non-negative (0: off)")
        if not (isinstance(self.fast_weight_floor, (int, float)) and 0 <= self.fast_weight_floor <= 1):
            raise ValueError(f"fast_weight_floor={self.fast_weight_floor!r} must lie in [0, 1]")

    def fit(
        self,
        X: ArrayLike,
        time_us: ArrayLike,
        *,
        groups: ArrayLike,
        hopeless: ArrayLike | None = None,
        problem_weight: ArrayLike | None = None,
    ) -> CostModel:
        """Fit on feature rows ``X``, measured ``time_us`` and each row's problem id ``groups``.

        ``hopeless`` marks rows whose time is a screening bound (weighted by ``hopeless_weight``); with
        ``hopeless_keep`` < 1 a seeded fraction of them is kept, weighted by ``hopeless_weight / hopeless_keep``.
        ``problem_weight`` (one value a row, the same for every row of a problem, positive and finite; default
        all 1) counts a problem of weight R as R problems: the same fit, up to the quantile sketch and the order
        of sums, as its rows given R times under R problem ids, without the copies. Not with ``rank_rounds``.
        """
        import xgboost as xgb

        self._validate()
        X = np.asarray(X, dtype=np.float64)
        time_us = np.asarray(time_us, dtype=np.float64)
        groups = np.asarray(groups)
        if X.ndim != 2 or X.shape[1] != len(FEATURE_NAMES):
            raise ValueError(f"X has shape {X.shape}; expected (rows, {len(FEATURE_NAMES)}) columns FEATURE_NAMES")
        if len(time_us) != len(X) or len(groups) != len(X):
            raise ValueError(f"X has {len(X)} rows, time_us {len(time_us)}, groups {len(groups)}: give one each")
        if len(X) == 0:
            raise ValueError("no rows to fit")
        if not (np.isfinite(time_us) & (time_us > 0)).all():
            raise ValueError("time_us must be positive and finite")
        if not np.isfinite(X).all():
            raise ValueError("X has non-finite values; build it with tilecost.features.feature_matrix")
        row_weight = None if problem_weight is None else _problem_weight_rows(problem_weight, len(X), self.rank_rounds)
        thinned = None  # the screening bounds kept by ``hopeless_keep`` < 1
        if hopeless is not None and self.hopeless_keep < 1:
            hopeless = np.asarray(hopeless, dtype=bool)
            kept = ~hopeless | (np.random.default_rng(self.seed).random(len(X)) < self.hopeless_keep)
            X, time_us, groups, thinned = X[kept], time_us[kept], groups[kept], hopeless[kept]
            hopeless = thinned
            row_weight = None if row_weight is None else row_weight[kept]
        problem_ids, inverse = np.unique(groups, return_inverse=True)
        per_problem = None if row_weight is None else _per_problem(row_weight, inverse, len(problem_ids))
        kind = _kind_of_rows(X) if self.balance_kinds else None
        weight = self.sample_weight(time_us, inverse, hopeless, kind=kind, problem_weight=per_problem)
        if thinned is not None:  # the kept screening bounds stand for the dropped ones too
            weight[thinned] /= self.hopeless_keep
        y = to_target(time_us, X, self.target)
        params = self.xgb_params()
        names = list(FEATURE_NAMES)
        level = None
        if self.center_problems:  # each problem's weighted mean target: the level booster's label
            level = np.bincount(inverse, weights=weight * y) / np.bincount(inverse, weights=weight)
            y = y - level[inverse]
        # Quantised once, straight from X: the same bins and trees as a DMatrix (identical predictions on all of the
        # twenty-ninth session's 2.48M training rows) without a float copy of X; fit time the same within this
        # machine's noise (-6% in one run, +4% in another: BENCHMARKS §4).
        dtrain = xgb.QuantileDMatrix(X, y, weight=weight, feature_names=names, max_bin=self.max_bin)
        if self.n_bags == 1:
            booster = xgb.train(params, dtrain, num_boost_round=self.n_estimators)
        else:
            per_bag = self.n_estimators // self.n_bags
            bags = [
                xgb.train({**params, "seed": self.seed + b}, dtrain, num_boost_round=per_bag)
                for b in range(self.n_bags)
            ]
            booster = _average_boosters(bags)
        if self.rank_rounds:
            booster = self._rank_stage(booster, X, time_us, inverse, params)
        self.level_trees_ = 0
        if level is not None:  # the level trees go last, so that a predictor can rank with the others
            level_booster = self._level_booster(X, inverse, level, params, per_problem)
            booster = _joined_booster([booster, level_booster], [1.0, 1.0])
            self.level_trees_ = self.level_estimators
        self.booster_ = booster
        self.n_features_in_ = X.shape[1]
        self.feature_names_ = tuple(FEATURE_NAMES)
        self.target_ = self.target
        self.n_problems_ = len(problem_ids)
        return self

    def _level_booster(
        self, X: NDArray[np.float64], problem: NDArray[np.intp], level: NDArray[np.float64], params: dict[str, Any],
        problem_weight: NDArray[np.float64] | None = None,
    ) -> Any:  # fmt: skip
        """Trees of each problem's level (``center_problems``) from its problem columns alone.

        One row per problem: its :data:`~tilecost.features.PROBLEM_FEATURES` columns, every other column
        missing, so no tree can split on a configuration; labels ``level``, problems weighted equally (or by
        ``problem_weight``), base score 0 so that the trees alone carry the level when they are appended to the
        main booster.
        """
        import xgboost as xgb

        first = np.unique(problem, return_index=True)[1]
        rows = np.full((len(first), X.shape[1]), np.nan)
        rows[:, :_PROBLEM_COLUMNS] = X[first, :_PROBLEM_COLUMNS]
        # The main trees' growth policy carries over (loss-guided with ``max_leaves``; the leaf budget cannot
        # bind at level_max_depth 6): the shipped models and their CV were fitted so.
        level_params = {**params, "max_depth": self.level_max_depth, "base_score": 0.0, "subsample": 1.0,
                        "colsample_bytree": 1.0}  # fmt: skip
        dlevel = xgb.DMatrix(rows, level, weight=problem_weight, feature_names=list(FEATURE_NAMES))
        return xgb.train(level_params, dlevel, num_boost_round=self.level_estimators)

    def sample_weight(
        self,
        time_us: NDArray[np.float64],
        problem: NDArray[np.intp],
        hopeless: ArrayLike | None = None,
        kind: NDArray[np.intp] | None = None,
        problem_weight: NDArray[np.float64] | None = None,
    ) -> NDArray[np.float64]:
        """Each row's training weight (module docstring, "Weights"), from its time and problem index.

        ``problem`` numbers the rows' problems 0..P-1. The near-best factor
        ``max(floor, 2 ** -(octaves / fast_halflife_octaves))``, ``octaves = log2(time / problem's best)``,
        is applied first; ``balance_problems`` then gives every problem the same total weight (the
        mean row count), so the factor moves weight within a problem, not between problems;
        hopeless and tiny-problem factors multiply last. ``problem_weight`` (one value a problem) counts
        problem p as ``problem_weight[p]`` problems, in the mean row count, in its own total and in its kind's
        problem count: the weights its rows would sum to if they were given that many times.
        """
        counts = np.bincount(problem)
        copies = None if problem_weight is None else np.asarray(problem_weight, dtype=np.float64)
        mean_count = counts.mean() if copies is None else copies @ counts / copies.sum()
        best = np.full(len(counts), np.inf)
        np.minimum.at(best, problem, time_us)
        weight = np.ones(len(time_us))
        if self.fast_halflife_octaves:
            octaves = np.log2(time_us / best[problem])
            weight = np.maximum(self.fast_weight_floor, np.exp2(-octaves / self.fast_halflife_octaves))
        if self.balance_problems:
            weight *= mean_count / np.bincount(problem, weights=weight)[problem]
        if copies is not None:
            weight *= copies[problem]
        if hopeless is not None:
            weight[np.asarray(hopeless, dtype=bool)] *= self.hopeless_weight
        if self.tiny_best_us:
            weight[best[problem] < self.tiny_best_us] *= self.tiny_weight
        if self.balance_kinds and kind is not None:
            # A problem of a (dtype, layout) kind with P problems gets (mean P / P) ** balance_kinds.
            kind = np.asarray(kind)
            problem_kind = np.zeros(len(counts), dtype=np.intp)
            problem_kind[problem] = kind
            per_kind = np.bincount(problem_kind, weights=copies)  # copies None: a count a problem
            present = per_kind[per_kind > 0]
            factor = (present.mean() / np.maximum(per_kind, 1)) ** self.balance_kinds
            weight *= factor[problem_kind[problem]]
        return weight

    def _rank_stage(
        self, booster: Any, X: NDArray[np.float64], time_us: NDArray[np.float64], problem: NDArray[np.intp],
        params: dict[str, Any],
    ) -> Any:  # fmt: skip
        """Continue ``booster`` with ``rank_rounds`` pairwise-ranking trees (module docstring).

        The ranking objective wants larger scores for better candidates, the regression smaller
        times, so the ranking stage sees negated labels' order: its label is a relevance grade
        that falls with time, and its trees fit the negated margin. Implemented by training on the
        negated base margin and negating the new trees' leaves back into one booster.
        """

        import xgboost as xgb

        order = np.argsort(problem, kind="stable")
        best = np.full(problem.max() + 1, np.inf)
        np.minimum.at(best, problem, time_us)
        octaves = np.log2(time_us / best[problem])
        grade = np.maximum(0.0, _TOP_GRADE - np.round(octaves * _GRADES_PER_OCTAVE))
        names = list(FEATURE_NAMES)
        drank = xgb.DMatrix(X[order], grade[order], qid=problem[order], feature_names=names)
        drank.set_base_margin(-booster.predict(drank, output_margin=True))
        rank_params = {**params, "objective": "rank:pairwise", "eta": self.rank_learning_rate}
        ranker = xgb.train(rank_params, drank, num_boost_round=self.rank_rounds)
        # Append the ranker's trees, leaves negated, to the regression booster: one model predicting
        # regression margin - ranker margin, i.e. still the target.
        return _joined_booster([booster, ranker], [1.0, -1.0])

    # ------------------------------------------------------------------ predicting
    def _check_fitted(self) -> None:
        if not hasattr(self, "booster_"):
            raise NotFittedError("this CostModel is not fitted yet; call fit(X, time_us, groups=...) first")

    def predict_target(self, X: ArrayLike) -> NDArray[np.float64]:
        """The booster's raw prediction of the target for feature rows ``X``."""
        self._check_fitted()
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has shape {X.shape}; this model was fitted on {self.n_features_in_} columns")
        return np.asarray(self.booster_.inplace_predict(X), dtype=np.float64)

    def predict(self, X: ArrayLike) -> NDArray[np.float64]:
        """Predicted time in µs of each feature row."""
        X = np.asarray(X, dtype=np.float64)
        return from_target(self.predict_target(X), X, self.target_)

    # ------------------------------------------------------------------ interchange
    def model_json(self) -> bytes:
        """The booster in XGBoost's JSON model format."""
        self._check_fitted()
        return bytes(self.booster_.save_raw("json"))

    def model_ubjson(self) -> bytes:
        """The booster in XGBoost's UBJSON model format (what an exported artifact stores: ``model.ubj``)."""
        self._check_fitted()
        return bytes(self.booster_.save_raw("ubj"))

    @classmethod
    def from_booster(cls, booster: Any, target: str, level_trees: int = 0) -> CostModel:
        """A fitted model around an existing booster (a loaded artifact, an MLflow champion);
        ``level_trees`` as the artifact's metadata records it."""
        if target not in TARGETS:
            raise ValueError(f"target={target!r} is not allowed; use one of {TARGETS}")
        names = booster.feature_names
        if names is not None and tuple(names) != tuple(FEATURE_NAMES):
            raise ValueError("the booster was trained on other feature columns than FEATURE_NAMES")
        model = cls(target=target)
        model.booster_ = booster
        model.n_features_in_ = booster.num_features()
        model.feature_names_ = tuple(FEATURE_NAMES)
        model.target_ = target
        model.level_trees_ = level_trees
        return model
