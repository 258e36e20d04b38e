"""CostModel's row weights: problems balanced, fast configurations emphasised, tiny problems damped."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_train_fixtures import write_dataset
from tilecost.device import load_device
from tilecost.train.dataset import load_measurements
from tilecost.train.model import CostModel
from tilecost.train.pipeline import build_features, split_by_role

DEVICE = load_device("h200")
SMALL = {"n_estimators": 20, "max_depth": 4, "n_jobs": 1}


@pytest.fixture(scope="module")
def training(tmp_path_factory: pytest.TempPathFactory):
    root = write_dataset(tmp_path_factory.mktemp("weights") / "ds")
    train, _ = split_by_role(load_measurements(root, "h200"))
    _, problem = np.unique(train["problem_key"].to_numpy(), return_inverse=True)
    return train, build_features(train, DEVICE), problem


def test_halflife_halves_the_weight_per_halflife_slower_than_the_problems_best() -> None:
    # One problem, times 10, 20, 40 µs: 0, 1 and 2 octaves slower than its best. Half-life 1 octave:
    # factors 1, 1/2, 1/4 (sum 1.75); balanced to a total of 3 (the mean row count): 3/1.75 = 12/7 each.
    model = CostModel(fast_halflife_octaves=1.0)

    weight = model.sample_weight(np.array([10.0, 20.0, 40.0]), np.array([0, 0, 0]))

    assert weight == pytest.approx(np.array([1.0, 0.5, 0.25]) * 12 / 7)


def test_floor_bounds_the_weight_of_slow_configurations() -> None:
    # 4 octaves slower with half-life 0.5: 2**-8 = 0.0039, raised to the floor 0.1.
    model = CostModel(fast_halflife_octaves=0.5, fast_weight_floor=0.1, balance_problems=False)

    weight = model.sample_weight(np.array([5.0, 80.0]), np.array([0, 0]))

    assert weight == pytest.approx([1.0, 0.1])


def test_default_emphasises_configurations_within_half_an_octave_of_the_best() -> None:
    assert CostModel().fast_halflife_octaves == 0.5  # chosen by grouped CV (train/model.py docstring)


def test_every_problem_keeps_the_same_total_weight(training) -> None:
    train, _, problem = training
    times = train["time_us"].to_numpy()

    settings = ({"fast_halflife_octaves": 0.0}, {}, {"fast_halflife_octaves": 0.25, "fast_weight_floor": 0.05})
    for params in settings:
        totals = np.bincount(problem, weights=CostModel(**params).sample_weight(times, problem))
        assert totals == pytest.approx(np.full(len(totals), len(times) / len(totals))), params


def test_tiny_problems_and_hopeless_rows_are_scaled_after_balancing() -> None:
    # Problem 0 (best 4 µs) is tiny under an 8 µs threshold, problem 1 (best 50 µs) is not; 3 rows in
    # all, 2 problems: each balanced to a total of 1.5, then problem 0's rows x 0.5, a hopeless row x 0.2.
    model = CostModel(fast_halflife_octaves=0.0, tiny_best_us=8.0, tiny_weight=0.5, hopeless_weight=0.2)

    weight = model.sample_weight(
        np.array([4.0, 12.0, 50.0]), np.array([0, 0, 1]), hopeless=np.array([False, True, False])
    )

    assert weight == pytest.approx([0.75 * 0.5, 0.75 * 0.5 * 0.2, 1.5])


def test_balance_kinds_evens_out_the_total_weight_of_dtype_and_layout_kinds() -> None:
    # Three problems of kind 0 (one row each) and one of kind 3; each problem balanced to a total of 1.
    # Kinds hold 3 and 1 problems, mean 2: factors (2/3) ** b and 2 ** b.
    times, problem, kind = np.array([5.0, 6.0, 7.0, 8.0]), np.array([0, 1, 2, 3]), np.array([0, 0, 0, 3])
    base = CostModel(fast_halflife_octaves=0.0)
    full = CostModel(fast_halflife_octaves=0.0, balance_kinds=1.0)
    half = CostModel(fast_halflife_octaves=0.0, balance_kinds=0.5)

    assert base.sample_weight(times, problem, kind=kind) == pytest.approx([1, 1, 1, 1])
    weight = full.sample_weight(times, problem, kind=kind)
    assert weight == pytest.approx([2 / 3, 2 / 3, 2 / 3, 2])
    assert weight[:3].sum() == pytest.approx(weight[3])  # each kind the same total
    assert half.sample_weight(times, problem, kind=kind) == pytest.approx([(2 / 3) ** 0.5] * 3 + [2**0.5])


def test_kinds_are_read_off_the_feature_rows(training) -> None:
    from tilecost.train.model import _kind_of_rows

    train, X, _ = training
    kinds = _kind_of_rows(X)
    order = {"fp16": 0, "bf16": 1, "fp32": 2, "fp8e4m3": 3}
    expected = train["dtype"].map(order).to_numpy() * 2 + (train["layout"] == "nt").to_numpy()
    assert (kinds == expected).all()


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"fast_halflife_octaves": -1.0}, "fast_halflife_octaves"),
        ({"fast_weight_floor": 1.5}, "fast_weight_floor"),
        ({"tiny_best_us": -8.0}, "tiny_best_us"),
        ({"tiny_weight": 0.0}, "tiny_weight"),
        ({"balance_kinds": -0.5}, "balance_kinds"),
        ({"hopeless_keep": 0.0}, "hopeless_keep"),
        ({"hopeless_keep": 1.5}, "hopeless_keep"),
    ],
)
def test_bad_weight_settings_are_refused_at_fit(training, params: dict, message: str) -> None:
    train, X, _ = training
    with pytest.raises(ValueError, match=message):
        CostModel(**{**SMALL, **params}).fit(X, train["time_us"], groups=train["problem_key"])


def test_fast_weighting_fits_the_fast_configurations_closer_and_still_predicts_microseconds(training) -> None:
    train, X, problem = training
    times = train["time_us"].to_numpy()
    best = np.full(problem.max() + 1, np.inf)
    np.minimum.at(best, problem, times)
    near = times <= 1.25 * best[problem]  # within a quarter of their problem's best

    def errors(**params) -> np.ndarray:
        model = CostModel(**{**SMALL, "n_estimators": 60, **params}).fit(X, times, groups=train["problem_key"])
        return np.log(model.predict(X)) - np.log(times)

    plain, weighted = errors(fast_halflife_octaves=0.0), errors(fast_halflife_octaves=0.25)

    assert np.sqrt(np.mean(weighted[near] ** 2)) < np.sqrt(np.mean(plain[near] ** 2))
    assert np.sqrt(np.mean(weighted**2)) < 0.5  # the slow rows still get times, not just an order


def test_hopeless_keep_fits_a_seeded_share_of_the_screening_bounds_weighted_up(training) -> None:
    train, X, _ = training
    times, groups = train["time_us"].to_numpy(), train["problem_key"].to_numpy()
    hopeless = (train["status"] == "hopeless").to_numpy()
    assert 0 < hopeless.sum() < len(hopeless)
    kept = ~hopeless | (np.random.default_rng(3).random(len(X)) < 0.5)

    cut = CostModel(**SMALL, seed=3, hopeless_keep=0.5).fit(X, times, groups=groups, hopeless=hopeless)
    by_hand = CostModel(**SMALL, seed=3, hopeless_weight=2.0).fit(
        X[kept], times[kept], groups=groups[kept], hopeless=hopeless[kept]
    )
    every = CostModel(**SMALL, seed=3).fit(X, times, groups=groups, hopeless=hopeless)

    assert kept.sum() < len(X)
    np.testing.assert_array_equal(cut.predict(X), by_hand.predict(X))  # the same rows, the same weights
    assert not np.array_equal(cut.predict(X), every.predict(X))


def test_problem_weight_gives_each_row_the_weight_it_would_have_if_its_problem_were_repeated() -> None:
    # Problem 0 (3 rows) counts twice, problem 1 (1 row) once, both of kind 0; kind 1's problem 2 (2 rows) once.
    # Repeated by hand: problems 0, 0', 1 and 2 with 3, 3, 1 and 2 rows.
    model = CostModel(fast_halflife_octaves=1.0, balance_kinds=1.0, hopeless_weight=0.5, tiny_best_us=6.0,
                      tiny_weight=0.25)  # fmt: skip
    times = np.array([10.0, 20.0, 40.0, 5.0, 8.0, 16.0])
    problem, kind = np.array([0, 0, 0, 1, 2, 2]), np.array([0, 0, 0, 0, 1, 1])
    hopeless = np.array([False, False, True, False, False, True])
    twice = np.r_[0:3, 0:3, 3:6]

    weighted = model.sample_weight(times, problem, hopeless, kind=kind, problem_weight=np.array([2.0, 1.0, 1.0]))
    repeated = model.sample_weight(
        times[twice], np.array([0, 0, 0, 1, 1, 1, 2, 3, 3]), hopeless[twice], kind=kind[twice]
    )

    # Each row of problem 0 carries what its two copies carry together.
    assert weighted == pytest.approx(np.r_[repeated[0:3] + repeated[3:6], repeated[6:]])


def test_problem_weight_fits_as_the_problems_rows_given_that_many_times(training) -> None:
    train, X, problem = training
    times, groups = train["time_us"].to_numpy(), train["problem_key"].to_numpy().astype(object)
    hopeless = (train["status"] == "hopeless").to_numpy()
    heavy = problem % 3 == 0  # a third of the problems count three times
    copies = np.r_[np.arange(len(X)), np.flatnonzero(heavy), np.flatnonzero(heavy)]
    copy_groups = np.r_[groups, groups[heavy] + "#1", groups[heavy] + "#2"]

    weighted = CostModel(**SMALL).fit(X, times, groups=groups, hopeless=hopeless, problem_weight=np.where(heavy, 3, 1))
    repeated = CostModel(**SMALL).fit(X[copies], times[copies], groups=copy_groups, hopeless=hopeless[copies])
    plain = CostModel(**SMALL).fit(X, times, groups=groups, hopeless=hopeless)

    gap = np.abs(np.log(weighted.predict(X)) - np.log(repeated.predict(X)))
    moved = np.abs(np.log(weighted.predict(X)) - np.log(plain.predict(X)))
    # The same trees up to float32 rounding (2e-7 in ln µs here); the weight moved the fit by 0.2.
    assert gap.max() < 1e-5 < 0.01 < moved.max(), (gap.max(), moved.max())


@pytest.mark.parametrize(
    ("weight", "params", "message"),
    [
        ("short", {}, r"problem_weight has shape \(\d+,\); give one value a row"),
        ("zero", {}, "problem_weight must be positive and finite"),
        ("nan", {}, "problem_weight must be positive and finite"),
        ("bool", {}, "problem_weight has dtype bool"),
        ("text", {}, "problem_weight has dtype <U"),
        ("uneven", {}, "problem_weight differs between rows of one problem"),
        ("ones", {"rank_rounds": 2}, "problem_weight cannot be given with rank_rounds=2"),
    ],
)
def test_bad_problem_weight_is_refused_naming_it(training, weight: str, params: dict, message: str) -> None:
    train, X, problem = training
    rows = len(X)
    given = {
        "short": np.ones(rows - 1),
        "zero": np.where(problem == 0, 0.0, 1.0),
        "nan": np.where(problem == 0, np.nan, 1.0),
        "bool": np.ones(rows, dtype=bool),
        "text": np.full(rows, "2"),
        "uneven": np.where(np.arange(rows) == np.flatnonzero(problem == 0)[0], 2.0, 1.0),
        "ones": np.ones(rows),
    }[weight]
    with pytest.raises(ValueError, match=message):
        CostModel(**{**SMALL, **params}).fit(X, train["time_us"], groups=train["problem_key"], problem_weight=given)
