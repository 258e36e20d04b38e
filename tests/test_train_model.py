"""CostModel follows scikit-learn's conventions, and its target transforms invert each other."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_train_fixtures import write_dataset
from tilecost.device import load_device
from tilecost.errors import NotFittedError
from tilecost.features import FEATURE_NAMES
from tilecost.train.dataset import load_measurements
from tilecost.train.model import TARGETS, CostModel, from_target, to_target
from tilecost.train.pipeline import build_features, split_by_role

DEVICE = load_device("h200")
SMALL = {"n_estimators": 20, "max_depth": 4, "n_jobs": 1}


@pytest.fixture(scope="module")
def training(tmp_path_factory: pytest.TempPathFactory):
    root = write_dataset(tmp_path_factory.mktemp("model") / "ds")
    train, heldout = split_by_role(load_measurements(root, "h200"))
    return train, build_features(train, DEVICE), heldout


def _fit(training, **params) -> CostModel:
    train, X, _ = training
    return CostModel(**{**SMALL, **params}).fit(X, train["time_us"], groups=train["problem_key"])


def test_constructor_only_stores_its_arguments() -> None:
    model = CostModel(max_depth=3, target="nonsense")  # validated in fit, not here

    assert model.get_params()["max_depth"] == 3
    assert not [name for name in vars(model) if name.endswith("_")]
    assert "max_depth=3" in repr(model)


def test_set_params_refuses_unknown_names() -> None:
    model = CostModel().set_params(max_depth=5)
    assert model.max_depth == 5
    with pytest.raises(ValueError, match="'depth' is not a parameter"):
        model.set_params(depth=5)


def test_predict_before_fit_raises_not_fitted() -> None:
    with pytest.raises(NotFittedError, match="not fitted"):
        CostModel().predict(np.zeros((1, len(FEATURE_NAMES))))


def test_fit_returns_self_with_fitted_attributes(training) -> None:
    model = CostModel(**SMALL)
    train, X, _ = training

    assert model.fit(X, train["time_us"], groups=train["problem_key"]) is model
    assert model.n_features_in_ == len(FEATURE_NAMES)
    assert model.target_ == "log_time_over_roofline"
    assert model.n_problems_ == train["problem_key"].nunique()
    predicted = model.predict(X)
    assert predicted.shape == (len(X),) and (predicted > 0).all()


def test_same_seed_same_model_and_the_seed_matters(training) -> None:
    a = _fit(training, seed=1, subsample=0.5)
    b = _fit(training, seed=1, subsample=0.5)
    c = _fit(training, seed=2, subsample=0.5)
    X = training[1]

    assert np.array_equal(a.predict(X), b.predict(X))
    assert not np.array_equal(a.predict(X), c.predict(X))


@pytest.mark.parametrize("target", TARGETS)
def test_both_targets_predict_microseconds(training, target: str) -> None:
    train, X, _ = training
    model = _fit(training, target=target, n_estimators=60)

    error = np.log(model.predict(X)) - np.log(train["time_us"].to_numpy())

    assert np.sqrt(np.mean(error**2)) < 0.5  # learns the synthetic times it was fitted on


@pytest.mark.parametrize("target", TARGETS)
def test_target_transform_round_trips(training, target: str) -> None:
    train, X, _ = training
    times = train["time_us"].to_numpy()

    assert np.allclose(from_target(to_target(times, X, target), X, target), times)


def test_ratio_target_is_time_over_the_roofline_feature(training) -> None:
    # log2_roofline_time_us = 3 means 8 µs: a measured 24 µs is ln(24 / 8) = ln 3.
    X = np.zeros((1, len(FEATURE_NAMES)))
    X[0, FEATURE_NAMES.index("log2_roofline_time_us")] = 3.0

    assert to_target([24.0], X, "log_time_over_roofline")[0] == pytest.approx(np.log(3.0))


def test_bad_inputs_name_the_problem(training) -> None:
    train, X, _ = training
    with pytest.raises(ValueError, match="target='speed'"):
        CostModel(target="speed").fit(X, train["time_us"], groups=train["problem_key"])
    with pytest.raises(ValueError, match="columns"):
        CostModel().fit(X[:, :5], train["time_us"], groups=train["problem_key"])
    with pytest.raises(ValueError, match="time_us must be positive"):
        CostModel().fit(X, -train["time_us"], groups=train["problem_key"])
    with pytest.raises(ValueError, match="learning_rate"):
        CostModel(learning_rate=2.0).fit(X, train["time_us"], groups=train["problem_key"])


def test_model_json_round_trips_through_from_booster(training) -> None:
    import xgboost as xgb

    model = _fit(training)
    X = training[1]
    booster = xgb.Booster()
    booster.load_model(bytearray(model.model_json()))

    again = CostModel.from_booster(booster, model.target_)

    assert np.allclose(again.predict(X), model.predict(X), rtol=1e-6)


def test_rank_stage_keeps_predicting_microseconds(training) -> None:
    train, X, _ = training
    plain = _fit(training, n_estimators=40)
    ranked = _fit(training, n_estimators=40, rank_rounds=10)
    times = train["time_us"].to_numpy()

    # 40 regression trees, 10 ranking trees and the level trees last, one booster
    assert len(ranked.booster_.get_dump()) == 50 + ranked.level_estimators and ranked.level_trees_ == 200
    error = np.log(ranked.predict(X)) - np.log(times)
    assert np.sqrt(np.mean(error**2)) < 2 * np.sqrt(np.mean((np.log(plain.predict(X)) - np.log(times)) ** 2)) + 0.2


def test_grouped_cross_validation_ranks_every_training_problem_out_of_fold(training) -> None:
    from tilecost.train.pipeline import grouped_cross_validation

    train, X, _ = training

    evaluation = grouped_cross_validation(CostModel(**SMALL), train, X, folds=4, seed=0)

    assert sorted(r.problem.key for r in evaluation.problems) == sorted(train["problem_key"].unique())
    assert 0 < evaluation.summary()["top1_geomean"] <= 1
    with pytest.raises(ValueError, match="cannot fill 99 folds"):
        grouped_cross_validation(CostModel(**SMALL), train, X, folds=99)


def test_bagged_model_predicts_the_mean_of_its_bags(training) -> None:
    # n_bags=3 with 30 trees: three boosters of 10 trees (seeds 0, 1, 2) merged into one of 30 trees
    # whose margin is their mean, so the predictor scores it like any other booster.
    import xgboost as xgb

    train, X, _ = training
    bagged = _fit(training, n_estimators=30, n_bags=3, seed=0, center_problems=False)
    singles = [_fit(training, n_estimators=10, seed=s, center_problems=False) for s in range(3)]

    assert bagged.booster_.num_boosted_rounds() == 30
    mean = np.mean([m.predict_target(X) for m in singles], axis=0)
    assert bagged.predict_target(X) == pytest.approx(mean, abs=1e-5)
    reloaded = xgb.Booster()
    reloaded.load_model(bytearray(bagged.model_json()))
    assert reloaded.inplace_predict(X) == pytest.approx(mean, abs=1e-5)


def test_bad_bag_count_is_refused_at_fit(training) -> None:
    with pytest.raises(ValueError, match="n_bags"):
        _fit(training, n_bags=0)


def test_centred_model_appends_level_trees_that_read_only_the_problem_columns(training) -> None:
    import json

    from tilecost.features import PROBLEM_FEATURES

    train, X, _ = training
    model = _fit(training, n_estimators=30, level_estimators=60, level_max_depth=3)
    trees = json.loads(model.model_json())["learner"]["gradient_booster"]["model"]["trees"]

    assert len(trees) == 90 and model.level_trees_ == 60
    for tree in trees[-60:]:  # the level trees split on problem columns only
        splits = [f for f, left in zip(tree["split_indices"], tree["left_children"], strict=True) if left != -1]
        assert all(f < len(PROBLEM_FEATURES) for f in splits), splits
    # Within a problem the level is one constant: the ranking is the main trees' alone.
    import xgboost as xgb

    dm = xgb.DMatrix(X, feature_names=list(FEATURE_NAMES))
    full = model.booster_.predict(dm, output_margin=True)
    main = model.booster_.predict(dm, output_margin=True, iteration_range=(0, 30))
    for _, index in train.groupby("problem_key").indices.items():
        assert np.ptp(full[index] - main[index]) < 1e-5
    # And the predicted times remain times: as close to the measured as the uncentred model's, about.
    times = train["time_us"].to_numpy()
    plain = _fit(training, n_estimators=30, center_problems=False)
    assert plain.level_trees_ == 0 and len(plain.booster_.get_dump()) == 30

    def rmse(m: CostModel) -> float:
        return float(np.sqrt(np.mean((np.log(m.predict(X)) - np.log(times)) ** 2)))

    assert rmse(model) < 1.5 * rmse(plain) + 0.1


def test_bad_centring_settings_are_refused_at_fit(training) -> None:
    with pytest.raises(ValueError, match="center_problems"):
        _fit(training, center_problems="yes")
    with pytest.raises(ValueError, match="level_estimators"):
        _fit(training, level_estimators=0)


def test_max_leaves_grows_deep_trees_best_leaf_first_within_the_leaf_budget(training) -> None:
    import json

    limited = _fit(training, max_depth=8, max_leaves=6, n_estimators=10, level_estimators=5)
    free = _fit(training, max_depth=8, max_leaves=0, n_estimators=10, level_estimators=5)
    assert limited.xgb_params()["grow_policy"] == "lossguide" and "grow_policy" not in free.xgb_params()

    def leaves(model: CostModel) -> list[int]:
        trees = json.loads(model.model_json())["learner"]["gradient_booster"]["model"]["trees"]
        return [sum(left == -1 for left in tree["left_children"]) for tree in trees[:10]]  # the main trees

    assert max(leaves(limited)) <= 6 < max(leaves(free))
    with pytest.raises(ValueError, match="max_leaves"):
        _fit(training, max_leaves=-1)


def test_fit_grows_the_trees_xgboost_grows_from_a_plain_dmatrix(training) -> None:
    """The fit quantises X once (QuantileDMatrix); the trees must stay those of XGBoost's float DMatrix."""
    import xgboost as xgb

    train, X, _ = training
    model = _fit(training, center_problems=False)
    groups = np.unique(train["problem_key"], return_inverse=True)[1]
    weight = model.sample_weight(train["time_us"].to_numpy(), groups)
    y = to_target(train["time_us"].to_numpy(), X, model.target)
    plain = xgb.train(model.xgb_params(), xgb.DMatrix(X, y, weight=weight, feature_names=list(FEATURE_NAMES)),
                      num_boost_round=model.n_estimators)  # fmt: skip

    assert np.array_equal(model.booster_.inplace_predict(X), plain.inplace_predict(X))
